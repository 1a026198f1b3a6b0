#include "dml/actors/transport.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <cstdio>
#include <utility>
#include <vector>

#include <caf/atom.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/openssl/manager.hpp>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/native_socket.hpp>
#include <caf/io/network/stream_impl.hpp>
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
std::atomic<int64_t> g_handshake_ms{kDefaultTlsHandshakeTimeout.count()};
std::atomic<uint64_t> g_unadmitted{0};
// Per actor system (a process may hold several: a node's, and each
// key-value group's), the one actor unadmitted peers may reach.
std::mutex g_gates_mu;
std::vector<std::pair<const caf::actor_system*, caf::actor_id>> g_gates;
std::atomic<bool> g_any_gate{false};

caf::actor_id GateOf(const caf::actor_system* sys) {
  if (!g_any_gate.load(std::memory_order_acquire)) return caf::invalid_actor_id;
  std::lock_guard<std::mutex> lock(g_gates_mu);
  for (const auto& [s, id] : g_gates) {
    if (s == sys) return id;
  }
  return caf::invalid_actor_id;
}
// Admitted peer processes, per actor system of this process (a process
// admitted by a key-value group's gate is not thereby admitted to the
// node's own actors).
std::mutex g_admitted_mu;
std::set<std::pair<const caf::actor_system*, caf::node_id>> g_admitted;

bool IsAdmitted(const caf::actor_system* sys, const caf::node_id& id) {
  std::lock_guard<std::mutex> lock(g_admitted_mu);
  return g_admitted.count({sys, id}) != 0;
}
void RevokeAdmission(const caf::actor_system* sys, const caf::node_id& id) {
  std::lock_guard<std::mutex> lock(g_admitted_mu);
  g_admitted.erase({sys, id});
}

std::string PeerOf(net::native_socket fd) {
  auto a = net::remote_addr_of_fd(fd);
  auto p = net::remote_port_of_fd(fd);
  return (a ? *a : std::string("?")) + ":" + (p ? std::to_string(*p) : std::string("?"));
}

// Whether a read of `bytes` is over the bound; if so, refuses it: logs, and
// closes the connection. BASP asks its scribe for exactly the announced
// payload (configure_read) before the buffer is sized, so this is the one
// place to say no.
template <class Scribe, class Stream>
bool RefuseOversized(Scribe* self, Stream& stream, std::size_t bytes) {
  if (FrameWithinBound(bytes)) return false;
  const std::size_t limit = g_max_frame.load(std::memory_order_relaxed);
  g_refused.fetch_add(1, std::memory_order_relaxed);
  std::fprintf(stderr,
               "dml: refused a frame of %zu bytes from %s (limit %zu bytes): connection closed\n",
               bytes, PeerOf(stream.fd()).c_str(), limit);
  // No more reads; the broker learns of the close outside its handler (it
  // is inside one now), then the socket goes.
  stream.passivate();
  caf::intrusive_ptr<Scribe> keep{self};
  stream.backend().post([keep, &stream] {
    keep->io_failure(&stream.backend(), net::operation::read);
    stream.graceful_shutdown();
  });
  return true;
}

// A TCP scribe with the frame bound.
class bounded_scribe : public net::scribe_impl {
 public:
  bounded_scribe(net::default_multiplexer& mx, net::native_socket fd) : scribe_impl(mx, fd) {}

  void configure_read(caf::io::receive_policy::config config) override {
    if (refused_) return;
    if ((refused_ = RefuseOversized(this, stream_, config.second))) return;
    scribe_impl::configure_read(config);
  }

 private:
  bool refused_ = false;
};

// TLS: our own OpenSSL session as the stream's policy (CAF's module
// decides the handshake's rules; we keep them: TLS >= 1.2, both ends
// present a certificate, verified against the CA where one is given, CAF's
// TLS 1.2 cipher list). Why not CAF's session: it reads each 16 KiB record
// with two read() calls and writes it with one write(): an 8 MiB message
// cost ~1500 system calls and TLS moved 0.5-0.6x plaintext. Here reads are
// read-ahead into a 256 KiB buffer and records are written through a
// 256 KiB buffer, so one system call moves ~16 records. A socket BIO of our
// own sends with MSG_NOSIGNAL (a peer that closed must not raise SIGPIPE).
constexpr int kTlsBuffer = 256 * 1024;

