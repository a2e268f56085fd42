// Node admission (runtime/admission): the budget in a flock-guarded file, the priority queue with its
// deadline, UNAVAILABLE naming the resource, and two processes sharing one file (a dead one's reservation
// is dropped).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <chrono>
#include <thread>
#include <vector>

#include "runtime/metrics/admission.hpp"
#include "unit_helpers.hpp"

using sandlet::AdmissionOptions;
using sandlet::AdmissionPriority;
using sandlet::AdmissionRequest;
using sandlet::NodeAdmission;

namespace {

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/metrics-admission-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

AdmissionRequest req(const std::string& key, AdmissionPriority p = AdmissionPriority::kBatch, uint64_t memory = 0) {
  AdmissionRequest r;
  r.key = key;
  r.priority = p;
  r.memory = memory;
  return r;
}

std::string unavailable_message(NodeAdmission& a, const AdmissionRequest& r) {
  try {
    a.admit(r);
  } catch (const sandlet::Error& e) {
    CHECK(e.code() == sandlet::Code::kUnavailable);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("admission: a full node queues until the deadline, naming the resource", "[admission]") {
  TempDir d;
  AdmissionOptions o;
  o.max_sandboxes = 1;
  o.max_memory = 1 << 30;
  o.timeout_s = 0.2;
  NodeAdmission a(d.path + "/admission", o);
  a.admit(req("a", AdmissionPriority::kBatch, 256 << 20));
  const auto t0 = std::chrono::steady_clock::now();
  const std::string msg = unavailable_message(a, req("b"));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(msg.find("sandboxes (1 of 1 in use)") != std::string::npos);
  CHECK(waited >= 0.19);
  CHECK(waited < 2);
  // Released: the next fits at once.
  a.release("a");
  CHECK(a.admit(req("b")) < 0.1);
  CHECK(a.usage().at("sandboxes") == 1);

  // Memory names itself; a request bigger than the whole budget can never fit.
  AdmissionOptions m;
  m.max_memory = 1 << 30;
  m.timeout_s = 0.05;
  NodeAdmission mem(d.path + "/admission-mem", m);
  mem.admit(req("x", AdmissionPriority::kBatch, 768 << 20));
  CHECK(unavailable_message(mem, req("y", AdmissionPriority::kBatch, 512 << 20)).find("memory (") != std::string::npos);
  CHECK_THROWS_WITH(mem.admit(req("z", AdmissionPriority::kBatch, 2ull << 30)), Catch::Contains("'memory'"));

  // So does the CPU share (the sum of the specs' cpus, here oversubscribing a 2-CPU node 2x).
  AdmissionOptions c;
  c.max_cpu_millis = 4000;
  c.timeout_s = 0.05;
  NodeAdmission cpu(d.path + "/admission-cpu", c);
  AdmissionRequest big = req("c1");
  big.cpu_millis = 3000;
  cpu.admit(big);
  AdmissionRequest more = req("c2");
  more.cpu_millis = 1500;
  CHECK(unavailable_message(cpu, more).find("cpu share (3 of 4 CPUs reserved, 1.5 asked)") != std::string::npos);
  more.cpu_millis = 1000;
  cpu.admit(more);  // exactly full
  CHECK(cpu.usage().at("cpu_millis") == 4000);
  AdmissionRequest huge = req("c3");
  huge.cpu_millis = 4500;
  CHECK_THROWS_WITH(cpu.admit(huge), Catch::Contains("'cpus'"));
}

TEST_CASE("admission: latency-sensitive requests go before batch ones", "[admission]") {
  TempDir d;
  AdmissionOptions o;
  o.max_sandboxes = 1;
  o.timeout_s = 5;
  NodeAdmission a(d.path + "/admission", o);
  a.admit(req("holder"));
  std::vector<std::string> order;
  std::mutex m;
  auto wait_for = [&](std::string key, AdmissionPriority p) {
    a.admit(req(key, p));
    std::lock_guard lock(m);
    order.push_back(key);
  };
  std::thread batch(wait_for, "batch", AdmissionPriority::kBatch);
  while (a.waiting() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::thread latency(wait_for, "latency", AdmissionPriority::kLatency);
  while (a.waiting() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  a.release("holder");
  while (true) {
    {
      std::lock_guard lock(m);
      if (!order.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  a.release("latency");
  latency.join();
  batch.join();
  REQUIRE(order.size() == 2);
  CHECK(order[0] == "latency");
  CHECK(order[1] == "batch");
}

TEST_CASE("admission: bounded concurrent initialisations", "[admission]") {
  TempDir d;
  AdmissionOptions o;
  o.max_initializing = 1;
  o.timeout_s = 0.1;
  NodeAdmission a(d.path + "/admission", o);
  a.admit(req("a"));
  CHECK(unavailable_message(a, req("b")).find("initialisations (1 of 1 under way)") != std::string::npos);
  a.initialised("a");
  a.admit(req("b"));
  CHECK(a.usage().at("sandboxes") == 2);
}

TEST_CASE("admission: the queue is bounded", "[admission]") {
  TempDir d;
  AdmissionOptions o;
  o.max_sandboxes = 1;
  o.max_queue = 1;
  o.timeout_s = 1;
  NodeAdmission a(d.path + "/admission", o);
  a.admit(req("a"));
  std::thread waiter([&] { CHECK_THROWS(a.admit(req("b"))); });
  while (a.waiting() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(unavailable_message(a, req("c")).find("queue is full") != std::string::npos);
  waiter.join();
}

TEST_CASE("admission: two processes share the budget; a dead one's reservation is dropped", "[admission]") {
  TempDir d;
  AdmissionOptions o;
  o.max_sandboxes = 1;
  o.timeout_s = 0.3;
  const std::string path = d.path + "/admission";
  int ready[2], go[2];
  REQUIRE(::pipe(ready) == 0);
  REQUIRE(::pipe(go) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int status = 1;
    try {
      NodeAdmission a(path, o);
      a.admit(req("child"));
      status = 0;
    } catch (...) {
    }
    char c = static_cast<char>(status);
    (void)!::write(ready[1], &c, 1);
    (void)!::read(go[0], &c, 1);  // holds the reservation until told, then dies without releasing it
    ::_exit(status);
  }
  char c = 1;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  REQUIRE(c == 0);
  NodeAdmission a(path, o);
  CHECK(unavailable_message(a, req("parent")).find("sandboxes (1 of 1 in use)") != std::string::npos);
  // While the parent waits, the child dies: its reservation is dropped and the parent gets in.
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    (void)!::write(go[1], "x", 1);
    int st = 0;
    ::waitpid(child, &st, 0);
  });
  AdmissionOptions longer = o;
  longer.timeout_s = 5;
  NodeAdmission b(path, longer);
  CHECK(b.admit(req("parent")) >= 0.05);
  killer.join();
  CHECK(b.usage().at("sandboxes") == 1);
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
}

TEST_CASE("admission: cancel ends every wait at once", "[admission]") {
  TempDir d;
  AdmissionOptions o;
  o.max_sandboxes = 1;
  o.timeout_s = 30;
  NodeAdmission a(d.path + "/admission", o);
  a.admit(req("a"));
  const auto t0 = std::chrono::steady_clock::now();
  std::thread waiter([&] { CHECK_THROWS_WITH(a.admit(req("b", AdmissionPriority::kLatency)), Catch::Contains("closed")); });
  while (a.waiting() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  a.cancel();
  waiter.join();
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 5);
  CHECK(a.usage().at("waiting_latency") == 0);  // its waiting entry is gone from the file
}
