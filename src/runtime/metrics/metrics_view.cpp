// The runtime's metrics as families (runtime.hpp: metrics_text, metrics_json): this runtime's counters
// (metrics.hpp), its warm pool, the sandboxes of the whole root read from their records (every process's),
// and any registered source.
#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <set>

#include "network/gateway/netgw_paths.hpp"
#include "proto/netgw_counters.hpp"
#include "runtime/metrics/metrics.hpp"
#include "runtime/metrics/admission.hpp"
#include "runtime/metrics/admission_gate.hpp"
#include "runtime/metrics/metrics_publisher.hpp"
#include "runtime/runtime.hpp"
#include "sys/fd.hpp"
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

// The node gateway's counters (proto/netgw_counters.hpp), as its last flush left them: nothing before a
// gateway ever ran on the root.
void append_gateway_families(const std::string& root, std::vector<MetricFamily>& out) {
  proto::NetgwCounters c{};
  const sys::UniqueFd fd(::open((netgw::gateway_dir(root) + "/counters").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd || ::pread(fd.get(), &c, sizeof c, 0) != static_cast<ssize_t>(sizeof c) || c.magic != proto::kNetgwCountersMagic ||
      c.version != proto::kNetgwCountersVersion)
    return;
  auto v = [&](proto::NetgwCounter k) { return static_cast<double>(c.v[k]); };
  MetricFamily refused{"sandlet_net_gateway_refused_total",
                       "Connections and datagrams the node gateway refused, by reason (policy: the destination; budget: "
                       "the sandbox's own limits; node: the gateway's; error: a failure in the gateway).",
                       "counter", {}};
  const std::pair<const char*, proto::NetgwCounter> reasons[] = {{"policy", proto::kGwRefusedPolicy},
                                                                 {"budget", proto::kGwRefusedBudget},
                                                                 {"node", proto::kGwRefusedNode},
                                                                 {"error", proto::kGwRefusedError}};
  for (const auto& [reason, k] : reasons) refused.samples.push_back({refused.name, {{"reason", reason}}, v(k)});
  out.push_back(std::move(refused));
  auto one = [&](const char* name, const char* help, const char* type, double x) {
    out.push_back({name, help, type, {{name, {}, x}}});
  };
  one("sandlet_net_gateway_tcp_accepted_total", "TCP connections the node gateway relayed.", "counter", v(proto::kGwTcpAccepted));
  one("sandlet_net_gateway_udp_flows_total", "UDP flows the node gateway opened.", "counter", v(proto::kGwUdpFlows));
  MetricFamily bytes{"sandlet_net_gateway_bytes_total", "Bytes the node gateway relayed, by direction.", "counter", {}};
  bytes.samples.push_back({bytes.name, {{"direction", "out"}}, v(proto::kGwBytesOut)});
  bytes.samples.push_back({bytes.name, {{"direction", "in"}}, v(proto::kGwBytesIn)});
  out.push_back(std::move(bytes));
  one("sandlet_net_gateway_restarts_total", "Times the supervisor started the node gateway again after it died.", "counter",
      v(proto::kGwRestarts));
  one("sandlet_net_gateway_loop_errors_total", "Failures caught in the node gateway's event loop.", "counter",
      v(proto::kGwLoopErrors));
  one("sandlet_net_gateway_protect_updates_total",
      "Times the uplink's addresses changed and every sandbox's protected ranges followed.", "counter",
      v(proto::kGwProtectUpdates));
  one("sandlet_net_gateway_protect_update_seconds",
      "How long the last such update took, from the kernel's address event to the last sandbox.", "gauge",
      v(proto::kGwProtectLastUs) / 1e6);
  one("sandlet_net_gateway_attached", "Sandboxes attached to the node gateway (at its last flush).", "gauge", v(proto::kGwAttached));
  MetricFamily dns{"sandlet_net_dns_queries_total",
                   "Queries the node's resolver decided, by verdict (answered by an upstream; refused by a policy; "
                   "failed: no usable answer; dropped: malformed or over the bounds).",
                   "counter", {}};
  const std::pair<const char*, proto::NetgwCounter> verdicts[] = {{"answered", proto::kGwDnsAnswered},
                                                                  {"refused", proto::kGwDnsRefused},
                                                                  {"failed", proto::kGwDnsFailed},
                                                                  {"dropped", proto::kGwDnsDropped}};
  for (const auto& [verdict, k] : verdicts) dns.samples.push_back({dns.name, {{"verdict", verdict}}, v(k)});
  out.push_back(std::move(dns));
  MetricFamily fds{"sandlet_net_gateway_fds", "The node gateway's descriptors: held for sandboxes, and its limit.", "gauge", {}};
  fds.samples.push_back({fds.name, {{"kind", "in_use"}}, v(proto::kGwFdsInUse)});
  fds.samples.push_back({fds.name, {{"kind", "limit"}}, v(proto::kGwFdLimit)});
  out.push_back(std::move(fds));
}

}  // namespace

std::vector<MetricFamily> Runtime::metrics_families(bool node) {
  std::vector<MetricFamily> out;
  metrics_->append_families(out, sys::now_monotonic_ns());
  if (node && publisher_) publisher_->add_others(out);
  append_pool_families(pool_ ? pool_->stats() : WarmPool::Stats(), out);
  append_record_families(list(""), LabelBounds{}, out);
  append_gateway_families(root_, out);
  if (std::shared_ptr<NodeAdmission> a = admission_->current()) {
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
