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
#include "policy/net_resolved.hpp"
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

// Protected ranges a filter holds at most (fixed ones, then the uplink's addresses and local routes: a node
// with a local address per service, as Kubernetes' IPVS mode makes, has thousands).
constexpr uint32_t kNetMaxProtected = 65536;

class NetFilter final {
 public:
  // Maps and programs, loaded (not attached) with `rules` and the protected ranges `protect` in place.
  static NetFilter create(const std::vector<NetTrieEntry>& rules, const std::vector<NetProtectedRange>& protect);
  // The filter attached to the cgroup2 directory `cgroup_fd`, or nothing when none is (maps only: what
  // set_rules and counters need).
  static std::optional<NetFilter> open_attached(int cgroup_fd);

  // Attaches every program to the group (its descendants included); on failure none stays attached.
  void attach(int cgroup_fd);
  // Replaces the rules' part of the allowlist (compile_net_rules) in one step: a new trie of these and
  // the resolved addresses, swapped into the live slot by one update. Resolved addresses stay, but only
  // those whose rule tag is in `keep_tags` when given (the rules by name of the new policy).
  void set_rules(const std::vector<NetTrieEntry>& rules, const std::vector<uint32_t>* keep_tags = nullptr);
  // Adds addresses resolved for rules by name (merge_resolved_set: expired ones leave, the set stays
  // bounded) and swaps in the new trie. Returns how many records could not be placed in the trie (inside
  // a protected range — this filter's and `protect` — or more than kNetEntriesPerPrefix ranges on one
  // address). FAILED_PRECONDITION for a filter made before the resolved set existed.
  size_t add_resolved(const std::vector<NetResolved>& add, uint32_t now, const std::vector<NetProtectedRange>& protect = {});
  // Makes the protected ranges exactly `protect` (the first kNetMaxProtected): old ones leave, then new
  // ones come; a range in both is never touched, so no range that stays protected is ever open. Each entry is one map update (no grace period): the node's
  // gateway calls it for every sandbox when the uplink's addresses change. False for a filter made by an
  // older version (its protection was compiled into the rules).
  bool set_protected(const std::vector<NetProtectedRange>& protect);
  // The same as a change: `remove`, then `add` (one map update per range; what the gateway does per
  // sandbox when an address comes or goes, so the cost follows the change, not the whole set).
  bool change_protected(const std::vector<NetProtectedRange>& add, const std::vector<NetProtectedRange>& remove);
  std::vector<NetProtectedRange> protected_ranges() const;
  // The resolved set as stored (expired records stay until the next add or update).
  std::vector<NetResolved> resolved() const;
  // Whether this filter keeps a resolved set (filters made by older versions have only the live slot).
  bool holds_resolved() const { return slots_ > kSlotResolved; }
  // Whether its programs read a protected-range map (older versions compiled protection into the rules).
  bool holds_protect() const { return static_cast<bool>(protect_); }
  NetCounters counters() const;
  // Closes what allows() and the protected-range calls do not need (the denial ring): the node gateway holds
  // one filter per attached sandbox. denials_after() reads nothing then.
  void keep_lookups_only() { denied_.reset(); }
  // The live trie's generation (the stats map's last slot, bumped at every swap; 0: a filter of an older
  // version, which has none).
  uint64_t generation() const;
  // The allowlist's verdict for one destination, read from the kernel's maps as the programs see them now
  // (so it follows every update, protected ranges included): the node gateway's second check of what it
  // relays. `addr` in network order (IPv4 in the first 4 bytes); `proto` a NetProto bit. Throws an Error
  // when the maps cannot be read (e.g. EMFILE): the caller refuses.
  bool allows(int family, const uint8_t* addr, uint8_t proto, uint16_t port) const;
  // The last kNetDeniedSlots denials with seq > `after`, oldest first. Written by the programs without
  // a lock: a record read while another CPU rewrites its slot can be torn (seq tells which to drop).
  std::vector<NetDenial> denials_after(uint64_t after) const;
  uint32_t rules_map_id() const;
  uint32_t stats_map_id() const;

 private:
  NetFilter() = default;
  // Slots of the rules map: the trie the programs read, the rules' compile, the resolved set.
  static constexpr uint32_t kSlotLive = 0, kSlotStatic = 1, kSlotResolved = 2, kSlots = 3;
  sys::UniqueFd make_trie(const std::vector<NetTrieEntry>& rules) const;
  void put_slot(uint32_t slot, const sys::UniqueFd& trie);
  std::vector<NetTrieEntry> read_slot(uint32_t slot) const;
  // Writes the rules' compile and the resolved set, then the live trie made of both.
  size_t store(const std::vector<NetTrieEntry>& rules, const std::vector<NetResolved>& set,
               std::vector<NetProtectedRange> protect);
  uint32_t slots_ = 1;
  sys::UniqueFd template_;  // the inner map type (kept only by create)
  sys::UniqueFd rules_;     // array-of-maps: kSlots slots (one in filters of older versions)
  sys::UniqueFd stats_;     // u64 per NetHook
  sys::UniqueFd denied_;    // NetDeniedRecord ring
  sys::UniqueFd protect_;   // protected ranges (absent in filters of older versions)
  struct Loaded {
    sys::UniqueFd fd;
    bpf_attach_type type;
  };
  std::vector<Loaded> programs_;
  void bump_generation();
  // allows()'s copy of the live trie and the generation it was read at (loop thread only).
  mutable sys::UniqueFd live_trie_;
  mutable uint64_t live_generation_ = 0;
};

}  // namespace sandlet::policy
