// Platform metrics through the C ABI (sandlet_metrics.h) and `sandlet metrics` (print and --listen, fetched
// with a real HTTP client, Python's urllib): counts by state and label across runtimes on one root, the
// create histograms, exec counters.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "integration/functional/cli_support.hpp"
#include "sandlet/sandlet_metrics.h"

namespace {

std::string metrics_text(sandlet::Runtime& rt) {
  char* out = nullptr;
  sandlet::detail::check(sandlet_runtime_metrics_text(rt.get(), &out));
  return sandlet::detail::take_string(out);
}

bool has_line(const std::string& text, const std::string& line) { return text.find("\n" + line + "\n") != std::string::npos; }

// A command's standard output (popen: the shell runs it), or "" when it failed.
std::string output_of(const std::string& command, int* status) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

}  // namespace

TEST_CASE("metrics count sandboxes by state and label on the whole root", "[metrics]") {
  Harness h;
  auto a1 = h.rt().create(Harness::spec().label("job", "a").label("tier", "x\"y"));
  auto a2 = h.rt().create(Harness::spec().label("job", "a"));
  auto b1 = h.rt().create(Harness::spec().label("job", "b"));
  CHECK(a1.exec({"true"}).exit_code == 0);
  CHECK(a1.exec({"sh", "-c", "sleep 0.2"}).exit_code == 0);
  b1.pause();

  const std::string text = metrics_text(h.rt());
  INFO(text);
  CHECK(text.find("# HELP sandlet_sandboxes ") != std::string::npos);
  CHECK(has_line(text, "# TYPE sandlet_sandboxes gauge"));
  CHECK(has_line(text, "sandlet_sandboxes{state=\"running\"} 2"));
  CHECK(has_line(text, "sandlet_sandboxes{state=\"paused\"} 1"));
  CHECK(has_line(text, "sandlet_paused_sandboxes 1"));
  CHECK(has_line(text, "sandlet_sandboxes_by_label{key=\"job\",value=\"a\",state=\"running\"} 2"));
  CHECK(has_line(text, "sandlet_sandboxes_by_label{key=\"job\",value=\"b\",state=\"paused\"} 1"));
  CHECK(has_line(text, "sandlet_sandboxes_by_label{key=\"tier\",value=\"x\\\"y\",state=\"running\"} 1"));
  CHECK(has_line(text, "sandlet_creates_total{result=\"ok\"} 3"));
  CHECK(has_line(text, "sandlet_execs_total 2"));
  CHECK(has_line(text, "sandlet_scheduling_latency_seconds_count 3"));
  CHECK(has_line(text, "sandlet_scheduling_latency_seconds_bucket{le=\"+Inf\"} 3"));
  CHECK(has_line(text, "sandlet_queue_wait_seconds_count 3"));
  CHECK(has_line(text, "# TYPE sandlet_warm_pool_hits_total counter"));
  // a1 was busy for at least the 0.2 s sleep.
  const size_t busy = text.find("\nsandlet_busy_seconds_total ");
  REQUIRE(busy != std::string::npos);
  CHECK(std::stod(text.substr(busy + 28)) >= 0.2);

  // Another runtime on the root (as another process would) sees the same sandboxes, with counters of its own.
  {
    sandlet::RuntimeOptions o;
    o.disable_warm_pool = true;
    auto other = sandlet::Runtime::open(h.root(), o);
    const std::string t2 = metrics_text(other);
    CHECK(has_line(t2, "sandlet_sandboxes{state=\"paused\"} 1"));
    CHECK(has_line(t2, "sandlet_sandboxes_by_label{key=\"job\",value=\"a\",state=\"running\"} 2"));
    CHECK(has_line(t2, "sandlet_creates_total{result=\"ok\"} 0"));
  }

  // The CLI prints the same node-wide counts, and the counters this runtime published (at most once a
  // second after a change) summed with its own.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto r = cli_test::cli(h, {"metrics"});
  CHECK(r.status == 0);
  CHECK(has_line(r.out, "sandlet_creates_total{result=\"ok\"} 3"));
  CHECK(has_line(r.out, "sandlet_execs_total 2"));
  CHECK(has_line(r.out, "sandlet_scheduling_latency_seconds_count 3"));
  CHECK(has_line(r.out, "sandlet_sandboxes{state=\"paused\"} 1"));
  CHECK(has_line(r.out, "sandlet_sandboxes_by_label{key=\"job\",value=\"b\",state=\"paused\"} 1"));

  a2.destroy();
  const std::string t3 = metrics_text(h.rt());
  CHECK(has_line(t3, "sandlet_destroys_total 1"));
  CHECK(has_line(t3, "sandlet_sandbox_utilisation_ratio_count 1"));
  b1.resume();
}

