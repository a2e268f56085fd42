#include "policy/net_filter.hpp"

#include <linux/bpf.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "common/error.hpp"
#include "sys/bpf.hpp"

namespace sandlet::policy {
namespace {

constexpr uint32_t kMaxRuleEntries = 1024;  // rules and the ranges they imply
constexpr uint32_t kMaxTrieEntries = kMaxRuleEntries + kNetMaxResolved;  // and one per resolved address
constexpr const char* kRulesName = "sl_net_rules";
constexpr const char* kStatsName = "sl_net_stats";
constexpr const char* kEgressName = "sl_net_egress";
constexpr const char* kDeniedName = "sl_net_denied";
constexpr const char* kProtectName = "sl_net_protect";


sys::BpfMapSpec trie_spec() {
  sys::BpfMapSpec s;
  s.type = BPF_MAP_TYPE_LPM_TRIE;
  s.key_size = sizeof(NetTrieKey);
  s.value_size = sizeof(NetTrieValue);
  s.max_entries = kMaxTrieEntries;
  s.flags = BPF_F_NO_PREALLOC;  // required for LPM tries
  s.name = "sl_net_trie";
  return s;
}

}  // namespace

sys::UniqueFd NetFilter::make_trie(const std::vector<NetTrieEntry>& rules) const {
  if (rules.size() > kMaxTrieEntries)
    throw Error(Code::kInvalidArgument, "network allowlist: more than " + std::to_string(kMaxTrieEntries) +
                                            " address ranges");
  sys::UniqueFd trie = sys::bpf_map_create(trie_spec());
  for (const NetTrieEntry& e : rules) sys::bpf_map_update(trie.get(), &e.key, &e.value);
  return trie;
}

uint64_t NetFilter::generation() const {
  uint64_t g = 0;
  const uint32_t at = kNetStatGeneration;
  try {
    if (stats_ && sys::bpf_map_lookup(stats_.get(), &at, &g)) return g;
  } catch (const Error&) {
    // a filter of an older version has no such slot (E2BIG/ENOENT): no generation
  }
  return 0;
}

void NetFilter::bump_generation() {
  const uint32_t at = kNetStatGeneration;
  const uint64_t g = generation() + 1;
  try {
    sys::bpf_map_update(stats_.get(), &at, &g);
  } catch (const Error&) {
    // an older filter: readers look the live trie up every time
  }
}

bool NetFilter::allows(int family, const uint8_t* addr, uint8_t proto, uint16_t port) const {
  // The live trie, looked up in the array-of-maps only when it was swapped since: on kernels before 6.7
  // every look-up of a map of maps from user space waits for an RCU grace period (milliseconds; seconds
  // under emulation), which per relayed connection would stall the node's gateway.
  const uint64_t gen = generation();
  if (gen == 0 || gen != live_generation_ || !live_trie_) {
    const uint32_t slot = 0;
    uint32_t trie_id = 0;
    if (!sys::bpf_map_lookup(rules_.get(), &slot, &trie_id)) return false;
    live_trie_ = sys::bpf_map_by_id(trie_id);
    live_generation_ = gen;
  }
  const sys::UniqueFd& trie = live_trie_;
  if (!trie) return false;  // swapped out meanwhile: refuse; the sandbox retries
  std::array<uint8_t, 16> a{};
  std::memcpy(a.data(), addr, family == 4 ? 4 : 16);
  const NetTrieKey key = net_key_of(family, a, family == 4 ? 32 : 128);
  uint32_t inside = 0;  // as the programs do: the reach a protected range holding it asks for
  if (protect_ && !sys::bpf_map_lookup(protect_.get(), &key, &inside)) inside = 0;
  NetTrieValue v;
  if (!sys::bpf_map_lookup(trie.get(), &key, &v)) return false;
  for (const NetPortEntry& e : v.e)
    if ((e.protos & proto) && e.reach >= inside && e.lo <= port && port <= e.hi) return true;
  return false;
}

bool NetFilter::set_protected(const std::vector<NetProtectedRange>& protect) {
  if (!protect_) return false;
  using Bytes = std::array<uint8_t, sizeof(NetTrieKey)>;
  auto bytes_of = [](const NetTrieKey& k) {
    Bytes b;
    std::memcpy(b.data(), &k, sizeof k);
    return b;
  };
  std::set<Bytes> want;
  for (const NetProtectedRange& r : protect) {
    if (want.size() == kNetMaxProtected) break;  // the fixed ranges come first
    want.insert(bytes_of(net_key_of(r.family, r.addr, r.prefix)));
  }
  // Stale ones leave first, then only the missing ones are added: a range that stays is never touched (so
  // nothing protected is open meanwhile), and a full trie takes no key, not even one it holds, on kernels
  // before 6.14.
  NetTrieKey key, next;
  const void* at = nullptr;
  std::vector<NetTrieKey> stale;
  std::set<Bytes> held;
  while (sys::bpf_map_next_key(protect_.get(), at, &next)) {
    const Bytes b = bytes_of(next);
    if (want.count(b)) held.insert(b);
    else stale.push_back(next);
    key = next;
    at = &key;
  }
  for (const NetTrieKey& k : stale) sys::bpf_map_delete(protect_.get(), &k);
  for (const Bytes& b : want) {
    if (held.count(b)) continue;
    NetTrieKey k;
    std::memcpy(&k, b.data(), sizeof k);
    sys::bpf_map_update(protect_.get(), &k, &kNetProtectReach);
  }
  return true;
}

bool NetFilter::change_protected(const std::vector<NetProtectedRange>& add, const std::vector<NetProtectedRange>& remove) {
  if (!protect_) return false;
  for (const NetProtectedRange& r : remove) {  // first: room for the new ones in a full trie
    const NetTrieKey k = net_key_of(r.family, r.addr, r.prefix);
    sys::bpf_map_delete(protect_.get(), &k);
  }
  for (const NetProtectedRange& r : add) {
    const NetTrieKey k = net_key_of(r.family, r.addr, r.prefix);
    sys::bpf_map_update(protect_.get(), &k, &kNetProtectReach);
  }
  return true;
}

std::vector<NetProtectedRange> NetFilter::protected_ranges() const {
  std::vector<NetProtectedRange> out;
  if (!protect_) return out;
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  NetTrieKey key, next;
  const void* at = nullptr;
  while (out.size() < kNetMaxProtected && sys::bpf_map_next_key(protect_.get(), at, &next)) {
    NetProtectedRange r;
    if (next.prefixlen >= 96 && std::memcmp(next.addr, kMapped, 12) == 0) {
      r.family = 4;
      std::memcpy(r.addr.data(), next.addr + 12, 4);
      r.prefix = static_cast<int>(next.prefixlen) - 96;
    } else {
      r.family = 6;
      std::memcpy(r.addr.data(), next.addr, 16);
      r.prefix = static_cast<int>(next.prefixlen);
    }
    out.push_back(r);
    key = next;
    at = &key;
  }
  return out;
}

NetFilter NetFilter::create(const std::vector<NetTrieEntry>& rules, const std::vector<NetProtectedRange>& protect) {
  NetFilter f;
  f.template_ = sys::bpf_map_create(trie_spec());
  sys::BpfMapSpec outer;
  outer.type = BPF_MAP_TYPE_ARRAY_OF_MAPS;
  outer.key_size = 4;
  outer.value_size = 4;
  outer.max_entries = kSlots;
  outer.inner_map_fd = f.template_.get();
  outer.name = kRulesName;
  f.rules_ = sys::bpf_map_create(outer);
  f.slots_ = kSlots;
  sys::BpfMapSpec stats;
  stats.type = BPF_MAP_TYPE_ARRAY;
  stats.key_size = 4;
  stats.value_size = 8;
  stats.max_entries = kNetStatSlots;
  stats.name = kStatsName;
  f.stats_ = sys::bpf_map_create(stats);
  sys::BpfMapSpec denied;
  denied.type = BPF_MAP_TYPE_ARRAY;
  denied.key_size = 4;
  denied.value_size = sizeof(NetDeniedRecord);
  denied.max_entries = kNetDeniedSlots;
  denied.name = kDeniedName;
  f.denied_ = sys::bpf_map_create(denied);
  sys::BpfMapSpec prot;
  prot.type = BPF_MAP_TYPE_LPM_TRIE;
  prot.key_size = sizeof(NetTrieKey);
  prot.value_size = 4;
  prot.max_entries = kNetMaxProtected;
  prot.flags = BPF_F_NO_PREALLOC;
  prot.name = kProtectName;
  f.protect_ = sys::bpf_map_create(prot);
  f.set_protected(protect);
  f.set_rules(rules);
  f.template_.reset();

  const NetMaps maps{f.rules_.get(), f.stats_.get(), f.denied_.get(), f.protect_.get()};
  const struct {
    bool v6;
    NetHook hook;
    bpf_attach_type type;
    const char* name;
  } sock_addr[] = {
      {false, kNetHookConnect, BPF_CGROUP_INET4_CONNECT, "sl_net_conn4"},
      {true, kNetHookConnect, BPF_CGROUP_INET6_CONNECT, "sl_net_conn6"},
      {false, kNetHookSendmsg, BPF_CGROUP_UDP4_SENDMSG, "sl_net_send4"},
      {true, kNetHookSendmsg, BPF_CGROUP_UDP6_SENDMSG, "sl_net_send6"},
  };
  for (const auto& p : sock_addr) {
    f.programs_.push_back({sys::bpf_prog_load(BPF_PROG_TYPE_CGROUP_SOCK_ADDR, p.type,
                                              net_sock_addr_program(p.v6, p.hook, maps), p.name),
                           p.type});
  }
  f.programs_.push_back({sys::bpf_prog_load(BPF_PROG_TYPE_CGROUP_SKB, BPF_CGROUP_INET_EGRESS,
                                            net_egress_program(maps), kEgressName),
                         BPF_CGROUP_INET_EGRESS});
  return f;
}

void NetFilter::attach(int cgroup_fd) {
  size_t done = 0;
  try {
    for (; done < programs_.size(); ++done)
      sys::bpf_cgroup_attach(cgroup_fd, programs_[done].fd.get(), programs_[done].type);
  } catch (...) {
    for (size_t i = 0; i < done; ++i) {
      try {
        sys::bpf_cgroup_detach(cgroup_fd, programs_[i].fd.get(), programs_[i].type);
      } catch (const Error&) {
        // the group's removal frees it
      }
    }
    throw;
  }
}

std::optional<NetFilter> NetFilter::open_attached(int cgroup_fd) {
  for (uint32_t id : sys::bpf_cgroup_query(cgroup_fd, BPF_CGROUP_INET_EGRESS)) {
    sys::UniqueFd prog = sys::bpf_prog_by_id(id);
    if (!prog) continue;
    const sys::BpfProgInfo info = sys::bpf_prog_info_of(prog.get());
    if (info.name != kEgressName) continue;
    NetFilter f;
    for (uint32_t map_id : info.map_ids) {
      sys::UniqueFd map = sys::bpf_map_by_id(map_id);
      if (!map) continue;
      const std::string name = sys::bpf_map_info_of(map.get()).name;
      if (name == kRulesName) {
        f.slots_ = sys::bpf_map_info_of(map.get()).max_entries;
        f.rules_ = std::move(map);
      }
      else if (name == kStatsName) f.stats_ = std::move(map);
      else if (name == kDeniedName) f.denied_ = std::move(map);
      else if (name == kProtectName) f.protect_ = std::move(map);
    }
    if (f.rules_ && f.stats_ && f.denied_) return f;
  }
  return std::nullopt;
}

void NetFilter::put_slot(uint32_t slot, const sys::UniqueFd& trie) {
  const uint32_t fd = static_cast<uint32_t>(trie.get());
  sys::bpf_map_update(rules_.get(), &slot, &fd);  // the swap: one pointer in the kernel
}

std::vector<NetTrieEntry> NetFilter::read_slot(uint32_t slot) const {
  std::vector<NetTrieEntry> out;
  uint32_t id = 0;
  if (!sys::bpf_map_lookup(rules_.get(), &slot, &id)) return out;  // never written
  const sys::UniqueFd trie = sys::bpf_map_by_id(id);
  if (!trie) return out;  // replaced meanwhile; the caller holds the sandbox's lock, so not by an update
  NetTrieKey key, next;
  const void* at = nullptr;
  while (out.size() < kMaxTrieEntries && sys::bpf_map_next_key(trie.get(), at, &next)) {
    NetTrieEntry e{next, {}};
    if (sys::bpf_map_lookup(trie.get(), &next, &e.value)) out.push_back(e);
    key = next;
    at = &key;
  }
  return out;
}

size_t NetFilter::store(const std::vector<NetTrieEntry>& rules, const std::vector<NetResolved>& set,
                        std::vector<NetProtectedRange> protect) {
  for (const NetProtectedRange& r : protected_ranges()) protect.push_back(r);
  if (rules.size() > kMaxRuleEntries)
    throw Error(Code::kInvalidArgument, "network allowlist: more than " + std::to_string(kMaxRuleEntries) +
                                            " address ranges");
  size_t dropped = 0;
  const std::vector<NetTrieEntry> live = merge_resolved_entries(rules, set, protect, &dropped);
  // The parts first, the live trie last: a reader of the parts never sees them older than the live one.
  std::vector<uint32_t> slots;
  std::vector<sys::UniqueFd> tries;
  if (holds_resolved()) {
    std::vector<NetTrieEntry> stored;
    for (const auto& [key, value] : resolved_to_store(set)) {
      NetTrieEntry e{key, {}};
      static_assert(sizeof e.value == sizeof value);
      std::memcpy(static_cast<void*>(&e.value), &value, sizeof value);  // both trivially copyable
      stored.push_back(e);
    }
    slots.push_back(kSlotStatic);
    tries.push_back(make_trie(rules));
    slots.push_back(kSlotResolved);
    tries.push_back(make_trie(stored));
  }
  slots.push_back(kSlotLive);
  tries.push_back(make_trie(live));
  // In one call: each replaced inner map makes the kernel wait for an RCU grace period, once per call.
  std::vector<uint32_t> fds;
  for (const sys::UniqueFd& t : tries) fds.push_back(static_cast<uint32_t>(t.get()));
  if (!sys::bpf_map_update_batch(rules_.get(), slots.data(), fds.data(), static_cast<uint32_t>(slots.size()))) {
    for (size_t i = 0; i < slots.size(); ++i) put_slot(slots[i], tries[i]);
  }
  bump_generation();  // after the swap: a reader that sees it reads the new trie
  return dropped;
}

void NetFilter::set_rules(const std::vector<NetTrieEntry>& rules, const std::vector<uint32_t>* keep_tags) {
  store(rules, holds_resolved() ? merge_resolved_set(resolved(), {}, net_clock_now(), keep_tags) : std::vector<NetResolved>{},
        {});
}

size_t NetFilter::add_resolved(const std::vector<NetResolved>& add, uint32_t now,
                               const std::vector<NetProtectedRange>& protect) {
  if (!holds_resolved())
    throw Error(Code::kFailedPrecondition, "network allowlist: made by an older version without a resolved set "
                                           "(re-create the sandbox to use rules by name)");
  return store(read_slot(kSlotStatic), merge_resolved_set(resolved(), add, now), protect);
}

std::vector<NetResolved> NetFilter::resolved() const {
  std::vector<NetResolved> out;
  if (!holds_resolved()) return out;
  for (const NetTrieEntry& e : read_slot(kSlotResolved)) {
    NetResolvedValue v;
    std::memcpy(static_cast<void*>(&v), &e.value, sizeof v);
    for (const NetResolved& r : resolved_from_store(e.key, v)) out.push_back(r);
  }
  return out;
}

NetCounters NetFilter::counters() const {
  uint64_t v[kNetHookCount] = {};
  for (uint32_t i = 0; stats_ && i < kNetHookCount; ++i) (void)sys::bpf_map_lookup(stats_.get(), &i, &v[i]);
  return {v[kNetHookConnect], v[kNetHookSendmsg], v[kNetHookEgress]};
}

std::vector<NetDenial> NetFilter::denials_after(uint64_t after) const {
  std::vector<NetDenial> out;
  for (uint32_t i = 0; i < kNetDeniedSlots; ++i) {
    NetDeniedRecord r{};
    if (!denied_ || !sys::bpf_map_lookup(denied_.get(), &i, &r) || r.seq <= after) continue;
    NetDenial d;
    d.seq = r.seq;
    static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(r.addr, kMapped, 12) == 0) {
      d.family = 4;
      std::memcpy(d.addr.data(), r.addr + 12, 4);
    } else {
      d.family = 6;
      std::memcpy(d.addr.data(), r.addr, 16);
    }
    d.port = r.port;
    d.protos = r.protos;
    d.hook = r.hook < kNetStatTotal ? static_cast<NetHook>(r.hook) : kNetHookEgress;
    out.push_back(d);
  }
  std::sort(out.begin(), out.end(), [](const NetDenial& a, const NetDenial& b) { return a.seq < b.seq; });
  return out;
}

uint32_t NetFilter::rules_map_id() const { return sys::bpf_map_info_of(rules_.get()).id; }
uint32_t NetFilter::stats_map_id() const { return sys::bpf_map_info_of(stats_.get()).id; }

}  // namespace sandlet::policy
