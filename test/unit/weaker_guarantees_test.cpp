// The accept_weaker spec field and the container backend's decision which guarantees a host weakens
// (the probes themselves run on real kernels: test/vm and `sandlet doctor`).
#include <catch2/catch.hpp>

#include <string>

#include "backends/container/kernel_support.hpp"
#include "common/error.hpp"
#include "spec/spec.hpp"
#include "spec/weaker_guarantees.hpp"
#include "unit_helpers.hpp"

using namespace sandlet;
using unit::expect_error;

TEST_CASE("accept_weaker takes known names once, from the setter and from JSON", "[spec][kernel]") {
  Spec s;
  spec_accept_weaker(s, "memory_swap");
  spec_accept_weaker(s, "memory_swap");
  spec_accept_weaker(s, "exec_kill_descendants");
  CHECK(s.accept_weaker == std::vector<std::string>{"memory_swap", "exec_kill_descendants"});
  const Spec back = parse_spec_json(spec_to_json(s));
  CHECK(back.accept_weaker == s.accept_weaker);
  CHECK(parse_spec_json(R"({"accept_weaker": ["memory_swap"]})").accept_weaker ==
        std::vector<std::string>{"memory_swap"});
  for (const auto& g : kWeakerGuarantees) spec_accept_weaker(s, g.name);  // every catalogued name is accepted
}

TEST_CASE("accept_weaker rejects unknown names and wrong types, naming the field", "[spec][kernel]") {
  Spec s;
  Error e = expect_error([&] { spec_accept_weaker(s, "isolation"); });
  CHECK(e.code() == Code::kInvalidArgument);
  CHECK_THAT(e.what(), Catch::Contains("accept_weaker") && Catch::Contains("\"isolation\"") &&
                           Catch::Contains("memory_swap") && Catch::Contains("exec_kill_descendants"));
  e = expect_error([] { parse_spec_json(R"({"accept_weaker": "memory_swap"})"); });
  CHECK(e.code() == Code::kInvalidArgument);
  CHECK_THAT(e.what(), Catch::Contains("accept_weaker"));
  e = expect_error([] { parse_spec_json(R"({"accept_weaker": [1]})"); });
  CHECK_THAT(e.what(), Catch::Contains("accept_weaker[0]"));
  Spec direct;
  direct.layers = {"/"};
  direct.accept_weaker = {"nope"};
  e = expect_error([&] { validate_spec(direct); });
  CHECK_THAT(e.what(), Catch::Contains("accept_weaker"));
}

TEST_CASE("a host lacking a guarantee refuses creates that do not accept it, and only those it concerns",
          "[kernel]") {
  container::HostGuarantees full;
  full.cgroup_kill = true;
  full.swap_on = true;
  full.swap_accounted = true;
  Spec spec;
  spec.limits.memory = 64 << 20;
  CHECK(container::weaker_guarantees(full, &spec).empty());
  container::require_accepted_guarantees(full, spec);

  container::HostGuarantees no_swap_accounting = full;
  no_swap_accounting.swap_accounted = false;
  no_swap_accounting.swap_answer = "memory.swap.max is missing";
  Error e = expect_error([&] { container::require_accepted_guarantees(no_swap_accounting, spec); });
  CHECK(e.code() == Code::kUnimplemented);
  CHECK_THAT(e.what(), Catch::Contains("memory_swap") && Catch::Contains("memory.swap.max is missing") &&
                           Catch::Contains("accept_weaker"));
  spec_accept_weaker(spec, "memory_swap");
  container::require_accepted_guarantees(no_swap_accounting, spec);
  // No memory limit: nothing to bound, nothing weaker. No swap at all: the same.
  Spec unlimited;
  CHECK(container::weaker_guarantees(no_swap_accounting, &unlimited).empty());
  no_swap_accounting.swap_on = false;
  CHECK(container::weaker_guarantees(no_swap_accounting, &spec).empty());

  container::HostGuarantees no_kill = full;
  no_kill.cgroup_kill = false;
  auto weaker = container::weaker_guarantees(no_kill, &unlimited);
  REQUIRE(weaker.size() == 1);
  CHECK(weaker[0].name == "exec_kill_descendants");
  e = expect_error([&] { container::require_accepted_guarantees(no_kill, unlimited); });
  CHECK_THAT(e.what(), Catch::Contains("exec_kill_descendants") && Catch::Contains("cgroup.kill"));
}
