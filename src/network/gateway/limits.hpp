// Bounds of the gateway: everything a sandbox sends is hostile, so every resource it can make the
// gateway hold has a ceiling.
#pragma once
#include <cstddef>
#include <cstdint>

namespace sandlet::netgw {

constexpr size_t kMaxSandboxes = 4096;
constexpr size_t kTcpPerSandbox = 1024;     // relayed connections open at once
constexpr size_t kTcpPerNode = 16384;
constexpr size_t kUdpFlowsPerSandbox = 256;  // (source, destination) pairs
constexpr size_t kUdpFlowsPerNode = 8192;
constexpr size_t kRelayBuffer = 64 * 1024;   // per direction of a connection
constexpr int kConnectTimeoutMs = 15000;     // uplink connect()
constexpr int kUdpIdleMs = 30000;            // a flow without traffic either way is closed
constexpr size_t kMaxDatagram = 65536;
constexpr size_t kMaxPublished = 64;         // the spec's limit
constexpr size_t kMaxNameRules = 256;        // the spec's limit of rules (and more than its resolvers)
constexpr size_t kDnsWorkers = 8;            // threads adding answers to allowlists (upstream waits hold none)
constexpr size_t kDnsQueued = 1024;          // queries in flight node-wide (each holds <= 1 upstream socket)
constexpr size_t kDnsPerSandbox = 8;         // a sandbox's queries in flight (being decided or answered)
constexpr int kDnsAllowWaitMs = 2000;        // an answer waiting this long for the allowlist: SERVFAIL
constexpr size_t kDnsTcpPerSandbox = 16;     // TCP connections to the resolver address
constexpr size_t kDnsTcpQueries = 16;        // queries on one such connection
constexpr int kDnsTcpIdleMs = 10000;         // a TCP resolver connection with nothing to do is closed
constexpr int kDnsPruneMs = 300000;          // expired resolved addresses leave the allowlist this often

// Descriptors (fd_budget.hpp). What an attached sandbox holds whatever it does: its namespace, init pidfd,
// counters file, four steered listeners, the steering's link, its filter's rules, protected-range and stats
// maps and its copy of the live trie (12); with a resolver its cgroup and DNS log too (2); and one per
// published port.
constexpr size_t kFdsPerSandbox = 12;
constexpr size_t kFdsPerResolver = 2;
constexpr size_t kFdsOwn = 256;              // the gateway's own: epoll, control clients, log, netlink, spare
constexpr size_t kFdFloorPerSandbox = 64;    // what any sandbox may hold for its connections (32 of them)
// The limit the gateway asks for, so that its counts, not descriptors, are what binds.
constexpr size_t kFdsWanted = kFdsOwn + kDnsQueued + kMaxSandboxes * (kFdsPerSandbox + kFdsPerResolver) + 2 * kTcpPerNode +
                              2 * kUdpFlowsPerNode;
constexpr int kUplinkRelistMs = 10000;       // the uplink's addresses are listed again at least this often
constexpr int kCountersFlushMs = 250;        // counters files are rewritten at most this often

}  // namespace sandlet::netgw