int SockWrite(BIO* b, const char* data, int len) {
  BIO_clear_retry_flags(b);
  const ssize_t n = ::send(static_cast<int>(BIO_get_fd(b, nullptr)), data, static_cast<size_t>(len),
                           MSG_NOSIGNAL);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_write(b);
  return static_cast<int>(n);
}

int SockRead(BIO* b, char* data, int len) {
  BIO_clear_retry_flags(b);
  const ssize_t n = ::recv(static_cast<int>(BIO_get_fd(b, nullptr)), data, static_cast<size_t>(len), 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_read(b);
  return static_cast<int>(n);
}

long SockCtrl(BIO* b, int cmd, long num, void* ptr) {
  switch (cmd) {
    case BIO_C_SET_FD:
      BIO_set_data(b, reinterpret_cast<void*>(static_cast<intptr_t>(*static_cast<int*>(ptr))));
      BIO_set_init(b, 1);
      return 1;
    case BIO_C_GET_FD: {
      const int fd = static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(b)));
      if (ptr != nullptr) *static_cast<int*>(ptr) = fd;
      return fd;
    }
    case BIO_CTRL_FLUSH:
      return 1;
    default:
      (void)num;
      return 0;
  }
}

const BIO_METHOD* SockMethod() {
  static BIO_METHOD* m = [] {
    BIO_METHOD* x = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                 "dml socket");
    BIO_meth_set_write(x, SockWrite);
    BIO_meth_set_read(x, SockRead);
    BIO_meth_set_ctrl(x, SockCtrl);
    return x;
  }();
  return m;
}

BIO* NewSockBio(int fd) {
  BIO* b = BIO_new(SockMethod());
  if (b != nullptr) BIO_set_fd(b, fd, BIO_NOCLOSE);
  return b;
}

std::string SslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char why[256];
    ERR_error_string_n(e, why, sizeof why);
    if (!out.empty()) out += "; ";
    out += why;
  }
  return out;
}

class tls_session {
 public:
  using rw_state = net::rw_state;

  ~tls_session() {
    SSL_free(ssl_);  // frees both BIO chains
    SSL_CTX_free(ctx_);
  }

