// Counters of the node's network gateway (docs/NETWORK.md, "Limits and refusals"): one file per sandbox
// with a policy (`<sandbox dir>/netgw-counters`, made by the library at create and handed to the gateway at
// attach, read by `net stats` and the audit at the sandbox's end, also after a gateway restart) and one for
// the node (`<root>/netgw/counters`, read by the metrics). The gateway is the only writer; a reader may see
// one counter older than another (no lock), never a torn 8-byte value. Fixed layout, native endianness.
#pragma once
#include <cstdint>

namespace sandlet::proto {

constexpr uint32_t kNetgwCountersMagic = 0x4357'474e;  // "NGWC"
constexpr uint32_t kNetgwCountersVersion = 1;

// Indexes of NetgwCounters::v; names in kNetgwCounterNames. Append only.
enum NetgwCounter : uint32_t {
  kGwRefusedPolicy = 0,  // destination refused: not allowed, protected, loopback or unroutable
  kGwRefusedBudget,      // over the sandbox's own connection or descriptor budget
  kGwRefusedNode,        // the node's budget or the process's descriptors ran out
  kGwRefusedError,       // accept(), socket() or connect() failed in the gateway
  kGwTcpAccepted,        // connections relayed (accepted and connected out)
  kGwUdpFlows,           // UDP flows opened
  kGwBytesOut,           // relayed from the sandbox outward
  kGwBytesIn,            // relayed back to the sandbox
  // Node-wide only (0 in a sandbox's file):
  kGwRestarts,           // the supervisor started the gateway again after it died
  kGwLoopErrors,         // failures caught in the event loop (logged, the loop goes on)
  kGwProtectUpdates,     // times the uplink's addresses changed and every sandbox's protected ranges followed
  kGwProtectLastUs,      // how long the last such update took, from the kernel's event to the last sandbox
  kGwAttached,           // sandboxes attached now
  kGwFdsInUse,           // descriptors the gateway's sandboxes hold now
  kGwFdLimit,            // the gateway's descriptor limit (RLIMIT_NOFILE)
  kGwDnsAnswered,        // the resolver's decisions, node-wide (each also in its sandbox's DNS log)
  kGwDnsRefused,
  kGwDnsFailed,
  kGwDnsDropped,
  kGwCounterCount
};

inline constexpr const char* kNetgwCounterNames[kGwCounterCount] = {
    "refused_policy", "refused_budget", "refused_node", "refused_error", "tcp_accepted", "udp_flows",
    "bytes_out", "bytes_in", "restarts", "loop_errors", "protect_updates", "protect_last_us", "attached",
    "fds_in_use", "fd_limit", "dns_answered", "dns_refused", "dns_failed", "dns_dropped"};

struct NetgwCounters {
  uint32_t magic;
  uint32_t version;
  uint64_t v[32];  // room to append counters without a new version
};
static_assert(kGwCounterCount <= 32);

}  // namespace sandlet::proto
