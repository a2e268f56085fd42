// The event fields of the runtime's audit records (docs/AUDIT.md lists every field): what a create asked
// for (never env values or secrets), what an exec ran and how it ended, why a sandbox ended.
#pragma once
#include <boost/json/object.hpp>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "runtime/agent/exec_outcome.hpp"
#include "runtime/lifecycle.hpp"
#include "runtime/record.hpp"

namespace sandlet {

// Why a sandbox ended (the `reason` of a "destroy" record).
namespace end_reason {
constexpr const char* kExplicit = "explicit";           // destroy / rm
constexpr const char* kReleased = "released";           // an owned sandbox's last handle was dropped
constexpr const char* kRuntimeClosed = "runtime_closed";  // an owned sandbox's runtime closed
constexpr const char* kOwnerGone = "owner_gone";        // its owner process died (found by gc)
constexpr const char* kMaxLifetime = "max_lifetime";
constexpr const char* kIdleTimeout = "idle_timeout";
constexpr const char* kExited = "exited";               // its init ended by itself (a crash, a kill from outside)
constexpr const char* kRunFinished = "run_finished";    // a one-shot run's command ended
constexpr const char* kCreateFailed = "create_failed";
constexpr const char* kReclaimed = "reclaimed";         // gc found it dead or damaged, for no reason above
}  // namespace end_reason

// The sandbox's init ended by itself: max lifetime when its deadline has passed, else idle timeout when it
// has one, else exited (the agent says nothing on its way out: this is the host's inference).
const char* inferred_exit_reason(const SandboxRecord& rec, double now);

// "create": backend, environment, layers (ref and digest), limits, network, lifetime, max_lifetime_s,
// idle_timeout_s, user, workdir, hostname, mounts, accept_weaker, env_keys and secret count (no values).
boost::json::object audit_create_fields(const SandboxRecord& rec);

// "exec" (and one-shot runs): what ran and how it ended.
struct ExecAudit {
  std::vector<std::string> argv;
  std::string cwd, user;
  double start = 0, end = 0;  // unix seconds
  bool keep_background = false, streaming = false, one_shot = false;
  uint64_t output_limit = 0;
  uint64_t stdout_bytes = 0, stderr_bytes = 0;
  bool bytes_known = true;  // false for one-shot runs (their output goes to the caller's descriptors)
};
boost::json::object audit_exec_fields(const ExecAudit& a, const ExecOutcome* outcome, std::exception_ptr error);

// {"code": "NOT_FOUND", "message": "..."} of an exception (INTERNAL for a non-sandlet one).
boost::json::object audit_error(std::exception_ptr error);

}  // namespace sandlet
