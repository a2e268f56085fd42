// Unit tests for the protected ranges (src/policy/net_protect.cpp): each IPv4 address of the uplink also in
// the IPv6 forms a translator on it would reach, and which ranges are such forms.
#include <catch2/catch.hpp>

#include <algorithm>

#include "policy/net_protect.hpp"

using namespace sandlet;
using namespace sandlet::policy;

namespace {

NetProtectedRange v6(std::initializer_list<uint8_t> head, int prefix) {
  NetProtectedRange r;
  r.family = 6;
  size_t i = 0;
  for (uint8_t b : head) r.addr[i++] = b;
  r.prefix = prefix;
  return r;
}

bool has(const std::vector<NetProtectedRange>& v, const NetProtectedRange& r) {
  return std::find(v.begin(), v.end(), r) != v.end();
}

}  // namespace

TEST_CASE("protected ranges: an uplink IPv4 address with its NAT64 and 6to4 forms", "[net-protect]") {
  sys::NetnsAddress a;
  a.family = 4;
  a.addr = {198, 51, 100, 7};
  const auto ranges = protected_ranges_of({a});
  NetProtectedRange v4;
  v4.addr = {198, 51, 100, 7};
  const NetProtectedRange nat64 = v6({0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0, 198, 51, 100, 7}, 128);
  const NetProtectedRange six_to_four = v6({0x20, 0x02, 198, 51, 100, 7}, 48);
  CHECK(has(ranges, v4));
  CHECK(has(ranges, nat64));
  CHECK(has(ranges, six_to_four));

  CHECK(is_translated_form(nat64));
  CHECK(is_translated_form(six_to_four));
  CHECK_FALSE(is_translated_form(v4));
  CHECK_FALSE(is_translated_form(v6({0xfe, 0x80}, 10)));
  CHECK_FALSE(is_translated_form(v6({0x20, 0x01, 0x0d, 0xb8}, 128)));
  // Each IPv4 range of the list (the fixed ones too) has its two forms, and nothing else is one.
  const auto v4_ranges = std::count_if(ranges.begin(), ranges.end(), [](const auto& r) { return r.family == 4; });
  const auto forms = std::count_if(ranges.begin(), ranges.end(), [](const auto& r) { return is_translated_form(r); });
  CHECK(forms == 2 * v4_ranges);
}
