// One-shot runs (Runtime::run / sandlet_run): a new sandbox whose init starts one command with the
// caller's descriptors as its stdio, then nothing of the sandbox is left.
#include <fcntl.h>

#include <condition_variable>
#include <mutex>

#include "integration/harness.hpp"

namespace {

// A pipe whose read end is drained after the run (the outputs here are small: they fit in the pipe).
struct Pipe {
  int r = -1, w = -1;
  Pipe() {
    int p[2];
    REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
    r = p[0];
    w = p[1];
  }
  ~Pipe() {
    if (r >= 0) ::close(r);
    if (w >= 0) ::close(w);
  }
  // Closes our write end (the sandbox's copy is gone once the run returned) and reads to EOF.
  std::string drain() {
    ::close(w);
    w = -1;
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(r, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    return out;
  }
};

sandlet::RunOptions with_output(std::vector<std::string> argv, Pipe& out, Pipe& err) {
  sandlet::RunOptions o(std::move(argv));
  o.stdout_fd = out.w;
  o.stderr_fd = err.w;
  return o;
}

size_t sandbox_groups() {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(cgroup2_parent()))
    if (e.is_directory()) ++n;
  return n;
}

}  // namespace

TEST_CASE("run: exit code, output on the caller's descriptors, env, cwd, user, nothing left", "[run]") {
  Harness h;
  const size_t groups_before = sandbox_groups();
  Pipe out, err;
  auto o = with_output({"sh", "-c", "echo out $GREETING $EXTRA $(pwd) $(id -u); echo err >&2; exit 3"}, out, err);
  o.env = {"EXTRA=there"};
  o.cwd = "/tmp";
  o.user = "1000";
  auto r = h.rt().run(Harness::spec().env("GREETING", "hi"), o);
  CHECK(r.exit_code == 3);
  CHECK(r.signal == 0);
  CHECK_FALSE(r.timed_out);
  CHECK(r.stdout_data.empty());  // it went to the descriptors
  CHECK(r.run_ns > 0);
  CHECK(r.duration_ns >= r.run_ns);
  CHECK(out.drain() == "out hi there /tmp 1000\n");
  CHECK(err.drain() == "err\n");
  // Gone from the listing when run returns; its cgroups once the runtime closed (reclaimed meanwhile).
  CHECK(h.rt().list().empty());
  h.check_no_leaks();
  CHECK(sandbox_groups() == groups_before);
}

TEST_CASE("run: stdin from a descriptor, /dev/null without one", "[run]") {
  Harness h;
  Pipe in, out, err;
  REQUIRE(::write(in.w, "from the host", 13) == 13);
  ::close(in.w);
  in.w = -1;
  auto o = with_output({"cat"}, out, err);
  o.stdin_fd = in.r;
  CHECK(h.rt().run(Harness::spec(), o).exit_code == 0);
  CHECK(out.drain() == "from the host");

  // No stdin_fd: the command reads the sandbox's /dev/null, not the caller's stdin.
  Pipe out2, err2;
  auto r = h.rt().run(Harness::spec(), with_output({"sh", "-c", "cat; readlink /proc/self/fd/0"}, out2, err2));
  CHECK(r.exit_code == 0);
  CHECK(out2.drain() == "/dev/null\n");
  h.check_no_leaks();
}

TEST_CASE("run: a signal, a timeout that kills the whole tree, a command that cannot start", "[run][timeout]") {
  Harness h;
  Pipe out, err;
  auto r = h.rt().run(Harness::spec(), with_output({"sh", "-c", "kill -9 $$"}, out, err));
  CHECK(r.exit_code == -1);
  CHECK(r.signal == 9);

  // A daemonized grandchild too: the timeout ends the whole sandbox, not only the shell.
  const auto t0 = std::chrono::steady_clock::now();
  auto o = with_output({"sh", "-c", "setsid sleep 29.517 & sleep 30"}, out, err);
  o.timeout_s = 0.3;
  r = h.rt().run(Harness::spec(), o);
  CHECK(r.timed_out);
  CHECK(r.signal == 9);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  CHECK(h.rt().list().empty());
  // (Written 29[.]517 so that the grep's own command line does not match.)
  CHECK(wait_until([] { return host_sh("grep -l 29[.]517 /proc/[0-9]*/cmdline 2>/dev/null").empty(); }, 5));

  try {
    h.rt().run(Harness::spec(), with_output({"/no/such/program"}, out, err));
    FAIL("expected an error");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_NOT_FOUND);
    CHECK(std::string(e.what()).find("/no/such/program") != std::string::npos);
  }
  try {
    h.rt().run(Harness::spec(), with_output({"/etc/passwd"}, out, err));
    FAIL("expected an error");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_PERMISSION_DENIED);
  }
  h.check_no_leaks();
}

