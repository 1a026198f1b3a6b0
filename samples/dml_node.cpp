// dml-node: a libdml process that hosts workers and parameter shards for
// jobs coordinated elsewhere (dml-train --nodes / --local-nodes, or a host
// service with JobSpec.cluster.nodes). Workers load their data from this machine's
// disk. Runs until SIGTERM or SIGINT, then stops its actors and exits 0.
//
//   dml-node [--host=127.0.0.1] [--port=0] [--port-file=PATH] [--name=NAME] [--threads=T]
//            [--bulk=on|off] [--bulk-port=0] [--bulk-local=on|off]
//   --port 0 picks a free port; --port-file receives it (written atomically)
//   once the node listens, for launchers. --bulk: large vectors this node
//   sends wait on a bulk endpoint (host:bulk-port) for their receivers to
//   fetch, instead of being copied through CAF (dml/net/bulk.hpp); receivers
//   must reach that address. --bulk-local=off: fetch from processes on this
//   machine over TCP too (no single-copy path; for measurements).
//   --secret-file PATH: run workers and shards only for processes that prove
//   they know the secret in PATH (dml/net/admission.hpp); others are refused.
//   Without a secret the node listens on loopback only: a --host that other
//   machines can reach needs --secret-file, or --insecure-open to accept
//   that anyone who can reach it may use it.
//   --tls-cert=PEM --tls-key=PEM [--tls-ca=PEM]: every connection is TLS
//   (dml/actors/transport.hpp); with a CA, peers must present a certificate
//   it signed. Plaintext peers are refused. TLS turns the bulk channel off.
//   --tls-handshake-seconds S: a TLS peer that has not finished the handshake
//   S seconds after connecting is disconnected (default 10).
//   --max-frame-bytes N: refuse (and close the connection of) any incoming
//   frame larger than N bytes, before memory is reserved for it
//   (dml/actors/transport.hpp; default 256 MiB + 64 KiB).
// Exit status: 0 after a clean shutdown, 2 on a bad flag, 1 if it cannot listen
// or its actors did not stop within 3 s of the signal.
#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <caf/actor_registry.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/io/middleman.hpp>
#include <caf/send.hpp>

#include "dml/actors/network.hpp"
#include "dml/actors/node.hpp"
#include "dml/actors/transport.hpp"
#include "dml/net/admission.hpp"
#include "dml/net/bulk.hpp"

namespace {

int Usage(const std::string& msg) {
  std::fprintf(stderr, "dml-node: %s\nusage: dml-node [--host=H] [--port=P] [--port-file=PATH] "
                       "[--name=NAME] [--threads=T] [--bulk=on|off] [--bulk-port=P]\n"
                       "       [--bulk-local=on|off] [--secret-file=PATH] [--insecure-open]\n"
                       "       [--max-frame-bytes=N] [--tls-cert=PEM --tls-key=PEM [--tls-ca=PEM]]\n"
                       "       [--tls-handshake-seconds=S]\n",
               msg.c_str());
  return 2;
}

template <class Int>
bool ParseInt(const std::string& s, Int& out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// Literal loopback addresses only: a name may resolve elsewhere.
bool IsLoopback(const std::string& host) {
  return host.rfind("127.", 0) == 0 || host == "localhost" || host == "::1";
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1", port_file, name, secret;
  bool insecure_open = false;
  dml::actors::TlsFiles tls;
  int port = 0, threads = 0, bulk_port = 0;
  bool bulk = true, bulk_local = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--insecure-open") {
      insecure_open = true;
      continue;
    }
    if (a.rfind("--insecure-open=", 0) == 0) {
      return Usage("--insecure-open is a switch: it takes no value, got \"" + a + "\"");
    }
    const auto eq = a.find('=');
    if (a.rfind("--", 0) != 0 || eq == std::string::npos) {
      return Usage("expected --flag=value, got \"" + a + "\"");
    }
    const std::string key = a.substr(0, eq), value = a.substr(eq + 1);
    if (key == "--host") {
      host = value;
    } else if (key == "--port") {
      if (!ParseInt(value, port) || port < 0 || port > 65535) {
        return Usage("--port: expected a number in [0, 65535], got \"" + value + "\"");
      }
    } else if (key == "--port-file") {
      port_file = value;
    } else if (key == "--bulk") {
      if (value != "on" && value != "off") return Usage("--bulk: expected on or off, got \"" + value + "\"");
      bulk = value == "on";
    } else if (key == "--secret-file") {
      auto read = dml::net::ReadSecretFile(value);
      if (!read.ok()) return Usage("--secret-file: " + std::string(read.status().message()));
      secret = *std::move(read);
    } else if (key == "--bulk-local") {
      if (value != "on" && value != "off") {
        return Usage("--bulk-local: expected on or off, got \"" + value + "\"");
      }
      bulk_local = value == "on";
    } else if (key == "--bulk-port") {
      if (!ParseInt(value, bulk_port) || bulk_port < 0 || bulk_port > 65535) {
        return Usage("--bulk-port: expected a number in [0, 65535], got \"" + value + "\"");
      }
    } else if (key == "--name") {
      name = value;
    } else if (key == "--tls-cert") {
      tls.cert = value;
    } else if (key == "--tls-key") {
      tls.key = value;
    } else if (key == "--tls-ca") {
      tls.ca = value;
    } else if (key == "--tls-handshake-seconds") {
      double sec = 0;
      const auto* end = value.data() + value.size();
      auto r = std::from_chars(value.data(), end, sec);
      if (r.ec != std::errc() || r.ptr != end || !(sec >= 0.001 && sec <= 86400)) {
        return Usage("--tls-handshake-seconds: expected seconds in [0.001, 86400], got \"" + value +
                     "\"");
      }
      dml::actors::SetTlsHandshakeTimeout(
          std::chrono::milliseconds(static_cast<int64_t>(sec * 1000 + 0.5)));
    } else if (key == "--max-frame-bytes") {
      long long n = 0;
      if (!ParseInt(value, n) || n < 65536) {
        return Usage("--max-frame-bytes: expected a number >= 65536, got \"" + value + "\"");
      }
      dml::actors::SetMaxFrameBytes(static_cast<std::size_t>(n));
    } else if (key == "--threads") {
      if (!ParseInt(value, threads) || threads < 0 || threads > dml::actors::kMaxSchedulerThreads) {
        return Usage("--threads: expected a number in [0, 1024], got \"" + value + "\"");
      }
    } else {
      return Usage("unknown option " + key);
    }
  }
  if (name.empty()) name = "node@" + host;
  if (secret.empty() && !insecure_open && !IsLoopback(host)) {
    return Usage("--host=" + host + " without --secret-file would let anyone who can reach it run "
                 "workers here: give --secret-file=PATH, or --insecure-open to accept that");
  }

