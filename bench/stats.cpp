#include "stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace bench {

double percentile(const std::vector<double> &sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return percentile(values, 50);
}

double ns_to_ms(std::uint64_t ns) { return static_cast<double>(ns) / 1e6; }

double round3(double v) { return std::round(v * 1000.0) / 1000.0; }

Summary summarize(const std::vector<std::uint64_t> &durations_ns) {
  Summary s;
  s.count = durations_ns.size();
  if (durations_ns.empty()) return s;
  std::vector<double> ms;
  ms.reserve(durations_ns.size());
  for (auto ns : durations_ns) ms.push_back(ns_to_ms(ns));
  std::sort(ms.begin(), ms.end());
  s.p50_ms = percentile(ms, 50);
  s.p90_ms = percentile(ms, 90);
  s.p99_ms = percentile(ms, 99);
  s.mean_ms = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  s.min_ms = ms.front();
  s.max_ms = ms.back();
  s.cdf_ms.reserve(kCdfPoints);
  for (std::size_t q = 0; q < kCdfPoints; ++q) s.cdf_ms.push_back(percentile(ms, static_cast<double>(q)));
  return s;
}

double paired_ratio_median(const std::vector<std::uint64_t> &ours_ns, const std::vector<std::uint64_t> &peer_ns) {
  std::vector<double> ratios;
  const auto n = std::min(ours_ns.size(), peer_ns.size());
  ratios.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    if (peer_ns[i] > 0) ratios.push_back(static_cast<double>(ours_ns[i]) / static_cast<double>(peer_ns[i]));
  return ratios.empty() ? 0.0 : median(std::move(ratios));
}

void put_summary(boost::json::object &out, const Summary &s) {
  out["p50_ms"] = round3(s.p50_ms);
  out["p90_ms"] = round3(s.p90_ms);
  out["p99_ms"] = round3(s.p99_ms);
  out["mean_ms"] = round3(s.mean_ms);
  out["min_ms"] = round3(s.min_ms);
  out["max_ms"] = round3(s.max_ms);
  if (!s.cdf_ms.empty()) {
    boost::json::array cdf;
    cdf.reserve(s.cdf_ms.size());
    for (double v : s.cdf_ms) cdf.push_back(round3(v));
    out["cdf_ms"] = std::move(cdf);
  }
}

}  // namespace bench
