// sandlet C++ wrapper: plain result values (copies: nothing in them points into the library). Part of
// sandlet.hpp (C++17 or later); may be included alone.
#ifndef SANDLET_CXX_RESULTS_HPP
#define SANDLET_CXX_RESULTS_HPP

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "sandlet/sandlet.h"

namespace sandlet {
inline namespace cxx {  // see sandlet/cxx/error.hpp

// ---- plain result types -------------------------------------------------------------------------------

struct BackendInfo {
  std::string name;     // "container", "fncall", "microvm", "fullvm"
  bool available = false;
  uint32_t capabilities = 0;  // SANDLET_CAP_* bits (sandlet.h)
  std::string reason;   // empty when available, else what this host lacks
  std::string summary;  // what it is for
  std::string details_json;  // the backend's own facts (sandlet_backend_info_t::details_json), "{}" if none
};

struct SandboxInfo {
  std::string id;
  std::string state;    // "running", "dead", ...
  std::string json;     // the full record as a JSON object
};

struct ExecResult {
  int exit_code = -1;   // -1 when killed by a signal
  int signal = 0;       // 0 when it exited
  bool timed_out = false;
  std::string stdout_data;  // empty when ExecOptions::on_output was set (output went there)
  std::string stderr_data;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  uint64_t duration_ns = 0;  // request to exit
  uint64_t run_ns = 0;       // spawn to exit, inside the sandbox

  // Copies everything out of a C result and frees it.
  static ExecResult take(sandlet_exec_result_t* r) {
    std::unique_ptr<sandlet_exec_result_t, void (*)(sandlet_exec_result_t*)> guard(r, &sandlet_exec_result_delete);
    ExecResult out;
    out.exit_code = sandlet_exec_result_exit_code(r);
    out.signal = sandlet_exec_result_signal(r);
    out.timed_out = sandlet_exec_result_timed_out(r) != 0;
    size_t len = 0;
    const char* p = sandlet_exec_result_stdout(r, &len);
    if (p != nullptr) out.stdout_data.assign(p, len);
    len = 0;
    p = sandlet_exec_result_stderr(r, &len);
    if (p != nullptr) out.stderr_data.assign(p, len);
    out.stdout_truncated = sandlet_exec_result_stdout_truncated(r) != 0;
    out.stderr_truncated = sandlet_exec_result_stderr_truncated(r) != 0;
    out.duration_ns = sandlet_exec_result_duration_ns(r);
    out.run_ns = sandlet_exec_result_run_ns(r);
    return out;
  }
};

}  // inline namespace cxx
}  // namespace sandlet

#endif  // SANDLET_CXX_RESULTS_HPP