TEST_CASE("sandlet metrics --listen serves GET /metrics over HTTP until SIGTERM", "[metrics][cli]") {
  Harness h;
  auto sb = h.rt().create(Harness::spec().label("job", "served"));
  // Started by hand: its first line (the address served) is read while it runs.
  int out[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  std::vector<std::string> args = {SANDLET_CLI, "--root", h.root(), "metrics", "--listen", "127.0.0.1:0"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  REQUIRE(::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  std::string first;
  char c;
  while (::read(out[0], &c, 1) == 1 && c != '\n') first += c;
  ::close(out[0]);
  INFO("first line: " << first);
  const std::string prefix = "listening on http://127.0.0.1:";
  REQUIRE(first.rfind(prefix, 0) == 0);
  const std::string url = first.substr(std::string("listening on ").size());

  int status = -1;
  const std::string got = output_of(
      "python3 -c 'import sys, urllib.request, urllib.error\n"
      "r = urllib.request.urlopen(sys.argv[1], timeout=10)\n"
      "print(r.status, r.headers[\"Content-Type\"])\n"
      "sys.stdout.write(r.read().decode())\n"
      "try:\n"
      "    urllib.request.urlopen(sys.argv[1].replace(\"/metrics\", \"/other\"), timeout=10)\n"
      "except urllib.error.HTTPError as e:\n"
      "    print(\"other:\", e.code)\n' " + url,
      &status);
  INFO(got);
  CHECK(status == 0);
  CHECK(got.rfind("200 text/plain; version=0.0.4; charset=utf-8\n", 0) == 0);
  CHECK(has_line(got, "sandlet_sandboxes_by_label{key=\"job\",value=\"served\",state=\"running\"} 1"));
  CHECK(got.find("\nother: 404\n") != std::string::npos);

  // An oversized request is refused and the server goes on.
  const std::string big = output_of("python3 -c 'import socket, sys\n"
                                    "s = socket.create_connection((\"127.0.0.1\", int(sys.argv[1])))\n"
                                    "s.sendall(b\"GET /metrics HTTP/1.1\\r\\nX: \" + b\"a\" * 9000)\n"
                                    "print(s.recv(100).split(b\"\\r\\n\")[0].decode())\n' " +
                                        first.substr(prefix.size(), first.find("/metrics") - prefix.size()),
                                    &status);
  CHECK(big.rfind("HTTP/1.1 431", 0) == 0);

  REQUIRE(::kill(pid, SIGTERM) == 0);
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
}

TEST_CASE("node admission: a create waits for room, fails UNAVAILABLE naming it, fits after a destroy", "[metrics][admission]") {
  Harness h;
  sandlet_admission_options_t o = SANDLET_ADMISSION_OPTIONS_INIT;
  o.max_sandboxes = 1;
  o.timeout_s = 0.3;
  sandlet::detail::check(sandlet_runtime_set_admission(h.rt().get(), &o));
  auto first = h.rt().create(Harness::spec().label("sandlet/priority", "latency"));
  // A second runtime on the root (its own budget object, the same node-wide file) sees the reservation.
  sandlet::RuntimeOptions ro;
  ro.disable_warm_pool = true;
  auto other = sandlet::Runtime::open(h.root(), ro);
  sandlet::detail::check(sandlet_runtime_set_admission(other.get(), &o));
  const auto t0 = std::chrono::steady_clock::now();
  try {
    other.create(Harness::spec());
    FAIL("the second create was admitted");
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == SANDLET_UNAVAILABLE);
    CHECK(std::string(e.what()).find("sandboxes (1 of 1 in use)") != std::string::npos);
  }
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= 0.29);
  const std::string text = metrics_text(h.rt());
  CHECK(has_line(text, "sandlet_admission_in_use{resource=\"sandboxes\"} 1"));
  CHECK(has_line(text, "sandlet_admission_wait_seconds_count 1"));

  // A create that waits gets in once the first is destroyed.
  o.timeout_s = 10;
  sandlet::detail::check(sandlet_runtime_set_admission(other.get(), &o));
  std::thread destroyer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    first.destroy();
  });
  auto second = other.create(Harness::spec());
  destroyer.join();
  CHECK(second.exec({"true"}).exit_code == 0);
  CHECK_THROWS_WITH(h.rt().create(Harness::spec().label("sandlet/priority", "soon")), Catch::Contains("sandlet/priority"));
  second.destroy();
  sandlet::detail::check(sandlet_runtime_set_admission(h.rt().get(), nullptr));
}
