// The seccomp denial log: a small file the host makes in the sandbox's directory and hands the init with
// its configuration (kInitHasDenialLog). The init maps it and its supervisor thread (guest/seccomp_notify)
// is its only writer; any process of the runtime reads it, also after the sandbox ended (retire audits it).
// Fixed layout, native endianness (host and init are the same machine). The host treats what it reads as
// hostile: every field is range-checked (host side: backends/container/denial_log_reader).
#pragma once
#include <cstdint>

namespace sandlet::proto {

constexpr uint32_t kDenialLogMagic = 0x4c44'4c53;  // "SLDL"
constexpr uint32_t kDenialLogVersion = 1;
constexpr uint32_t kDenialLogRing = 64;      // the last denials kept with detail
constexpr uint32_t kDenialLogSyscalls = 512;  // per-number counters for x86-64 numbers below this
constexpr uint32_t kDenialLogSize = 4096;

struct DenialRecord {
  uint64_t seq;      // 1, 2, ...: written last, 0 while the record is being written
  uint64_t time_ns;  // CLOCK_REALTIME
  uint32_t nr;       // the system call's number (x86-64)
  uint32_t pid;      // the caller, in the sandbox's pid namespace
};

struct DenialLog {
  uint32_t magic;
  uint32_t version;
  uint64_t total;     // every denial since the sandbox started
  uint64_t last_seq;  // the newest record's seq (records last_seq-63 .. last_seq are in the ring)
  uint32_t other;     // denials of numbers >= kDenialLogSyscalls
  uint32_t counting;  // 1 once the supervisor runs; 0: this kernel gave no listener, denials are not counted
  uint32_t by_nr[kDenialLogSyscalls];
  DenialRecord ring[kDenialLogRing];  // record seq s sits at ring[(s - 1) % kDenialLogRing]
};
static_assert(sizeof(DenialLog) <= kDenialLogSize, "the denial log fits its file");

}  // namespace sandlet::proto
