// Unit tests for a build's network (src/recipe/build_network.hpp): RUN --network in the parser and the plan,
// the policy's checks (the spec's, naming the field as for a sandbox), and the cache key's network field.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "recipe/build_cache.hpp"
#include "recipe/build_network.hpp"
#include "recipe/plan.hpp"
#include "recipe/recipe.hpp"

using namespace sandlet;
using namespace sandlet::build;

namespace {

Plan plan(const std::string& text) { return plan_recipe(parse_recipe(text, "Dockerfile"), {}, State{}); }

// The INVALID_ARGUMENT message parsing `text` fails with, or "" if it parses.
std::string refusal(const std::string& text) {
  try {
    plan(text);
  } catch (const Error& e) {
    CHECK(e.code() == Code::kInvalidArgument);
    return e.what();
  }
  return "";
}

std::string network_error(const std::string& text) {
  try {
    parse_build_network(text);
  } catch (const Error& e) {
    CHECK(e.code() == Code::kInvalidArgument);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("build network: RUN --network=none|default, per step", "[build]") {
  Plan p = plan("FROM base\nRUN --network=none true\nRUN --network=default true\nRUN true\n");
  REQUIRE(p.steps.size() == 4);
  CHECK(p.steps[1].no_network);
  CHECK(p.steps[1].argv == std::vector<std::string>{"/bin/sh", "-c", "true"});
  CHECK_FALSE(p.steps[2].no_network);
  CHECK_FALSE(p.steps[3].no_network);
  // With another flag, in either order.
  Plan q = plan("FROM base\nRUN --mount=type=secret,id=a --network=none cat /run/secrets/a\n");
  CHECK(q.steps[1].no_network);
  CHECK(q.steps[1].secrets.size() == 1);
}

TEST_CASE("build network: RUN --network=host and unknown values are refused naming the line", "[build]") {
  CHECK(refusal("FROM base\nRUN true\nRUN --network=host curl x\n")
            .find("Dockerfile:3: RUN --network=host is not supported (a step never shares the host's network") == 0);
  CHECK(refusal("FROM base\nRUN --network=bridge true\n") == "Dockerfile:2: RUN --network=bridge: unknown value (none or default)");
  CHECK(refusal("FROM base\nRUN --network= true\n") == "Dockerfile:2: RUN --network=: unknown value (none or default)");
  CHECK(refusal("FROM base\nRUN --network true\n") == "Dockerfile:2: RUN --network=: unknown value (none or default)");
  CHECK(refusal("FROM base\nRUN --network=none --network=default true\n") == "Dockerfile:2: RUN --network given twice");
  CHECK(refusal("FROM base\nWORKDIR --network=none /x\n") == "Dockerfile:2: WORKDIR --network is not supported (only RUN takes --network)");
}

TEST_CASE("build network: the policy is checked as a sandbox's, naming the field", "[build]") {
  CHECK(parse_build_network("").none);
  CHECK(parse_build_network("none").none);
  CHECK(parse_build_network("\"none\"").none);
  const NetworkPolicy p = parse_build_network(R"({"allow": ["tcp:198.19.0.1:443"]})");
  CHECK_FALSE(p.none);
  REQUIRE(p.allow.size() == 1);
  CHECK(p.allow[0].port_lo == 443);
  CHECK(network_error(R"({"allow": ["tcp:10.0.0.1/33:443"]})").find("invalid spec field 'network.allow[0]': ") == 0);
  CHECK(network_error(R"({"allow": ["tcp:pkgs.internal:443"]})") ==
        "invalid spec field 'network.allow[0].host': a rule by name needs resolvers in \"network.dns\"");
  CHECK(network_error(R"({"allow": [], "colour": 1})") == "invalid spec field 'network.colour': unknown field");
  CHECK(network_error("bridge").find("invalid spec field 'network'") == 0);
  CHECK(network_error(R"({"publish": [{"port": 80}]})") == "invalid spec field 'network.publish': a build step publishes no ports");
  // The same words as a sandbox's spec gives.
  try {
    parse_network_text(R"({"allow": ["tcp:10.0.0.1/33:443"]})");
    FAIL("a bad address parsed");
  } catch (const Error& e) {
    CHECK(network_error(R"({"allow": ["tcp:10.0.0.1/33:443"]})") == e.what());
  }
}

TEST_CASE("build network: a RUN's cache key holds its network, a COPY's does not", "[build]") {
  const std::vector<std::string> layers = {std::string(64, 'a')};
  Step run;
  run.kind = Kind::kRun;
  run.argv = {"/bin/sh", "-c", "fetch"};
  const NetworkPolicy allow = parse_build_network(R"({"allow": ["198.19.0.1"]})");
  const NetworkPolicy other = parse_build_network(R"({"allow": ["198.19.0.2"]})");
  CHECK(network_key(NetworkPolicy{}) == "none");
  CHECK(network_key(allow) == network_to_json(allow));
  const std::string none = cache_key(layers, run, "", {}, "none");
  CHECK(none == cache_key(layers, run, ""));
  CHECK(cache_key(layers, run, "", {}, network_key(allow)) != none);
  CHECK(cache_key(layers, run, "", {}, network_key(allow)) != cache_key(layers, run, "", {}, network_key(other)));
  CHECK(cache_key(layers, run, "", {}, network_key(allow)) ==
        cache_key(layers, run, "", {}, network_key(parse_build_network(R"({"allow": ["any:198.19.0.1/32"]})"))));
  Step copy;
  copy.kind = Kind::kCopy;
  copy.sources = {"a"};
  copy.dest = "/a";
  CHECK(cache_key(layers, copy, "d", {}, "none") == cache_key(layers, copy, "d", {}, network_key(allow)));
}

TEST_CASE("build network: a failed step's note says what network it had", "[build]") {
  const NetworkPolicy allow = parse_build_network(R"({"allow": ["198.19.0.1"]})");
  CHECK(network_note(NetworkPolicy{}, false).find("network \"none\": the build was given no network policy") != std::string::npos);
  CHECK(network_note(NetworkPolicy{}, true).find("the build was given no network policy") != std::string::npos);
  CHECK(network_note(allow, true) == "the step ran with network \"none\" (RUN --network=none)");
  CHECK(network_note(allow, false) == "the step ran with the build's network policy " + network_to_json(allow));
}
