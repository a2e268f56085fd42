// Push-based byte sinks over a file descriptor: plain or zstd (the counterpart of byte_reader for layer
// exports). Errors are Error naming the file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace sandlet::image {

class ByteWriter {
 public:
  virtual ~ByteWriter() = default;
  virtual void write(const void* buf, size_t n) = 0;
  // Flushes everything (ends the zstd frame); the fd itself is neither synced nor closed.
  virtual void finish() = 0;
  // Bytes written to the file so far (compressed bytes for zstd).
  virtual uint64_t output_bytes() const = 0;
};

// `fd` stays owned by the caller and must outlive the writer. `zstd_level` 0 = uncompressed, else a zstd
// level (1..19; frames carry a content checksum).
std::unique_ptr<ByteWriter> open_writer_fd(int fd, std::string name_for_errors, int zstd_level);

}  // namespace sandlet::image
