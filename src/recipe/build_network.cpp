// A build's network policy (build_network.hpp): the spec's own parser and validator, plus the build's rules.
#include "recipe/build_network.hpp"

#include "common/error.hpp"

namespace sandlet::build {

NetworkPolicy parse_build_network(std::string_view text) {
  if (text.empty()) return NetworkPolicy{};
  NetworkPolicy p = parse_network_text(text, "network");
  check_build_network(p);
  return p;
}

void check_build_network(const NetworkPolicy& p) {
  validate_network(p, "network");
  // A published port would outlive nothing useful (each step's sandbox is gone when it ends) and would
  // claim a host port while it runs.
  if (!p.publish.empty()) throw_invalid("network.publish", "a build step publishes no ports");
}

std::string network_key(const NetworkPolicy& p) { return p.none ? "none" : network_to_json(p); }

std::string network_note(const NetworkPolicy& build, bool step_none) {
  if (step_none && !build.none) return "the step ran with network \"none\" (RUN --network=none)";
  if (build.none)
    return "the step ran with network \"none\": the build was given no network policy (--allow, --network)";
  return "the step ran with the build's network policy " + network_to_json(build);
}

}  // namespace sandlet::build
