// What a max lifetime or an idle timeout does (spec "on_expiry"): by default the sandbox ends at once
// (lifecycle_test.cpp); with "keep_logs" it ends at once but its last output and audit trail stay for
// keep_s; with "keep" its processes stop where they are, its files and calls stay for a debugger, and it
// ends keep_s later, enforced inside the sandbox with no owner watching.
#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <thread>

#include "integration/harness.hpp"

namespace {

// A counter a background process of the sandbox bumps every 20 ms in /tmp/n.
void start_counter(sandlet::Sandbox& sb) {
  sandlet::ExecOptions o({"sh", "-c", "(i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.02; done) >/dev/null 2>&1 &"});
  o.keep_background = true;
  sb.exec(o);
}

// "" until the background loop has written it once (on a loaded host that can take a while).
std::string counter(sandlet::Sandbox& sb) {
  try {
    return sb.read_file("/tmp/n");
  } catch (const sandlet::Error& e) {
    if (e.code() == SANDLET_NOT_FOUND) return "";
    throw;
  }
}

// True when the counter no longer moves (its process is stopped).
bool counter_stopped(sandlet::Sandbox& sb) {
  const std::string before = counter(sb);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return counter(sb) == before;
}

}  // namespace

TEST_CASE("on_expiry keep: at the max lifetime its processes stop, files and calls stay, it ends keep_s later",
          "[lifecycle][expiry]") {
  Harness h;
  const auto t0 = std::chrono::steady_clock::now();
  auto sb = h.rt().create(Harness::spec().max_lifetime(1).on_expiry("keep", 2));
  const std::string id = sb.id();
  start_counter(sb);
  CHECK(wait_until([&] { return !counter(sb).empty(); }, 5));
  CHECK_FALSE(counter_stopped(sb));  // running before the deadline
  std::this_thread::sleep_until(t0 + std::chrono::milliseconds(1300));
  CHECK(counter_stopped(sb));
  CHECK_FALSE(h.gone(id));
  CHECK(run_out(sb, "grep -l '^State:.*T' /proc/[0-9]*/status | wc -l") != "0\n");  // stopped, not gone
  CHECK(run_out(sb, "echo debugging") == "debugging\n");                                // calls still served
  // Ended by the sandbox itself 2 s after the deadline (and not by this runtime, which does nothing).
  CHECK(wait_until([&] { return h.gone(id); }, 10));
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(2500));
  h.check_no_leaks();
}

TEST_CASE("on_expiry keep after an idle timeout; a destroy ends a kept sandbox at once", "[lifecycle][expiry]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec().idle_timeout(0.5).on_expiry("keep", 600));
  const std::string id = sb.id();
  start_counter(sb);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // idle since the exec returned
  CHECK(counter_stopped(sb));  // calls in the kept state do not make it "busy" again
  CHECK(counter_stopped(sb));
  sb.destroy();
  CHECK(wait_until([&] { return h.gone(id); }, 10));
  h.check_no_leaks();
}

TEST_CASE("on_expiry: bad values name the field", "[spec][expiry]") {
  sandlet::Spec spec;
  try {
    spec.on_expiry("archive");
    FAIL("accepted");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
    CHECK(std::string(e.what()).find("on_expiry") != std::string::npos);
  }
  try {
    spec.on_expiry("keep", 0);
    FAIL("accepted");
  } catch (const sandlet::Error& e) {
    CHECK(std::string(e.what()).find("keep_s") != std::string::npos);
  }
  spec.on_expiry("keep", 5);
  CHECK(spec.to_json().find("\"on_expiry\":\"keep\",\"keep_s\":5") != std::string::npos);
}

namespace {

namespace bj = boost::json;

bj::object logs_of(sandlet::Runtime& rt, const std::string& id) { return bj::parse(rt.logs(id)).as_object(); }

// The events of a logs() audit array, in order.
std::vector<std::string> events(const bj::object& logs) {
  std::vector<std::string> out;
  for (const auto& r : logs.at("audit").as_array()) out.emplace_back(r.as_object().at("event").as_string());
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

sandlet_code_t code_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const sandlet::Error& e) {
    return e.code();
  }
  return SANDLET_OK;
}

}  // namespace

