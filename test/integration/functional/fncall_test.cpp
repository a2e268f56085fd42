// FnCall (sandlet_fncall.h): calls in pooled containers. Every isolation check runs two calls on the SAME
// pool of max size 1, so the second one runs in the first one's container or in its replacement; whatever
// the first left must not be seen by the second.
#include <csignal>
#include <atomic>
#include <boost/json.hpp>
#include <thread>

#include "integration/functional/cli_support.hpp"
#include "integration/harness.hpp"
#include "integration/mounts_support.hpp"
#include "sandlet/sandlet_fncall.h"

namespace {

struct Called {
  int exit_code = -1, signal = 0, timed_out = 0;
  std::string out, err;
  uint64_t duration_ns = 0;
};

struct Caller {
  sandlet_runtime_t* rt;
  std::string spec_json;
  sandlet_error_t* call(const std::string& script, Called& c, double timeout_s = 0,
                        std::vector<const char*> env = {}, const std::string& stdin_data = "") {
    sandlet_call_options_t o = SANDLET_CALL_OPTIONS_INIT;
    o.spec_json = spec_json.c_str();
    o.script = script.c_str();
    env.push_back(nullptr);
    o.env = env.data();
    o.stdin_data = stdin_data.data();
    o.stdin_len = stdin_data.size();
    o.timeout_s = timeout_s;
    sandlet_exec_result_t* r = nullptr;
    if (sandlet_error_t* e = sandlet_call(rt, &o, &r)) return e;
    size_t n;
    c.exit_code = sandlet_exec_result_exit_code(r);
    c.signal = sandlet_exec_result_signal(r);
    c.timed_out = sandlet_exec_result_timed_out(r);
    const char* s = sandlet_exec_result_stdout(r, &n);
    c.out.assign(s, n);
    s = sandlet_exec_result_stderr(r, &n);
    c.err.assign(s, n);
    c.duration_ns = sandlet_exec_result_duration_ns(r);
    sandlet_exec_result_delete(r);
    return nullptr;
  }
  Called ok(const std::string& script, double timeout_s = 0, std::vector<const char*> env = {},
            const std::string& stdin_data = "") {
    Called c;
    sandlet_error_t* e = call(script, c, timeout_s, std::move(env), stdin_data);
    INFO("script: " << script << " error: " << (e ? sandlet_error_message(e) : ""));
    REQUIRE(e == nullptr);
    INFO("stderr: " << c.err);
    return c;
  }
  boost::json::object stats() {
    char* s = nullptr;
    REQUIRE(sandlet_runtime_fncall_stats_json(rt, &s) == nullptr);
    auto v = boost::json::parse(s).as_object();
    sandlet_free(s);
    REQUIRE(!v.at("pools").as_array().empty());
    return v.at("pools").as_array()[0].as_object();
  }
  void pool(uint32_t max_size, const char* reuse = nullptr, double freeze = 30, double destroy = 300,
            uint32_t min_idle = 0) {
    sandlet_fncall_pool_options_t p = SANDLET_FNCALL_POOL_OPTIONS_INIT;
    p.max_size = max_size;
    p.min_idle = min_idle;
    p.reuse = reuse;
    p.freeze_after_s = freeze;
    p.destroy_frozen_after_s = destroy;
    REQUIRE(sandlet_runtime_set_fncall_pool(rt, spec_json.c_str(), &p) == nullptr);
  }
};

int64_t num(const boost::json::object& o, const char* k) { return o.at(k).to_number<int64_t>(); }

}  // namespace

TEST_CASE("fncall: a clean call reuses its container; output, exit code, env and stdin per call", "[fncall]") {
  Harness h;
  Caller c{h.rt().get(), Harness::spec().to_json()};
  c.pool(1);
  auto a = c.ok("echo hi $X; cat; exit 4", 0, {"X=one"}, "input");
  CHECK(a.exit_code == 4);
  CHECK(a.out == "hi one\ninput");
  auto b = c.ok("echo [$X]");
  CHECK(b.out == "[]\n");  // the env was the first call's only
  auto s = c.stats();
  CHECK(num(s, "created") == 1);
  CHECK(num(s, "reused") == 1);
  CHECK(num(s, "discarded_dirty") == 0);
  h.check_no_leaks();
}

