#include "proto/frame_reader.hpp"

#include <algorithm>
#include <cstring>

namespace sandlet::proto {

char* FrameReader::space() { return in_payload_ ? payload_.data() + have_ : head_ + have_; }

size_t FrameReader::space_size() const {
  if (bad_) return 0;
  return in_payload_ ? header_.len - have_ : kHeaderSize - have_;
}

FrameReader::Result FrameReader::commit(size_t n) {
  if (bad_) return Result::kBad;
  have_ += n;
  if (!in_payload_) {
    if (have_ < kHeaderSize) return Result::kNeedMore;
    header_ = parse_header(head_);
    check_ = check_header(*dir_, header_);
    if (check_ != HeaderCheck::kOk) {
      bad_ = true;
      return Result::kBad;
    }
    // Only now, and only as much as this type may carry.
    payload_.resize(header_.len);
    in_payload_ = true;
    have_ = 0;
  }
  if (have_ < header_.len) return Result::kNeedMore;
  in_payload_ = false;
  have_ = 0;
  return Result::kFrame;
}

FrameReader::Result FrameReader::take(std::string_view& in) {
  for (;;) {
    // A frame with an empty payload is complete as soon as its header is.
    const size_t n = std::min(space_size(), in.size());
    if (n) std::memcpy(space(), in.data(), n);
    in.remove_prefix(n);
    const Result r = commit(n);
    if (r != Result::kNeedMore || in.empty()) return r;
  }
}

}  // namespace sandlet::proto