  // The session for `fd`, its handshake started; nullptr with `why` set
  // when the files do not load or the handshake fails at once.
  static std::unique_ptr<tls_session> Make(caf::actor_system& sys, int fd, bool accepted,
                                           std::string* why) {
    auto s = std::unique_ptr<tls_session>(new tls_session());
    const auto& cfg = sys.config();
    s->ctx_ = SSL_CTX_new(TLS_method());
    SSL_CTX* ctx = s->ctx_;
    auto fail = [&](const std::string& what) {
      *why = what + ": " + SslErrors();
      return nullptr;
    };
    if (ctx == nullptr) return fail("cannot create an OpenSSL context");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(ctx, cfg.openssl_certificate.c_str()) != 1) {
      return fail("cannot load certificate " + cfg.openssl_certificate);
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, cfg.openssl_key.c_str(), SSL_FILETYPE_PEM) != 1) {
      return fail("cannot load key " + cfg.openssl_key);
    }
    if (!cfg.openssl_cafile.empty() &&
        SSL_CTX_load_verify_locations(ctx, cfg.openssl_cafile.c_str(), nullptr) != 1) {
      return fail("cannot load CA file " + cfg.openssl_cafile);
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    if (SSL_CTX_set_cipher_list(ctx, "HIGH:!aNULL:!MD5") != 1) return fail("cannot set cipher list");
    // TLS 1.3: AES-128-GCM first (TLS 1.3's mandatory suite; a quarter
    // fewer AES rounds than AES-256).
    if (SSL_CTX_set_ciphersuites(
            ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") != 1) {
      return fail("cannot set TLS 1.3 cipher suites");
    }
    SSL_CTX_set_num_tickets(ctx, 0);  // no resumption: no tickets written after the handshake
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_default_read_buffer_len(ctx, kTlsBuffer);
    s->ssl_ = SSL_new(ctx);
    if (s->ssl_ == nullptr) return fail("cannot create an SSL session");
    BIO* rbio = NewSockBio(fd);
    BIO* wsock = NewSockBio(fd);
    BIO* wbuf = BIO_new(BIO_f_buffer());
    if (rbio == nullptr || wsock == nullptr || wbuf == nullptr) {
      BIO_free(rbio);
      BIO_free(wsock);
      BIO_free(wbuf);
      return fail("cannot create BIOs");
    }
    BIO_set_write_buffer_size(wbuf, kTlsBuffer);
    s->wbio_ = BIO_push(wbuf, wsock);
    SSL_set_bio(s->ssl_, rbio, s->wbio_);
    if (accepted) {
      SSL_set_accept_state(s->ssl_);
    } else {
      SSL_set_connect_state(s->ssl_);
    }
    const int ret = SSL_do_handshake(s->ssl_);
    if (ret == 1 ? !s->Push() : !s->Retry(ret)) return fail("handshake refused");
    return s;
  }

  rw_state read_some(std::size_t& result, net::native_socket, void* buf, std::size_t len) {
    result = 0;
    if (rw_state st; !Handshake(&st)) return st;
    if (len == 0) return rw_state::indeterminate;
    const int n = SSL_read(ssl_, buf, static_cast<int>(std::min<std::size_t>(len, 1 << 30)));
    if (n > 0) {
      starved_ = false;
      result = static_cast<std::size_t>(n);
      return rw_state::success;
    }
    if (SSL_get_error(ssl_, n) == SSL_ERROR_WANT_READ) starved_ = true;
    return Retry(n) ? rw_state::success : rw_state::failure;
  }

  // SSL_write encrypts into the write buffer; its last records may wait
  // there for a flush the socket refused. They are then reported written
  // only once flushed: CAF calls again with the same bytes (as it does
  // for SSL_write's own retries), and would otherwise stop polling for
  // writes with records still buffered.
  rw_state write_some(std::size_t& result, net::native_socket, const void* buf, std::size_t len) {
    result = 0;
    if (rw_state st; !Handshake(&st)) return st;
    if (unreported_ > 0 || len == 0) {
      if (BIO_wpending(wbio_) > 0 && BIO_flush(wbio_) <= 0) {
        return BIO_should_retry(wbio_) ? rw_state::success : rw_state::failure;
      }
      if (len == 0) return rw_state::indeterminate;
      result = unreported_;
      unreported_ = 0;
      return rw_state::success;
    }
    const int n = SSL_write(ssl_, buf, static_cast<int>(std::min<std::size_t>(len, 1 << 30)));
    if (n <= 0) return Retry(n) ? rw_state::success : rw_state::failure;
    if (BIO_flush(wbio_) <= 0) {
      if (!BIO_should_retry(wbio_)) return rw_state::failure;
      unreported_ = static_cast<std::size_t>(n);
      return rw_state::success;
    }
    result = static_cast<std::size_t>(n);
    return rw_state::success;
  }

  // Records already read ahead are not signalled by the socket: read on
  // while some are buffered, until SSL_read asks for more bytes.
  bool must_read_more(net::native_socket, std::size_t) {
    return !starved_ && SSL_has_pending(ssl_) == 1;
  }

  bool established() const { return SSL_is_init_finished(ssl_) == 1; }
  // Handshake records the socket has not taken yet (it would have blocked).
  bool write_pending() const { return BIO_wpending(wbio_) > 0; }

 private:
  tls_session() = default;

  // Drives the handshake; false with *st set while it is not done.
  bool Handshake(rw_state* st) {
    if (SSL_is_init_finished(ssl_)) return true;
    const int ret = SSL_do_handshake(ssl_);
    if (ret == 1 && Push()) return true;
    *st = ret != 1 && Retry(ret) ? rw_state::success : rw_state::failure;
    return false;
  }

  // Pushes out the handshake's last records (the peer may wait for them
  // before it says anything); false if the socket failed. What it would
  // have blocked on stays buffered: write_pending() says so.
  bool Push() {
    return BIO_wpending(wbio_) == 0 || BIO_flush(wbio_) > 0 || BIO_should_retry(wbio_);
  }

  // Whether a failed call only has to be repeated later (the socket would
  // block); pushes out what the handshake buffered.
  bool Retry(int ret) {
    switch (SSL_get_error(ssl_, ret)) {
      case SSL_ERROR_WANT_READ:
      case SSL_ERROR_WANT_WRITE:
        return Push();
      default:
        return false;
    }
  }

  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  BIO* wbio_ = nullptr;  // the write buffer, over the socket
  std::size_t unreported_ = 0;
  bool starved_ = false;
};

