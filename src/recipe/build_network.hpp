// A build's network (docs/BUILD.md, "Network"): the policy RUN steps run with. "none" unless the builder
// gives one, so a recipe reaches nothing the builder did not allow; RUN --network=none takes it away from one
// step. It belongs to the build's step sandboxes only: the result (an environment) stores no network.
#pragma once
#include <string>
#include <string_view>

#include "spec/network_spec.hpp"

namespace sandlet::build {

// The C ABI's and CLI's text ("" or "none" = none, else a policy object as a sandbox's "network" takes it).
// Errors name the field as for a sandbox ("invalid spec field 'network.allow[0]': ...").
NetworkPolicy parse_build_network(std::string_view text);
// Checks a policy given directly: the spec's checks, and no `publish` (a step serves nothing).
void check_build_network(const NetworkPolicy& p);
// What a RUN's cache key records of its network: "none", or the policy's canonical JSON.
std::string network_key(const NetworkPolicy& p);
// How a failed RUN's error names the network it had.
std::string network_note(const NetworkPolicy& build, bool step_none);

}  // namespace sandlet::build
