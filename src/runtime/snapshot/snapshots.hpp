// The runtime's snapshot service: a sandbox's changes into an artifact (a `diff` store layer, and from a
// backend with kCapMachineState its machine state), a restore of an artifact into a new sandbox, and fork
// as one snapshot plus N restores — the same on every backend (for a container a restore is a create on
// the snapshot's layers). It owns no sandbox: creates go through the runtime (Wiring::create).
#pragma once
#include <cstddef>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "image/layer_mounts.hpp"
#include "image/layer_store.hpp"
#include "runtime/audit/audit_log.hpp"
#include "runtime/layers.hpp"
#include "runtime/record.hpp"
#include "runtime/sandbox_dirs.hpp"
#include "runtime/snapshot/snapshot_types.hpp"
#include "spec/spec.hpp"

namespace sandlet {

class Sandbox;

class Snapshots final {
 public:
  using CreateDone = std::function<void(std::exception_ptr, std::shared_ptr<Sandbox>)>;
  // What the service uses of the runtime that owns it (all outlive it).
  struct Wiring {
    image::LayerStore& store;
    image::LayerMounts& mounts;
    LayerUsage& layers;
    const SandboxDirs& dirs;
    std::shared_ptr<AuditLog> audit;
    size_t default_max_depth;  // RuntimeOptions::snapshot_max_depth
    std::string machine_root;  // where snapshots' machine states are kept (<root>/machines)
    std::function<uint32_t(const std::string& backend)> capabilities;  // 0 = not available here
    // The runtime's create (asynchronous, `done` on the loop thread); with `resume`, the backend resumes
    // that machine state instead of starting the sandbox fresh.
    std::function<void(Spec, std::shared_ptr<const MachineState> resume, CreateDone)> create;
    std::function<void(const char* what)> check_not_on_loop;
    std::function<void(std::function<void()>)> in_background;
  };
  explicit Snapshots(Wiring wiring) : w_(std::move(wiring)) {}

  // The sandbox's changes (since it was created, or since its last snapshot) as a store layer of role
  // "diff" whose stack names what it goes on; with options.machine, its machine state too.
  SnapshotResult take(const SandboxRecord& rec, BackendSandbox& impl, const SnapshotOptions& options);
  // A new sandbox from `artifact`, made from `spec` (its layers and environment are replaced by the
  // artifact's chain); a machine state is resumed by the backend that wrote it. `done` on the loop thread;
  // input the restore refuses throws here, before anything is made.
  void restore_async(const SnapshotArtifact& artifact, Spec spec, CreateDone done);
  // The children of a fork of `parent`, from the snapshot just taken of it: n restores, each with a child
  // identity of its own (sandlet.h, "Fork children"). Blocks until all are ready or failed.
  ForkResult fork_from(const SandboxRecord& parent, SnapshotResult snap, const ForkOptions& options);
  // n sandboxes restored from the stored snapshot `layer` (a store reference), each made from `base`.
  ForkResult fork_snapshot(const std::string& layer, const Spec& base, const ForkOptions& options);

 private:
  // Past `max_depth` snapshots stacked on each other, the chain is merged into one layer.
  std::vector<std::string> flatten_if_deep(std::vector<std::string> stack, size_t max_depth, bool* flattened);
  void fork_children(const SnapshotArtifact& artifact, const Spec& base, const std::string& parent_id,
                     const ForkOptions& options, ForkResult& out);
  void audit_fork(const std::string& parent_id, const std::map<std::string, std::string>& labels,
                  const ForkResult& out) noexcept;

  Wiring w_;
};

}  // namespace sandlet
