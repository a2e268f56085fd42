// The Prometheus text exposition format 0.0.4 and JSON of runtime/metrics: HELP and TYPE lines, label value
// and help escaping, histogram buckets (cumulative, +Inf), the label bounds, and the busy-time arithmetic.
#include <boost/json.hpp>

#include "runtime/metrics/metrics.hpp"
#include "unit_helpers.hpp"

using sandlet::MetricFamily;

namespace {
bool has(const std::string& text, const std::string& line) { return text.find(line) != std::string::npos; }
}  // namespace

TEST_CASE("metrics text: HELP, TYPE, escaped label values and help", "[metrics]") {
  std::vector<MetricFamily> fams{{"sandlet_x_total", "Help with \\ and\nnewline \"quoted\".", "counter",
                                  {{"sandlet_x_total", {{"key", "a\"b\\c\nd"}, {"state", "running"}}, 3}}},
                                 {"sandlet_y", "A gauge.", "gauge", {{"sandlet_y", {}, 0.25}}}};
  const std::string text = sandlet::render_metrics_text(fams);
  CHECK(has(text, "# HELP sandlet_x_total Help with \\\\ and\\nnewline \"quoted\".\n"));
  CHECK(has(text, "# TYPE sandlet_x_total counter\n"));
  CHECK(has(text, "sandlet_x_total{key=\"a\\\"b\\\\c\\nd\",state=\"running\"} 3\n"));
  CHECK(has(text, "# TYPE sandlet_y gauge\nsandlet_y 0.25\n"));
  // Every line is a comment or a sample; the text ends with a newline.
  CHECK(text.back() == '\n');
}

TEST_CASE("metrics values: integers, fractions, infinities", "[metrics]") {
  CHECK(sandlet::format_metric_value(3) == "3");
  CHECK(sandlet::format_metric_value(0.1) == "0.1");
  CHECK(sandlet::format_metric_value(1e-4) == "0.0001");
  CHECK(sandlet::format_metric_value(1.0 / 0.0) == "+Inf");
  CHECK(sandlet::format_metric_value(-1.0 / 0.0) == "-Inf");
}

TEST_CASE("metrics histogram: cumulative buckets, +Inf, sum and count", "[metrics]") {
  sandlet::Histogram h({0.01, 0.1, 1});
  for (double v : {0.005, 0.01, 0.05, 0.5, 7.0}) h.observe(v);
  MetricFamily f{"sandlet_h_seconds", "h", "histogram", {}};
  h.append_to(f);
  const std::string text = sandlet::render_metrics_text({f});
  CHECK(has(text, "sandlet_h_seconds_bucket{le=\"0.01\"} 2\n"));  // le is inclusive
  CHECK(has(text, "sandlet_h_seconds_bucket{le=\"0.1\"} 3\n"));
  CHECK(has(text, "sandlet_h_seconds_bucket{le=\"1\"} 4\n"));
  CHECK(has(text, "sandlet_h_seconds_bucket{le=\"+Inf\"} 5\n"));
  CHECK(has(text, "sandlet_h_seconds_sum 7.56"));  // 7.565 up to the rounding of the sum
  CHECK(has(text, "sandlet_h_seconds_count 5\n"));
}

TEST_CASE("metrics json: the same families, full sample names", "[metrics]") {
  std::vector<MetricFamily> fams{{"sandlet_y", "A gauge.", "gauge", {{"sandlet_y", {{"k", "v"}}, 2}}}};
  auto j = boost::json::parse(sandlet::render_metrics_json(fams)).as_object();
  auto& f = j.at("families").as_array().at(0).as_object();
  CHECK(f.at("name").as_string() == "sandlet_y");
  CHECK(f.at("type").as_string() == "gauge");
  auto& s = f.at("samples").as_array().at(0).as_object();
  CHECK(s.at("labels").at("k").as_string() == "v");
  CHECK(s.at("value").to_number<double>() == 2);
}

TEST_CASE("metrics label bounds: values and keys past the bound count as other", "[metrics]") {
  sandlet::LabelCounts counts;
  for (int i = 0; i < 70; ++i) counts["job"]["j" + std::to_string(100 + i)]["running"] = 1;
  counts["zz"]["1"]["paused"] = 2;
  const auto b = sandlet::bound_label_counts(counts, {1, 64});
  CHECK(b.at("job").size() == 65);  // 64 kept + other
  CHECK(b.at("job").at("other").at("running") == 6);
  CHECK(b.at("other").at("other").at("paused") == 2);  // the second key is past max_keys = 1
}

TEST_CASE("metrics busy time: utilisation of a sandbox is busy / lifetime", "[metrics]") {
  sandlet::Metrics m;
  const uint64_t s = 1'000'000'000;
  m.create_started(0, s / 2);
  m.create_done(0, s, true, "a");
  m.exec_began("a", 2 * s);
  m.exec_began("a", 2 * s);  // overlapping execs count once
  m.exec_ended("a", 3 * s);
  m.exec_ended("a", 4 * s);
  m.exec_began("other", 4 * s);  // attached, not created here: counted only
  m.sandbox_ended("a", 5 * s);
  std::vector<MetricFamily> fams;
  m.append_families(fams, 6 * s);
  const std::string text = sandlet::render_metrics_text(fams);
  CHECK(has(text, "sandlet_creates_total{result=\"ok\"} 1\n"));
  CHECK(has(text, "sandlet_execs_total 3\n"));
  CHECK(has(text, "sandlet_destroys_total 1\n"));
  CHECK(has(text, "sandlet_busy_seconds_total 2\n"));
  CHECK(has(text, "sandlet_sandbox_utilisation_ratio_sum 0.5\n"));  // 2 s busy of 4 s
  CHECK(has(text, "sandlet_sandbox_utilisation_ratio_count 1\n"));
  CHECK(has(text, "sandlet_queue_wait_seconds_sum 0.5\n"));
  CHECK(has(text, "sandlet_scheduling_latency_seconds_sum 1\n"));
}

TEST_CASE("metrics json reads back and sums: counters and buckets add, *_mean gauges average", "[metrics]") {
  std::vector<MetricFamily> a{{"sandlet_c_total", "c", "counter", {{"sandlet_c_total", {{"r", "ok"}}, 2}}},
                              {"sandlet_u_mean", "u", "gauge", {{"sandlet_u_mean", {}, 0.2}}}};
  std::vector<MetricFamily> b{{"sandlet_c_total", "c", "counter",
                               {{"sandlet_c_total", {{"r", "ok"}}, 3}, {"sandlet_c_total", {{"r", "error"}}, 1}}},
                              {"sandlet_u_mean", "u", "gauge", {{"sandlet_u_mean", {}, 0.4}}}};
  sandlet::Histogram h({1});
  h.observe(0.5);
  MetricFamily hf{"sandlet_h_seconds", "h", "histogram", {}};
  h.append_to(hf);
  b.push_back(hf);
  auto parsed = sandlet::parse_metrics_json(sandlet::render_metrics_json(b));
  REQUIRE(parsed.size() == 3);
  CHECK(parsed[2].samples[1].value == 1);  // le="+Inf" came back as a number
  sandlet::add_metric_families(a, parsed, 1);
  const std::string text = sandlet::render_metrics_text(a);
  CHECK(has(text, "sandlet_c_total{r=\"ok\"} 5\n"));
  CHECK(has(text, "sandlet_c_total{r=\"error\"} 1\n"));
  CHECK(has(text, "sandlet_u_mean 0.3"));
  CHECK(has(text, "sandlet_h_seconds_bucket{le=\"+Inf\"} 1\n"));
}
