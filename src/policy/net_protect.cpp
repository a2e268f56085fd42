#include "policy/net_protect.hpp"

#include <cstring>
#include <initializer_list>

namespace sandlet::policy {
namespace {

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
    bool seen = false;
    for (const NetProtectedRange& o : out) seen |= o == r;
    if (!seen) out.push_back(r);
  }
  return out;
}

}  // namespace sandlet::policy
