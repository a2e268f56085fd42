// The host's one frame reader, for every channel it reads from a sandbox (the agent's replies, the init's
// set-up replies, a one-shot sandbox's report). Incremental: the caller reads into space() at most
// space_size() bytes (never past the current frame, so a blocking reader never takes bytes that belong to
// whoever reads next) and commits them. A header is checked against the direction's table (version, a
// type known for that direction, a length within that type's own range) before any of the payload is
// allocated or read. Host-side only (the guest parses its input in place: guest/frame_parse.hpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "proto/frame.hpp"

namespace sandlet::proto {

class FrameReader final {
 public:
  enum class Result : uint8_t { kNeedMore, kFrame, kBad };

  explicit FrameReader(const Direction& direction) : dir_(&direction) {}

  // Where the next bytes go: the rest of the header, or of the payload once the header passed.
  char* space();
  size_t space_size() const;
  // `n` (<= space_size()) bytes were written at space(). kFrame: type() and payload() hold the frame
  // until the next call. kBad: error() says what was wrong; the reader stays bad.
  Result commit(size_t n);
  // For bytes already in memory: takes from the front of `in` until a frame is complete (kFrame), `in`
  // is used up (kNeedMore) or a header is bad.
  Result take(std::string_view& in);

  uint8_t type() const { return header_.type; }
  std::string_view payload() const { return payload_; }
  const FrameHeader& header() const { return header_; }
  HeaderCheck error_kind() const { return check_; }
  std::string error() const { return describe(check_, header_, *dir_); }
  // Part of a frame has arrived (an end of stream now cuts a frame short).
  bool mid_frame() const { return have_ > 0 || in_payload_; }
  // The memory held for payloads (tests check that a refused header reserved nothing).
  size_t payload_capacity() const { return payload_.capacity(); }

 private:
  const Direction* dir_;
  char head_[kHeaderSize];
  size_t have_ = 0;          // bytes of the header, then of the payload, received
  bool in_payload_ = false;  // the header passed; payload_ is being filled
  bool bad_ = false;
  FrameHeader header_;
  HeaderCheck check_ = HeaderCheck::kOk;
  std::string payload_;
};

}  // namespace sandlet::proto
