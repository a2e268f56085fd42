// The environment a command sees: sane defaults, thread-pool limits matching the CPU limit (so one
// sandbox does not size its pools for every host core), then the spec's env, then the exec's.
#pragma once
#include <string>
#include <vector>

#include "spec/spec.hpp"

namespace sandlet {

std::vector<std::string> base_env(const Spec& spec);
// Overlays "K=V" entries on `base` (later wins); entries without '=' are rejected (INVALID_ARGUMENT).
std::vector<std::string> merge_env(const std::vector<std::string>& base, const std::vector<std::string>& extra);

}  // namespace sandlet