  // Block the stop signals before any thread exists, so every CAF thread
  // inherits the mask and only sigwait below receives them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  dml::actors::TuneAllocatorForMessages();
  dml::actors::process_config cfg(threads, dml::net::BulkOptions{bulk_local});
  if (auto s = dml::actors::ConfigureTls(cfg, tls); !s.ok()) return Usage(std::string(s.message()));
  const bool tls_on = !tls.cert.empty();
  if (tls_on) bulk = false;  // no plaintext side channel beside TLS
  if (bulk) {
    if (auto s = cfg.bulk().Serve(host, static_cast<uint16_t>(bulk_port)); !s.ok()) {
      std::fprintf(stderr, "dml-node: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  caf::actor_system sys(cfg);
  // hogwild's key-value groups listen beside the node, on its host; under
  // TLS they are refused (their own connections carry no TLS).
  auto node = dml::actors::spawn_node(sys, name, secret, tls_on ? std::string() : host);
  // With a secret, every message (not only spawning) needs an admitted
  // sender; the node actor itself stays open for the challenge.
  if (!secret.empty()) dml::actors::RequireAdmission(sys, node->id());
  auto published = dml::actors::Publish(sys, node, static_cast<uint16_t>(port), host, true);
  if (!published) {
    std::fprintf(stderr, "dml-node: cannot listen on %s:%d: %s\n", host.c_str(), port,
                 sys.render(published.error()).c_str());
    caf::anon_send_exit(node, caf::exit_reason::user_shutdown);
    return 1;
  }
  std::fprintf(stderr, "dml-node %s listening on %s:%u (pid %d), bulk %s, admission %s\n",
               name.c_str(), host.c_str(), static_cast<unsigned>(*published),
               static_cast<int>(::getpid()),
               bulk ? std::to_string(cfg.bulk().port()).c_str() : "off",
               secret.empty() ? "open" : "by secret");
  if (tls_on) {
    std::fprintf(stderr, "dml-node %s: TLS on%s\n", name.c_str(),
                 tls.ca.empty() ? "" : ", peers must present a certificate signed by the CA");
  }
  if (!port_file.empty()) {
    // Whoever waits for the port file would wait forever: no file, no node.
    const std::string tmp = port_file + ".tmp";
    bool written = false;
    {
      std::ofstream out(tmp);
      out << *published << "\n";
      out.flush();
      written = static_cast<bool>(out);
    }
    if (!written || std::rename(tmp.c_str(), port_file.c_str()) != 0) {
      std::fprintf(stderr, "dml-node: cannot write the port file %s: %s\n", port_file.c_str(),
                   std::strerror(errno));
      std::remove(tmp.c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
  }

  int sig = 0;
  sigwait(&stop, &sig);
  const char* signal_name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
  std::fprintf(stderr, "dml-node %s: %s, shutting down\n", name.c_str(), signal_name);
  // Stop the node actor (it stops the workers and shards it hosts) and
  // wait for every actor to finish, then leave without destroying the actor
  // system: CAF 0.17.6's destructor can deadlock joining the threads of
  // detached actors (actor-framework#1196, fixed in 0.18), and a node keeps
  // nothing that needs unwinding (checkpoints are the coordinator's; peers
  // see the connections close as if the node were killed).
  caf::anon_send_exit(node, caf::exit_reason::user_shutdown);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (sys.registry().running() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::size_t left = sys.registry().running();
  if (left > 0) {
    std::fprintf(stderr, "dml-node %s: %zu actor(s) still running 3 s after %s; exiting anyway\n",
                 name.c_str(), left, signal_name);
  } else {
    std::fprintf(stderr, "dml-node %s: all actors stopped\n", name.c_str());
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(left > 0 ? 1 : 0);
}
