// The microVM's channel: many byte streams over the one virtio-serial port between the host-side
// multiplexer (a process per VM, beside QEMU) and the guest's PID 1. Each stream carries what a Unix
// connection to a container's agent carries (one request, closing it cancels), so the agent protocol runs
// over it unchanged.
//
// Frame: 9-byte header {u32 stream, u8 kind, u32 payload_len}, little-endian, then the payload (at most
// kMaxPayload). Only the host opens streams (ids it picks, never reused in a VM's life). Flow control by
// credit: a side sends DATA on a stream only within the bytes the other side granted (kWindow at open,
// then CREDIT frames as it drains), so neither side buffers more than a window per stream and one slow
// stream never stalls the others. Header-only: both ends (the static guest binary) include it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace sandlet::proto::vmchan {

constexpr size_t kHeaderSize = 9;
constexpr uint32_t kMaxPayload = 64 * 1024;
constexpr uint32_t kWindow = 256 * 1024;
constexpr uint32_t kVersion = 1;

enum Kind : uint8_t {
  kHello = 1,   // host -> guest, payload u32 version: the host (re)connected; the guest drops every stream
  kOpen = 2,    // host -> guest, payload u8 port: a new stream to that port
  kData = 3,    // bytes of the stream (within the receiver's credit)
  kEof = 4,     // the sender will send no more data on the stream (half close)
  kClose = 5,   // the sender is done with the stream in both directions (a cancel when early)
  kCredit = 6,  // payload u32: the receiver drained that many more bytes
};

// What a stream reaches in the guest.
enum Port : uint8_t {
  kAgentPort = 0,  // the agent (agent_protocol.hpp), one request per stream
  kBootPort = 1,   // the guest's start-up configuration (init_protocol.hpp's kConfig, answered kReady)
};

struct Header {
  uint32_t stream = 0;
  uint8_t kind = 0;
  uint32_t len = 0;
};

inline void put_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
inline uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
inline void put_header(char* p, const Header& h) {
  put_u32(p, h.stream);
  p[4] = static_cast<char>(h.kind);
  put_u32(p + 5, h.len);
}
inline Header parse_header(const char* p) { return {get_u32(p), static_cast<uint8_t>(p[4]), get_u32(p + 5)}; }

// Whether a header is well-formed for its kind (the stream id is checked by the receiver's table).
inline bool header_ok(const Header& h) {
  switch (h.kind) {
    case kHello: case kCredit: return h.len == 4;
    case kOpen: return h.len == 1;
    case kData: return h.len > 0 && h.len <= kMaxPayload;
    case kEof: case kClose: return h.len == 0;
    default: return false;
  }
}

}  // namespace sandlet::proto::vmchan
