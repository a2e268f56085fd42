// The bench scenarios. Each returns its result fields; main adds the common ones (scenario, host, ...).
#pragma once

#include "common.hpp"

#include <boost/json.hpp>

#include <vector>

namespace bench {

boost::json::object scenario_lifecycle(const Context &ctx);
boost::json::object scenario_lifecycle_cli(const Context &ctx);
boost::json::object scenario_run(const Context &ctx);
boost::json::object scenario_exec(const Context &ctx);
boost::json::object scenario_idle_density(const Context &ctx);
boost::json::object scenario_workspace_provision(const Context &ctx);
boost::json::object scenario_import(const Context &ctx);
boost::json::object scenario_snapshot(const Context &ctx);
boost::json::object scenario_fork(const Context &ctx);
boost::json::object scenario_cold_start(const Context &ctx);
boost::json::object scenario_policy(const Context &ctx);
boost::json::object scenario_net(const Context &ctx);
boost::json::object scenario_fncall(const Context &ctx);
boost::json::object scenario_pool(const Context &ctx);
boost::json::object scenario_pause(const Context &ctx);
boost::json::object scenario_qos(const Context &ctx);
boost::json::object scenario_copy(const Context &ctx);
boost::json::object scenario_microvm(const Context &ctx);
boost::json::object scenario_session(const Context &ctx);

struct ScenarioInfo {
  const char *name;
  boost::json::object (*run)(const Context &);
  std::size_t default_iterations;
  const char *summary;
};
const std::vector<ScenarioInfo> &all_scenarios();

// Per-thread copies of the one-layer spec (a spec is used from one thread at a time).
std::size_t iterations_of(const Context &ctx);

}  // namespace bench
