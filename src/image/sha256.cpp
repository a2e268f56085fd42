#include "image/sha256.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <memory>
#include <new>

#include "common/error.hpp"
#include "sys/fd.hpp"

namespace sandlet::image {

namespace {
EVP_MD_CTX* as_ctx(void* p) { return static_cast<EVP_MD_CTX*>(p); }
}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(as_ctx(ctx_), EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(as_ctx(ctx_));
    throw std::bad_alloc();
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(as_ctx(ctx_)); }

void Sha256::update(const void* data, size_t len) {
  if (len) EVP_DigestUpdate(as_ctx(ctx_), data, len);
}

Digest Sha256::finish() {
  Digest d{};
  unsigned int n = 0;
  EVP_DigestFinal_ex(as_ctx(ctx_), d.data(), &n);
  EVP_DigestInit_ex(as_ctx(ctx_), EVP_sha256(), nullptr);
  return d;
}

Digest sha256(const void* data, size_t len) {
  Digest d{};
  unsigned int n = 0;
  EVP_Digest(data, len, d.data(), &n, EVP_sha256(), nullptr);
  return d;
}

std::string to_hex(const Digest& d) {
  static const char kHex[] = "0123456789abcdef";
  std::string s(64, '0');
  for (size_t i = 0; i < d.size(); ++i) {
    s[2 * i] = kHex[d[i] >> 4];
    s[2 * i + 1] = kHex[d[i] & 15];
  }
  return s;
}

bool from_hex(std::string_view hex, Digest& out) {
  if (hex.size() != 64) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < 32; ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

Digest sha256_file(const std::string& path) {
  sys::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw_errno("open " + path);
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  constexpr size_t kBuf = 1 << 20;
  std::unique_ptr<char[]> buf(new char[kBuf]);
  Sha256 h;
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.get(), kBuf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("read " + path);
    }
    if (n == 0) break;
    h.update(buf.get(), static_cast<size_t>(n));
  }
  return h.finish();
}

}  // namespace sandlet::image