using tls_session_ptr = std::unique_ptr<tls_session>;

// The policy tells its scribe after each read or write that did not fail:
// the handshake may have ended, or its records may wait for the socket.
class handshake_listener {
 public:
  virtual void HandshakeStep() = 0;

 protected:
  ~handshake_listener() = default;
};

// The session as the stream's policy, plus a log line saying why a peer
// failed (not TLS, a certificate refused).
struct tls_policy {
  tls_policy(tls_session_ptr s, std::string who, handshake_listener* l)
      : session(std::move(s)), peer(std::move(who)), listener(l) {}
  net::rw_state read_some(std::size_t& result, net::native_socket fd, void* buf, std::size_t len) {
    auto st = session->read_some(result, fd, buf, len);
    if (st == net::rw_state::failure) Report(fd);
    if (st == net::rw_state::success && result > 0) data_flowed = true;
    Progress(st);
    return st;
  }
  net::rw_state write_some(std::size_t& result, net::native_socket fd, const void* buf,
                           std::size_t len) {
    auto st = session->write_some(result, fd, buf, len);
    if (st == net::rw_state::failure) Report(fd);
    Progress(st);
    return st;
  }
  void Progress(net::rw_state st) {
    if (st != net::rw_state::failure) listener->HandshakeStep();
  }
  bool must_read_more(net::native_socket fd, std::size_t threshold) {
    return session->must_read_more(fd, threshold);
  }
  // Once data has flowed, a failure is the peer closing: not worth a line.
  // OpenSSL's reasons are taken off the thread's queue either way (left
  // there, they would be the next connection's on this thread).
  void Report(net::native_socket) {
    std::string why = SslErrors();
    if (reported || data_flowed) return;
    reported = true;
    if (why.empty()) why = "connection closed during the handshake";
    std::fprintf(stderr, "dml: TLS connection with %s failed: %s\n", peer.c_str(), why.c_str());
  }
  tls_session_ptr session;
  std::string peer;
  handshake_listener* listener;
  bool reported = false;
  bool data_flowed = false;
};

// A TLS connection as a CAF scribe. Until the handshake is done, what
// BASP writes waits here, not in the stream: CAF's stream polls for writes
// while it holds bytes, and a handshake waiting on a silent peer would
// turn every poll into a write of nothing (the network thread spun at 100%
// for as long as the peer stayed connected). The handshake is driven by
// reads, and by writes only while its own records wait for the socket.
class tls_scribe : public caf::io::scribe, public handshake_listener {
 public:
  tls_scribe(net::default_multiplexer& mx, net::native_socket fd, tls_session_ptr s)
      : scribe(net::conn_hdl_from_socket(fd)),
        session_(s.get()),
        stream_(mx, fd, std::move(s), PeerOf(fd), this) {}

