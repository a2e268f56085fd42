// The JSON the bench prints: common fields (host, date), result blocks, leftovers, pretty printing.
#pragma once

#include "stats.hpp"

#include <boost/json.hpp>

#include <filesystem>
#include <set>
#include <string>

namespace bench {

boost::json::object host_info();   // nproc, kernel, machine, cpu, mem_total_mib, versions
std::string iso_date_utc();        // 2026-01-31T12:34:56Z

// p50/p90/p99/mean/min/max_ms and throughput_per_s into `out`.
void put_latency(boost::json::object &out, const Summary &s, double throughput_per_s);
boost::json::object peer_json(const std::string &name, const std::string &command, const Summary &s,
                              double throughput_per_s);

// Cgroup directories with "sandlet" in their path, to tell which ones a run added.
std::set<std::string> sandlet_cgroups();

// What is left after the runtime closed: our descendant processes, mounts under the runtime root and
// the rootfs, cgroups named after our sandboxes (and, for information, sandlet cgroups that appeared
// since `cgroups_before`). "clean" is true when the first three are empty.
boost::json::object leftovers(const std::filesystem::path &root, const std::filesystem::path &rootfs,
                              const std::set<std::string> &cgroups_before);

// Pretty-printed (2-space indent; arrays of numbers on one line) or on one line; doubles in their shortest
// form.
std::string to_text(const boost::json::value &v, bool pretty);

}  // namespace bench
