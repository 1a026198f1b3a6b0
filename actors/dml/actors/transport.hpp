#pragma once
// How libdml processes open CAF connections: through a middleman actor of
// our own (a subclass of CAF 0.17's io::middleman_actor_impl, the hook CAF
// offers for custom transports) whose connections bound every BASP frame.
//
// Why: CAF 0.17's BASP header carries a 32-bit payload length, and its
// broker sizes the read buffer to it (scribe::configure_read) before any
// check; one 32-byte header announcing 4 GiB made a node reserve and touch
// over a gigabyte. Our scribes refuse any read larger than the limit before
// a byte is reserved: the connection is closed, one line is logged to stderr
// naming the peer and the size, and the refusal is counted. The limit
// applies to every frame, the handshake included.
//
// TLS: with ConfigureTls (a certificate and key, and optionally a CA file),
// every connection is TLS 1.2 through CAF's OpenSSL session (the same
// policy as CAF's OpenSSL module, with the frame bound). With a CA file,
// both ends must present a certificate it signed (mutual authentication);
// a peer that does not speak TLS, or whose certificate fails, is refused and
// the refusing process logs why to stderr. Both ends must agree: a TLS node
// refuses plaintext peers, a plaintext process cannot reach a TLS node.
//
// Every libdml process publishes and connects with these functions, never
// with sys.middleman().publish / remote_actor (those would bypass the
// bound). Thread-safe.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include <set>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>
#include <caf/node_id.hpp>
#include <caf/timespan.hpp>

#include "absl/status/status.h"

namespace dml::actors {

/// Loads CAF's middleman module with libdml's BASP broker, which survives
/// a peer's malformed message (closes that connection instead of dying with
/// all of them). Every libdml process loads this instead of
/// caf::io::middleman (ConfigureProcess does).
void LoadMiddleman(caf::actor_system_config& cfg);

/// PEM files of a process's TLS identity; all empty: no TLS.
struct TlsFiles {
  std::string cert;  ///< this process's certificate (chain)
  std::string key;   ///< its private key
  std::string ca;    ///< CA file: peers must present a certificate it signed
};

/// Turns TLS on for the actor system built from `cfg` (loads CAF's OpenSSL
/// module). Call before the system is built. Errors: InvalidArgument (a
/// certificate without a key or the reverse, a file that cannot be read).
absl::Status ConfigureTls(caf::actor_system_config& cfg, const TlsFiles& tls);
/// Whether `sys`'s connections are TLS.
bool TlsOn(caf::actor_system& sys);

/// How long an accepted TLS peer has to finish the handshake before the
/// connection is closed (with a log line); 0 restores the default. For
/// connections accepted from now on.
inline constexpr std::chrono::milliseconds kDefaultTlsHandshakeTimeout{10000};
void SetTlsHandshakeTimeout(std::chrono::milliseconds timeout);

/// Default frame bound: 256 MiB of payload plus room for CAF's framing.
/// Vectors larger than ~32M doubles travel over the bulk channel (on by
/// default) or need a larger bound on both ends.
inline constexpr std::size_t kDefaultMaxFrameBytes = (std::size_t{256} << 20) + (64 << 10);

/// Sets the frame bound of this process's connections opened from now on
/// (0 restores the default).
void SetMaxFrameBytes(std::size_t bytes);
std::size_t MaxFrameBytes();
/// Whether a frame of `bytes` is within the bound (what the transport's
/// scribes check before sizing a read buffer).
bool FrameWithinBound(std::size_t bytes);
/// Admission for every message to `sys` (a node with a secret, a
/// key-value node with one): from now on, a message that arrives at `sys`
/// on a connection whose peer process has not been admitted (AdmitPeer) is
/// dropped before it is decoded, with a log line, unless it is for `gate`
/// (the actor that runs the challenge). Other actor systems of the process
/// are not affected. `sys` must outlive the process's transport use (its
/// address is the key; a system made later at the same address inherits
/// the gate).
/// Admission is bound to the connection: it ends when that connection
/// closes. Messages relayed by an admitted process pass (traffic between
/// nodes travels through the coordinator's process).
/// Call before the process publishes anything (frames are tracked from
/// then on; without a gate none is looked at).
void RequireAdmission(const caf::actor_system& sys, caf::actor_id gate);
/// Forgets `sys`'s gate and admissions (call once that system is destroyed).
void ReleaseAdmission(const caf::actor_system* sys);
/// Admits the process `id` to the actors of `sys` (the node actor, or a
/// key-value group's gate, calls it on a correct proof).
void AdmitPeer(const caf::actor_system& sys, const caf::node_id& id);
/// Messages dropped so far for coming from unadmitted peers.
uint64_t DroppedUnadmitted();
/// Frames refused in this process so far (connections closed for them).
uint64_t RefusedFrames();

/// Publishes `whom` on host:port (port 0: any free port); returns the port.
caf::expected<uint16_t> PublishActor(caf::actor_system& sys, const caf::strong_actor_ptr& whom,
                                     std::set<std::string> sigs, uint16_t port,
                                     const std::string& host, bool reuse_addr);

template <class Handle>
caf::expected<uint16_t> Publish(caf::actor_system& sys, const Handle& whom, uint16_t port,
                                const std::string& host, bool reuse_addr = true) {
  return PublishActor(sys, caf::actor_cast<caf::strong_actor_ptr>(whom), sys.message_types(whom),
                      port, host, reuse_addr);
}

/// The actor published at host:port, checked against `sigs` (empty: any).
caf::expected<caf::strong_actor_ptr> RemoteActorImpl(caf::actor_system& sys,
                                                     std::set<std::string> sigs,
                                                     const std::string& host, uint16_t port,
                                                     caf::timespan timeout);

template <class Handle = caf::actor>
caf::expected<Handle> RemoteActor(caf::actor_system& sys, const std::string& host, uint16_t port,
                                  caf::timespan timeout = std::chrono::seconds(30)) {
  auto x = RemoteActorImpl(sys, sys.message_types<Handle>(), host, port, timeout);
  if (!x) return x.error();
  return caf::actor_cast<Handle>(std::move(*x));
}

}  // namespace dml::actors
