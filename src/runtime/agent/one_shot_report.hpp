// The report a one-shot sandbox sends when its command has ended (runtime/run_once.cpp), read through the
// host's one frame reader: never blocks, never reads past the report, never allocates past its type's cap.
#pragma once
#include <chrono>
#include <optional>
#include <string>

#include "proto/frame_reader.hpp"
#include "proto/init_protocol.hpp"
#include "runtime/agent/exec_outcome.hpp"

namespace sandlet {

class OneShotReport final {
 public:
  // `id` names the sandbox in messages; `timeout_ms` is the command's (0 = none), from now on.
  OneShotReport(std::string id, uint64_t timeout_ms);
  // One read of what `fd` has now (call it when poll or the event loop says it is readable; EAGAIN is
  // fine): the outcome once the report is complete; kRunExit gives the outcome, kError the command's
  // start-up error (thrown as that error). End of file first means the sandbox died (killed, or
  // destroyed by runtime close): UNAVAILABLE. A frame out of protocol: INTERNAL.
  std::optional<ExecOutcome> read_some(int fd);
  // The same for bytes already read (tests, fuzzing).
  std::optional<ExecOutcome> feed(std::string_view bytes);
  // Waits (poll) and reads until the report is complete.
  ExecOutcome read_blocking(int fd);

  // The host's backstop against a silent init: the command's timeout plus a grace period (the init
  // enforces the timeout itself). None without a timeout.
  std::optional<std::chrono::milliseconds> backstop() const { return backstop_; }
  // For poll(2): the milliseconds left to the backstop (-1 without one); DEADLINE_EXCEEDED once past it.
  int poll_timeout_ms() const;
  [[noreturn]] void throw_backstop() const;

 private:
  std::optional<ExecOutcome> conclude();

  std::string id_;
  std::optional<std::chrono::milliseconds> backstop_;
  std::chrono::steady_clock::time_point deadline_;
  proto::FrameReader reader_{proto::kInitToHost};
};

}  // namespace sandlet
