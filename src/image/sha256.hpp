// SHA-256 over OpenSSL's libcrypto (uses the CPU's SHA extensions: hashing is on the import and verify paths).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sandlet::image {

using Digest = std::array<uint8_t, 32>;

class Sha256 final {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t len);
  void update(std::string_view s) { update(s.data(), s.size()); }
  Digest finish();  // the hasher is reset and may be reused

 private:
  void* ctx_;  // EVP_MD_CTX
};

Digest sha256(const void* data, size_t len);
inline Digest sha256(std::string_view s) { return sha256(s.data(), s.size()); }
std::string to_hex(const Digest& d);
// Parses exactly 64 lowercase hex digits; false otherwise.
bool from_hex(std::string_view hex, Digest& out);
// SHA-256 of a whole file (read with large buffered reads); throws Error naming the path.
Digest sha256_file(const std::string& path);

}  // namespace sandlet::image
