// What a sandbox handle needs from the runtime that opened it, and nothing more: the handle (sandbox.hpp)
// depends on this interface, the runtime implements it, so neither includes the other's header.
#pragma once
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>

#include "backends/backend.hpp"
#include "runtime/audit/audit_log.hpp"
#include "runtime/record.hpp"
#include "runtime/snapshot/snapshot_types.hpp"

namespace sandlet {

class SandboxOwner {
 public:
  virtual ~SandboxOwner() = default;
  virtual boost::asio::io_context& io() = 0;
  virtual bool closed() const = 0;
  virtual void check_not_on_loop(const char* what) const = 0;
  virtual void in_background(std::function<void()> fn) = 0;  // on a runtime worker
  // Ends the sandbox (the one destroy verb): nothing of it runs when this returns, and it is no longer listed
  // or attachable; its host resources are reclaimed on a worker (the runtime's close waits for that).
  // `reason`: one of audit_records.hpp's end_reason, for the audit log.
  virtual void end(const SandboxRecord& rec, const std::shared_ptr<BackendSandbox>& impl, const char* reason) = 0;
  // The audit log of the runtime's root (it outlives the runtime while a handle holds it).
  virtual std::shared_ptr<AuditLog> audit() = 0;
  // An exec of sandbox `id` started / completed (for its busy time in the metrics). exec_ended may run on
  // the loop thread after the handle is gone.
  virtual void exec_began(const std::string& id) { (void)id; }
  virtual void exec_ended(const std::string& id) { (void)id; }
  // The handle of `id` is gone (its object may be dropped from the registry).
  virtual void forget(const std::string& id) = 0;
  // Where the last output of `id`'s execs is kept (runtime/agent/output_log.hpp), for a spec that keeps it.
  virtual std::string output_log_path(const std::string& id) const = 0;
  // Persists a state change of the record (pause/resume).
  virtual void persist(const SandboxRecord& rec) = 0;
  // Whether the persisted record of `id` says "paused" (another process, or a pause by label, may have
  // paused it behind the handle's back). False when the record is gone or unreadable.
  virtual bool record_paused(const std::string& id) = 0;
  // Runs `work` on a thread of its own (it may block for long, and may itself wait for the loop and the
  // workers), then `done` on the loop thread. The runtime's close waits for it. FAILED_PRECONDITION once closed.
  virtual void long_call(std::function<std::string()> work, std::function<void(std::exception_ptr, std::string)> done) = 0;
  // The Capability bits of the backend named `name` (0 when it is not available here).
  virtual uint32_t backend_capabilities(const std::string& name) const = 0;
  // Snapshot and fork of this sandbox (the Snapshots service, runtime/snapshot/snapshots.hpp).
  virtual SnapshotResult snapshot(const SandboxRecord& rec, BackendSandbox& impl, const SnapshotOptions& options) = 0;
  // The children of a fork of `parent`, from the snapshot just taken of it.
  virtual ForkResult fork_from(const SandboxRecord& parent, SnapshotResult snap, const ForkOptions& options) = 0;
};

}  // namespace sandlet
