// Pause/resume and the warm pool's counters, through the public API.
#include <boost/json.hpp>

#include "integration/harness.hpp"

namespace {

boost::json::object stats(sandlet::Runtime& rt) {
  return boost::json::parse(rt.stats_json()).as_object().at("warm_pool").as_object();
}

uint64_t counter(const boost::json::object& o, const char* key) { return o.at(key).to_number<uint64_t>(); }

std::string info_field(sandlet::Sandbox& sb, const char* key) {
  auto o = boost::json::parse(sb.info_json()).as_object();
  return boost::json::value_to<std::string>(o.at(key));
}

std::string cgroup_of(sandlet::Sandbox& sb) {
  auto o = boost::json::parse(sb.info_json()).as_object();
  return boost::json::value_to<std::string>(o.at("backend_state").at("cgroup_v2"));
}

}  // namespace

TEST_CASE("pause freezes every process of a sandbox; an exec resumes it", "[lifecycle][pause]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  // A process that keeps counting while it runs.
  sandlet::ExecOptions bg({"sh", "-c", "(while :; do echo x >> /tmp/ticks; sleep 0.02; done) >/dev/null 2>&1 &"});
  bg.keep_background = true;
  sb.exec(bg);
  CHECK(wait_until([&] { return run_out(sb, "cat /tmp/ticks 2>/dev/null | wc -l") != "0\n"; }, 5));

  sb.pause();
  CHECK(info_field(sb, "state") == "paused");
  const std::string events = cgroup_of(sb) + "/cgroup.events";
  CHECK(slurp(events).find("frozen 1") != std::string::npos);
  // Nothing of it runs: the host sees every one of its processes stopped by the freezer.
  std::string procs = slurp(cgroup_of(sb) + "/cgroup.procs");
  CHECK_FALSE(procs.empty());
  sb.pause();  // again: nothing to do

  // Listed as paused by another runtime on the root too.
  {
    sandlet::RuntimeOptions o;
    o.disable_warm_pool = true;
    auto other = sandlet::Runtime::open(h.root(), o);
    auto listed = other.list();
    REQUIRE(listed.size() == 1);
    CHECK(listed[0].state == "paused");
  }

  // The next exec resumes it, and the counter moves again.
  std::string before = run_out(sb, "cat /tmp/ticks 2>/dev/null | wc -l");
  CHECK(info_field(sb, "state") == "running");
  CHECK(slurp(events).find("frozen 0") != std::string::npos);
  CHECK(wait_until([&] { return run_out(sb, "cat /tmp/ticks 2>/dev/null | wc -l") != before; }, 5));

  sb.pause();
  sb.resume();
  CHECK(info_field(sb, "state") == "running");
  sb.resume();  // running already: nothing to do
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("a paused sandbox is destroyed and reclaimed like a running one", "[lifecycle][pause]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec());
  std::string id = sb.id();
  sb.pause();
  sb.destroy();
  CHECK(wait_until([&] { return h.gone(id); }, 10));
  h.check_no_leaks();
}

TEST_CASE("warm pool: repeated creates of one environment are hits, counted", "[lifecycle][warm]") {
  Harness h;
  auto s0 = stats(h.rt());
  CHECK(counter(s0, "target") == 2);
  CHECK(counter(s0, "hits") == 0);
  // The pool starts at the second create; give it time to fill before each create.
  for (int i = 0; i < 5; ++i) {
    auto sb = h.rt().create(Harness::spec());
    CHECK(run_out(sb, "echo ok") == "ok\n");
    if (i >= 1) CHECK(wait_until([&] { return counter(stats(h.rt()), "ready") >= 1; }, 10));
  }
  auto s = stats(h.rt());
  CHECK(counter(s, "hits") >= 3);
  CHECK(counter(s, "hits") + counter(s, "misses") == 5);
  CHECK(counter(s, "prepared") >= counter(s, "hits"));
  CHECK(s.at("backend").as_string() == "container");
  CHECK(s.at("staged").as_bool());
  h.check_no_leaks();
}

TEST_CASE("warm pool off: every create is a miss and nothing is prepared", "[lifecycle][warm]") {
  char tmpl[] = "/tmp/sandlet-it-XXXXXX";
  std::string root = ::mkdtemp(tmpl);
  {
    sandlet::RuntimeOptions o;
    o.disable_warm_pool = true;
    auto rt = sandlet::Runtime::open(root, o);
    for (int i = 0; i < 3; ++i) {
      auto sb = rt.create(Harness::spec());
      CHECK(run_out(sb, "echo ok") == "ok\n");
    }
    auto s = stats(rt);
    CHECK(counter(s, "target") == 0);
    CHECK(counter(s, "hits") == 0);
    CHECK(counter(s, "misses") == 3);
    CHECK(counter(s, "prepared") == 0);
  }
  CHECK(mounts_mentioning(root) == 0);
  std::error_code ec;
  fs::remove_all(root, ec);
}
