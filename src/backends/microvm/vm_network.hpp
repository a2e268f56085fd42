// A microVM's network (docs/backends/microvm.md, "Network"). The guest's NIC is QEMU's user-mode network
// stack: every connection or datagram the guest sends leaves as a socket call of QEMU's own, in QEMU's
// network namespace and jail cgroup. So a container's mechanisms apply unchanged: the allowlist filter on
// the jail's cgroup, and the node gateway attached to QEMU's namespace (AnyIP routes, the resolver, the
// published ports). "none" gives the VM no NIC at all.
#pragma once
#include <string>
#include <vector>

#include "spec/network_spec.hpp"
#include "sys/fd.hpp"

namespace sandlet::microvm {

struct MicrovmNode;

// QEMU's arguments for the NIC of a sandbox with a network policy: user-mode networking, each published
// port forwarded from 127.0.0.1 of QEMU's namespace (where the gateway connects it) into the guest (the
// guest's side, 10.0.2.15/24 through 10.0.2.2, is guest/vm/guest_net.cpp's).
std::vector<std::string> nic_args(const NetworkPolicy& policy);

// Before QEMU runs: the namespace QEMU will join (loopback up, as a container's), and the allowlist filter
// on the jail's cgroup2 directory `cgroup_fd`.
sys::UniqueFd prepare_vm_network(int cgroup_fd, const NetworkPolicy& policy);

// Once the multiplexer runs (`pidfd`; the gateway drops the sandbox when it ends): the gateway's attach,
// before anything of the guest runs a command. `dir` is the sandbox's directory (its DNS log and counters).
void attach_vm_gateway(MicrovmNode& node, const std::string& id, const std::string& dir, int netns_fd, int pidfd,
                       int cgroup_fd, const NetworkPolicy& policy);

}  // namespace sandlet::microvm
