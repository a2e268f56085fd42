#include "proc.hpp"

#include "common.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

extern char **environ;

namespace bench {
namespace fs = std::filesystem;

Command::Command(std::vector<std::string> args) : args_(std::move(args)) {
  for (auto &a : args_) argv_.push_back(a.data());
  argv_.push_back(nullptr);
}

pid_t Command::spawn() const {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv_[0], &fa, &attr, argv_.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw BenchError("spawn " + args_[0] + ": " + std::strerror(rc));
  return pid;
}

std::uint64_t Command::run_ok() const {
  const auto t0 = now_ns();
  const pid_t pid = spawn();
  const int status = wait_child(pid);
  const auto t = now_ns() - t0;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw BenchError("`" + str() + "` " + describe_status(status));
  return t;
}

std::string Command::str() const {
  std::string s;
  for (const auto &a : args_) {
    if (!s.empty()) s += ' ';
    s += a.find_first_of(" \t'\"") == std::string::npos ? a : "'" + a + "'";
  }
  return s;
}

int wait_child(pid_t pid) {
  int status = 0;
  for (;;) {
    if (waitpid(pid, &status, 0) == pid) return status;
    if (errno == EINTR) continue;
    throw BenchError("waitpid(" + std::to_string(pid) + "): " + std::strerror(errno) +
                     (errno == ECHILD ? " (child reaped by someone else: does the library wait for any child?)" : ""));
  }
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  return "ended with status " + std::to_string(status);
}

namespace {
std::string read_small(const fs::path &p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

std::vector<pid_t> descendants(pid_t root) {
  std::vector<pid_t> out;
  std::vector<pid_t> todo{root};
  std::set<pid_t> seen{root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    std::error_code ec;
    for (fs::directory_iterator it("/proc/" + std::to_string(p) + "/task", ec), end; !ec && it != end;
         it.increment(ec)) {
      std::istringstream children(read_small(it->path() / "children"));
      pid_t c;
      while (children >> c)
        if (seen.insert(c).second) {
          out.push_back(c);
          todo.push_back(c);
        }
    }
  }
  return out;
}

void kill_tree(pid_t pid) noexcept {
  if (pid <= 0) return;
  try {
    // Stop first so nothing forks between listing and killing, then kill the whole listed tree.
    kill(pid, SIGSTOP);
    for (pid_t d : descendants(pid)) kill(d, SIGKILL);
  } catch (...) {
  }
  kill(pid, SIGKILL);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

std::string proc_comm(pid_t pid) {
  std::string s = read_small("/proc/" + std::to_string(pid) + "/comm");
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

std::uint64_t proc_pss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Pss:", 0) == 0) return std::strtoull(line.c_str() + 4, nullptr, 10);
  return 0;
}

std::map<std::string, std::uint64_t> meminfo() {
  std::map<std::string, std::uint64_t> m;
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    m[line.substr(0, colon)] = std::strtoull(line.c_str() + colon + 1, nullptr, 10);
  }
  return m;
}

std::vector<std::string> cgroup_dirs_where(const std::function<bool(const std::string &name)> &match) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::recursive_directory_iterator it("/sys/fs/cgroup", fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (it.depth() > 6) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_directory(ec) || it->is_symlink(ec)) continue;
    if (match(it->path().filename().string())) {
      out.push_back(it->path().string());
      it.disable_recursion_pending();  // what is below belongs to the match
    }
  }
  return out;
}

std::vector<std::string> cgroups_matching(const std::set<std::string> &ids) {
  if (ids.empty()) return {};
  return cgroup_dirs_where([&ids](const std::string &name) {
    for (const auto &id : ids)
      if (name.find(id) != std::string::npos) return true;
    return false;
  });
}

std::set<pid_t> cgroup_pids(const std::vector<std::string> &dirs) {
  std::set<pid_t> pids;
  for (const auto &d : dirs) {
    std::error_code ec;
    std::vector<fs::path> all{d};
    for (fs::recursive_directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec))
      if (it->is_directory(ec)) all.push_back(it->path());
    for (const auto &p : all) {
      std::istringstream procs(read_small(p / "cgroup.procs"));
      pid_t pid;
      while (procs >> pid) pids.insert(pid);
    }
  }
  return pids;
}

std::vector<std::string> mounts_under(const std::string &path) {
  std::vector<std::string> out;
  std::string prefix = path;
  while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, mountpoint;
    fields >> id >> parent >> devno >> root >> mountpoint;
    if (mountpoint == prefix || mountpoint.rfind(prefix + "/", 0) == 0) out.push_back(mountpoint);
  }
  return out;
}

std::string capture_output(const std::string &shell_command) {
  std::string out;
  if (FILE *f = popen((shell_command + " 2>/dev/null").c_str(), "r")) {
    char buf[512];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    pclose(f);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace bench
