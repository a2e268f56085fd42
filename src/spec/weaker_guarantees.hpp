// Guarantees a sandbox normally has that some hosts can give only in a weaker form (an older kernel, a
// host set up without a feature). The container backend probes the host for each; a create on a host
// that cannot give one refuses (UNIMPLEMENTED naming it and saying why) unless the spec's
// `accept_weaker` lists its name. `sandlet doctor` shows which ones this host weakens.
#pragma once
#include <string_view>

namespace sandlet {

struct WeakerGuaranteeInfo {
  std::string_view name;       // what accept_weaker lists
  std::string_view guarantee;  // what a sandbox normally gets
};

inline constexpr WeakerGuaranteeInfo kWeakerGuarantees[] = {
    {"exec_kill_descendants",
     "a timeout, cancel or kill of a command reaches every process it started, also those that left its "
     "process group (the per-exec cgroup's cgroup.kill)"},
    {"memory_swap", "limits.memory bounds swap too: a sandbox cannot push what exceeds it out to swap"},
};

}  // namespace sandlet
