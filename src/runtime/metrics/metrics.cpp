// Counting and rendering of the runtime's metrics (metrics.hpp).
#include "runtime/metrics/metrics.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sandlet {

namespace {

// Seconds: a warm create takes about a millisecond, a cold one tens, a queued burst seconds.
std::vector<double> latency_bounds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}

double seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

// HELP text escaping: backslash and newline (double quotes stay).
std::string escape_help(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  if (std::isnan(v)) return;
  size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::append_to(MetricFamily& family) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    family.samples.push_back({family.name + "_bucket", {{"le", format_metric_value(bounds_[i])}}, static_cast<double>(cumulative)});
  }
  family.samples.push_back({family.name + "_bucket", {{"le", "+Inf"}}, static_cast<double>(count_)});
  family.samples.push_back({family.name + "_sum", {}, sum_});
  family.samples.push_back({family.name + "_count", {}, static_cast<double>(count_)});
}

std::string escape_label_value(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string format_metric_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  // The shortest form that reads back the same.
  for (int p = 6; p <= 17; ++p) {
    char shorter[40];
    std::snprintf(shorter, sizeof shorter, "%.*g", p, v);
    if (std::strtod(shorter, nullptr) == v) return shorter;
  }
  return buf;
}

std::string render_metrics_text(const std::vector<MetricFamily>& families) {
  std::string out;
  for (const MetricFamily& f : families) {
    out += "# HELP " + f.name + " " + escape_help(f.help) + "\n";
    out += "# TYPE " + f.name + " " + f.type + "\n";
    for (const MetricSample& s : f.samples) {
      out += s.name;
      if (!s.labels.empty()) {
        out += '{';
        for (size_t i = 0; i < s.labels.size(); ++i) {
          if (i) out += ',';
          out += s.labels[i].first + "=\"" + escape_label_value(s.labels[i].second) + "\"";
        }
        out += '}';
      }
      out += ' ' + format_metric_value(s.value) + '\n';
    }
  }
  return out;
}

std::string render_metrics_json(const std::vector<MetricFamily>& families) {
  boost::json::array fams;
  for (const MetricFamily& f : families) {
    boost::json::array samples;
    for (const MetricSample& s : f.samples) {
      boost::json::object labels;
      for (const auto& [k, v] : s.labels) labels[k] = v;
      boost::json::value value;
      // JSON has no infinities: those (and NaN) are written as the text format's strings.
      if (std::isfinite(s.value))
        value = s.value;
      else
        value = format_metric_value(s.value);
      samples.push_back(boost::json::object{{"name", s.name}, {"labels", std::move(labels)}, {"value", std::move(value)}});
    }
    fams.push_back(boost::json::object{{"name", f.name}, {"help", f.help}, {"type", f.type}, {"samples", std::move(samples)}});
  }
  return boost::json::serialize(boost::json::object{{"families", std::move(fams)}});
}

LabelCounts bound_label_counts(const LabelCounts& counts, const LabelBounds& bounds) {
  LabelCounts bounded;
  size_t keys = 0;
  for (const auto& [k, values] : counts) {
    const std::string key = keys++ < bounds.max_keys ? k : "other";
    size_t n = 0;
    for (const auto& [v, states] : values) {
      // A folded key's values are all "other" too: its own values would multiply the series again.
      const std::string value = key == k && n++ < bounds.max_values ? v : "other";
      for (const auto& [s, c] : states) bounded[key][value][s] += c;
    }
  }
  return bounded;
}

std::vector<MetricFamily> parse_metrics_json(const std::string& text) {
  std::vector<MetricFamily> out;
  const boost::json::object root = boost::json::parse(text).as_object();
  for (const boost::json::value& fv : root.at("families").as_array()) {
    const boost::json::object& f = fv.as_object();
    MetricFamily fam{std::string(f.at("name").as_string()), std::string(f.at("help").as_string()),
                     std::string(f.at("type").as_string()), {}};
    for (const boost::json::value& sv : f.at("samples").as_array()) {
      const boost::json::object& so = sv.as_object();
      MetricSample sample{std::string(so.at("name").as_string()), {}, 0};
      for (const auto& kv : so.at("labels").as_object())
        sample.labels.emplace_back(std::string(kv.key()), std::string(kv.value().as_string()));
      const boost::json::value& v = so.at("value");
      // strtod reads the text format's "+Inf", "-Inf" and "NaN".
      sample.value = v.is_string() ? std::strtod(std::string(v.as_string()).c_str(), nullptr) : v.to_number<double>();
      fam.samples.push_back(std::move(sample));
    }
    out.push_back(std::move(fam));
  }
  return out;
}

