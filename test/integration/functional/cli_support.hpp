// Shared by the CLI's integration tests (cli_test.cpp, cli_run_test.cpp): one `sandlet` process with its
// standard streams on pipes, and helpers to read what it printed.
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstring>
#include <set>

#include <boost/json.hpp>

#include "integration/harness.hpp"

extern char** environ;

namespace cli_test {

struct CliResult {
  int status = -1;  // the exit status, or 128+N when the CLI died by signal N (as a shell reports it)
  int signal = 0;   // N when it died by a signal
  std::string out, err;
  double seconds = 0;
};

// What a CLI process gets besides its arguments.
struct Input {
  std::string data;              // written to the CLI's stdin
  bool close = true;             // false: the stdin pipe stays open (no EOF) until the CLI has exited
  std::vector<std::string> env;  // "K=V" added to the CLI's environment
};

// One `sandlet --root <harness root> ARGS...` process with its three standard streams on pipes. It runs
// without a shell: stdout and stderr are collected apart, stdin is ours to feed (or to keep open), and a
// signal can be sent to the CLI itself.
class CliProcess {
 public:
  CliProcess(Harness& h, const std::vector<std::string>& args, Input input = {}) : input_(std::move(input)) {
    std::vector<std::string> argv_s = {SANDLET_CLI, "--root", h.root()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<std::string> env_s;
    for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
    env_s.insert(env_s.end(), input_.env.begin(), input_.env.end());
    // (Everything the child needs is built before fork: this process has other threads.)
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    int in[2], out[2], err[2];
    REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
    start_ = std::chrono::steady_clock::now();
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(126);
    }
    // Our copy of the stdin read end stays open until the end: a write never raises SIGPIPE here, even
    // when the CLI does not read its stdin.
    stdin_read_ = in[0];
    stdin_ = in[1];
    ::fcntl(stdin_, F_SETFL, O_NONBLOCK);
    ::close(out[1]);
    ::close(err[1]);
    out_ = out[0];
    err_ = err[0];
  }
  ~CliProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    for (int fd : {stdin_, stdin_read_, out_, err_})
      if (fd >= 0) ::close(fd);
  }
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Feeds stdin and reads stdout and stderr until both end, then reaps the CLI. After `stdout_keep` bytes of
  // stdout our read end is closed (like `| head -c N`). A CLI still running after `limit` seconds is killed
  // and the check fails.
  CliResult wait(double limit = 20, size_t stdout_keep = SIZE_MAX) {
    CliResult r;
    size_t written = 0;
    const auto deadline = start_ + std::chrono::duration<double>(limit);
    bool overdue = false;
    while (out_ >= 0 || err_ >= 0) {
      if (stdin_ >= 0 && written == input_.data.size() && input_.close) close_fd(stdin_);
      pollfd p[3];
      int n = 0;
      for (int fd : {out_, err_}) p[n++] = {fd, POLLIN, 0};
      const bool feeding = stdin_ >= 0 && written < input_.data.size();
      p[n++] = {feeding ? stdin_ : -1, POLLOUT, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        overdue = true;
        ::kill(pid_, SIGKILL);
        break;
      }
      if (::poll(p, n, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
      if (feeding && (p[2].revents & (POLLOUT | POLLERR))) {
        const ssize_t w = ::write(stdin_, input_.data.data() + written, input_.data.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
      }
      for (int i = 0; i < 2; ++i) {
        if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        int& fd = i == 0 ? out_ : err_;
        std::string& sink = i == 0 ? r.out : r.err;
        char buf[65536];
        const ssize_t got = ::read(fd, buf, sizeof buf);
        if (got > 0) sink.append(buf, static_cast<size_t>(got));
        if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) close_fd(fd);
        if (i == 0 && fd >= 0 && r.out.size() >= stdout_keep) {
          r.out.resize(stdout_keep);
          close_fd(fd);
        }
      }
    }
    int st = 0;
    ::waitpid(pid_, &st, 0);
    reaped_ = true;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (WIFEXITED(st)) r.status = WEXITSTATUS(st);
    if (WIFSIGNALED(st)) {
      r.signal = WTERMSIG(st);
      r.status = 128 + r.signal;
    }
    close_fd(stdin_);
    INFO("stdout: " << r.out.substr(0, 2000) << "\nstderr: " << r.err);
    CHECK_FALSE(overdue);  // the CLI did not end within `limit` seconds
    return r;
  }

 private:
  static void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  Input input_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int stdin_ = -1, stdin_read_ = -1, out_ = -1, err_ = -1;
  std::chrono::steady_clock::time_point start_;
};

inline CliResult cli(Harness& h, const std::vector<std::string>& args, Input input = {}) {
  CliProcess p(h, args, std::move(input));
  return p.wait();
}

// `run` with the test root filesystem as its layer.
inline CliResult run(Harness& h, std::vector<std::string> args, Input input = {}) {
  args.insert(args.begin(), {"run", "--layer", SANDLET_TEST_ROOTFS});
  return cli(h, args, std::move(input));
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A sleep duration no other process on the host uses (30 s plus a fraction made of our pid), so that its
// process can be found from the host by its command line.
inline std::string unique_seconds(int n) { return std::to_string(30 + n) + "." + std::to_string(::getpid()); }

// Host pids of the processes whose command line is exactly `argv` (sandboxed processes are visible from the
// host's /proc; a zombie's command line is empty, so it does not count).
inline std::vector<pid_t> host_pids(const std::vector<std::string>& argv) {
  std::string want;
  for (const auto& a : argv) want += a + '\0';
  std::vector<pid_t> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (slurp(e.path().string() + "/cmdline") == want) out.push_back(std::stoi(name));
  }
  return out;
}

// Nothing of the test's sandboxes is left on the host: those whose id the test knows have no directory,
// cgroup (v1 or v2) or uid slot; no sandbox directory at all remains under the root (the runtime removes
// a sandbox's directory only after its cgroups, so this covers `run`'s sandboxes too); no mount of the
// root is in the mount table. No waiting: the CLI's runtime, closed before the CLI exits, waits for the
// reclaims its destroys started. (And no CLI runs before these checks: its sweep would hide a leak.)
inline void expect_nothing_left(Harness& h, const std::vector<std::string>& ids = {}) {
  for (const auto& id : ids) CHECK(h.gone(id));
  CHECK(h.sandbox_dirs().empty());
  CHECK_FALSE(contains(slurp("/proc/self/mountinfo"), h.root()));
  h.check_no_leaks();
}

// A sandbox id as `create` prints it: 12 lowercase hex digits and a newline.
inline std::string expect_id(const CliResult& r) {
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  REQUIRE(r.out.size() == 13);
  REQUIRE(r.out.back() == '\n');
  const std::string id = r.out.substr(0, 12);
  REQUIRE(id.find_first_not_of("0123456789abcdef") == std::string::npos);
  return id;
}

// `ps --json` is read with Boost.JSON: code independent of the CLI's own JSON writer (src/cli/json.cpp).
inline boost::json::value parse_json(const std::string& text) {
  INFO("JSON text: " << text);
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec) FAIL("not JSON: " << ec.message());
  return v;
}

// The string at `key` of a JSON object, "" when absent or not a string.
inline std::string str(const boost::json::value& obj, const char* key) {
  const auto* o = obj.if_object();
  const auto* v = o != nullptr ? o->if_contains(key) : nullptr;
  return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
}

inline std::set<std::string> lines(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.insert(l);
  return out;
}

}  // namespace cli_test
