// The DNS log of a sandbox with a resolver: a small file the library makes in the sandbox's directory and
// hands the node gateway at attach; the gateway's name gate is its only writer (one record per query it
// decided), and any process of the runtime reads it, also after the sandbox ended (retire audits it).
// Fixed layout, native endianness (one machine). The reader range-checks every field all the same: the
// names in it were sent by the sandbox.
#pragma once
#include <cstdint>

namespace sandlet::proto {

constexpr uint32_t kDnsLogMagic = 0x4c53'4e44;  // "DNSL"
constexpr uint32_t kDnsLogVersion = 1;
constexpr uint32_t kDnsLogRing = 64;     // the last queries kept with detail
constexpr uint32_t kDnsLogName = 256;    // the asked name as the gate printed it (NUL-padded, cut if longer)
constexpr uint32_t kDnsLogOutcome = 160; // the gate's one-line outcome (NUL-padded, cut if longer)
constexpr uint32_t kDnsLogSize = 32768;

enum class DnsVerdict : uint32_t { kAnswered = 1, kRefused = 2, kFailed = 3, kDropped = 4 };

struct DnsLogRecord {
  uint64_t seq;        // 1, 2, ...: written last, 0 while the record is being written
  uint64_t time_ns;    // CLOCK_REALTIME
  uint32_t verdict;    // DnsVerdict
  uint16_t qtype;      // the question's type (0: none could be read)
  uint16_t addresses;  // addresses the answer opened
  char name[kDnsLogName];
  char outcome[kDnsLogOutcome];
};

struct DnsLog {
  uint32_t magic;
  uint32_t version;
  uint64_t last_seq;      // the newest record's seq (records last_seq-63 .. last_seq are in the ring)
  uint64_t answered;      // queries forwarded and answered (NOERROR or NXDOMAIN from an upstream)
  uint64_t refused;       // refused by the policy (a name in no rule, a type not forwarded, ...)
  uint64_t failed;        // no usable upstream answer (SERVFAIL), or the allowlist could not take it
  uint64_t dropped;       // not answered at all (malformed, over the gateway's bounds)
  DnsLogRecord ring[kDnsLogRing];  // record seq s sits at ring[(s - 1) % kDnsLogRing]
};
static_assert(sizeof(DnsLog) <= kDnsLogSize, "the DNS log fits its file");

}  // namespace sandlet::proto
