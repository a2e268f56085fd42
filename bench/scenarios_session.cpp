// session: N short commands through one shell session (sandlet_session_run), against what a harness does
// otherwise: a persistent shell on the host driven over a pseudo-terminal with an end marker after each
// command (pexpect-style; no sandbox at all), and a fresh `sh -c` exec per command in the same sandbox
// (no state kept). Also the cost of a terminal: an exec with `tty` against a plain one.
#include "capi.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "scenarios.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstring>
#include <optional>

namespace bench {
namespace json = boost::json;

namespace {

constexpr const char *kCommand = "echo hi";
constexpr const char *kProgram = "/bin/true";

// A host `sh` on a new pseudo-terminal with echo off, fed one command at a time; each is followed by a
// marker line whose arrival ends it (what pexpect-based agent harnesses do with a local shell).
class HostPtyShell final {
 public:
  HostPtyShell() {
    struct termios raw {};
    cfmakeraw(&raw);
    raw.c_lflag &= ~ECHO;
    pid_ = forkpty(&master_, nullptr, &raw, nullptr);
    if (pid_ < 0) throw BenchError(std::string("forkpty: ") + std::strerror(errno));
    if (pid_ == 0) {
      execl("/bin/sh", "sh", static_cast<char *>(nullptr));
      _exit(127);
    }
    run("stty -echo");
  }
  ~HostPtyShell() {
    ::kill(pid_, SIGKILL);
    int st;
    ::waitpid(pid_, &st, 0);
    ::close(master_);
  }
  HostPtyShell(const HostPtyShell &) = delete;
  HostPtyShell &operator=(const HostPtyShell &) = delete;

  std::uint64_t run(const std::string &cmd) {
    const auto t0 = now_ns();
    const std::string line = cmd + "; echo __end_$?__\n";
    if (::write(master_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      throw BenchError("host pty shell: short write");
    std::string seen;
    char buf[4096];
    while (seen.find("__end_") == std::string::npos || seen.find("__", seen.find("__end_") + 6) == std::string::npos) {
      pollfd p{master_, POLLIN, 0};
      if (::poll(&p, 1, 10000) <= 0) throw BenchError("host pty shell: no marker within 10 s");
      const ssize_t n = ::read(master_, buf, sizeof buf);
      if (n <= 0) throw BenchError("host pty shell: ended");
      seen.append(buf, static_cast<size_t>(n));
    }
    return now_ns() - t0;
  }

 private:
  int master_ = -1;
  pid_t pid_ = -1;
};

class Session final {
 public:
  explicit Session(const Sandbox &sb) { check(sandlet_session_open(sb.get(), nullptr, &s_), "session open"); }
  ~Session() { sandlet_session_close(s_); }
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;
  std::uint64_t run(const char *cmd) {
    const auto t0 = now_ns();
    sandlet_exec_result_t *r = nullptr;
    check(sandlet_session_run(s_, cmd, 60, &r), "session run");
    const int code = sandlet_exec_result_exit_code(r);
    sandlet_exec_result_delete(r);
    if (code != 0) throw BenchError("session run: exit code " + std::to_string(code));
    return now_ns() - t0;
  }

 private:
  sandlet_session_t *s_ = nullptr;
};

std::uint64_t exec_timed(const Sandbox &sb, const std::vector<const char *> &argv, bool tty) {
  std::vector<const char *> args = argv;
  args.push_back(nullptr);
  sandlet_exec_options_t o = SANDLET_EXEC_OPTIONS_INIT;
  o.argv = args.data();
  o.tty = tty ? 1 : 0;
  const auto t0 = now_ns();
  sandlet_exec_result_t *r = nullptr;
  check(sandlet_sandbox_exec(sb.get(), &o, &r), "exec");
  const int code = sandlet_exec_result_exit_code(r);
  sandlet_exec_result_delete(r);
  if (code != 0) throw BenchError("exec: exit code " + std::to_string(code));
  return now_ns() - t0;
}

}  // namespace

json::object scenario_session(const Context &ctx) {
  Runtime rt(ctx.root, ctx.opt.workers, ctx.opt.warm_pool);
  const Spec spec(ctx.rootfs);
  Sandbox sb = create_sandbox(rt.get(), spec);
  const std::size_t n = iterations_of(ctx);
  json::object out;
  {
    // A builtin (the shell alone) and a program (a fork and exec in the sandbox per command).
    Session session(sb);
    std::optional<HostPtyShell> host;
    if (ctx.opt.peer) host.emplace();
    for (const char *cmd : {kCommand, kProgram}) {
      TimedOp peer;
      if (host) peer = [&](unsigned) { return host->run(cmd); };
      const PairedRun r = run_paired([&](unsigned) { return session.run(cmd); }, peer, n, 1, ctx.opt.warmup);
      json::object row;
      put_latency(row, summarize(r.ours_ns), r.ours_throughput());
      row["command"] = cmd;
      if (host) {
        row["peer"] = peer_json("host-sh-over-pty", "sh on a host pty, marker after each command", summarize(r.peer_ns),
                                r.peer_throughput());
        row["ratio_vs_peer"] = round3(paired_ratio_median(r.ours_ns, r.peer_ns));
      }
      if (cmd == kCommand) out = std::move(row);
      else out["program"] = std::move(row);
    }
  }
  // The same command as a fresh exec each time (`sh -c`), and the price of a terminal on an exec.
  const PairedRun fresh = run_paired([&](unsigned) { return exec_timed(sb, {"sh", "-c", kCommand}, false); },
                                     [&](unsigned) { return exec_timed(sb, {"sh", "-c", kCommand}, true); }, n, 1, 0);
  out["exec_sh_c"] = peer_json("exec-sh-c", "sandlet exec sh -c 'echo hi' (no state kept)", summarize(fresh.ours_ns),
                               fresh.ours_throughput());
  out["exec_sh_c_tty"] = peer_json("exec-sh-c-tty", "the same exec with tty", summarize(fresh.peer_ns),
                                   fresh.peer_throughput());
  out["tty_ratio_vs_plain_exec"] = round3(paired_ratio_median(fresh.peer_ns, fresh.ours_ns));
  sb.destroy();
  return out;
}

}  // namespace bench
