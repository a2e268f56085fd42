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
constexpr size_t kDnsWorkers = 8;            // threads deciding queries (each may wait on an upstream)
constexpr size_t kDnsQueued = 1024;          // queries waiting for a worker, node-wide
constexpr size_t kDnsPerSandbox = 8;         // a sandbox's queries queued or being decided
constexpr size_t kDnsTcpPerSandbox = 16;     // TCP connections to the resolver address
constexpr size_t kDnsTcpQueries = 16;        // queries on one such connection
constexpr int kDnsTcpIdleMs = 10000;         // a TCP resolver connection with nothing to do is closed
constexpr int kDnsPruneMs = 300000;          // expired resolved addresses leave the allowlist this often

}  // namespace sandlet::netgw
