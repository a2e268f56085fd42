// What a max lifetime or an idle timeout does (spec "on_expiry"): by default the sandbox ends at once
// (lifecycle_test.cpp); with "keep" its processes stop where they are, its files and calls stay for a
// debugger, and it ends keep_s later, enforced inside the sandbox with no owner watching.
#include <chrono>
#include <thread>

#include "integration/harness.hpp"

namespace {

// A counter a background process of the sandbox bumps every 20 ms in /tmp/n.
void start_counter(sandlet::Sandbox& sb) {
  sandlet::ExecOptions o({"sh", "-c", "(i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.02; done) >/dev/null 2>&1 &"});
  o.keep_background = true;
  sb.exec(o);
}

std::string counter(sandlet::Sandbox& sb) { return sb.read_file("/tmp/n"); }

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