void add_metric_families(std::vector<MetricFamily>& into, const std::vector<MetricFamily>& more, size_t sets) {
  for (const MetricFamily& m : more) {
    auto f = std::find_if(into.begin(), into.end(), [&](const MetricFamily& x) { return x.name == m.name; });
    if (f == into.end()) {
      into.push_back(m);
      continue;
    }
    const bool mean = f->type == "gauge" && f->name.size() > 5 && f->name.compare(f->name.size() - 5, 5, "_mean") == 0;
    for (const MetricSample& s : m.samples) {
      auto t = std::find_if(f->samples.begin(), f->samples.end(),
                            [&](const MetricSample& x) { return x.name == s.name && x.labels == s.labels; });
      if (t == f->samples.end())
        f->samples.push_back(s);
      else if (mean)
        t->value = (t->value * static_cast<double>(sets) + s.value) / static_cast<double>(sets + 1);
      else
        t->value += s.value;
    }
  }
}

Metrics::Metrics() : scheduling_(latency_bounds()), queue_wait_(latency_bounds()), admission_(latency_bounds()) {}

void Metrics::create_started(uint64_t requested_ns, uint64_t now_ns) {
  std::lock_guard lock(mutex_);
  queue_wait_.observe(seconds(now_ns - std::min(requested_ns, now_ns)));
}

void Metrics::create_done(uint64_t requested_ns, uint64_t now_ns, bool ok, const std::string& id) {
  std::unique_lock lock(mutex_);
  if (!ok) {
    ++creates_failed_;
  } else {
    ++creates_ok_;
    scheduling_.observe(seconds(now_ns - std::min(requested_ns, now_ns)));
    busy_[id].born_ns = now_ns;
  }
  changed(lock);
}

void Metrics::admission_wait(double s) {
  std::lock_guard lock(mutex_);
  admission_.observe(s);
}

void Metrics::exec_began(const std::string& id, uint64_t now_ns) {
  std::lock_guard lock(mutex_);
  ++execs_;
  auto it = busy_.find(id);
  if (it == busy_.end()) return;  // attached from another process: counted, not timed
  if (it->second.in_flight++ == 0) it->second.since_ns = now_ns;
}

void Metrics::exec_ended(const std::string& id, uint64_t now_ns) {
  std::unique_lock lock(mutex_);
  auto it = busy_.find(id);
  if (it == busy_.end() || it->second.in_flight == 0) return;
  if (--it->second.in_flight == 0) {
    const uint64_t d = now_ns - std::min(it->second.since_ns, now_ns);
    it->second.busy_ns += d;
    busy_total_ns_ += d;
  }
  changed(lock);
}

double Metrics::utilisation(const Busy& b, uint64_t now_ns) {
  const uint64_t life = now_ns > b.born_ns ? now_ns - b.born_ns : 0;
  if (!life) return 0;
  uint64_t busy = b.busy_ns;
  if (b.in_flight) busy += now_ns - std::min(b.since_ns, now_ns);
  return std::min(1.0, static_cast<double>(busy) / static_cast<double>(life));
}

void Metrics::sandbox_ended(const std::string& id, uint64_t now_ns) {
  std::unique_lock lock(mutex_);
  ++destroys_;
  auto it = busy_.find(id);
  if (it != busy_.end()) {
    if (it->second.in_flight) busy_total_ns_ += now_ns - std::min(it->second.since_ns, now_ns);
    ended_util_sum_ += utilisation(it->second, now_ns);
    ++ended_util_count_;
    busy_.erase(it);
  }
  changed(lock);
}

void Metrics::denials(const std::string& kind, uint64_t n) {
  if (n == 0) return;
  std::unique_lock lock(mutex_);
  denials_[kind] += n;
  changed(lock);
}

void Metrics::changed(std::unique_lock<std::mutex>& lock) {
  if (publish_pending_ || !on_change_) return;
  publish_pending_ = true;
  std::function<void()> fn = on_change_;
  lock.unlock();
  fn();
}

