// Who may take the gateway's descriptors (docs/NETWORK.md, "Limits and refusals"). Each relayed TCP
// connection or UDP flow holds two, so a sandbox that opens connections as fast as it can would otherwise
// run the process out of them and take every other sandbox's network down with it. The rules:
//   - no sandbox holds more than `cap` (half of what is usable) for its connections;
//   - every sandbox may hold up to `floor` whatever the others do: the last `reserve` descriptors are kept
//     for sandboxes under their floor and for attaching new sandboxes;
//   - when three quarters of the rest are in use, a sandbox over its fair share (the rest divided by the
//     sandboxes attached) gets no more.
// Pure arithmetic, unit-tested (test/unit/netgw_fd_budget_test.cpp).
#pragma once
#include <algorithm>
#include <cstddef>

#include "netgw/limits.hpp"

namespace sandlet::netgw {

enum class FdVerdict { kAdmit, kOverSandbox, kNodeFull };

struct FdBudget {
  size_t usable = 0;   // for the sandboxes: the limit minus the gateway's own and the DNS sockets
  size_t reserve = 0;  // the last ones, for sandboxes under their floor and new attaches
  size_t floor = kFdFloorPerSandbox;
  size_t cap = 0;

  static FdBudget for_limit(size_t nofile) {
    FdBudget b;
    const size_t own = kFdsOwn + kDnsQueued;
    b.usable = nofile > own ? nofile - own : 0;
    b.reserve = std::min(b.usable, std::max<size_t>(b.usable / 8, 256));
    b.cap = b.usable / 2;
    return b;
  }

  // Whether a sandbox whose connections hold `own` descriptors may take `want` more, while the node's
  // sandboxes hold `node` (their fixed descriptors included) and `attached` are attached.
  FdVerdict admits_connection(size_t node, size_t own, size_t attached, size_t want) const {
    if (own + want > cap) return FdVerdict::kOverSandbox;
    if (node + want > usable) return FdVerdict::kNodeFull;
    if (own + want <= floor) return FdVerdict::kAdmit;
    const size_t shared = usable - reserve;
    if (node + want > shared) return FdVerdict::kNodeFull;
    const size_t fair = shared / std::max<size_t>(attached, 1);
    if (node + want > shared - shared / 4 && own + want > fair) return FdVerdict::kOverSandbox;
    return FdVerdict::kAdmit;
  }

  // Whether one more sandbox (kFdsPerSandbox) may be attached.
  bool admits_sandbox(size_t node) const { return node + kFdsPerSandbox + floor <= usable; }
};

}  // namespace sandlet::netgw
