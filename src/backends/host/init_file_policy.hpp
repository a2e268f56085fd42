// The spec's file policy as a guest init's configuration (guest/file_rules.hpp applies it inside): the
// file rules and the kernel-file masks. The same for every backend whose init serves the agent.
#pragma once
#include "proto/init_protocol.hpp"
#include "spec/spec.hpp"

namespace sandlet::host {

void add_file_policy(const Policy& policy, proto::InitConfig& config);

}  // namespace sandlet::host
