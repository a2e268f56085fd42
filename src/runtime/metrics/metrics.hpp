// Platform metrics of one runtime: what only a live runtime sees (scheduling latency, queue wait, exec busy
// time, throughput) is counted here as it happens; what the root's records say (sandboxes per state and
// label, node-wide) and the warm pool's counters are read when asked (runtime/metrics/metrics_view.cpp). Rendered
// as Prometheus text exposition format 0.0.4 or as JSON of the same families (documented in
// sandlet_metrics.h). Thread-safe: creates run on workers, execs complete on the loop thread.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace sandlet {

// One sample of a family: its full name (family name, or with _bucket/_sum/_count), labels, value.
struct MetricSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
};

struct MetricFamily {
  std::string name;  // sandlet_*; counters end in _total
  std::string help;
  std::string type;  // "counter", "gauge", "histogram", "summary"
  std::vector<MetricSample> samples;
};

// Fixed-bucket histogram (cumulative on output, as Prometheus wants).
class Histogram final {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends name_bucket{le=...}, name_sum and name_count samples.
  void append_to(MetricFamily& family) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Prometheus text exposition format 0.0.4: HELP and TYPE lines, escaped help and label values.
std::string render_metrics_text(const std::vector<MetricFamily>& families);
// {"families":[{"name","help","type","samples":[{"name","labels":{...},"value"}]}]}
std::string render_metrics_json(const std::vector<MetricFamily>& families);
// Parses what render_metrics_json wrote (another process's published counters); throws on malformed input.
std::vector<MetricFamily> parse_metrics_json(const std::string& text);
// Adds `more` into `into`, sample by sample (same name and labels): counters, histograms and summaries are
// summed; gauges too, except those named *_mean, which become the mean over the sets added (`sets`: how
// many sets `into` already holds).
void add_metric_families(std::vector<MetricFamily>& into, const std::vector<MetricFamily>& more, size_t sets);
// Label value escaping of the text format (backslash, double quote, newline).
std::string escape_label_value(const std::string& v);
// A number as the text format writes it (+Inf, -Inf, NaN, integers without exponent).
std::string format_metric_value(double v);

// Bounds the label values reported per label key: the first `max_values` distinct values (in sorted
// order) keep their name, the rest are counted under "other". Likewise at most `max_keys` keys.
struct LabelBounds {
  size_t max_keys = 32;
  size_t max_values = 64;
};
// Sandbox counts: label key -> value -> state -> count.
using LabelCounts = std::map<std::string, std::map<std::string, std::map<std::string, uint64_t>>>;
// The counts with keys and values beyond the bounds folded into "other" (so that a distinct job id per
// sandbox cannot blow up the number of series).
LabelCounts bound_label_counts(const LabelCounts& counts, const LabelBounds& bounds);

class Metrics final {
 public:
  Metrics();

  // A create left the caller (queued for a worker) at `requested_ns` (monotonic); the worker took it.
  void create_started(uint64_t requested_ns, uint64_t now_ns);
  // It ended: usable sandbox `id` (ok) or an error.
  void create_done(uint64_t requested_ns, uint64_t now_ns, bool ok, const std::string& id);
  // Time a create waited for node admission (when admission is on).
  void admission_wait(double seconds);
  void exec_began(const std::string& id, uint64_t now_ns);
  void exec_ended(const std::string& id, uint64_t now_ns);
  void sandbox_ended(const std::string& id, uint64_t now_ns);
  // Refusals counted in a sandbox this runtime ended (its kernel filter, resolver, gateway, seccomp), by kind:
  // "network", "dns", "gateway", "seccomp".
  void denials(const std::string& kind, uint64_t n);

  // The families this object counts (not the record- or pool-based ones).
  void append_families(std::vector<MetricFamily>& out, uint64_t now_ns) const;

  // Called (outside the lock) on the first change after mark_published: the runtime publishes its counters
  // for `sandlet metrics` in other processes (runtime/metrics/metrics_publisher.hpp).
  void set_on_change(std::function<void()> fn);
  void mark_published();

  // Further sources (the lead wires e.g. FnCall pools or job pause here): each appends its families.
  using Source = std::function<void(std::vector<MetricFamily>&)>;
  void add_source(const std::string& name, Source source);
  void remove_source(const std::string& name);
  void append_sources(std::vector<MetricFamily>& out) const;

 private:
  struct Busy {
    uint64_t born_ns = 0;
    uint64_t busy_ns = 0;      // finished busy intervals
    uint64_t since_ns = 0;     // start of the running busy interval (in_flight > 0)
    unsigned in_flight = 0;
  };
  static double utilisation(const Busy& b, uint64_t now_ns);

  mutable std::mutex mutex_;
  Histogram scheduling_;  // request -> usable sandbox
  Histogram queue_wait_;  // request -> a worker took it
  Histogram admission_;   // waiting for node admission
  uint64_t creates_ok_ = 0, creates_failed_ = 0, execs_ = 0, destroys_ = 0;
  std::map<std::string, uint64_t> denials_{{"network", 0}, {"dns", 0}, {"gateway", 0}, {"seccomp", 0}};
  uint64_t busy_total_ns_ = 0;  // every finished exec interval, all sandboxes
  std::map<std::string, Busy> busy_;  // live sandboxes created here
  double ended_util_sum_ = 0;  // utilisation of sandboxes that ended, for the summary
  uint64_t ended_util_count_ = 0;
  std::map<std::string, Source> sources_;
  std::function<void()> on_change_;
  bool publish_pending_ = false;
  void changed(std::unique_lock<std::mutex>& lock);
};

}  // namespace sandlet
