// Pull-based byte sources over a file: plain, gzip or zstd, with an optional digest of the raw bytes
// (OCI blob digests are over the compressed blob, so they are computed while streaming, not in a second pass).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "image/sha256.hpp"
#include "sys/fd.hpp"

namespace sandlet::image {

class ByteReader {
 public:
  virtual ~ByteReader() = default;
  // Reads up to n bytes; returns 0 only at the end of the stream. Throws Error.
  virtual size_t read(void* buf, size_t n) = 0;
  // Raw (compressed) bytes consumed from the file so far, for progress reports.
  virtual uint64_t input_bytes() const = 0;
};

enum class Compression { kAuto, kNone, kGzip, kZstd };

// Opens `path` and returns a reader that decompresses per `c` (kAuto: gzip or zstd by magic, else none).
// If `raw_digest` is non-null, every raw byte read from the file is also fed into it; call drain() before
// finishing the digest so trailing bytes are included. A truncated or corrupt stream is Error(kDataLoss).
std::unique_ptr<ByteReader> open_decompressing(const std::string& path, Compression c = Compression::kAuto,
                                               Sha256* raw_digest = nullptr);
// Same over an already open fd (ownership taken); `name_for_errors` names it in messages.
std::unique_ptr<ByteReader> open_decompressing_fd(sys::UniqueFd fd, std::string name_for_errors, Compression c,
                                                  Sha256* raw_digest);
// Reads to the end of the stream (so trailing bytes reach the digest and corruption there is detected).
void drain(ByteReader& r);

}  // namespace sandlet::image
