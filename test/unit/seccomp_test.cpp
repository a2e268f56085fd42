// Unit tests for the baseline seccomp filter the library carries (compiled at build time).
#include <catch2/catch.hpp>

#include <linux/filter.h>

#include <string>

#include "policy/seccomp/baseline_rules.hpp"
#include "policy/seccomp_profile.hpp"

TEST_CASE("the embedded baseline seccomp program is what its rules compile to", "[seccomp]") {
  const std::string& embedded = sandlet::policy::baseline_seccomp_bpf();
  REQUIRE(!embedded.empty());
  CHECK(embedded.size() % sizeof(sock_filter) == 0);
  // A stale build (rules edited, program not regenerated) or a different libseccomp shows up here.
  CHECK(embedded == sandlet::seccomp::build_baseline_seccomp_bpf());
}
