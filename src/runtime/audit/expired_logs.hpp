// What stays of a sandbox that expired under on_expiry "keep_logs": a tombstone <root>/expired/<id>.json
// with its identity, why and when it ended, until when it is kept, and the last output of its commands
// (runtime/agent/output_log.hpp). Its audit trail stays in the root's audit log, as every sandbox's does;
// `logs_json` joins the two, for a live sandbox too.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "runtime/audit/audit_log.hpp"
#include "runtime/record.hpp"
#include "runtime/sandbox_dirs.hpp"

namespace sandlet {

class ExpiredLogs final {
 public:
  // `live_state`: the state of a recorded sandbox as the runtime lists it ("running", "dead", ...).
  ExpiredLogs(std::string root, const SandboxDirs& dirs, std::shared_ptr<AuditLog> audit,
              std::function<std::string(const SandboxRecord&)> live_state)
      : root_(std::move(root)), dirs_(dirs), audit_(std::move(audit)), live_state_(std::move(live_state)) {}

  // Where the last output of `id`'s execs is kept (for a spec that keeps it).
  std::string output_log_path(const std::string& id) const;
  // The tombstone of `rec`, which expired for `reason` (before its directory goes). Never throws.
  void keep(const SandboxRecord& rec, const char* reason) noexcept;
  // Removes the tombstones past their keep_until (gc); returns how many.
  size_t sweep(double now) noexcept;
  // JSON documented in sandlet.h at sandlet_runtime_logs: of a live sandbox, or of one kept (NOT_FOUND
  // for neither); the summaries of those kept; forget() drops one's (NOT_FOUND when none).
  std::string logs_json(const std::string& id) const;
  std::string expired_json() const;
  void forget(const std::string& id);

 private:
  const std::string root_;
  const SandboxDirs& dirs_;
  std::shared_ptr<AuditLog> audit_;
  std::function<std::string(const SandboxRecord&)> live_state_;
};

}  // namespace sandlet
