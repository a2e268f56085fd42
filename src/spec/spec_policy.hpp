// The JSON form of the spec's `policy` object (spec/policy_spec.hpp), for spec_json.cpp.
#pragma once
#include <boost/json/fwd.hpp>
#include <string>

#include "spec/policy_spec.hpp"

namespace sandlet {

// Replaces `policy` with the parsed object; absent sub-keys keep their defaults. Throws
// Error(kInvalidArgument) naming the field ("policy.<key>", "policy.seccomp.deny[N]").
void parse_policy_json(Policy& policy, const boost::json::value& v);
// Every sub-key, as JSON text; parse_policy_json reads it back to the same Policy.
std::string policy_to_json(const Policy& policy);

}  // namespace sandlet
