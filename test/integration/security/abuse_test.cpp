// Resource abuse, each contained in the sandbox that caused it (docs/SECURITY-TESTS.md): memory, pids, CPU,
// the writable layer's bytes and inodes, open files, output floods, a tree that ignores SIGTERM, /dev/shm.
// A neighbour sandbox runs `true` in a loop meanwhile: its exec latency is printed (performance belongs to
// the benchmarks) and it must keep working within a generous bound.
#include <algorithm>
#include <mutex>

#include "integration/security/attack_world.hpp"

namespace {

constexpr double kNeighbourBoundS = 10;  // generous: the machine may be loaded

// Execs in the neighbour until stopped; every one must succeed within kNeighbourBoundS.
class NeighbourProbe {
 public:
  explicit NeighbourProbe(sandlet::Sandbox& sb) : sb_(sb), thread_([this] { loop(); }) {}
  ~NeighbourProbe() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // Stops and prints "what: neighbour exec n=..., median ..., max ..."; checks the neighbour kept working.
  void report(const std::string& what) {
    stop();
    std::sort(ms_.begin(), ms_.end());
    const double median = ms_.empty() ? 0 : ms_[ms_.size() / 2], max = ms_.empty() ? 0 : ms_.back();
    std::printf("%s: neighbour exec latency n=%zu median %.1f ms max %.1f ms (failures %d)\n", what.c_str(),
                ms_.size(), median, max, failures_);
    INFO(what);
    CHECK(failures_ == 0);
    CHECK_FALSE(ms_.empty());
    CHECK(max < kNeighbourBoundS * 1000);
  }