TEST_CASE("run: the cancel descriptor kills the command and destroys the sandbox", "[run]") {
  Harness h;
  Pipe cancel, out, err;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    REQUIRE(::write(cancel.w, "x", 1) == 1);
  });
  auto o = with_output({"sleep", "30"}, out, err);
  o.cancel_fd = cancel.r;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    h.rt().run(Harness::spec(), o);
    FAIL("expected CANCELLED");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_CANCELLED);
  }
  canceller.join();
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  CHECK(h.rt().list().empty());
  h.check_no_leaks();
}

TEST_CASE("run: invalid input is rejected naming the field, and nothing is created", "[run][spec]") {
  Harness h;
  auto expect_invalid = [&](const sandlet::Spec& spec, const sandlet::RunOptions& o, const char* field) {
    try {
      h.rt().run(spec, o);
      FAIL("expected INVALID_ARGUMENT");
    } catch (const sandlet::Error& e) {
      CHECK(e.code() == SANDLET_INVALID_ARGUMENT);
      CHECK(std::string(e.what()).find(field) != std::string::npos);
    }
  };
  expect_invalid(Harness::spec(), sandlet::RunOptions(), "argv");
  sandlet::RunOptions bad_fd({"true"});
  bad_fd.stdout_fd = 999;
  expect_invalid(Harness::spec(), bad_fd, "stdout_fd");
  expect_invalid(Harness::spec().lifetime("detached"), sandlet::RunOptions({"true"}), "lifetime");
  CHECK(h.rt().list().empty());
  h.check_no_leaks();
}

TEST_CASE("run_async: many one-shot runs in flight from one thread, each result its own", "[run]") {
  Harness h;
  constexpr int kRuns = 8;
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<int> codes(kRuns, -100);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kRuns; ++i) {
    sandlet::RunOptions o({"sh", "-c", "sleep 0.2; exit " + std::to_string(i)});
    h.rt().run_async(Harness::spec(), o, [&, i](const sandlet::Error* err, sandlet::ExecResult r) {
      std::lock_guard lock(mu);
      codes[i] = err != nullptr ? -200 : r.exit_code;
      ++done;
      cv.notify_all();
    });
  }
  {
    std::unique_lock lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return done == kRuns; }));
  }
  for (int i = 0; i < kRuns; ++i) CHECK(codes[i] == i);
  // In flight at once: eight 0.2 s sleeps take well under eight times 0.2 s.
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1400));
  CHECK(h.rt().list().empty());
  h.check_no_leaks();
}

TEST_CASE("run_async: cancelled through its descriptor; a run in flight ends when the runtime closes", "[run]") {
  Harness h;
  Pipe cancel;
  std::mutex mu;
  std::condition_variable cv;
  int cancelled = -1, closed = -1;
  sandlet::RunOptions o({"sleep", "30"});
  o.cancel_fd = cancel.r;
  h.rt().run_async(Harness::spec(), o, [&](const sandlet::Error* err, sandlet::ExecResult) {
    std::lock_guard lock(mu);
    cancelled = err != nullptr ? static_cast<int>(err->code()) : 0;
    cv.notify_all();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  REQUIRE(::write(cancel.w, "x", 1) == 1);
  {
    std::unique_lock lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return cancelled >= 0; }));
  }
  CHECK(cancelled == SANDLET_CANCELLED);

  h.rt().run_async(Harness::spec(), sandlet::RunOptions({"sleep", "30"}), [&](const sandlet::Error* err, sandlet::ExecResult) {
    std::lock_guard lock(mu);
    closed = err != nullptr ? static_cast<int>(err->code()) : 0;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  h.check_no_leaks();  // closes the runtime: the run ends, its callback has run, nothing is left
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  std::lock_guard lock(mu);
  CHECK(closed == SANDLET_UNAVAILABLE);
}