TEST_CASE("fncall: nothing a call leaves is seen by the next one on the same pool", "[fncall]") {
  Harness h;
  Caller c{h.rt().get(), Harness::spec().to_json()};
  c.pool(1);
  struct Case {
    const char* leave;
    const char* look;  // prints "clean" when nothing of `leave` is there
  };
  const Case cases[] = {
      {"echo x > /leak", "test -e /leak || echo clean"},
      {"echo x > /tmp/leak", "test -e /tmp/leak || echo clean"},
      {"echo x > /dev/shm/leak", "test -e /dev/shm/leak || echo clean"},
      {"rm -f /etc/hostname /etc/passwd.bak; touch /etc/x; rm /etc/x", "test -e /etc/x || echo clean"},
      {"setsid sleep 1000 > /dev/null 2>&1 < /dev/null & sleep 0.1",
       "grep -lx sleep /proc/[0-9]*/comm 2>/dev/null | grep -q . || echo clean"},
      {"(nc -l -p 5555 >/dev/null 2>&1 &) ; sleep 0.1", "grep -q ':15B3 ' /proc/net/tcp || echo clean"},
  };
  for (const auto& k : cases) {
    INFO("left: " << k.leave);
    c.ok(k.leave);
    auto r = c.ok(k.look);
    CHECK(r.out == "clean\n");
  }
  auto s = c.stats();
  // The four file changes cost their container; the processes were killed with their exec (reused).
  CHECK(num(s, "discarded_dirty") == 4);
  CHECK(num(s, "reused") == 4);  // the calls after the process and port cases
  h.check_no_leaks();
}

TEST_CASE("fncall: a SysV object a call leaves costs its container; the next call's namespace is empty",
          "[fncall]") {
  // The probe (static) and its marker come in a layer of their own: the calls write no file, so only
  // the SysV check can tell their containers apart.
  HostDir probe_layer;
  fs::create_directories(probe_layer.path + "/tmp");
  fs::copy_file(SANDLET_FS_PROBE, probe_layer.path + "/probe");
  std::ofstream(probe_layer.path + "/tmp/.sandlet-fs-probe-inside").put('\n');
  Harness h;
  Caller c{h.rt().get(), Harness::spec().layer(probe_layer.path).to_json()};
  c.pool(1);
  const char* look = "test $(wc -l < /proc/sysvipc/shm) -eq 1 && test $(wc -l < /proc/sysvipc/sem) -eq 1 && "
                     "test $(wc -l < /proc/sysvipc/msg) -eq 1 && echo clean";
  CHECK(c.ok(look).out == "clean\n");
  CHECK(c.ok(look).out == "clean\n");
  CHECK(num(c.stats(), "reused") == 1);  // looking leaves nothing
  for (const char* op : {"shmget", "semget", "msgget"}) {
    INFO(op);
    CHECK(c.ok(std::string("/probe ") + op + " x").out == "ok\n");
    CHECK(c.ok(look).out == "clean\n");
  }
  CHECK(num(c.stats(), "discarded_dirty") == 3);
  // Every thread of this process is back in its own IPC namespace: none keeps a discarded container's
  // namespace (and its objects) alive.
  const std::string home = fs::read_symlink("/proc/self/ns/ipc").string();
  for (const auto& task : fs::directory_iterator("/proc/self/task")) {
    std::error_code ec;
    const std::string ns = fs::read_symlink(task.path() / "ns" / "ipc", ec).string();
    if (!ec) CHECK(ns == home);
  }
  h.check_no_leaks();
}

