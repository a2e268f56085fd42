// Shared fixture for the integration tests: a fresh runtime root per test, the busybox test root
// filesystem as the layer, and a leak check (mounts, cgroups, sandbox directories) at the end.
#pragma once
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <csignal>

#include "sandlet/sandlet.hpp"
#include "support/sweep_root.hpp"

namespace fs = std::filesystem;

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Mounts in the host's mount table that mention `path` (as mount point, root or source), and loop
// devices backed by a file under it. Scoped to one test's runtime root, so that tests of other processes
// running at the same time do not count.
inline size_t mounts_mentioning(const std::string& path) {
  std::istringstream in(slurp("/proc/self/mountinfo"));
  size_t n = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find(path) != std::string::npos) ++n;
  std::error_code ec;
  for (auto& e : fs::directory_iterator("/sys/block", ec)) {
    std::string backing = slurp(e.path().string() + "/loop/backing_file");
    if (backing.rfind(path, 0) == 0) ++n;
  }
  return n;
}

inline std::string cgroup2_parent() {
  return fs::exists("/sys/fs/cgroup/unified/sandlet") ? "/sys/fs/cgroup/unified/sandlet" : "/sys/fs/cgroup/sandlet";
}

// Runs a shell command on the host, returns its stdout.
inline std::string host_sh(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = ::pclose(p);
  if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

inline bool wait_until(const std::function<bool()>& cond, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

class Harness {
 public:
  Harness() {
    char tmpl[] = "/tmp/sandlet-it-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    rt_ = sandlet::Runtime::open(root_);
  }
  ~Harness() {
    rt_.close();
    test_support::sweep_and_remove_root(root_);
  }
  sandlet::Runtime& rt() { return rt_; }
  const std::string& root() const { return root_; }
  static sandlet::Spec spec() { return sandlet::Spec().layer(SANDLET_TEST_ROOTFS); }

  // (<root>/sandboxes may be a symlink to tmpfs state, removed when the last runtime closes empty.)
  std::vector<std::string> sandbox_dirs() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(root_ + "/sandboxes", ec)) out.push_back(e.path().filename());
    return out;
  }
  // Nothing of `id` remains on the host: directory, cgroups, slot. (destroy() reclaims in the background:
  // poll this with wait_until.)
  bool gone(const std::string& id) const {
    return !fs::exists(root_ + "/sandboxes/" + id) && !fs::exists(root_ + "/sandboxes/.reclaim-" + id) &&
           !fs::exists(cgroup2_parent() + "/" + id) &&
           !fs::exists("/sys/fs/cgroup/memory/sandlet/" + id) && !fs::exists("/sys/fs/cgroup/pids/sandlet/" + id);
  }
  void check_no_leaks() {
    rt_.close();
    CHECK(mounts_mentioning(root_) == 0);
    CHECK(sandbox_dirs().empty());
    for (const std::string& slots : std::vector<std::string>{"/run/sandlet/slots", "/dev/shm/sandlet-state/slots", root_ + "/slots"}) {
      std::error_code ec;
      for (auto& e : fs::directory_iterator(slots, ec)) {
        std::string target = fs::read_symlink(e.path(), ec).string();
        if (target.rfind(root_ + "/", 0) == 0) FAIL("uid slot left behind: " << e.path() << " -> " << target);
      }
    }
  }

 private:
  std::string root_;
  sandlet::Runtime rt_;
};

// How many processes named `comm` run in the sandbox (busybox-static has no pgrep).
inline int count_procs(sandlet::Sandbox& sb, const std::string& comm) {
  auto r = sb.exec({"sh", "-c", "grep -lx " + comm + " /proc/[0-9]*/comm 2>/dev/null | wc -l"});
  return std::atoi(r.stdout_data.c_str());
}

inline std::string run_out(sandlet::Sandbox& sb, const std::string& script) {
  auto r = sb.exec({"sh", "-c", script});
  INFO("script: " << script << "\nstderr: " << r.stderr_data);
  REQUIRE(r.exit_code == 0);
  return r.stdout_data;
}
