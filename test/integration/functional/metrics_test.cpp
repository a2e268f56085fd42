// Platform metrics through the C ABI (sandlet_metrics.h) and `sandlet metrics` (print and --listen, fetched
// over a TCP socket, as a scraper would): counts by state and label across runtimes on one root, the
// create histograms, exec counters.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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

// Sends `request` to 127.0.0.1:port and returns everything answered until the server closes ("" on a
// connect failure). Bounded: a silent server fails the read after 10 s.
std::string http_exchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string got;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == ssize_t(request.size())) {
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) got.append(buf, size_t(n));
  }
  ::close(fd);
  return got;
}

std::string get(int port, const std::string& path) {
  return http_exchange(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
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

  const int port = std::stoi(first.substr(prefix.size()));
  const std::string got = get(port, "/metrics");
  INFO(got);
  CHECK(got.rfind("HTTP/1.1 200 ", 0) == 0);
  CHECK(got.find("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n") != std::string::npos);
  const size_t body = got.find("\r\n\r\n");
  REQUIRE(body != std::string::npos);
  CHECK(has_line("\n" + got.substr(body + 4), "sandlet_sandboxes_by_label{key=\"job\",value=\"served\",state=\"running\"} 1"));
  CHECK(get(port, "/other").rfind("HTTP/1.1 404 ", 0) == 0);

  // An oversized request is refused and the server goes on.
  CHECK(http_exchange(port, "GET /metrics HTTP/1.1\r\nX: " + std::string(9000, 'a')).rfind("HTTP/1.1 431", 0) == 0);
  CHECK(get(port, "/metrics").rfind("HTTP/1.1 200 ", 0) == 0);

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
