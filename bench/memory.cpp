#include "memory.hpp"

#include "proc.hpp"
#include "stats.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace bench {
namespace json = boost::json;

// Meminfo fields whose change says where the memory went (kB).
const char *const kMemFields[] = {"MemAvailable", "MemFree", "Slab", "SUnreclaim", "KernelStack", "PageTables",
                                  "Shmem", "AnonPages"};

MemSample sample_memory() {
  std::vector<std::map<std::string, std::uint64_t>> reads;
  for (int i = 0; i < 5; ++i) {
    if (i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    reads.push_back(meminfo());
  }
  MemSample s;
  for (const char *f : kMemFields) {
    std::vector<std::uint64_t> v;
    for (auto &r : reads) v.push_back(r[f]);
    std::sort(v.begin(), v.end());
    s.kib[f] = v[v.size() / 2];
    if (std::string(f) == "MemAvailable") s.spread_kib = v.back() - v.front();
  }
  return s;
}

void settle(const Context &ctx) {
  const auto until = now_ns() + static_cast<std::uint64_t>(ctx.opt.settle_s * 1e9);
  while (now_ns() < until) {
    throw_if_stopped();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

namespace {
std::uint64_t pss_sum_kib(const std::set<pid_t> &pids) {
  std::uint64_t sum = 0;
  for (pid_t p : pids) sum += proc_pss_kib(p);
  return sum;
}
}  // namespace

void put_memory(json::object &out, const MemSample &before, const MemSample &after, std::size_t n,
                const std::set<pid_t> &pids) {
  const double per = 1.0 / static_cast<double>(n);
  auto delta = [&](const char *f) {  // how much more of f is used (MemAvailable/MemFree: less available)
    const double b = static_cast<double>(before.kib.at(f)), a = static_cast<double>(after.kib.at(f));
    const bool is_free = std::string(f) == "MemAvailable" || std::string(f) == "MemFree";
    return is_free ? b - a : a - b;
  };
  out["memory_per_sandbox_mib"] = round3(delta("MemAvailable") * per / 1024.0);
  out["pss_per_sandbox_kib"] = round3(static_cast<double>(pss_sum_kib(pids)) * per);
  out["processes_per_sandbox"] = round3(static_cast<double>(pids.size()) * per);
  json::object fields;
  for (const char *f : kMemFields) fields[f] = round3(delta(f) * per);
  out["meminfo_delta_per_sandbox_kib"] = fields;
  // How much MemAvailable moved while nothing changed on our side (other work on the host):
  // per-sandbox figures are only as good as this divided by n.
  const auto noise = std::max(before.spread_kib, after.spread_kib);
  out["memavailable_noise_kib"] = noise;
  out["memavailable_noise_per_sandbox_mib"] = round3(static_cast<double>(noise) * per / 1024.0);
}

}  // namespace bench
