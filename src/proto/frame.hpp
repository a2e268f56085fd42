// The frame layout shared by the two protocols on a sandbox's channels: the agent protocol (host <->
// in-sandbox agent, agent_protocol.hpp) and the container init's set-up protocol (host <-> init on its
// set-up socket, init_protocol.hpp).
//
// Header: 8 bytes {u32 payload_len, u8 type, u8 version, u16 reserved = 0}, little-endian, then payload_len
// bytes. Each protocol has its own version and its own message types, in disjoint ranges, so a frame of one
// protocol is never valid in the other. For each direction a table lists the types that may flow that way
// with their smallest and largest payload: a receiver checks a header against it before it allocates or
// reads anything of the payload. Header-only and dependency-free: the static guest includes it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace sandlet::proto {

constexpr size_t kHeaderSize = 8;

struct FrameHeader {
  uint32_t len = 0;
  uint8_t type = 0;
  uint8_t version = 0;
  uint16_t reserved = 0;
};

struct FrameType {
  uint8_t type;
  uint32_t min_len, max_len;
  const char* name;
};

// What one end may receive: a protocol's version and the types that flow in one direction.
struct Direction {
  const char* name;  // e.g. "agent -> host", for messages
  uint8_t version;
  const FrameType* types;
  size_t count;

  const FrameType* find(uint8_t type) const {
    for (size_t i = 0; i < count; ++i)
      if (types[i].type == type) return &types[i];
    return nullptr;
  }
};

enum class HeaderCheck : uint8_t { kOk, kBadVersion, kBadReserved, kUnknownType, kTooShort, kTooLong };

inline FrameHeader parse_header(const char* p) {
  const auto b = [p](int i) { return static_cast<uint32_t>(static_cast<unsigned char>(p[i])); };
  FrameHeader h;
  h.len = b(0) | b(1) << 8 | b(2) << 16 | b(3) << 24;
  h.type = static_cast<uint8_t>(b(4));
  h.version = static_cast<uint8_t>(b(5));
  h.reserved = static_cast<uint16_t>(b(6) | b(7) << 8);
  return h;
}

// The version first: a peer of another version may number its types differently.
inline HeaderCheck check_header(const Direction& d, const FrameHeader& h) {
  if (h.version != d.version) return HeaderCheck::kBadVersion;
  if (h.reserved != 0) return HeaderCheck::kBadReserved;
  const FrameType* t = d.find(h.type);
  if (!t) return HeaderCheck::kUnknownType;
  if (h.len < t->min_len) return HeaderCheck::kTooShort;
  if (h.len > t->max_len) return HeaderCheck::kTooLong;
  return HeaderCheck::kOk;
}

// "frame type 0x99 is not a message of this protocol (agent protocol, agent -> host)", ... (snprintf, not
// string concatenation: this is in the guest too, where every inlined append costs start-up pages.)
[[gnu::cold]] inline std::string describe(HeaderCheck c, const FrameHeader& h, const Direction& d) {
  const FrameType* t = d.find(h.type);
  char type[16];
  if (t) std::snprintf(type, sizeof type, "%s", t->name);
  else std::snprintf(type, sizeof type, "0x%02x", static_cast<unsigned>(h.type));
  const unsigned long len = h.len;
  char buf[256];
  switch (c) {
    case HeaderCheck::kOk: std::snprintf(buf, sizeof buf, "frame %s of %lu bytes", type, len); break;
    case HeaderCheck::kBadVersion:
      std::snprintf(buf, sizeof buf, "frame of protocol version %u, expected %u", static_cast<unsigned>(h.version),
                    static_cast<unsigned>(d.version));
      break;
    case HeaderCheck::kBadReserved: std::snprintf(buf, sizeof buf, "frame header with non-zero reserved bits"); break;
    case HeaderCheck::kUnknownType: std::snprintf(buf, sizeof buf, "frame type %s is not a message of this protocol", type); break;
    case HeaderCheck::kTooShort:
      std::snprintf(buf, sizeof buf, "frame %s of %lu bytes, below its minimum of %lu", type, len,
                    static_cast<unsigned long>(t->min_len));
      break;
    case HeaderCheck::kTooLong:
      std::snprintf(buf, sizeof buf, "frame %s of %lu bytes, over its maximum of %lu", type, len,
                    static_cast<unsigned long>(t->max_len));
      break;
  }
  const size_t n = std::strlen(buf);
  std::snprintf(buf + n, sizeof buf - n, " (%s)", d.name);
  return buf;
}

inline void put_header(char* p, uint8_t type, uint8_t version, uint32_t len) {
  p[0] = static_cast<char>(len & 0xff);
  p[1] = static_cast<char>((len >> 8) & 0xff);
  p[2] = static_cast<char>((len >> 16) & 0xff);
  p[3] = static_cast<char>((len >> 24) & 0xff);
  p[4] = static_cast<char>(type);
  p[5] = static_cast<char>(version);
  p[6] = 0;
  p[7] = 0;
}

inline std::string encode_frame(uint8_t type, uint8_t version, std::string_view payload) {
  std::string f(kHeaderSize, '\0');
  put_header(f.data(), type, version, static_cast<uint32_t>(payload.size()));
  f.append(payload);
  return f;
}

}  // namespace sandlet::proto
