#pragma once
// Node admission by a shared secret: a node that has one answers a
// challenge (a fresh random nonce) and admits a peer process only after it
// proves knowledge of the secret with
//   proof = hex(HMAC-SHA256(secret, "dml-admit-v1\n" + nonce + "\n" + peer))
// where `peer` names the proving process as the node sees it (CAF's node
// id), so a proof cannot be replayed for another process or nonce.
// This authenticates admission; it does not encrypt the traffic that
// follows (use a private network, or a VPN, for that).
//
// Thread-safety: the free functions keep no state (a wrong proof is simply
// not equal); AdmissionChallenges is one admitting party's.

#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace dml::net {

/// 32 random bytes as 64 hex digits (the kernel's random source).
std::string NewAdmissionNonce();

/// The proof a peer sends for `nonce` (64 hex digits).
std::string AdmissionProof(std::string_view secret, std::string_view nonce, std::string_view peer);

/// Whether `proof` is AdmissionProof(secret, nonce, peer), compared in
/// constant time.
bool AdmissionProofMatches(std::string_view proof, std::string_view secret,
                           std::string_view nonce, std::string_view peer);

/// The challenges one admitting party (a node actor, a key-value gate) has
/// issued, by asking process; each nonce is good for one proof. Not
/// thread-safe (one per actor).
class AdmissionChallenges {
 public:
  /// A fresh nonce for `peer` (replacing any earlier one).
  std::string Issue(const std::string& peer);
  /// OK when `proof` answers the nonce last issued to `peer` under `secret`
  /// (the nonce is then spent, answered or not). Errors: PermissionDenied
  /// "admission refused: no challenge was asked first", or "admission
  /// refused: wrong <what> secret".
  absl::Status Check(const std::string& peer, std::string_view proof, std::string_view secret,
                     std::string_view what);

 private:
  std::map<std::string, std::string> nonces_;
};

/// Reads a secret file: its bytes without one trailing newline. Errors:
/// NotFound (cannot open), InvalidArgument (empty, or over 4 KiB), both
/// naming the file.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

}  // namespace dml::net
