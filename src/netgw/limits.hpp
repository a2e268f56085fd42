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

}  // namespace sandlet::netgw
