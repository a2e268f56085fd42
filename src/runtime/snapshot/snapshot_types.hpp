// What snapshot, restore and fork take and give (runtime/snapshot/snapshots.hpp; the packing itself is
// src/snapshot). A snapshot's artifact is an ordinary store layer of role "diff" whose `stack` lists the
// layers it goes on, lowest first (naming it as the lowest layer of a spec restores its files: the runtime
// stacks its chain), and, from a backend with kCapMachineState, that sandbox's machine state.
#pragma once
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "image/layer_store.hpp"

namespace sandlet {

class Sandbox;

// Paths a snapshot leaves out unless told otherwise: build residue and caches (docs/SNAPSHOTS.md). A fork
// copies everything (it continues one trajectory), so it applies only what its caller lists.
inline const std::vector<std::string>& default_snapshot_excludes() {
  static const std::vector<std::string> kList = {"/tmp/*", "/var/tmp/*", "/root/.cache", "/var/cache/apt/archives/*.deb",
                                                 "/var/lib/apt/lists/*"};
  return kList;
}

struct SnapshotOptions {
  // Absolute paths inside the sandbox, each leaving out that path and everything below it; a last
  // component may be a glob ("/tmp/*": what /tmp holds, not /tmp). At most 256, each <= 4096 bytes.
  std::vector<std::string> exclude;
  bool default_excludes = true;  // also default_snapshot_excludes()
  // Every change since the sandbox was created, instead of those since its last snapshot (incremental).
  bool full = false;
  std::string name;  // names the layer ("" = unnamed)
  uint32_t max_depth = 0;  // 0 = RuntimeOptions::snapshot_max_depth
  // Also the machine state (memory and devices) while the sandbox is held still: backends with
  // kCapMachineState only (UNIMPLEMENTED elsewhere, before anything is made).
  bool machine = false;
};

// What a restore takes: the files (a `diff` layer with its chain) and, when the snapshot carried it, the
// machine state, which only the backend that wrote it resumes.
struct SnapshotArtifact {
  image::LayerInfo layer;
  std::optional<MachineState> machine;
};

struct SnapshotResult {
  image::LayerInfo layer;  // role "diff"; layer.stack: what a restore stacks under it
  bool existed = false;    // the store had this snapshot already (same changes on the same layers)
  uint64_t frozen_ns = 0;  // how long the sandbox's processes were frozen
  uint64_t total_ns = 0;   // the whole call
  uint64_t entries = 0;    // files, directories, links, whiteouts packed
  uint64_t bytes = 0;      // file data packed
  bool flattened = false;  // the chain below was merged into one layer (it had reached max depth)
  std::optional<MachineState> machine;  // with SnapshotOptions::machine
  SnapshotArtifact artifact() const { return {layer, machine}; }
};

struct ForkOptions {
  size_t n = 1;                                // 1 .. kMaxForkChildren
  std::map<std::string, std::string> labels;   // added to the inherited labels
  std::vector<std::string> exclude;            // as SnapshotOptions::exclude (no default list)
  bool copy_secrets = false;                   // children get the parent's secrets too
  bool detached = false;                       // children outlive this process, whatever the parent's lifetime
  uint32_t max_depth = 0;                      // as SnapshotOptions::max_depth
  bool machine = false;                        // children resume the parent's machine state (kCapMachineState)
};
constexpr size_t kMaxForkChildren = 1024;
// INVALID_ARGUMENT unless 1 <= n <= kMaxForkChildren.
void check_fork_count(size_t n);

struct ForkResult {
  SnapshotResult snapshot;                          // the one snapshot the children are restored from
  std::vector<std::shared_ptr<Sandbox>> children;   // n entries; null where that child failed
  std::vector<std::exception_ptr> errors;           // n entries; set where that child failed
};

}  // namespace sandlet