void Metrics::set_on_change(std::function<void()> fn) {
  std::lock_guard lock(mutex_);
  on_change_ = std::move(fn);
}

void Metrics::mark_published() {
  std::lock_guard lock(mutex_);
  publish_pending_ = false;
}

void Metrics::append_families(std::vector<MetricFamily>& out, uint64_t now_ns) const {
  std::lock_guard lock(mutex_);
  auto counter = [&](const char* name, const char* help, std::vector<MetricSample> samples) {
    out.push_back({name, help, "counter", std::move(samples)});
  };
  counter("sandlet_creates_total", "Sandbox creates of this runtime, by result.",
          {{"sandlet_creates_total", {{"result", "ok"}}, static_cast<double>(creates_ok_)},
           {"sandlet_creates_total", {{"result", "error"}}, static_cast<double>(creates_failed_)}});
  counter("sandlet_execs_total", "Commands started in sandboxes by this runtime.",
          {{"sandlet_execs_total", {}, static_cast<double>(execs_)}});
  counter("sandlet_destroys_total", "Sandboxes this runtime ended (destroyed, exited, expired).",
          {{"sandlet_destroys_total", {}, static_cast<double>(destroys_)}});
  std::vector<MetricSample> refused;
  for (const auto& [kind, n] : denials_) refused.push_back({"sandlet_denials_total", {{"kind", kind}}, static_cast<double>(n)});
  counter("sandlet_denials_total",
          "Refusals counted in the sandboxes this runtime ended, by kind (network: the allowlist's kernel hooks; "
          "dns: the resolver's refusals and drops; gateway: connections the node gateway refused; seccomp: system "
          "calls the policy refused).",
          std::move(refused));

  MetricFamily sched{"sandlet_scheduling_latency_seconds",
                     "Time from a create request to a usable sandbox (this runtime's creates that succeeded).",
                     "histogram", {}};
  scheduling_.append_to(sched);
  out.push_back(std::move(sched));
  MetricFamily queued{"sandlet_queue_wait_seconds", "Time a create request waited before a worker took it.", "histogram", {}};
  queue_wait_.append_to(queued);
  out.push_back(std::move(queued));
  MetricFamily admitted{"sandlet_admission_wait_seconds", "Time a create waited for node admission.", "histogram", {}};
  admission_.append_to(admitted);
  out.push_back(std::move(admitted));

  uint64_t busy_ns = busy_total_ns_;
  double live_sum = 0;
  for (const auto& [id, b] : busy_) {
    live_sum += utilisation(b, now_ns);
    if (b.in_flight) busy_ns += now_ns - std::min(b.since_ns, now_ns);
  }
  counter("sandlet_busy_seconds_total", "Time sandboxes created here had at least one exec in flight.",
          {{"sandlet_busy_seconds_total", {}, seconds(busy_ns)}});
  out.push_back({"sandlet_sandbox_utilisation_ratio",
                 "Busy time / lifetime of each sandbox created here, over those that ended.",
                 "summary",
                 {{"sandlet_sandbox_utilisation_ratio_sum", {}, ended_util_sum_},
                  {"sandlet_sandbox_utilisation_ratio_count", {}, static_cast<double>(ended_util_count_)}}});
  out.push_back({"sandlet_sandbox_utilisation_mean",
                 "Mean busy time / lifetime over the live sandboxes created here (0 when none).",
                 "gauge",
                 {{"sandlet_sandbox_utilisation_mean", {}, busy_.empty() ? 0.0 : live_sum / static_cast<double>(busy_.size())}}});
}

void Metrics::add_source(const std::string& name, Source source) {
  std::lock_guard lock(mutex_);
  sources_[name] = std::move(source);
}

void Metrics::remove_source(const std::string& name) {
  std::lock_guard lock(mutex_);
  sources_.erase(name);
}

void Metrics::append_sources(std::vector<MetricFamily>& out) const {
  std::map<std::string, Source> sources;
  {
    std::lock_guard lock(mutex_);
    sources = sources_;
  }
  // Outside the lock: a source may take its own locks (a pool's), never ours.
  for (const auto& [name, fn] : sources) {
    if (fn) fn(out);
  }
}

}  // namespace sandlet
