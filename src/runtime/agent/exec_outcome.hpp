// What an exec (or a one-shot run) ended with, as the host tells its callers.
#pragma once
#include <cstdint>
#include <string>

namespace sandlet {

struct ExecOutcome {
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  std::string stdout_data;
  std::string stderr_data;
  uint64_t duration_ns = 0;
  uint64_t run_ns = 0;
};

}  // namespace sandlet
