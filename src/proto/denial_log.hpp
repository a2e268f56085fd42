// The seccomp denial log: a small file the host makes in the sandbox's directory and hands the init with
// its configuration (kInitHasDenialLog). The init maps it and its supervisor thread (guest/seccomp_notify)
// is its only writer; any process of the runtime reads it, also after the sandbox ended (retire audits it).
// Fixed layout, native endianness (host and init are the same machine). The host treats what it reads as
// hostile: every field is range-checked (host side: backends/container/denial_log.cpp).
#pragma once
#include <cstdint>

namespace sandlet::proto {

constexpr uint32_t kDenialLogMagic = 0x4c44'4c53;  // "SLDL"
constexpr uint32_t kDenialLogVersion = 2;
constexpr uint32_t kDenialLogRing = 64;      // the last denials kept with detail
constexpr uint32_t kDenialLogSyscalls = 512;  // per-number counters for x86-64 numbers below this
constexpr uint32_t kDenialLogSize = 8192;

struct DenialRecord {
  uint64_t seq;      // 1, 2, ...: written last, 0 while the record is being written
  uint64_t time_ns;  // CLOCK_REALTIME
  uint32_t nr;       // the system call's number (x86-64)
  uint32_t pid;      // the caller, in the sandbox's pid namespace
  uint32_t error;    // the errno the caller got: EPERM, EAFNOSUPPORT (a refused socket family), ...
  uint32_t reserved;
  uint64_t args[3];  // the first three arguments as the filter saw them (socket: family, type, protocol)
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

// Version 1 (a 4 KiB file; records without errno and arguments): what the init of an older library
// writes. The host still reads it, for a detached sandbox that library started.
namespace v1 {
constexpr uint32_t kVersion = 1;
constexpr uint32_t kSize = 4096;
struct DenialRecord {
  uint64_t seq;
  uint64_t time_ns;
  uint32_t nr;
  uint32_t pid;
};
struct DenialLog {
  uint32_t magic;
  uint32_t version;
  uint64_t total;
  uint64_t last_seq;
  uint32_t other;
  uint32_t counting;
  uint32_t by_nr[kDenialLogSyscalls];
  DenialRecord ring[kDenialLogRing];
};
static_assert(sizeof(DenialLog) <= kSize, "a version 1 log fits its file");
}  // namespace v1

}  // namespace sandlet::proto
