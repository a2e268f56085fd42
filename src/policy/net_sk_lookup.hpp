// The steering program of a sandbox's network namespace (docs/NETWORK.md, "Connectivity"): a
// BPF_PROG_TYPE_SK_LOOKUP program, generated as instructions like the cgroup filter (net_program.hpp).
// Every lookup for a packet the namespace sent itself (arriving on lo: `ingress_ifindex`, 5.17+) to a
// destination outside its own addresses (127.0.0.0/8, ::1, kSandboxSource4/6) is given the node
// gateway's listening socket of that protocol and family from a sockmap; the others pass untouched,
// so the sandbox's own servers keep working. The namespace's AnyIP routes (sys/rtnetlink.hpp) make every
// destination local, so every connection and datagram reaches this lookup.
#pragma once
#include <linux/bpf.h>

#include <cstdint>
#include <vector>

namespace sandlet::policy {

// Slots of the sockmap the program reads.
enum GatewaySocketSlot : uint32_t { kGwTcp4 = 0, kGwTcp6 = 1, kGwUdp4 = 2, kGwUdp6 = 3, kGwSlotCount = 4 };

// The sandbox's own address in its namespace (on lo, the AnyIP routes' preferred source): what the
// sandbox's packets come from, so that replies to it are told apart from the sandbox's own sends (which,
// with a local route and no source, would come from their destination) and are never steered.
// 192.0.0.8 is the IPv4 dummy address; the IPv6 one is a unique-local address of the project's choosing.
inline constexpr uint8_t kSandboxSource4[4] = {192, 0, 0, 8};
inline constexpr uint8_t kSandboxSource6[16] = {0xfd, 0x5a, 0x6e, 0x1e, 0x70, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08};

// The sandbox's resolver (docs/NETWORK.md, "DNS by name"): port 53 of these, UDP and TCP, is answered by
// the node gateway's name gate, never relayed. Link-local and the project's unique-local prefix: no
// address a network the sandbox is allowed to reach would use.
inline constexpr uint8_t kResolver4[4] = {169, 254, 53, 53};
inline constexpr uint8_t kResolver6[16] = {0xfd, 0x5a, 0x6e, 0x1e, 0x70, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x53};
inline constexpr uint16_t kResolverPort = 53;

std::vector<bpf_insn> gateway_sk_lookup_program(int sockmap_fd);

}  // namespace sandlet::policy
