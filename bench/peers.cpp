#include "peers.hpp"

#include "common.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <thread>

namespace bench {
namespace fs = std::filesystem;

std::string find_bwrap() {
  const char *path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const fs::path p = fs::path(dir.empty() ? "." : dir) / "bwrap";
    if (access(p.c_str(), X_OK) == 0) return p.string();
  }
  throw BenchError("bwrap not found on PATH (install bubblewrap, or pass --no-peer)");
}

std::string bwrap_version() { return capture_output(find_bwrap() + " --version"); }

Command bwrap_command(const fs::path &rootfs, const std::vector<std::string> &cmd) {
  std::vector<std::string> args{find_bwrap(), "--unshare-all", "--die-with-parent", "--ro-bind", rootfs.string(), "/",
                                "--proc",     "/proc",         "--dev",             "/dev"};
  args.insert(args.end(), cmd.begin(), cmd.end());
  return Command(std::move(args));
}

Command host_true() { return Command({"/bin/true"}); }

IdleBwrapFleet::IdleBwrapFleet(const fs::path &rootfs) : cmd_(bwrap_command(rootfs, {"/bin/sleep", "1000000"})) {}

bool IdleBwrapFleet::ready(pid_t pid) {
  for (pid_t d : descendants(pid))
    if (proc_comm(d) == "sleep") return true;
  return false;
}

std::vector<std::uint64_t> IdleBwrapFleet::start(std::size_t n, unsigned in_flight) {
  std::vector<std::uint64_t> latencies;
  latencies.reserve(n);
  struct Starting {
    pid_t pid;
    std::uint64_t t0;
  };
  std::vector<Starting> starting;
  std::size_t spawned = 0;
  const auto deadline_ns = 30'000'000'000ull;
  while (latencies.size() < n) {
    throw_if_stopped();
    while (starting.size() < std::max(1u, in_flight) && spawned < n) {
      const auto t0 = now_ns();
      const pid_t pid = cmd_.spawn();
      pids_.push_back(pid);  // owned from here on: kill_all() reaps it whatever happens
      starting.push_back({pid, t0});
      ++spawned;
    }
    for (auto it = starting.begin(); it != starting.end();) {
      int status;
      if (waitpid(it->pid, &status, WNOHANG) == it->pid) {
        std::erase(pids_, it->pid);
        throw BenchError("idle bwrap " + describe_status(status) + " before it was ready: " + cmd_.str());
      }
      if (ready(it->pid)) {
        latencies.push_back(now_ns() - it->t0);
        it = starting.erase(it);
      } else if (now_ns() - it->t0 > deadline_ns) {
        throw BenchError("idle bwrap not ready after 30 s: " + cmd_.str());
      } else {
        ++it;
      }
    }
    if (!starting.empty()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return latencies;
}

void IdleBwrapFleet::kill_all() noexcept {
  // Kill what runs inside each sandbox (bwrap's pid-1 and the sleep), not the outer bwrap: that one
  // then reaps its child and exits by itself, so nothing is orphaned as a zombie for init to collect.
  for (pid_t pid : pids_) {
    try {
      for (pid_t d : descendants(pid)) kill(d, SIGKILL);
    } catch (...) {
    }
  }
  const auto deadline = now_ns() + 5'000'000'000ull;
  std::vector<pid_t> left;
  for (pid_t pid : pids_) {
    int status;
    pid_t r;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && now_ns() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (r == 0) left.push_back(pid);
  }
  for (pid_t pid : left) kill_tree(pid);  // a stuck one: kill the outer bwrap too, and reap it
  pids_.clear();
}

}  // namespace bench
