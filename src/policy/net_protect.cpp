#include "policy/net_uplink.hpp"

#include <cstring>

namespace sandlet::policy {

std::vector<NetProtectedRange> protected_ranges_of(const std::vector<sys::NetnsAddress>& addresses) {
  static const uint8_t one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  std::vector<NetProtectedRange> out;
  for (const sys::NetnsAddress& a : addresses) {
    if ((a.family == 4 && a.addr[0] == 127) || (a.family == 6 && std::memcmp(a.addr.data(), one, 16) == 0)) continue;
    NetProtectedRange r;
    r.family = a.family;
    r.addr = a.addr;
    r.prefix = a.family == 4 ? 32 : 128;
    bool seen = false;
    for (const NetProtectedRange& o : out) seen |= o.family == r.family && o.addr == r.addr;
    if (!seen) out.push_back(r);
  }
  return out;
}

}  // namespace sandlet::policy
