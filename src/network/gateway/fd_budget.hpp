// Who may take the gateway's descriptors (docs/NETWORK.md, "Limits and refusals"). Each relayed TCP
// connection or UDP flow holds two, so a sandbox that opens connections as fast as it can would otherwise
// run the process out of them (or fill the node's connection caps) and take every other sandbox's network
// down with it. One budget covers both: `usable` is the smaller of what the descriptor limit leaves and
// what the node's caps allow. The rules:
//   - the floors (`floor` per sandbox) the attached sandboxes have not used yet are kept free, up to a
//     quarter of the budget: no sandbox goes beyond its own floor into them, and an attach must leave them;
//     so every sandbox may hold its floor whatever the others do, as long as the attached sandboxes' floors
//     fit in that quarter (on a node crowded with sandboxes, the quarter is shared first come);
//   - no sandbox holds more than `cap` (half of what is usable);
//   - once three quarters are in use (counting the kept floors), a sandbox over its fair share (the budget
//     divided by the sandboxes attached) gets no more.
// Pure arithmetic, unit-tested (test/unit/netgw_fd_budget_test.cpp).
#pragma once
#include <algorithm>
#include <cstddef>

#include "network/gateway/limits.hpp"

namespace sandlet::netgw {

enum class FdVerdict { kAdmit, kOverSandbox, kNodeFull };

struct FdBudget {
  size_t usable = 0;  // for the sandboxes: fixed descriptors and connections
  size_t floor = kFdFloorPerSandbox;
  size_t cap = 0;

  // The budget under a descriptor limit of `nofile`: minus the gateway's own and the resolver's sockets
  // (one per query in flight: kDnsQueued, or an eighth of a small limit), and never more than the caps.
  // What the resolver's upstream sockets get under a limit of `nofile` (its bound on queries in flight).
  static size_t dns_reserve(size_t nofile) { return std::min(kDnsQueued, nofile / 8); }

  static FdBudget for_limit(size_t nofile) {
    FdBudget b;
    const size_t own = kFdsOwn + dns_reserve(nofile);
    const size_t by_caps = kMaxSandboxes * (kFdsPerSandbox + kFdsPerResolver) + 2 * (kTcpPerNode + kUdpFlowsPerNode);
    b.usable = std::min(nofile > own ? nofile - own : 0, by_caps);
    b.cap = b.usable / 2;
    return b;
  }

  // Whether a sandbox whose connections hold `own` descriptors may take `want` more, while the node's
  // sandboxes hold `node` (their fixed descriptors included), `attached` are attached and the floors they
  // have not used add up to `unused_floors`.
  FdVerdict admits_connection(size_t node, size_t own, size_t attached, size_t unused_floors, size_t want) const {
    if (own + want > std::max(cap, floor)) return FdVerdict::kOverSandbox;
    if (own + want <= floor) return node + want <= usable ? FdVerdict::kAdmit : FdVerdict::kNodeFull;
    // Beyond its floor: the floors the others have not used stay free.
    const size_t committed = node + kept(unused_floors) + want;
    if (committed > usable) return FdVerdict::kNodeFull;
    const size_t fair = usable / std::max<size_t>(attached, 1);
    if (committed > usable - usable / 4 && own + want > fair) return FdVerdict::kOverSandbox;
    return FdVerdict::kAdmit;
  }

  // Whether one more sandbox holding `fixed` descriptors (and its floor, kept for it) fits.
  bool admits_sandbox(size_t node, size_t unused_floors, size_t fixed) const {
    return node + fixed + kept(unused_floors + floor) <= usable;
  }

  // What is kept free for the floors not used yet: at most a quarter of the budget.
  size_t kept(size_t unused_floors) const { return std::min(unused_floors, usable / 4); }
};

}  // namespace sandlet::netgw