  void configure_read(caf::io::receive_policy::config config) override {
    if (refused_) return;
    if ((refused_ = RefuseOversized(this, stream_, config.second))) return;
    stream_.configure_read(config);
    if (!launched_) launch();
  }
  void ack_writes(bool enable) override { stream_.ack_writes(enable); }
  std::vector<char>& wr_buf() override { return established_ ? stream_.wr_buf() : held_; }
  std::vector<char>& rd_buf() override { return stream_.rd_buf(); }
  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }
  void flush() override {
    if (established_) stream_.flush(this);  // else HandshakeStep flushes
  }
  std::string addr() const override {
    auto x = net::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string();
  }
  uint16_t port() const override {
    auto x = net::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }
  void launch() {
    launched_ = true;
    stream_.start(this);
    HandshakeStep();  // the session may have finished it when it was made
  }
  void add_to_loop() override { stream_.activate(this); }
  void remove_from_loop() override { stream_.passivate(); }
  bool established() const { return established_; }
  // Names this connection for its handshake deadline: socket numbers (the
  // handles) are reused by the next connection, in or out.
  uint64_t serial() const { return serial_; }

  // On the network thread; from the policy, inside an event of this stream.
  void HandshakeStep() override {
    if (established_) return;
    if (session_->established()) {
      established_ = true;
      if (!held_.empty()) {
        auto& out = stream_.wr_buf();
        out.insert(out.end(), held_.begin(), held_.end());
        std::vector<char>().swap(held_);
        stream_.flush(this);  // inside a write event, the stream sends it next
      }
    }
    if (!session_->write_pending()) return;
    // Records the socket refused: poll for writes until they are out. Not
    // from inside the event: after it, the stream decides whether it polls.
    caf::intrusive_ptr<tls_scribe> keep{this};
    stream_.backend().post([keep] {
      if (keep->session_->write_pending()) keep->stream_.force_empty_write(keep.get());
    });
  }

 private:
  static uint64_t NextSerial() {
    static std::atomic<uint64_t> next{0};
    return next.fetch_add(1, std::memory_order_relaxed) + 1;
  }

  bool launched_ = false;
  bool refused_ = false;
  bool established_ = false;
  uint64_t serial_ = NextSerial();
  std::vector<char> held_;  // BASP's bytes written before the handshake ended
  tls_session* session_;    // owned by stream_'s policy
  net::stream_impl<tls_policy> stream_;
};

tls_session_ptr MakeSession(caf::actor_system& sys, net::native_socket fd, bool accepted) {
  net::nonblocking(fd, true);
  std::string why;
  auto s = tls_session::Make(sys, fd, accepted, &why);
  if (!s) std::fprintf(stderr, "dml: TLS connection with %s failed: %s\n", PeerOf(fd).c_str(), why.c_str());
  return s;
}

// Accepts connections as TLS scribes.
class tls_doorman : public net::doorman_impl {
 public:
  using doorman_impl::doorman_impl;

  bool new_connection() override {
    if (detached()) return false;
    auto& mx = acceptor_.backend();
    const auto fd = acceptor_.accepted_socket();
    auto session = MakeSession(parent()->system(), fd, true);
    if (!session) {
      net::close_socket(fd);
      return true;  // keep accepting others
    }
    caf::io::scribe_ptr s = caf::make_counted<tls_scribe>(mx, fd, std::move(session));
    auto hdl = s->hdl();
    parent()->add_scribe(std::move(s));
    return doorman::new_connection(&mx, hdl);
  }
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
    if (!TlsOn(system())) {
      return caf::io::scribe_ptr{caf::make_counted<bounded_scribe>(mpx(), *fd)};
    }
    auto session = MakeSession(system(), *fd, false);
    if (!session) {
      net::close_socket(*fd);
      return caf::make_error(caf::sec::cannot_connect_to_node, "TLS handshake with " + host + ":" +
                                                                    std::to_string(port) + " failed");
    }
    return caf::io::scribe_ptr{caf::make_counted<tls_scribe>(mpx(), *fd, std::move(session))};
  }

  caf::expected<caf::io::doorman_ptr> open(uint16_t port, const char* addr, bool reuse) override {
    auto fd = net::new_tcp_acceptor_impl(port, addr, reuse);
    if (!fd) return std::move(fd.error());
    if (TlsOn(system())) return caf::io::doorman_ptr{caf::make_counted<tls_doorman>(mpx(), *fd)};
    return caf::io::doorman_ptr{caf::make_counted<bounded_doorman>(mpx(), *fd)};
  }

 private:
  net::default_multiplexer& mpx() {
    return static_cast<net::default_multiplexer&>(system().middleman().backend());
  }
};

