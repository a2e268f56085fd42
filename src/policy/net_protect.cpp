#include "policy/net_protect.hpp"

#include <array>
#include <cstring>
#include <utility>
#include <initializer_list>
#include <set>

namespace sandlet::policy {
namespace {

// Where an uplink may translate an IPv4 address into IPv6: the prefix's leading bytes, and the byte the
// IPv4 address starts at (NAT64's well-known prefix, 6to4).
struct Translation {
  std::array<uint8_t, 4> head;
  size_t head_len;
  int at;
};
constexpr Translation kTranslations[] = {{{0x00, 0x64, 0xff, 0x9b}, 4, 12}, {{0x20, 0x02, 0, 0}, 2, 2}};

NetProtectedRange range(int family, std::initializer_list<uint8_t> head, int prefix) {
  NetProtectedRange r;
  r.family = family;
  size_t i = 0;
  for (uint8_t b : head) r.addr[i++] = b;
  r.prefix = prefix;
  return r;
}

// The exact endpoints: AWS, GCP, Azure, OpenStack, Oracle and others at 169.254.169.254; AWS ECS task
// metadata; Tencent; Alibaba; Azure's WireServer; AWS's IPv6 metadata.
const std::vector<NetProtectedRange>& metadata_endpoints() {
  static const std::vector<NetProtectedRange> v = {
      range(4, {169, 254, 169, 254}, 32), range(4, {169, 254, 170, 2}, 32), range(4, {169, 254, 0, 23}, 32),
      range(4, {100, 100, 100, 200}, 32), range(4, {168, 63, 129, 16}, 32),
      range(6, {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54}, 128),
  };
  return v;
}

}  // namespace

const std::vector<NetProtectedRange>& fixed_protected_ranges() {
  static const std::vector<NetProtectedRange> v = [] {
    std::vector<NetProtectedRange> all = {range(4, {169, 254}, 16), range(6, {0xfe, 0x80}, 10)};
    for (const NetProtectedRange& m : metadata_endpoints()) all.push_back(m);
    return all;
  }();
  return v;
}

std::vector<NetProtectedRange> protected_ranges_of(const std::vector<sys::NetnsAddress>& addresses) {
  static const uint8_t one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  std::vector<NetProtectedRange> out = fixed_protected_ranges();
  std::set<NetProtectedRange> seen(out.begin(), out.end());
  for (const sys::NetnsAddress& a : addresses) {
    const int full = a.family == 4 ? 32 : 128;
    const int prefix = a.prefix < 0 || a.prefix > full ? full : a.prefix;
    // Loopback (127.0.0.0/8 and inside it, ::1) is the sandbox's own.
    if ((a.family == 4 && a.addr[0] == 127 && prefix >= 8) || (a.family == 6 && prefix == 128 && std::memcmp(a.addr.data(), one, 16) == 0))
      continue;
    NetProtectedRange r;
    r.family = a.family;
    r.addr = a.addr;
    r.prefix = prefix;
    if (seen.insert(r).second) out.push_back(r);
  }
  // Each IPv4 range also as the uplink may translate it (NAT64's well-known prefix, 6to4): a rule naming
  // those IPv6 ranges must not reach the host, or link-local, through a translator on it.
  const size_t v4_end = out.size();
  for (size_t i = 0; i < v4_end; ++i) {
    if (out[i].family != 4) continue;
    for (const Translation& x : kTranslations) {
      NetProtectedRange t;
      t.family = 6;
      std::memcpy(t.addr.data(), x.head.data(), x.head_len);
      std::memcpy(t.addr.data() + x.at, out[i].addr.data(), 4);
      t.prefix = x.at * 8 + out[i].prefix;
      if (seen.insert(t).second) out.push_back(t);
    }
  }
  return out;
}

bool is_translated_form(const NetProtectedRange& r) {
  if (r.family != 6) return false;
  for (const Translation& x : kTranslations)
    if (r.prefix >= x.at * 8 && std::memcmp(r.addr.data(), x.head.data(), x.head_len) == 0) return true;
  return false;
}

}  // namespace sandlet::policy
