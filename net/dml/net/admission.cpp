#include "dml/net/admission.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace dml::net {

std::string NewAdmissionNonce() {
  unsigned char bytes[32];
  std::size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t r = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (r > 0) got += static_cast<std::size_t>(r);
    // EINTR: again. No other failure is possible for 32 bytes on Linux.
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

std::string AdmissionProof(std::string_view secret, std::string_view nonce, std::string_view peer) {
  std::string message = "dml-admit-v1\n";
  message.append(nonce).append("\n").append(peer);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(mac), len));
}

bool AdmissionProofMatches(std::string_view proof, std::string_view secret,
                           std::string_view nonce, std::string_view peer) {
  const std::string want = AdmissionProof(secret, nonce, peer);
  return proof.size() == want.size() &&
         CRYPTO_memcmp(proof.data(), want.data(), want.size()) == 0;
}

std::string AdmissionChallenges::Issue(const std::string& peer) {
  std::string nonce = NewAdmissionNonce();
  nonces_[peer] = nonce;
  return nonce;
}

absl::Status AdmissionChallenges::Check(const std::string& peer, std::string_view proof,
                                        std::string_view secret, std::string_view what) {
  auto it = nonces_.find(peer);
  if (it == nonces_.end()) {
    return absl::PermissionDeniedError("admission refused: no challenge was asked first");
  }
  const std::string nonce = std::move(it->second);
  nonces_.erase(it);  // one proof per nonce
  if (!AdmissionProofMatches(proof, secret, nonce, peer)) {
    return absl::PermissionDeniedError(
        absl::StrCat("admission refused: wrong ", absl::string_view(what.data(), what.size()),
                     " secret"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  // POSIX reads, at most one byte past the limit: a directory, a device
  // that never ends (/dev/zero) or a huge file is an error, not a throw or
  // an endless read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open secret file: ",
                                            std::strerror(errno)));
  }
  struct stat info {};
  if (::fstat(fd, &info) == 0 && S_ISDIR(info.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": the secret file is a directory"));
  }
  constexpr std::size_t kMax = 4096;
  std::string s(kMax + 3, '\0');  // room for a CRLF after the longest secret, and one more
  std::size_t got = 0;
  while (got < s.size()) {
    const ssize_t r = ::read(fd, s.data() + got, s.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read secret file: ",
                                                     std::strerror(err)));
    }
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  ::close(fd);
  s.resize(got);
  if (!s.empty() && s.back() == '\n') s.pop_back();
  if (!s.empty() && s.back() == '\r') s.pop_back();
  if (s.size() > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the secret has more than ", kMax, " bytes; at most ", kMax));
  }
  if (s.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": the secret is empty"));
  return s;
}

}  // namespace dml::net