// CAF 0.17's BASP broker decodes every message a connected peer sends on
// its own thread, and a malformed built-in value (a config_value with an
// unknown variant index, found by fuzz/fuzz_frame.cpp) throws there: the
// broker died of it, and with it every connection of the process (a node
// then accepted none). This broker catches what decoding one connection's
// data throws, closes that connection (as if the peer had), logs it, and
// goes on serving the others.
class guarded_basp_broker : public caf::io::basp_broker {
 public:
  explicit guarded_basp_broker(caf::actor_config& cfg) : basp_broker(cfg) {}

  caf::behavior make_behavior() override {
    inner_ = basp_broker::make_behavior();
    caf::message_handler guard{
        [this](caf::io::new_data_msg& msg) {
          const auto hdl = msg.handle;
          if (Unadmitted(msg)) return;
          try {
            inner_(current_mailbox_element()->content());
          } catch (const std::exception& e) {
            g_refused.fetch_add(1, std::memory_order_relaxed);
            std::fprintf(stderr, "dml: a malformed message from %s (%s): connection closed\n",
                         remote_addr(hdl).c_str(), e.what());
            Drop(hdl);
          }
        },
        [this](caf::io::connection_closed_msg& msg) {
          // Admission lives as long as the connection that earned it.
          RevokeAdmission(&home_system(), instance.tbl().lookup_direct(msg.handle));
          dropping_.erase(msg.handle);
          payload_next_.erase(msg.handle);
          inner_(current_mailbox_element()->content());
        },
        [this](caf::io::new_connection_msg& msg) {
          const auto hdl = msg.handle;
          inner_(current_mailbox_element()->content());
          if (const tls_scribe* tls = Tls(hdl)) {
            delayed_send(this, std::chrono::milliseconds(g_handshake_ms.load()),
                         handshake_deadline_atom::value, hdl, tls->serial());
          }
        },
        [this](handshake_deadline_atom, caf::io::connection_handle hdl, uint64_t serial) {
          const tls_scribe* tls = Tls(hdl);
          if (tls == nullptr || tls->serial() != serial || tls->established()) return;
          g_refused.fetch_add(1, std::memory_order_relaxed);
          std::fprintf(stderr,
                       "dml: TLS connection with %s failed: no handshake within %lld ms: "
                       "connection closed\n",
                       remote_addr(hdl).c_str(), static_cast<long long>(g_handshake_ms.load()));
          Drop(hdl);
        }};
    return guard.or_else(inner_);
  }

