// Host memory figures shared by the scenarios that hold many idle sandboxes (idle-density, net): samples of
// /proc/meminfo before and after, turned into per-sandbox costs.
#pragma once

#include "common.hpp"

#include <boost/json.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include <sys/types.h>

namespace bench {

struct MemSample {
  std::map<std::string, std::uint64_t> kib;  // median of the samples, per field
  std::uint64_t spread_kib = 0;              // max - min of MemAvailable across the samples
};

// Median of 5 readings 100 ms apart: other work on the host moves MemAvailable too.
MemSample sample_memory();

// Waits --settle seconds (stops early on SIGINT/SIGTERM).
void settle(const Context &ctx);

// memory_per_sandbox_mib (MemAvailable), pss_per_sandbox_kib (of `pids`), processes_per_sandbox,
// meminfo_delta_per_sandbox_kib {...}, memavailable_noise_kib, memavailable_noise_per_sandbox_mib for n
// sandboxes between two samples.
void put_memory(boost::json::object &out, const MemSample &before, const MemSample &after, std::size_t n,
                const std::set<pid_t> &pids);

}  // namespace bench