TEST_CASE("fncall: a timeout kills everything; reuse replace never reuses", "[fncall][timeout]") {
  Harness h;
  Caller c{h.rt().get(), Harness::spec().to_json()};
  c.pool(1, "replace");
  auto r = c.ok("sleep 100 & sleep 100", 0.3);
  CHECK(r.timed_out);
  auto after = c.ok("grep -lx sleep /proc/[0-9]*/comm 2>/dev/null | grep -q . || echo clean");
  CHECK(after.out == "clean\n");
  c.ok("true");
  auto s = c.stats();
  CHECK(num(s, "reused") == 0);
  CHECK(num(s, "created") == 3);
  h.check_no_leaks();
}

TEST_CASE("fncall: 8 concurrent callers each get a container", "[fncall]") {
  Harness h;
  Caller c{h.rt().get(), Harness::spec().to_json()};
  c.pool(8);
  std::atomic<int> good{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i)
    ts.emplace_back([&] {
      for (int k = 0; k < 5; ++k) {
        Called r;
        sandlet_error_t* e = c.call("echo $$", r);
        if (!e && r.exit_code == 0) ++good;
        if (e) sandlet_error_delete(e);
      }
    });
  for (auto& t : ts) t.join();
  CHECK(good == 40);
  auto s = c.stats();
  CHECK(num(s, "created") <= 8);
  CHECK(num(s, "created") + num(s, "reused") == 40);
  h.check_no_leaks();
}

TEST_CASE("fncall: idle containers are frozen, then destroyed down to min_idle", "[fncall]") {
  Harness h;
  Caller c{h.rt().get(), Harness::spec().to_json()};
  c.pool(4, nullptr, 0.2, 0.3, 1);
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) ts.emplace_back([&] { c.ok("sleep 0.3"); });
  for (auto& t : ts) t.join();
  CHECK(wait_until([&] { return num(c.stats(), "frozen") >= 1; }, 5));
  CHECK(wait_until([&] { return num(c.stats(), "idle") == 1; }, 5));
  CHECK(c.ok("echo thawed").out == "thawed\n");
  h.check_no_leaks();
}

TEST_CASE("fncall: a call's own limits bind it and the pool's come back after it", "[fncall][limits]") {
  // The pids limit on whichever controller the host has (v2, or v1 on a hybrid host): through the backend's
  // set_limits, the same code for every host layout.
  Harness h;
  Caller c{h.rt().get(), Harness::spec().pids(64).to_json()};
  c.pool(1);
  // 20 sleepers: refused under a call limit of 12, fine under the pool's 64 before and after.
  const std::string many = "n=0; for i in $(seq 20); do sleep 5 & n=$((n+1)); done 2>/dev/null; "
                           "kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; echo started";
  auto before = c.ok(many);
  CHECK(before.out == "started\n");
  sandlet_call_options_t o = SANDLET_CALL_OPTIONS_INIT;
  o.spec_json = c.spec_json.c_str();
  o.script = "for i in $(seq 20); do sleep 5 & done; echo survived";
  o.pids = 12;
  sandlet_exec_result_t* r = nullptr;
  sandlet_error_t* e = sandlet_call(h.rt().get(), &o, &r);
  INFO((e ? sandlet_error_message(e) : ""));
  REQUIRE(e == nullptr);
  size_t n = 0;
  const char* text = sandlet_exec_result_stdout(r, &n);
  const std::string out(text, n);
  text = sandlet_exec_result_stderr(r, &n);
  const std::string err(text, n);
  INFO("stdout: " << out << " stderr: " << err << " exit " << sandlet_exec_result_exit_code(r) << " signal "
                  << sandlet_exec_result_signal(r));
  CHECK(err.find("fork") != std::string::npos);  // the shell could not start them all
  sandlet_exec_result_delete(r);
  auto after = c.ok(many);
  CHECK(after.out == "started\n");
  h.check_no_leaks();
}

