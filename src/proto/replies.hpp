// Replies both protocols carry: an error (the last frame of a failed request or start-up step) and the
// exit status of a command (an exec over the agent protocol, a one-shot command over the init's).
// Header-only and dependency-free: the static guest includes it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "proto/wire.hpp"

namespace sandlet::proto {

constexpr uint32_t kMaxErrorMessage = 16u << 10;  // longer messages are cut (paths and argv[0] can be long)
constexpr uint32_t kErrorReplyMax = 12 + kMaxErrorMessage;

struct ErrorReply {
  uint32_t code = 13;  // a sandlet_code_t other than OK (SANDLET_OK .. SANDLET_DATA_LOSS = 0 .. 15)
  int32_t err_no = 0;
  std::string message;

  std::string encode() const {
    wire::Writer w;
    w.u32(code); w.i32(err_no); w.str(std::string_view(message).substr(0, kMaxErrorMessage));
    return std::move(w.data());
  }
  static bool decode(std::string_view p, ErrorReply* out) {
    wire::Reader r(p);
    out->code = r.u32(); out->err_no = r.i32(); out->message = r.str();
    return r.ok() && r.at_end() && out->code >= 1 && out->code <= 15;
  }
};

enum ExitFlags : uint32_t {
  kExitStdoutTruncated = 1,
  kExitStderrTruncated = 2,
  kExitTimedOut = 4,
  kExitOutputLimitKilled = 8,
};
constexpr uint32_t kExitKnownFlags = 15;

struct ExitStatus {
  int32_t exit_code = -1;  // -1 when killed by a signal
  int32_t signal = 0;
  uint32_t flags = 0;
  uint64_t run_ns = 0;     // from spawn to the exit of the last process of the command
  static constexpr uint32_t kSize = 20;

  std::string encode() const {
    wire::Writer w;
    w.i32(exit_code); w.i32(signal); w.u32(flags); w.u64(run_ns);
    return std::move(w.data());
  }
  // An exit code is 0..255, or -1 with the signal (1..64) that ended the command.
  static bool decode(std::string_view p, ExitStatus* out) {
    wire::Reader r(p);
    out->exit_code = r.i32(); out->signal = r.i32(); out->flags = r.u32(); out->run_ns = r.u64();
    const bool by_signal = out->exit_code == -1 && out->signal >= 1 && out->signal <= 64;
    const bool by_exit = out->exit_code >= 0 && out->exit_code <= 255 && out->signal == 0;
    return r.ok() && r.at_end() && (by_signal || by_exit) && (out->flags & ~kExitKnownFlags) == 0;
  }
};

}  // namespace sandlet::proto
