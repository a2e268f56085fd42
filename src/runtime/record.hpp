// A sandbox's persistent record (<root>/sandboxes/<id>/record.json). It is what lets another process
// attach, list, destroy or garbage-collect a sandbox after its creator is gone.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "spec/spec.hpp"
#include "sys/cgroup.hpp"

namespace sandlet {

enum class SandboxState { kCreating, kRunning, kPooled };  // kPooled: prepared ahead, no spec yet

// One lower layer of a sandbox as asked for and as used: `ref` is what the spec or environment named
// (a directory, a name, a digest), `digest` the store layer it resolved to ("" for a host directory).
struct LayerUse {
  std::string ref;
  std::string digest;
};

struct SandboxRecord {
  std::string id;
  std::string backend;
  SandboxState state = SandboxState::kCreating;
  Spec spec;
  double created_at = 0;      // unix seconds
  double deadline = 0;        // unix seconds; max lifetime
  int slot = -1;              // uid range slot
  uint32_t uid_base = 0;      // host uid of root inside
  pid_t init_pid = 0;         // as seen from the host
  uint64_t init_start = 0;    // start time (clock ticks) to detect pid reuse
  pid_t owner_pid = 0;        // the creating process
  uint64_t owner_start = 0;
  sys::CgroupPaths cgroups;
  std::string agent_socket;   // host path of the agent's listening socket
  // Reproducibility: the environment version and store layers this sandbox was built from (spec.layers
  // then holds the resolved directories the backend stacked).
  std::string environment;    // "name@N" or ""
  std::vector<LayerUse> layers;

  std::string to_json() const;
  static SandboxRecord from_json(const std::string& text);  // throws DATA_LOSS on a damaged record
};

const char* state_name(SandboxState s);

}  // namespace sandlet
