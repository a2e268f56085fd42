// The guest's NIC, when the host gave the microVM one (a network policy: QEMU's user-mode network, see
// backends/microvm/vm_network.hpp on the host side).
#pragma once
#include "guest/status.hpp"

namespace sandlet::guest::vm {

// eth0 gets QEMU's fixed guest address (10.0.2.15/24) and a default route through QEMU (10.0.2.2); IPv6
// configures itself from QEMU's router advertisements, without duplicate detection (nothing else is on
// the link). Without eth0: an error when the host gave the VM a NIC (`expected`: a kernel kit without
// virtio_net), else nothing to do.
Status guest_network_up(bool expected);

}  // namespace sandlet::guest::vm
