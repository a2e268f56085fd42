// Latency statistics for sandlet-bench: percentiles, summaries and the paired ours/peer ratio.
#pragma once

#include <boost/json.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bench {

struct Summary {
  std::size_t count = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, mean_ms = 0, min_ms = 0, max_ms = 0;
  // Percentiles 0..100 (kCdfPoints values): the whole distribution in a fixed size, for CDF plots.
  std::vector<double> cdf_ms;
};

inline constexpr std::size_t kCdfPoints = 101;

// Linear interpolation between the closest ranks (numpy's default); `sorted` must be sorted, non-empty.
double percentile(const std::vector<double> &sorted, double p);
double median(std::vector<double> values);

Summary summarize(const std::vector<std::uint64_t> &durations_ns);

// Median over i of ours[i]/peer[i]: the pairs ran back to back, so slow phases of the machine hit both
// sides of a pair alike and cancel out. Pairs with a zero peer time are skipped; 0 if none are left.
double paired_ratio_median(const std::vector<std::uint64_t> &ours_ns, const std::vector<std::uint64_t> &peer_ns);

// {p50_ms, p90_ms, p99_ms, mean_ms, min_ms, max_ms, cdf_ms} added to `out` (cdf_ms only with samples).
void put_summary(boost::json::object &out, const Summary &s);

double round3(double v);  // JSON numbers stay readable: three decimals
double ns_to_ms(std::uint64_t ns);

}  // namespace bench