// A pool made without a memory limit takes one per call: on a hybrid-cgroup host that needs the memory v1
// group, which a pool's sandboxes get even when created cold.
TEST_CASE("fncall: a call's own memory limit binds it in a pool made without one", "[fncall][limits]") {
  Harness h;
  Caller c{h.rt().get(), Harness::spec().to_json()};
  c.pool(1);
  CHECK(c.ok("echo warm").out == "warm\n");
  sandlet_call_options_t o = SANDLET_CALL_OPTIONS_INIT;
  o.spec_json = c.spec_json.c_str();
  o.script = "head -c 134217728 /dev/zero | tail -n 1 >/dev/null; echo \"tail: $?\"";
  o.memory = 32ull << 20;
  sandlet_exec_result_t* r = nullptr;
  sandlet_error_t* e = sandlet_call(h.rt().get(), &o, &r);
  INFO((e ? sandlet_error_message(e) : ""));
  REQUIRE(e == nullptr);
  size_t n = 0;
  const char* text = sandlet_exec_result_stdout(r, &n);
  const std::string out(text, n);
  INFO("stdout: " << out << " exit " << sandlet_exec_result_exit_code(r) << " signal " << sandlet_exec_result_signal(r));
  CHECK((out == "tail: 137\n" || sandlet_exec_result_signal(r) == SIGKILL));
  sandlet_exec_result_delete(r);
  // Without the call's limit the pool's (none) is back.
  CHECK(c.ok("head -c 67108864 /dev/zero | tail -n 1 | wc -c").out == "67108864\n");
  h.check_no_leaks();
}

TEST_CASE("fncall: bad input names the field", "[fncall]") {
  Harness h;
  sandlet_call_options_t o = SANDLET_CALL_OPTIONS_INIT;
  sandlet_exec_result_t* r = nullptr;
  auto expect = [&](const char* field) {
    sandlet_error_t* e = sandlet_call(h.rt().get(), &o, &r);
    REQUIRE(e != nullptr);
    CHECK(sandlet_error_code(e) == SANDLET_INVALID_ARGUMENT);
    CHECK_THAT(sandlet_error_message(e), Catch::Contains(field));
    sandlet_error_delete(e);
  };
  expect("'environment'");
  const std::string spec = Harness::spec().to_json();
  o.spec_json = spec.c_str();
  expect("'argv'");
  o.script = "true";
  o.timeout_s = -1;
  expect("'timeout'");
  o.timeout_s = 0;
  o.memory = 5;
  expect("'memory'");
  o.memory = 0;
  const char* env[] = {"NOEQUALS", nullptr};
  o.env = env;
  expect("'env'");
  sandlet_fncall_pool_options_t p = SANDLET_FNCALL_POOL_OPTIONS_INIT;
  p.reuse = "sometimes";
  sandlet_error_t* e = sandlet_runtime_set_fncall_pool(h.rt().get(), spec.c_str(), &p);
  REQUIRE(e != nullptr);
  CHECK_THAT(sandlet_error_message(e), Catch::Contains("'reuse'"));
  sandlet_error_delete(e);
  h.check_no_leaks();
}


TEST_CASE("fncall: sandlet call passes stdin and the exit status", "[fncall][cli]") {
  Harness h;
  using cli_test::cli;
  auto r = cli(h, {"call", "--layer", SANDLET_TEST_ROOTFS, "--", "sh", "-c", "cat; echo err >&2; exit 7"},
               cli_test::Input{"from stdin\n"});
  CHECK(r.status == 7);
  CHECK(r.out == "from stdin\n");
  CHECK(r.err == "err\n");
  CHECK(cli(h, {"call", "--layer", SANDLET_TEST_ROOTFS, "--timeout", "0.2", "--", "sleep", "5"}).status == 124);
  CHECK(cli(h, {"call", "--layer", SANDLET_TEST_ROOTFS, "--", "no-such-command"}).status == 127);
  h.check_no_leaks();
}
