#include "guest/buffer.hpp"

#include <cstdlib>
#include <cstring>

namespace sandlet::guest {

Buffer::~Buffer() { std::free(data_); }

char* Buffer::reserve_tail(size_t n) {
  if (cap_ - end_ >= n) return data_ + end_;
  size_t live = end_ - begin_;
  if (begin_ > 0 && live + n <= cap_) {
    std::memmove(data_, data_ + begin_, live);
  } else {
    size_t want = cap_ ? cap_ * 2 : 4096;
    while (want < live + n) want *= 2;
    char* fresh = static_cast<char*>(std::malloc(want));
    if (!fresh) std::abort();  // the agent cannot work without memory; the host sees the sandbox die
    if (live) std::memcpy(fresh, data_ + begin_, live);
    std::free(data_);
    data_ = fresh;
    cap_ = want;
  }
  begin_ = 0;
  end_ = live;
  return data_ + end_;
}

void Buffer::append(const void* p, size_t n) {
  if (!n) return;
  std::memcpy(reserve_tail(n), p, n);
  end_ += n;
}

void Buffer::consume(size_t n) {
  begin_ += n;
  if (begin_ >= end_) begin_ = end_ = 0;
}

void Buffer::trim(size_t keep) {
  if (cap_ > keep && empty()) {
    std::free(data_);
    data_ = nullptr;
    cap_ = begin_ = end_ = 0;
  }
}

}  // namespace sandlet::guest
