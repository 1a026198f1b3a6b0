#include "dml/actors/transport.hpp"

#include <atomic>
#include <cstdio>
#include <utility>

#include <caf/atom.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/scribe_impl.hpp>
#include <caf/node_id.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/sec.hpp>

namespace dml::actors {
namespace {

namespace net = caf::io::network;

std::atomic<std::size_t> g_max_frame{kDefaultMaxFrameBytes};
std::atomic<uint64_t> g_refused{0};

// A TCP scribe that refuses to read a frame above the bound. BASP asks its
// scribe for exactly the announced payload (configure_read) before the
// buffer is sized, so this is the one place to say no.
class bounded_scribe : public net::scribe_impl {
 public:
  bounded_scribe(net::default_multiplexer& mx, net::native_socket fd) : scribe_impl(mx, fd) {}

  void configure_read(caf::io::receive_policy::config config) override {
    if (refused_) return;
    const std::size_t limit = g_max_frame.load(std::memory_order_relaxed);
    if (config.second <= limit) {
      scribe_impl::configure_read(config);
      return;
    }
    refused_ = true;
    g_refused.fetch_add(1, std::memory_order_relaxed);
    std::fprintf(stderr,
                 "dml: refused a frame of %zu bytes from %s:%u (limit %zu bytes): connection "
                 "closed\n",
                 config.second, addr().c_str(), static_cast<unsigned>(port()), limit);
    // No more reads; the broker learns of the close outside its handler
    // (it is inside one now), then the socket goes.
    stream_.passivate();
    caf::intrusive_ptr<bounded_scribe> self{this};
    stream_.backend().post([self] {
      self->io_failure(&self->stream_.backend(), net::operation::read);
      self->stream_.graceful_shutdown();
    });
  }

 private:
  bool refused_ = false;
};

// Accepts connections as bounded scribes.
class bounded_doorman : public net::doorman_impl {
 public:
  using doorman_impl::doorman_impl;

  bool new_connection() override {
    if (detached()) return false;
    auto& mx = acceptor_.backend();
    caf::io::scribe_ptr s = caf::make_counted<bounded_scribe>(mx, acceptor_.accepted_socket());
    auto hdl = s->hdl();
    parent()->add_scribe(std::move(s));
    return doorman::new_connection(&mx, hdl);
  }
};

// CAF's middleman actor with bounded connections: the default
// implementation's connect and open, with our scribe and doorman.
class guarded_middleman : public caf::io::middleman_actor_impl {
 public:
  using middleman_actor_impl::middleman_actor_impl;
  const char* name() const override { return "dml.middleman"; }

 protected:
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host, uint16_t port) override {
    auto fd = net::new_tcp_connection(host, port);
    if (!fd) return std::move(fd.error());
    return caf::io::scribe_ptr{caf::make_counted<bounded_scribe>(mpx(), *fd)};
  }

  caf::expected<caf::io::doorman_ptr> open(uint16_t port, const char* addr, bool reuse) override {
    auto fd = net::new_tcp_acceptor_impl(port, addr, reuse);
    if (!fd) return std::move(fd.error());
    return caf::io::doorman_ptr{caf::make_counted<bounded_doorman>(mpx(), *fd)};
  }

 private:
  net::default_multiplexer& mpx() {
    return static_cast<net::default_multiplexer&>(system().middleman().backend());
  }
};

// A guarded middleman actor for one publish or connect. The connections
// it opens belong to the BASP broker, not to it, so it stops once it has
// answered (one kept per system would outlive the scheduler at shutdown).
caf::actor SpawnGuardedMiddleman(caf::actor_system& sys) {
  auto broker = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  return caf::actor_cast<caf::actor>(sys.spawn<guarded_middleman, caf::hidden>(std::move(broker)));
}

}  // namespace

void SetMaxFrameBytes(std::size_t bytes) {
  g_max_frame.store(bytes == 0 ? kDefaultMaxFrameBytes : bytes, std::memory_order_relaxed);
}

std::size_t MaxFrameBytes() { return g_max_frame.load(std::memory_order_relaxed); }

uint64_t RefusedFrames() { return g_refused.load(std::memory_order_relaxed); }

caf::expected<uint16_t> PublishActor(caf::actor_system& sys, const caf::strong_actor_ptr& whom,
                                     std::set<std::string> sigs, uint16_t port,
                                     const std::string& host, bool reuse_addr) {
  if (!whom) return caf::sec::cannot_publish_invalid_actor;
  caf::scoped_actor self{sys, true};
  caf::expected<uint16_t> result{caf::sec::runtime_error};
  auto mm = SpawnGuardedMiddleman(sys);
  self->request(mm, caf::infinite, caf::publish_atom::value, port, whom, std::move(sigs), host,
                reuse_addr)
      .receive([&](uint16_t p) { result = p; }, [&](caf::error& e) { result = std::move(e); });
  self->send_exit(mm, caf::exit_reason::user_shutdown);
  return result;
}

caf::expected<caf::strong_actor_ptr> RemoteActorImpl(caf::actor_system& sys,
                                                     std::set<std::string> sigs,
                                                     const std::string& host, uint16_t port,
                                                     caf::timespan timeout) {
  caf::scoped_actor self{sys, true};
  caf::expected<caf::strong_actor_ptr> result{caf::sec::runtime_error};
  auto mm = SpawnGuardedMiddleman(sys);
  self->request(mm, timeout, caf::connect_atom::value, host, port)
      .receive(
          [&](const caf::node_id&, caf::strong_actor_ptr& ptr, std::set<std::string>& ifs) {
            if (!ptr) {
              result = caf::make_error(caf::sec::no_actor_published_at_port, host, port);
            } else if (!sys.assignable(ifs, sigs)) {
              result = caf::make_error(caf::sec::unexpected_actor_messaging_interface, host, port);
            } else {
              result = std::move(ptr);
            }
          },
          [&](caf::error& e) { result = std::move(e); });
  self->send_exit(mm, caf::exit_reason::user_shutdown);
  return result;
}

}  // namespace dml::actors
