// One abstract interface per backend and one registry table {name, factory, probe}. A backend turns a
// validated spec into running sandbox whose agent listens on rec.agent_socket; everything after that
// (exec, files) speaks the agent protocol and is backend-independent.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/record.hpp"
#include "sys/cgroup.hpp"
#include "sys/fd.hpp"
#include "backends/container/netns_pool.hpp"

namespace sandlet {

// Host facts a backend needs, probed once when the runtime opens.
struct HostContext {
  std::string root;                // runtime root directory
  sys::CgroupSystem cgroups;
  std::unique_ptr<container::NetnsPool> netns;  // network namespaces made ahead of time
  std::string init_cache_dir;             // where the init binary may be cached ("" = memfd only)
  // Closes descriptors whose last close is slow (detached mounts) on a runtime worker, off the create
  // (unset: they are closed where they are dropped).
  std::function<void(std::vector<sys::UniqueFd>)> close_in_background;
};

// The command of a one-shot sandbox (Runtime::run_once): the sandbox starts it itself right after its
// start-up, reports its exit on `report`, and ends.
struct OneShot {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "K=V" over the (resolved) spec's environment
  std::string cwd, user;         // empty = the spec's
  uint64_t timeout_ms = 0;       // 0 = none
  int stdio[3] = {-1, -1, -1};   // the caller's descriptors (borrowed); -1 = /dev/null inside
  sys::UniqueFd report;          // filled by finish(): one kExit or kError frame arrives there
};

class Backend {
 public:
  // What `prepare` made: owns every kernel object of a sandbox that has no spec yet. Dropping it
  // destroys them.
  class Prepared {
   public:
    virtual ~Prepared() = default;
    // True when finish() can complete it for `spec` without redoing spec-dependent work it did ahead.
    virtual bool fits(const Spec& spec) const = 0;
  };

  virtual ~Backend() = default;
  // The spec-independent half of a start, for sandbox rec.id in directory `dir` (the runtime may do it
  // ahead of time, in a warm pool). Fills rec's runtime fields (cgroups, socket). Throws; on failure
  // nothing the backend made is left behind.
  // `stage_for` (may be null) names the spec it will most likely be finished with: the parts that depend
  // only on its environment (layers, disk) are then done now too. `limits` (may be null): the limits it
  // will certainly be finished with (a create that is not pooled), so that nothing unneeded is made.
  virtual std::unique_ptr<Prepared> prepare(SandboxRecord& rec, const std::string& dir, const Spec* stage_for,
                                            const Limits* limits) = 0;
  // Completes the start with rec.spec. Returns a pidfd of the sandbox's top process (a child of this
  // process). Throws; on failure `prepared` and everything it owned are gone. With `one_shot`, the
  // sandbox runs that command instead of serving requests (UNIMPLEMENTED where a backend cannot).
  virtual sys::UniqueFd finish(std::unique_ptr<Prepared> prepared, SandboxRecord& rec, OneShot* one_shot) = 0;
};

struct BackendEntry {
  const char* name;
  std::unique_ptr<Backend> (*factory)(const HostContext&);
  std::string (*probe)();  // "" when this host can run it, else why not
};

const std::vector<BackendEntry>& backend_registry();

}  // namespace sandlet
