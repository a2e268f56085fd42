// The kernel side of a network allowlist: cgroup BPF programs generated as instruction arrays, with the
// fds of one sandbox's maps patched in.
//
// Maps (per sandbox): `rules` is an array-of-maps with one slot holding an LPM trie of NetTrieEntry
// (net_rules.hpp); a new allowlist is built as a new trie and swapped into the slot with one update, so a
// program sees either the old set or the new one, never a mix. `stats` counts denials per hook.
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

enum NetHook : uint32_t { kNetHookConnect = 0, kNetHookSendmsg = 1, kNetHookEgress = 2, kNetHookCount = 4 };

// A cgroup/connect or cgroup/sendmsg program for IPv4 (`ipv6` false) or IPv6 destinations.
std::vector<bpf_insn> net_sock_addr_program(bool ipv6, NetHook hook, int rules_fd, int stats_fd);
// A cgroup_skb/egress program for IPv4 and IPv6 packets.
std::vector<bpf_insn> net_egress_program(int rules_fd, int stats_fd);

}  // namespace sandlet::policy
