// What the container backend needs from the host's kernel, and which of a sandbox's guarantees this host
// can give only in a weaker form. Everything is probed (sys/kernel_features and the cgroup tree), never
// inferred from the kernel's version; see `sandlet doctor` for the report.
#pragma once
#include <string>
#include <vector>

#include "spec/spec.hpp"
#include "sys/cgroup.hpp"

namespace sandlet::container {

// "" when the kernel has every interface the backend cannot do without; else the first one missing and
// what the kernel answered to its probe.
std::string kernel_unsupported();

// The facts behind the guarantees of spec/weaker_guarantees.hpp, probed once per cgroup tree.
struct HostGuarantees {
  bool cgroup_kill = false;      // cgroup2 groups have cgroup.kill
  std::string cgroup_kill_answer;
  bool swap_on = false;          // the host has swap space
  bool swap_accounted = false;   // and memory cgroups can bound a group's swap
  std::string swap_answer;
};
const HostGuarantees& host_guarantees(const sys::CgroupSystem& cgroups);

struct WeakerGuarantee {
  std::string name;  // as in spec/weaker_guarantees.hpp
  std::string why;   // what this host lacks and what a sandbox then gets instead
};
// The guarantees `host` weakens; for a spec, only those that concern it (memory_swap needs a memory
// limit). `spec` may be null (every one, for reports).
std::vector<WeakerGuarantee> weaker_guarantees(const HostGuarantees& host, const Spec* spec);

// Throws UNIMPLEMENTED naming every guarantee `spec` would get weaker here without listing it in
// accept_weaker, and why.
void require_accepted_guarantees(const HostGuarantees& host, const Spec& spec);

}  // namespace sandlet::container
