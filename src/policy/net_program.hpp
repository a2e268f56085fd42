// The kernel side of a network allowlist: cgroup BPF programs generated as instruction arrays, with the
// fds of one sandbox's maps patched in.
//
// Maps (per sandbox): `rules` is an array-of-maps whose slot 0 holds the LPM trie of NetTrieEntry the
// programs read (net_rules.hpp; slots 1 and 2 keep what it is built from, net_filter.hpp); a new allowlist
// is built as a new trie and swapped into slot 0 with one update, so a
// program sees either the old set or the new one, never a mix. `stats` counts denials per hook. `protect`
// holds the ranges only a rule naming the address opens (net_rules.hpp): a destination in one needs a
// matching entry whose `reach` is at least the range's value (kNetProtectReach).
//
// Programs: connect4/6 and sendmsg4/6 (a denied connect(), or sendto() of UDP, fails with EPERM) and
// an inet egress program that checks every packet any socket of the group sends — TCP of connections
// opened before an update, ICMP echo ("ping") sockets, UDP on connected sockets — and drops what is not
// allowed (a send fails with EPERM; TCP retransmits until its timeout).
#pragma once
#include <linux/bpf.h>

#include <cstdint>
#include <vector>

namespace sandlet::policy {

// Indexes of the stats map: a counter per hook, the total that numbers the denial records, and (user space
// only) the generation of the live trie, bumped at every swap.
enum NetHook : uint32_t {
  kNetHookConnect = 0,
  kNetHookSendmsg = 1,
  kNetHookEgress = 2,
  kNetStatTotal = 3,
  kNetHookCount = 4,
  kNetStatGeneration = 4,
  kNetStatSlots = 5
};

// One denial as the programs record it in the `denied` ring (kNetDeniedSlots entries, slot = seq % size).
struct NetDeniedRecord {
  uint64_t seq;       // 1, 2, ...: the sandbox's denial number (0: slot never used)
  uint8_t addr[16];   // destination, IPv4 mapped into IPv6
  uint16_t port;      // destination port, host order (0 for ICMP)
  uint8_t protos;     // NetProto bit (0: a protocol no rule can name)
  uint8_t hook;       // NetHook
  uint32_t pad;
};
static_assert(sizeof(NetDeniedRecord) == 32);
constexpr uint32_t kNetDeniedSlots = 64;

struct NetMaps {
  int rules, stats, denied;
  int protect;  // LPM trie of protected ranges (net_protect.hpp), value: the reach it asks for (u32)
};
// A cgroup/connect or cgroup/sendmsg program for IPv4 (`ipv6` false) or IPv6 destinations.
std::vector<bpf_insn> net_sock_addr_program(bool ipv6, NetHook hook, const NetMaps& maps);
// A cgroup_skb/egress program for IPv4 and IPv6 packets.
std::vector<bpf_insn> net_egress_program(const NetMaps& maps);

}  // namespace sandlet::policy
