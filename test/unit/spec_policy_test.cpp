// Unit tests for the spec's `policy` (src/spec/spec_policy.cpp): parsing, round trip, errors naming the field.
#include <catch2/catch.hpp>

#include <string>

#include "common/error.hpp"
#include "spec/spec.hpp"
#include "unit_helpers.hpp"

using namespace sandlet;
using unit::expect_error;

namespace {

Spec parse_policy(const std::string& policy) {
  return parse_spec_json(R"({"layers": ["/"], "policy": )" + policy + "}");
}

std::string policy_error(const std::string& policy) {
  Error e = expect_error([&] { parse_policy(policy); });
  CHECK(e.code() == Code::kInvalidArgument);
  return e.what();
}

}  // namespace

TEST_CASE("policy.seccomp parses, round-trips and defaults to the newest profile", "[spec][policy]") {
  const Spec def;
  CHECK(def.policy.seccomp.profile == "default");
  CHECK(def.policy.seccomp.allow.empty());
  CHECK(def.policy.seccomp.deny.empty());
  CHECK(spec_to_json(def).find(
            R"("policy":{"seccomp":{"profile":"default","deny":[],"allow":[]},"files":[],"mask_kernel_files":true})") !=
        std::string::npos);

  const Spec s = parse_policy(
      R"({"seccomp": {"profile": "default-v1", "deny": ["getcwd", "uname"], "allow": ["ptrace", "io_uring"]}})");
  CHECK(s.policy.seccomp.profile == "default-v1");
  CHECK(s.policy.seccomp.deny == std::vector<std::string>{"getcwd", "uname"});
  CHECK(s.policy.seccomp.allow == std::vector<std::string>{"ptrace", "io_uring"});
  const Spec back = parse_spec_json(spec_to_json(s));
  CHECK(back.policy == s.policy);
  validate_spec(back);

  // The newest version by name, with the socket relaxations.
  const Spec v2 = parse_policy(R"({"seccomp": {"profile": "default-v2", "allow": ["vsock", "netlink"]}})");
  CHECK(v2.policy.seccomp.allow == std::vector<std::string>{"vsock", "netlink"});
  validate_spec(v2);

  CHECK(parse_policy("{}").policy == Policy{});
  CHECK(parse_policy(R"({"seccomp": {}})").policy == Policy{});
}

TEST_CASE("policy errors name the field and the reason", "[spec][policy]") {
  std::string e = policy_error(R"({"bogus": 1})");
  CHECK_THAT(e, Catch::Contains("'policy.bogus'") && Catch::Contains("seccomp"));
  e = policy_error("[]");
  CHECK_THAT(e, Catch::Contains("'policy'") && Catch::Contains("an object"));
  e = policy_error(R"({"seccomp": {"profile": "strict"}})");
  CHECK_THAT(e, Catch::Contains("'policy.seccomp.profile'") && Catch::Contains("default-v1, default-v2") &&
                    Catch::Contains("'strict'"));
  e = policy_error(R"({"seccomp": {"profile": 1}})");
  CHECK_THAT(e, Catch::Contains("'policy.seccomp.profile'") && Catch::Contains("a string"));
  e = policy_error(R"({"seccomp": {"extra": []}})");
  CHECK_THAT(e, Catch::Contains("'policy.seccomp.extra'") && Catch::Contains("unknown field"));
  e = policy_error(R"({"seccomp": {"deny": ["getcwd", "no_such_call"]}})");
  CHECK_THAT(e, Catch::Contains("'policy.seccomp.deny[1]'") && Catch::Contains("no_such_call"));
  e = policy_error(R"({"seccomp": {"deny": [""]}})");
  CHECK_THAT(e, Catch::Contains("'policy.seccomp.deny[0]'"));
  e = policy_error(R"({"seccomp": {"deny": ["getcwd", "getcwd"]}})");
  CHECK_THAT(e, Catch::Contains("'policy.seccomp.deny[1]'") && Catch::Contains("twice"));
  e = policy_error(R"({"seccomp": {"deny": ["read"]}})");
  CHECK_THAT(e, Catch::Contains("'policy.seccomp.deny[0]'") && Catch::Contains("init"));
  e = policy_error(R"({"seccomp": {"deny": "getcwd"}})");
  CHECK_THAT(e, Catch::Contains("'policy.seccomp.deny'") && Catch::Contains("an array"));
  e = policy_error(R"({"seccomp": {"allow": ["ptrace", "mount"]}})");
  CHECK_THAT(e, Catch::Contains("'policy.seccomp.allow[1]'") && Catch::Contains("'mount'") &&
                    Catch::Contains("ptrace, io_uring, perf_event_open, vsock, netlink"));
  e = policy_error(R"({"seccomp": {"allow": [7]}})");
  CHECK_THAT(e, Catch::Contains("'policy.seccomp.allow[0]'") && Catch::Contains("a string"));
  e = policy_error(R"({"seccomp": {"allow": ["ptrace", "ptrace"]}})");
  CHECK_THAT(e, Catch::Contains("'policy.seccomp.allow[1]'"));
  e = policy_error(R"({"seccomp": {"allow": [], "allow": []}})");
  CHECK_THAT(e, Catch::Contains("policy.seccomp.allow") && Catch::Contains("duplicate"));
}

TEST_CASE("validate_spec checks a policy filled in directly", "[spec][policy]") {
  Spec s;
  s.layers = {"/"};
  s.policy.seccomp.allow = {"everything"};
  Error e = expect_error([&] { validate_spec(s); });
  CHECK(e.code() == Code::kInvalidArgument);
  CHECK_THAT(e.what(), Catch::Contains("'policy.seccomp.allow[0]'"));
  s.policy.seccomp.allow = {};
  s.policy.seccomp.profile = "default-v9";
  e = expect_error([&] { validate_spec(s); });
  CHECK_THAT(e.what(), Catch::Contains("'policy.seccomp.profile'"));
}