 private:
  void loop() {
    while (!stop_) {
      auto t0 = std::chrono::steady_clock::now();
      sandlet::ExecOptions o({"true"});
      o.timeout_s = kNeighbourBoundS;
      try {
        auto r = sb_.exec(o);
        if (r.exit_code != 0) ++failures_;
      } catch (const sandlet::Error&) {
        ++failures_;
      }
      ms_.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  sandlet::Sandbox& sb_;
  std::vector<double> ms_;
  int failures_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

sandlet::Spec attacker_spec() { return Harness::spec().mount(SANDLET_ATTACKS_DIR, "/attacks"); }

// The value of `key=` in a bomb's "RESULT" line.
std::string result_field(const std::string& out, const std::string& key) {
  const size_t at = out.find(" " + key + "=");
  if (at == std::string::npos) return "";
  const size_t start = at + key.size() + 2;
  return out.substr(start, out.find_first_of(" \n", start) - start);
}

sandlet::ExecResult bomb(sandlet::Sandbox& sb, std::vector<std::string> args, double timeout = 60) {
  args.insert(args.begin(), "/attacks/attack-bomb");
  sandlet::ExecOptions o(args);
  o.timeout_s = timeout;
  auto r = sb.exec(o);
  std::printf("%s: %s", args[1].c_str(), r.stdout_data.substr(0, 300).c_str());
  return r;
}

// The host's fs.file-nr: allocated file handles.
long host_files() { return std::atol(slurp("/proc/sys/fs/file-nr").c_str()); }

}  // namespace

TEST_CASE("abuse: a memory bomb is OOM-killed inside; the host and the neighbour go on", "[abuse][memory]") {
  Harness h;
  auto sb = h.rt().create(attacker_spec().memory(64ull << 20));
  auto neighbour = h.rt().create(Harness::spec());
  NeighbourProbe probe(neighbour);
  auto r = bomb(sb, {"memory"});
  INFO(r.stdout_data << r.stderr_data);
  CHECK(r.signal == SIGKILL);
  CHECK(result_field(r.stdout_data, "mib").empty());  // never saw mmap fail: killed while touching
  probe.report("memory bomb (64 MiB limit)");
  if (fs::exists("/sys/fs/cgroup/memory/sandlet/" + sb.id())) {
    const std::string g = "/sys/fs/cgroup/memory/sandlet/" + sb.id();
    CHECK(std::stoull(slurp(g + "/memory.max_usage_in_bytes")) <= (64ull << 20));
    CHECK_THAT(slurp(g + "/memory.oom_control"), Catch::Contains("oom_kill 1"));  // the kill was the group's
  }
  CHECK(run_out(sb, "echo alive") == "alive\n");
  h.check_no_leaks();
}

TEST_CASE("abuse: a fork bomb stops at the pids limit", "[abuse][pids]") {
  Harness h;
  auto sb = h.rt().create(attacker_spec().pids(64));
  auto neighbour = h.rt().create(Harness::spec());
  NeighbourProbe probe(neighbour);
  auto r = bomb(sb, {"forks"});
  INFO(r.stdout_data << r.stderr_data);
  REQUIRE_FALSE(result_field(r.stdout_data, "made").empty());
  CHECK(std::stoul(result_field(r.stdout_data, "made")) < 64);
  CHECK_THAT(r.stdout_data, Catch::Contains("stop=Resource temporarily unavailable"));
  probe.report("fork bomb (pids 64)");
  // The exec's tree was killed with it: the sandbox can fork again.
  CHECK(wait_until([&] { return sb.exec({"sh", "-c", "true"}).exit_code == 0; }, 10));
  CHECK(count_procs(sb, "attack-bomb") == 0);
  h.check_no_leaks();
}

TEST_CASE("abuse: busy loops get the sandbox's CPU share, not the neighbour's", "[abuse][cpu]") {
  Harness h;
  auto sb = h.rt().create(attacker_spec().cpus(0.2));
  auto neighbour = h.rt().create(Harness::spec());
  NeighbourProbe probe(neighbour);
  run_out(sb, "for i in 1 2 3 4; do timeout 3 yes >/dev/null & done; wait; echo done");
  probe.report("4 busy loops (cpus 0.2)");
  const bool hybrid = fs::exists("/sys/fs/cgroup/unified");
  const std::string stat = slurp(hybrid ? "/sys/fs/cgroup/cpu/sandlet/" + sb.id() + "/cpu.stat"
                                        : cgroup2_parent() + "/" + sb.id() + "/cpu.stat");
  INFO(stat);
  const size_t at = stat.find("nr_throttled ");
  REQUIRE(at != std::string::npos);
  CHECK(std::stoul(stat.substr(at + 13)) > 0);
  h.check_no_leaks();
}

TEST_CASE("abuse: filling the writable layer ends in ENOSPC inside", "[abuse][disk]") {
  Harness h;
  auto sb = h.rt().create(attacker_spec().disk(32ull << 20));
  auto neighbour = h.rt().create(Harness::spec());
  NeighbourProbe probe(neighbour);
  auto r = bomb(sb, {"fill", "/tmp/big"});
  INFO(r.stdout_data << r.stderr_data);
  CHECK_THAT(r.stdout_data, Catch::Contains("stop=No space left on device"));
  REQUIRE_FALSE(result_field(r.stdout_data, "bytes").empty());
  CHECK(std::stoull(result_field(r.stdout_data, "bytes")) <= (32ull << 20));
  probe.report("disk fill (32 MiB)");
  CHECK(run_out(sb, "rm /tmp/big && echo freed > /tmp/f && cat /tmp/f") == "freed\n");
  h.check_no_leaks();
}

TEST_CASE("abuse: an inode bomb stops at the writable layer's inode bound", "[abuse][inodes]") {
  Harness h;
  auto sb = h.rt().create(attacker_spec().disk(64ull << 20));  // 16384 inodes
  auto neighbour = h.rt().create(Harness::spec());
  NeighbourProbe probe(neighbour);
  auto r = bomb(sb, {"inodes", "/tmp/many", "200000"});
  INFO(r.stdout_data << r.stderr_data);
  REQUIRE_FALSE(result_field(r.stdout_data, "made").empty());
  CHECK(std::stoul(result_field(r.stdout_data, "made")) <= 16384);
  CHECK_THAT(r.stdout_data, Catch::Contains("stop=No space left on device"));
  // /dev, which the sandbox's root owns, and /dev/shm are bounded as well.
  auto d = bomb(sb, {"inodes", "/dev/many", "200000"});
  CHECK(std::stoul("0" + result_field(d.stdout_data, "made")) <= 4096);
  auto s = bomb(sb, {"inodes", "/dev/shm/many", "200000"});
  CHECK(std::stoul("0" + result_field(s.stdout_data, "made")) <= 16384);
  probe.report("inode bombs (upper, /dev, /dev/shm)");
  h.check_no_leaks();
}

TEST_CASE("abuse: filling /dev/shm stops at its bound", "[abuse][shm]") {
  Harness h;
  auto sb = h.rt().create(attacker_spec());
  auto neighbour = h.rt().create(Harness::spec());
  NeighbourProbe probe(neighbour);
  auto r = bomb(sb, {"fill", "/dev/shm/fill"});
  INFO(r.stdout_data << r.stderr_data);
  CHECK_THAT(r.stdout_data, Catch::Contains("stop=No space left on device"));
  REQUIRE_FALSE(result_field(r.stdout_data, "bytes").empty());
  CHECK(std::stoull(result_field(r.stdout_data, "bytes")) <= (256ull << 20));
  probe.report("/dev/shm fill");
  CHECK(neighbour.exec({"sh", "-c", "echo x > /dev/shm/n && cat /dev/shm/n"}).stdout_data == "x\n");
  run_out(sb, "rm /dev/shm/fill");
  h.check_no_leaks();
}

TEST_CASE("abuse: a descriptor bomb stops at the commands' RLIMIT_NOFILE", "[abuse][fds]") {
  Harness h;
  auto sb = h.rt().create(attacker_spec());
  auto neighbour = h.rt().create(Harness::spec());
  NeighbourProbe probe(neighbour);
  const long before = host_files();
  auto r = bomb(sb, {"fds"});
  INFO(r.stdout_data << r.stderr_data);
  REQUIRE_FALSE(result_field(r.stdout_data, "opened").empty());
  CHECK(std::stoul(result_field(r.stdout_data, "hard")) <= 65536);
  CHECK(std::stoul(result_field(r.stdout_data, "opened")) <= 65536);
  CHECK_THAT(r.stdout_data, Catch::Contains("errno=Too many open files"));
  probe.report("descriptor bomb");
  std::printf("host file handles: %ld before, %ld after\n", before, host_files());
  h.check_no_leaks();
}

TEST_CASE("abuse: an output flood is capped and the truncation reported", "[abuse][output]") {
  Harness h;
  auto sb = h.rt().create(attacker_spec());
  auto neighbour = h.rt().create(Harness::spec());
  NeighbourProbe probe(neighbour);
  sandlet::ExecOptions o({"/attacks/attack-bomb", "output", std::to_string(256ull << 20)});
  o.output_limit = 1 << 20;
  o.timeout_s = 60;
  auto r = sb.exec(o);
  CHECK(r.stdout_data.size() == (1u << 20));
  CHECK(r.stdout_truncated);
  CHECK_FALSE(r.stderr_truncated);
  CHECK(r.exit_code == 0);  // the rest was drained and dropped
  // With kill_on_output_limit the flood ends at the cap.
  o.kill_on_output_limit = true;
  auto k = sb.exec(o);
  CHECK(k.stdout_truncated);
  CHECK(k.stdout_data.size() <= (1u << 20));
  CHECK(k.signal == SIGKILL);
  // The default cap (16 MiB) holds without any option.
  sandlet::ExecOptions d({"/attacks/attack-bomb", "output", std::to_string(64ull << 20)});
  d.timeout_s = 60;
  auto def = sb.exec(d);
  CHECK(def.stdout_data.size() == (16u << 20));
  CHECK(def.stdout_truncated);
  probe.report("output flood (256 MiB, 64 MiB)");
  h.check_no_leaks();
}

TEST_CASE("abuse: a tree that ignores SIGTERM dies at the exec timeout and at destroy", "[abuse][sigterm]") {
  Harness h;
  auto sb = h.rt().create(attacker_spec());
  auto neighbour = h.rt().create(Harness::spec());
  NeighbourProbe probe(neighbour);
  const uint32_t base = uid_base_of(sb);
  // setsid'd children and grandchildren re-parented to the init: the timeout kills the exec's whole tree.
  auto r = bomb(sb, {"ignore-term", "3"}, 2);
  CHECK(r.timed_out);
  CHECK(wait_until([&] { return count_procs(sb, "attack-bomb") == 0; }, 10));
  // Left running in the background, the same tree dies with the sandbox.
  sandlet::ExecOptions bg({"sh", "-c", "/attacks/attack-bomb ignore-term 3 >/dev/null & echo started"});
  bg.keep_background = true;
  CHECK(sb.exec(bg).stdout_data == "started\n");
  CHECK(wait_until([&] { return count_procs(sb, "attack-bomb") == 7; }, 10));
  const std::string id = sb.id();
  sb.destroy();
  CHECK(wait_until([&] { return escaped_processes(base, "(none)").empty(); }, 15));
  probe.report("SIGTERM-ignoring tree");
  CHECK(wait_until([&] { return h.gone(id); }, 15));
  h.check_no_leaks();
}
