// The gateway's supervisor (docs/NETWORK.md, "What happens when the gateway fails"): the process that holds
// the root's lock and the control socket, and runs the gateway itself as a child. When that child dies of
// anything but its idle exit (a crash, a kill, the OOM killer), the supervisor starts another at once and
// gives it every sandbox the dead one had attached (journal.hpp), with the very descriptors it was given:
// no sandbox is looked up again by pid or path. Connections the dead gateway relayed are lost; new ones work
// as soon as the new gateway has re-attached. The supervisor itself does nothing a sandbox can reach: it
// reads only its own child's messages and never parses a sandbox's traffic.
#pragma once
#include <cstdint>
#include <functional>

#include "sys/fd.hpp"

namespace sandlet::netgw {

struct SupervisorOptions {
  int ready_fd = -1;  // told 'r' by the first gateway once it serves (or 'e<why>' by the supervisor)
};

// Runs gateways until one exits by itself (idle: returns 0). `run_gateway(journal_fd, ready_fd, restarts)`
// is what the child runs (its return value is its exit status).
int supervise(const SupervisorOptions& o, const std::function<int(sys::UniqueFd journal, int ready_fd, uint64_t restarts)>& run_gateway);

}  // namespace sandlet::netgw