 private:
  // Admission per message (RequireAdmission): a message (direct or routed)
  // that arrives on a connection whose peer has not been admitted, and is
  // not for the gate actor, is dropped here, before it is decoded: its
  // header is swallowed and its payload read and discarded, so the broker's
  // own framing never sees either. Returns whether `msg` was swallowed.
  bool Unadmitted(const caf::io::new_data_msg& msg) {
    // Without a gate (every system but a dml-node's or a key-value node's
    // with a secret, which set it before they listen) no frame is looked at.
    const caf::actor_id gate = GateOf(&home_system());
    if (gate == caf::invalid_actor_id) return false;
    const auto hdl = msg.handle;
    // BASP reads a header, then (if it announces one) its payload: which of
    // the two this is, we track ourselves.
    if (auto d = dropping_.find(hdl); d != dropping_.end()) {  // a dropped payload
      dropping_.erase(d);
      configure_read(hdl, caf::io::receive_policy::exactly(caf::io::basp::header_size));
      return true;
    }
    if (auto p = payload_next_.find(hdl); p != payload_next_.end()) {
      payload_next_.erase(p);
      return false;
    }
    if (msg.buf.size() != caf::io::basp::header_size) return false;
    caf::io::basp::header hdr;
    caf::binary_deserializer source{context(), msg.buf};
    if (source(hdr)) return false;  // the broker refuses it itself
    const bool dispatch = hdr.operation == caf::io::basp::message_type::direct_message ||
                          hdr.operation == caf::io::basp::message_type::routed_message;
    const caf::node_id peer = instance.tbl().lookup_direct(hdl);
    const bool drop = dispatch &&
                      !(hdr.operation == caf::io::basp::message_type::direct_message &&
                        hdr.dest_actor == gate) &&
                      !IsAdmitted(&home_system(), peer);
    if (!drop) {
      if (hdr.payload_len > 0) payload_next_.insert(hdl);
      return false;
    }
    const uint64_t n = g_unadmitted.fetch_add(1, std::memory_order_relaxed);
    if (n < 16 || (n & (n - 1)) == 0) {  // one line each at first, then sparser
      std::fprintf(stderr,
                   "dml: dropped a message from unadmitted peer %s (%s) to actor %llu "
                   "(%llu dropped so far)\n",
                   remote_addr(hdl).c_str(), caf::to_string(peer).c_str(),
                   static_cast<unsigned long long>(hdr.dest_actor),
                   static_cast<unsigned long long>(n + 1));
    }
    if (hdr.payload_len > 0) {
      if (!FrameWithinBound(hdr.payload_len)) {
        close(hdl);
        return true;
      }
      dropping_.insert(hdl);
      configure_read(hdl, caf::io::receive_policy::exactly(hdr.payload_len));
    }
    return true;
  }

  // Closes `hdl` as if the peer had: BASP forgets it first.
  void Drop(caf::io::connection_handle hdl) {
    auto closed = caf::make_message(caf::io::connection_closed_msg{hdl});
    inner_(closed);
    close(hdl);
  }

  // The TLS scribe of `hdl`, if it is one.
  const tls_scribe* Tls(caf::io::connection_handle hdl) {
    auto s = by_id(hdl);
    return s ? dynamic_cast<const tls_scribe*>(&*s) : nullptr;
  }

  using handshake_deadline_atom = caf::atom_constant<caf::atom("tlsdeadln")>;

  caf::behavior inner_;
  std::set<caf::io::connection_handle> dropping_;      // next read: a dropped payload
  std::set<caf::io::connection_handle> payload_next_;  // next read: a payload to pass on
};

}  // namespace

// The middleman module of every libdml process: CAF's, with the guarded BASP
// broker installed before the middleman starts (it creates the broker on
// start, by name, and then finds ours).
class guarded_middleman_module : public caf::io::middleman {
 public:
  explicit guarded_middleman_module(caf::actor_system& sys) : middleman(sys), backend_(&sys) {}
  static caf::actor_system::module* make(caf::actor_system& sys, caf::detail::type_list<>) {
    return new guarded_middleman_module(sys);
  }
  net::multiplexer& backend() override { return backend_; }
  void start() override {
    named_broker<guarded_basp_broker>(caf::atom("BASP"));
    middleman::start();
  }

 private:
  net::default_multiplexer backend_;
};

void LoadMiddleman(caf::actor_system_config& cfg) { cfg.load<guarded_middleman_module>(); }

namespace {

// A guarded middleman actor for one publish or connect. The connections
// it opens belong to the BASP broker, not to it, so it stops once it has
// answered (one kept per system would outlive the scheduler at shutdown).
caf::actor SpawnGuardedMiddleman(caf::actor_system& sys) {
  auto broker = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  return caf::actor_cast<caf::actor>(sys.spawn<guarded_middleman, caf::hidden>(std::move(broker)));
}

}  // namespace

