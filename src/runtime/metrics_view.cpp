// The runtime's metrics as families (runtime.hpp: metrics_text, metrics_json): this runtime's counters
// (metrics.hpp), its warm pool, the sandboxes of the whole root read from their records (every process's),
// and any registered source.
#include <map>
#include <set>

#include "runtime/metrics.hpp"
#include "runtime/admission.hpp"
#include "runtime/runtime.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {

namespace {

void append_record_families(const std::vector<ListedSandbox>& listed, const LabelBounds& bounds,
                            std::vector<MetricFamily>& out) {
  std::map<std::string, uint64_t> by_state;
  for (const char* s : {"running", "paused", "creating"}) by_state[s] = 0;
  // key -> value -> state -> count; bounded as LabelBounds says, in sorted order so the cut is stable.
  LabelCounts by_label;
  for (const ListedSandbox& l : listed) {
    if (l.record.state == SandboxState::kPooled) continue;  // not anyone's sandbox yet
    ++by_state[l.state];
    for (const auto& [k, v] : l.record.spec.labels) ++by_label[k][v][l.state];
  }
  MetricFamily states{"sandlet_sandboxes", "Sandboxes of the runtime root (all processes), by state.", "gauge", {}};
  for (const auto& [state, n] : by_state)
    states.samples.push_back({states.name, {{"state", state}}, static_cast<double>(n)});
  out.push_back(std::move(states));
  out.push_back({"sandlet_paused_sandboxes", "Paused sandboxes of the runtime root (all processes).", "gauge",
                 {{"sandlet_paused_sandboxes", {}, static_cast<double>(by_state["paused"])}}});

  const LabelCounts bounded = bound_label_counts(by_label, bounds);
  MetricFamily labels{"sandlet_sandboxes_by_label",
                      "Sandboxes of the runtime root by label key, value and state (at most " +
                          std::to_string(bounds.max_values) + " values per key and " + std::to_string(bounds.max_keys) +
                          " keys; the rest as \"other\").",
                      "gauge", {}};
  for (const auto& [k, values] : bounded)
    for (const auto& [v, states_of] : values)
      for (const auto& [s, c] : states_of)
        labels.samples.push_back({labels.name, {{"key", k}, {"value", v}, {"state", s}}, static_cast<double>(c)});
  out.push_back(std::move(labels));
}

void append_pool_families(const WarmPool::Stats& s, std::vector<MetricFamily>& out) {
  const std::vector<std::pair<std::string, std::string>> backend{{"backend", s.backend}};
  auto one = [&](const char* name, const char* help, const char* type, double v) {
    out.push_back({name, help, type, {{name, backend, v}}});
  };
  one("sandlet_warm_pool_ready", "Prepared sandboxes waiting in this runtime's warm pool.", "gauge", static_cast<double>(s.ready));
  one("sandlet_warm_pool_target", "Prepared sandboxes the warm pool keeps ready (0 = off).", "gauge", static_cast<double>(s.target));
  one("sandlet_warm_pool_hits_total", "Creates handed a prepared sandbox.", "counter", static_cast<double>(s.hits));
  one("sandlet_warm_pool_misses_total", "Creates on a pool-capable backend that found none fitting.", "counter",
      static_cast<double>(s.misses));
  one("sandlet_warm_pool_prepared_total", "Sandboxes the warm pool prepared.", "counter", static_cast<double>(s.prepared));
  one("sandlet_warm_pool_discarded_total", "Prepared sandboxes thrown away unused.", "counter", static_cast<double>(s.discarded));
  const uint64_t asked = s.hits + s.misses;
  one("sandlet_warm_pool_hit_ratio", "Hits / (hits + misses) of the warm pool (0 before any create).", "gauge",
      asked ? static_cast<double>(s.hits) / static_cast<double>(asked) : 0.0);
}

}  // namespace

std::vector<MetricFamily> Runtime::metrics_families(bool node) {
  std::vector<MetricFamily> out;
  metrics_->append_families(out, sys::now_monotonic_ns());
  if (node) add_published_metrics(out);
  append_pool_families(pool_ ? pool_->stats() : WarmPool::Stats(), out);
  append_record_families(list(""), LabelBounds{}, out);
  if (std::shared_ptr<NodeAdmission> a = admission()) {
    MetricFamily used{"sandlet_admission_in_use", "Node admission: what the root's processes hold now, by resource.", "gauge", {}};
    for (const auto& [resource, n] : a->usage())
      used.samples.push_back({used.name, {{"resource", resource}}, static_cast<double>(n)});
    out.push_back(std::move(used));
    out.push_back({"sandlet_admission_waiting", "Creates of this runtime waiting for node admission.", "gauge",
                   {{"sandlet_admission_waiting", {}, static_cast<double>(a->waiting())}}});
  }
  metrics_->append_sources(out);
  return out;
}

std::string Runtime::metrics_text(bool node) { return render_metrics_text(metrics_families(node)); }
std::string Runtime::metrics_json(bool node) { return render_metrics_json(metrics_families(node)); }

}  // namespace sandlet
