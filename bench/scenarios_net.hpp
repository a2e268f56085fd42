// Parts of the `net` scenario (scenarios_net.cpp runs them in order; scenarios_net_fleet.cpp holds the
// 1,000-sandbox part).
#pragma once

#include "capi.hpp"
#include "common.hpp"
#include "stats.hpp"

#include <boost/json.hpp>

#include <functional>
#include <string>

namespace bench {

// The egress policy the scenario's sandboxes get, and the one updates switch to and back: the fake
// internet is the uplink, whose own addresses the gateway opens only to a rule naming them exactly (/32).
inline constexpr const char *kEgressPolicy = R"({"allow":[{"cidr":"198.18.0.1/32","protocol":"tcp"}]})";
inline constexpr const char *kEgressPolicyPort = R"({"allow":[{"cidr":"198.18.0.1/32","protocol":"tcp","ports":"7007"}]})";

// p50/p99/mean in microseconds (one decimal): connect latencies are tens of microseconds.
boost::json::object us_summary(const Summary &s);

// The pid of the root's gateway: the process its supervisor (the pid its lock file holds) runs, else 0.
pid_t gateway_pid(const std::filesystem::path &root);

// N egress sandboxes, then N "none" ones: memory per sandbox (idle-density's method), the gateway's RSS
// growth per attached sandbox, and net_update latency over the egress ones; `with_fleet` runs while the N
// are attached (its result goes under "protect"). Opens nothing itself: `rt` is the scenario's runtime (its
// uplink already the fake internet).
boost::json::object net_fleet(const Context &ctx, sandlet_runtime_t *rt, std::size_t n,
                              const std::function<boost::json::object()> &with_fleet);

// How long an address the uplink gains stays open to a sandbox whose rules cover it (net_protect.cpp), with
// `attached` other sandboxes attached to the gateway.
boost::json::object protect_exposure(const Context &ctx, sandlet_runtime_t *rt, const std::string &uplink_netns,
                                     const std::string &probe_bytes, std::size_t attached);

}  // namespace bench