absl::Status ConfigureTls(caf::actor_system_config& cfg, const TlsFiles& tls) {
  if (tls.cert.empty() && tls.key.empty() && tls.ca.empty()) return absl::OkStatus();
  if (tls.cert.empty() || tls.key.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and a key (--tls-cert, --tls-key)");
  }
  for (const auto& [what, path] : {std::pair<const char*, const std::string&>{"certificate", tls.cert},
                                   {"key", tls.key}, {"CA file", tls.ca}}) {
    if (path.empty()) continue;
    if (std::FILE* f = std::fopen(path.c_str(), "r")) {
      std::fclose(f);
    } else {
      return absl::InvalidArgumentError(std::string("TLS ") + what + " " + path + ": cannot be read");
    }
  }
  // Loaded once here, as every connection will: a file that is not PEM, a
  // key that is not the certificate's, is refused at start, not on each
  // connection later.
  {
    std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(SSL_CTX_new(TLS_method()), &SSL_CTX_free);
    auto refuse = [&](const std::string& what) {
      std::string why = SslErrors();
      return absl::InvalidArgumentError("TLS " + what + (why.empty() ? "" : ": " + why));
    };
    if (ctx == nullptr) return refuse("cannot create an OpenSSL context");
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), tls.cert.c_str()) != 1) {
      return refuse("certificate " + tls.cert + " does not load (PEM expected)");
    }
    if (SSL_CTX_use_PrivateKey_file(ctx.get(), tls.key.c_str(), SSL_FILETYPE_PEM) != 1) {
      return refuse("key " + tls.key + " does not load (PEM expected)");
    }
    if (SSL_CTX_check_private_key(ctx.get()) != 1) {
      return refuse("key " + tls.key + " is not the key of certificate " + tls.cert);
    }
    if (!tls.ca.empty() && SSL_CTX_load_verify_locations(ctx.get(), tls.ca.c_str(), nullptr) != 1) {
      return refuse("CA file " + tls.ca + " does not load (PEM expected)");
    }
  }
  cfg.load<caf::openssl::manager>();
  // SSL_read hands out one record (16 KiB) per call, and CAF's stream
  // yields to the event loop after this many reads: at CAF's 50, an 8 MiB
  // message took ~10 loop turns.
  cfg.set("middleman.max-consecutive-reads", static_cast<size_t>(1024));
  cfg.openssl_certificate = tls.cert;
  cfg.openssl_key = tls.key;
  cfg.openssl_cafile = tls.ca;
  return absl::OkStatus();
}

bool TlsOn(caf::actor_system& sys) {
  return sys.has_openssl_manager() && !sys.config().openssl_certificate.empty();
}

void SetMaxFrameBytes(std::size_t bytes) {
  g_max_frame.store(bytes == 0 ? kDefaultMaxFrameBytes : bytes, std::memory_order_relaxed);
}

void SetTlsHandshakeTimeout(std::chrono::milliseconds timeout) {
  g_handshake_ms.store(timeout.count() <= 0 ? kDefaultTlsHandshakeTimeout.count() : timeout.count());
}

std::size_t MaxFrameBytes() { return g_max_frame.load(std::memory_order_relaxed); }

bool FrameWithinBound(std::size_t bytes) { return bytes <= MaxFrameBytes(); }

void RequireAdmission(const caf::actor_system& sys, caf::actor_id gate) {
  std::lock_guard<std::mutex> lock(g_gates_mu);
  for (auto& [s, id] : g_gates) {
    if (s == &sys) {
      id = gate;
      return;
    }
  }
  g_gates.emplace_back(&sys, gate);
  g_any_gate.store(true, std::memory_order_release);
}

void ReleaseAdmission(const caf::actor_system* sys) {
  {
    std::lock_guard<std::mutex> lock(g_gates_mu);
    g_gates.erase(std::remove_if(g_gates.begin(), g_gates.end(),
                                 [sys](const auto& g) { return g.first == sys; }),
                  g_gates.end());
  }
  std::lock_guard<std::mutex> lock(g_admitted_mu);
  for (auto it = g_admitted.begin(); it != g_admitted.end();) {
    it = it->first == sys ? g_admitted.erase(it) : std::next(it);
  }
}

void AdmitPeer(const caf::actor_system& sys, const caf::node_id& id) {
  std::lock_guard<std::mutex> lock(g_admitted_mu);
  g_admitted.insert({&sys, id});
}

uint64_t DroppedUnadmitted() { return g_unadmitted.load(std::memory_order_relaxed); }

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
