// The conformance fixture: host-side observations and the leak check.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "conformance/conformance.hpp"
#include "support/sweep_root.hpp"

extern char** environ;

namespace fs = std::filesystem;

namespace conformance {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool wait_until(const std::function<bool()>& cond, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

namespace {

std::vector<pid_t> host_pids_where(const std::function<bool(pid_t)>& pred) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    if (pred(static_cast<pid_t>(pid))) out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return out;
}

}  // namespace

std::vector<pid_t> host_pids_with_argv(const std::vector<std::string>& argv) {
  std::string want;
  for (const auto& a : argv) want += a + '\0';
  return host_pids_where([&](pid_t pid) { return slurp("/proc/" + std::to_string(pid) + "/cmdline") == want; });
}

std::vector<pid_t> host_pids_in_cgroup(const std::string& id) {
  return host_pids_where([&](pid_t pid) {
    std::istringstream lines(slurp("/proc/" + std::to_string(pid) + "/cgroup"));
    for (std::string line; std::getline(lines, line);) {
      const std::string path = line.substr(line.find(':', line.find(':') + 1) + 1) + "/";
      if (contains(path, "/" + id + "/")) return true;
    }
    return false;
  });
}

std::vector<std::string> cgroup_dirs_named(const std::string& id) {
  std::vector<std::string> out;
  std::function<void(const fs::path&, int)> walk = [&](const fs::path& dir, int depth) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (!e.is_directory(ec) || e.is_symlink(ec)) continue;
      if (e.path().filename() == id) out.push_back(e.path());
      if (depth > 1) walk(e.path(), depth - 1);
    }
  };
  walk("/sys/fs/cgroup", 3);
  return out;
}

std::vector<std::string> mount_lines() {
  std::vector<std::string> out;
  std::istringstream lines(slurp("/proc/self/mountinfo"));
  for (std::string line; std::getline(lines, line);) out.push_back(line.substr(line.find(' ') + 1));
  return out;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

Sleeper::Sleeper() {
  static std::atomic<int> counter{0};
  seconds = std::to_string(3000000 + (::getpid() % 5000) * 100 + counter++ % 100);
}

int Sleeper::inside(sandlet::Sandbox& sb) const {
  // (busybox has no pgrep.) The counting shell's own cmdline contains the words but is not equal to them.
  auto r = sb.exec({"sh", "-c",
                    "n=0; for p in /proc/[0-9]*; do "
                    "[ \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" = \"sleep " + seconds + " \" ] && n=$((n+1)); "
                    "done; echo $n"});
  if (r.exit_code != 0) return -1;
  return std::atoi(r.stdout_data.c_str());
}

// ---- fixture -------------------------------------------------------------------------------------------

Fixture::Fixture(const sandlet::RuntimeOptions& options) : mounts_before_(mount_lines()) {
  char tmpl[] = "/tmp/sandlet-conformance-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  root_ = tmpl;
  rt_ = sandlet::Runtime::open(root_, options);
}

Fixture::~Fixture() {
  rt_.close();
  test_support::sweep_and_remove_root(root_);
}

sandlet::Spec Fixture::spec() { return sandlet::Spec().backend(backend()).layer(rootfs()); }

sandlet::Sandbox Fixture::create(const sandlet::Spec& s) {
  auto sb = rt_.create(s);
  track(sb.id());
  return sb;
}

void Fixture::check_no_leaks() {
  // Sandboxes this root holds now, also those the test did not create itself (a warm pool's).
  for (const auto& id : test_support::sandbox_ids_under(root_)) track(id);
  rt_.close();
  {
    sandlet::RuntimeOptions o;
    o.disable_warm_pool = true;
    auto sweeper = sandlet::Runtime::open(root_, o);
    sweeper.gc();
    for (const auto& info : sweeper.list()) FAIL_CHECK("sandbox left listed: " << info.id << " " << info.state);
  }
  std::set<std::string> ids(ids_.begin(), ids_.end());
  for (const auto& id : ids) {
    INFO("sandbox " << id);
    CHECK(wait_until([&] { return host_pids_in_cgroup(id).empty(); }, 10));
    CHECK(wait_until([&] { return cgroup_dirs_named(id).empty(); }, 10));
  }
  // Mounts: only lines that name this root or one of its sandboxes (other processes mount things too).
  const auto ours = [&] {
    std::vector<std::string> added;
    std::vector<std::string> now = mount_lines();
    for (const auto& line : now) {
      if (std::find(mounts_before_.begin(), mounts_before_.end(), line) != mounts_before_.end()) continue;
      bool mine = contains(line, root_);
      for (const auto& id : ids) mine = mine || contains(line, id);
      if (mine) added.push_back(line);
    }
    return added;
  };
  if (!wait_until([&] { return ours().empty(); }, 5))
    for (const auto& line : ours()) FAIL_CHECK("mount left: " << line);
  // Files: nothing under the root (the sandboxes directory may link to tmpfs state) names a sandbox.
  std::error_code ec;
  std::vector<fs::path> dirs{root_};
  const fs::path state = fs::read_symlink(root_ + "/sandboxes", ec);
  if (!ec) dirs.push_back(state);
  for (const auto& dir : dirs) {
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      const std::string name = it->path().filename();
      for (const auto& id : ids) {
        if (!contains(name, id)) continue;
        std::string inside;
        for (const auto& e : fs::directory_iterator(it->path(), ec)) inside += " " + e.path().filename().string();
        FAIL_CHECK("file left: " << it->path() << (inside.empty() ? "" : " holding" + inside));
      }
    }
  }
  rt_ = sandlet::Runtime::open(root_);
}

// ---- helpers -------------------------------------------------------------------------------------------

sandlet::ExecResult sh(sandlet::Sandbox& sb, const std::string& script, double timeout_s) {
  sandlet::ExecOptions o({"sh", "-c", script});
  o.timeout_s = timeout_s;
  return sb.exec(o);
}

std::string out(sandlet::Sandbox& sb, const std::string& script) {
  auto r = sh(sb, script);
  INFO("script: " << script << "\nstderr: " << r.stderr_data);
  REQUIRE(r.exit_code == 0);
  return r.stdout_data;
}

sandlet::Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const sandlet::Error& e) {
    return e;
  }
  FAIL("expected a sandlet::Error, the call succeeded");
  throw std::logic_error("unreachable");
}

std::string code_name(const sandlet::Error& e) { return e.code_name(); }

// ---- owner processes -----------------------------------------------------------------------------------

Owner::Owner(const std::vector<std::string>& args) {
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  std::vector<std::string> all{self_exe(), "--owner"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  const int rc = ::posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(p[1]);
  out_ = p[0];
  REQUIRE(rc == 0);
}

Owner::~Owner() {
  kill9();
  if (out_ >= 0) ::close(out_);
}

std::string Owner::line(double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    const size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      std::string l = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return l;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) return "";
    pollfd pfd{out_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    char chunk[512];
    const ssize_t n = ::read(out_, chunk, sizeof chunk);
    if (n <= 0) return "";
    buf_.append(chunk, static_cast<size_t>(n));
  }
}

int Owner::wait() {
  int status = 0;
  if (pid_ > 0) ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

void Owner::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

}  // namespace conformance
