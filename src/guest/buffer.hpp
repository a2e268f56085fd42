// A growable byte queue without zero-fill (std::string::resize would memset every 64 KiB read) and with
// cheap consumption from the front. Used for connection input/output and pending stdin.
#pragma once
#include <cstddef>
#include <cstdint>

#include "proto/agent_protocol.hpp"

namespace sandlet::guest {

class Buffer final {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  size_t size() const { return end_ - begin_; }
  bool empty() const { return end_ == begin_; }
  const char* data() const { return data_ + begin_; }

  // Returns space for at least n more bytes at the tail; commit() what was filled.
  char* reserve_tail(size_t n);
  void commit(size_t n) { end_ += n; }
  void append(const void* p, size_t n);
  void consume(size_t n);
  void clear() { begin_ = end_ = 0; }
  // Releases the allocation when it grew beyond `keep` bytes (so an idle connection object does not
  // hoard a large output burst's memory).
  void trim(size_t keep);

 private:
  char* data_ = nullptr;
  size_t cap_ = 0, begin_ = 0, end_ = 0;
};

inline void append_frame(Buffer& b, proto::AgentMsg type, const void* payload, size_t len) {
  char* p = b.reserve_tail(proto::kHeaderSize + len);
  proto::put_header(p, type, static_cast<uint32_t>(len));
  if (len) __builtin_memcpy(p + proto::kHeaderSize, payload, len);
  b.commit(proto::kHeaderSize + len);
}

}  // namespace sandlet::guest
