// A sandbox's persistent record (<root>/sandboxes/<id>/record.json). It is what lets another process
// attach, list, destroy or garbage-collect a sandbox after its creator is gone. The runtime owns every
// field but `backend_state`, which belongs to the sandbox's backend and is never interpreted here.
#pragma once
#include <sys/types.h>

#include <boost/json/object.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/lifecycle.hpp"
#include "spec/spec.hpp"

namespace sandlet {

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
  Spec spec;                // as asked for, layers resolved (spec.layers: the directories stacked)
  double created_at = 0;    // unix seconds
  double deadline = 0;      // unix seconds; max lifetime
  pid_t owner_pid = 0;      // the creating process
  uint64_t owner_start = 0;
  // Reproducibility: the environment version and store layers this sandbox was built from.
  std::string environment;  // "name@N" or ""
  std::vector<LayerUse> layers;
  boost::json::object backend_state;  // the backend's own section (BackendSandbox::state())

  std::string to_json() const;
  // Throws DATA_LOSS on a damaged record. Reads version 1 records (before backends owned their section).
  static SandboxRecord from_json(const std::string& text);
};

// The record as the API shows it (sandlet_sandbox_info_json, list): every field of the record, with `state`
// replaced by `state` as the caller sees it ("running", "paused", "dead", "destroyed", ...), and
// `effective_policy` (policy::describe: the seccomp profile version, relaxations, extra denials).
std::string public_record_json(const SandboxRecord& rec, const char* state);

}  // namespace sandlet
