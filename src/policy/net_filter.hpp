// One sandbox's network allowlist in the kernel: its maps and programs (net_program.hpp), attached to
// the sandbox's cgroup2 directory. Programs attached to a cgroup stay with it: they (and the maps only
// they hold) are freed when the group is removed, so a crash leaks nothing that reclaim/gc's cgroup
// removal does not free. Another process finds the maps again from the group itself (open_attached).
#pragma once
#include <cstdint>
#include <array>
#include <optional>
#include <vector>

#include "policy/net_program.hpp"
#include "policy/net_rules.hpp"
#include "sys/fd.hpp"

namespace sandlet::policy {

struct NetCounters {
  uint64_t connect_denied = 0;  // connect() refused (EPERM)
  uint64_t sendmsg_denied = 0;  // sendto()/sendmsg() of UDP refused (EPERM)
  uint64_t egress_dropped = 0;  // packets dropped on the way out
};

// A denial, for the audit log: the destination the sandbox tried to reach.
struct NetDenial {
  uint64_t seq = 0;         // the sandbox's denial number (1, 2, ...; gaps: older records overwritten)
  int family = 4;           // of the destination (IPv4-mapped addresses are shown as IPv4)
  std::array<uint8_t, 16> addr{};  // network order, IPv4 in the first 4 bytes
  uint16_t port = 0;        // destination port (0 for ICMP)
  uint8_t protos = 0;       // NetProto bit; 0 for a protocol no rule can name
  NetHook hook = kNetHookConnect;
};

class NetFilter final {
 public:
  // Maps and programs, loaded (not attached) with `rules` in place.
  static NetFilter create(const std::vector<NetTrieEntry>& rules);
  // The filter attached to the cgroup2 directory `cgroup_fd`, or nothing when none is (maps only: what
  // set_rules and counters need).
  static std::optional<NetFilter> open_attached(int cgroup_fd);

  // Attaches every program to the group (its descendants included); on failure none stays attached.
  void attach(int cgroup_fd);
  // Replaces the whole allowlist in one step: a new trie, swapped into the rules slot by one update.
  void set_rules(const std::vector<NetTrieEntry>& rules);
  NetCounters counters() const;
  // The allowlist's verdict for one destination, read from the kernel's trie as the programs see it now
  // (so it follows every update): the node gateway's second check of what it relays. `addr` in network
  // order (IPv4 in the first 4 bytes); `proto` a NetProto bit.
  bool allows(int family, const uint8_t* addr, uint8_t proto, uint16_t port) const;
  // The last kNetDeniedSlots denials with seq > `after`, oldest first. Written by the programs without
  // a lock: a record read while another CPU rewrites its slot can be torn (seq tells which to drop).
  std::vector<NetDenial> denials_after(uint64_t after) const;
  uint32_t rules_map_id() const;
  uint32_t stats_map_id() const;

 private:
  NetFilter() = default;
  sys::UniqueFd make_trie(const std::vector<NetTrieEntry>& rules) const;
  sys::UniqueFd template_;  // the inner map type (kept only by create)
  sys::UniqueFd rules_;     // array-of-maps, one slot
  sys::UniqueFd stats_;     // u64 per NetHook
  sys::UniqueFd denied_;    // NetDeniedRecord ring
  struct Loaded {
    sys::UniqueFd fd;
    bpf_attach_type type;
  };
  std::vector<Loaded> programs_;
};

}  // namespace sandlet::policy