TEST_CASE("on_expiry keep_logs: at the max lifetime it ends, its last output and audit trail stay keep_s",
          "[lifecycle][expiry]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec().max_lifetime(2).on_expiry("keep_logs", 600).label("job", "j7"));
  const std::string id = sb.id();
  CHECK(run_out(sb, "echo first-out") == "first-out\n");
  auto failed = sb.exec({"sh", "-c", "echo to-stderr >&2; exit 3"});
  CHECK(failed.exit_code == 3);
  // A streaming exec: its output reaches the caller chunk by chunk, and the log keeps its tail.
  sandlet::ExecOptions streamed({"sh", "-c", "i=0; while [ $i -lt 3000 ]; do echo line-$i; i=$((i+1)); done"});
  std::string seen;
  streamed.on_output = [&](int, std::string_view d) { seen.append(d); };
  CHECK(sb.exec(streamed).exit_code == 0);
  CHECK(seen.size() > 20000);
  // While it runs, logs() shows it live.
  bj::object live = logs_of(h.rt(), id);
  CHECK(live.at("state").as_string() == "running");
  CHECK(live.at("on_expiry").as_string() == "keep_logs");
  CHECK(live.at("last_output").as_array().size() == 3);

  CHECK(wait_until([&] { return h.gone(id); }, 10));  // ended by its own init, nobody asked
  bj::object t = logs_of(h.rt(), id);
  CHECK(t.at("state").as_string() == "expired");
  CHECK(t.at("reason").as_string() == "max_lifetime");
  CHECK(t.at("labels").as_object().at("job").as_string() == "j7");
  const bj::array& out = t.at("last_output").as_array();
  REQUIRE(out.size() == 3);
  CHECK(out[0].as_object().at("stdout").as_string() == "first-out\n");
  CHECK(out[0].as_object().at("exit_code").as_int64() == 0);
  CHECK(out[1].as_object().at("stderr").as_string() == "to-stderr\n");
  CHECK(out[1].as_object().at("exit_code").as_int64() == 3);
  const std::string tail(out[2].as_object().at("stdout").as_string());
  CHECK(tail.size() <= 4000);
  CHECK(tail.size() > 3000);
  CHECK(tail.substr(tail.size() - 10) == "line-2999\n");
  CHECK(out[2].as_object().at("stdout_bytes").as_int64() == static_cast<int64_t>(seen.size()));
  const auto ev = events(t);
  CHECK(contains(ev, "create"));
  CHECK(contains(ev, "exec"));
  CHECK(ev.back() == "destroy");
  CHECK(t.at("audit").as_array().back().as_object().at("reason").as_string() == "max_lifetime");

  // Listed as expired, from another runtime of the root too; gc keeps it until keep_until.
  {
    sandlet::Runtime other = sandlet::Runtime::open(h.root());
    bj::array listed = bj::parse(other.expired()).as_array();
    REQUIRE(listed.size() == 1);
    CHECK(listed[0].as_object().at("id").as_string() == id);
    CHECK(listed[0].as_object().at("state").as_string() == "expired");
    CHECK_FALSE(listed[0].as_object().contains("last_output"));
    other.gc();
    CHECK(logs_of(other, id).at("state").as_string() == "expired");
    other.close();
  }
  h.rt().forget_expired(id);
  CHECK(code_of([&] { h.rt().logs(id); }) == SANDLET_NOT_FOUND);
  CHECK(code_of([&] { h.rt().forget_expired(id); }) == SANDLET_NOT_FOUND);
  CHECK(bj::parse(h.rt().expired()).as_array().empty());
  h.check_no_leaks();
}

TEST_CASE("on_expiry keep_logs after an idle timeout; gc drops it keep_s later; destroy mode keeps nothing",
          "[lifecycle][expiry]") {
  Harness h;
  auto kept = h.rt().create(Harness::spec().idle_timeout(0.5).on_expiry("keep_logs", 1));
  auto plain = h.rt().create(Harness::spec().idle_timeout(0.5));
  auto ended = h.rt().create(Harness::spec().on_expiry("keep_logs", 600));
  const std::string kept_id = kept.id(), plain_id = plain.id(), ended_id = ended.id();
  run_out(plain, "echo plain");
  run_out(ended, "echo ended");
  // More execs than are kept: the log keeps the last 16, oldest first.
  for (int i = 0; i < 20; ++i) run_out(kept, "echo run-" + std::to_string(i));
  ended.destroy();  // an explicit end is no expiry: nothing is kept
  CHECK(wait_until([&] { return h.gone(kept_id) && h.gone(plain_id) && h.gone(ended_id); }, 10));
  bj::object t = logs_of(h.rt(), kept_id);
  CHECK(t.at("reason").as_string() == "idle_timeout");
  const bj::array& out = t.at("last_output").as_array();
  REQUIRE(out.size() == 16);
  CHECK(out.front().as_object().at("stdout").as_string() == "run-4\n");
  CHECK(out.back().as_object().at("stdout").as_string() == "run-19\n");
  CHECK(code_of([&] { h.rt().logs(plain_id); }) == SANDLET_NOT_FOUND);
  CHECK(code_of([&] { h.rt().logs(ended_id); }) == SANDLET_NOT_FOUND);
  CHECK(code_of([&] { h.rt().logs("../etc"); }) == SANDLET_INVALID_ARGUMENT);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // past its keep_s
  h.rt().gc();
  CHECK(code_of([&] { h.rt().logs(kept_id); }) == SANDLET_NOT_FOUND);
  CHECK(std::filesystem::is_empty(h.root() + "/expired"));
  h.check_no_leaks();
}
