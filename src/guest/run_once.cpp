#include "guest/run_once.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctime>

#include "guest/command.hpp"
#include "guest/server.hpp"
#include "guest/setup.hpp"
#include "guest/spawn.hpp"
#include "guest/users.hpp"

namespace sandlet::guest {
namespace {

[[noreturn]] void report_and_exit(proto::InitMsg type, const std::string& payload) {
  send_frame_blocking(kSetupFd, type, payload);
  _exit(0);
}

[[noreturn]] void report_error_and_exit(const Status& s) {
  proto::ErrorReply r;
  r.code = s.code;
  r.err_no = s.err_no;
  r.message = s.message;
  report_and_exit(proto::InitMsg::kError, r.encode());
}

// The earliest of the command's timeout and the sandbox's max lifetime (0 = none), and which one it is.
struct Deadline {
  uint64_t ns = 0;
  bool is_timeout = false;
};

Deadline deadline_for(const proto::InitConfig& cfg, uint64_t start) {
  Deadline d;
  if (cfg.run_once.timeout_ms) d = {deadline_after(start, cfg.run_once.timeout_ms), true};
  if (cfg.max_lifetime_ms) {
    uint64_t lifetime = deadline_after(start, cfg.max_lifetime_ms);
    if (d.ns == 0 || lifetime < d.ns) d = {lifetime, false};
  }
  return d;
}

// Reaps every exited child (the command's orphans are ours too); true once `main` was reaped.
bool reap(pid_t main, int* main_status) {
  bool done = false;
  int status;
  for (pid_t p; (p = waitpid(-1, &status, WNOHANG | __WALL)) > 0;) {
    if (p == main) {
      *main_status = status;
      done = true;
    }
  }
  return done;
}

}  // namespace

void run_once(const proto::InitConfig& cfg, const int stdio[3], const struct rlimit* child_nofile) {
  const proto::RunOnce& cmd = cfg.run_once;
  const std::string& user = cmd.user.empty() ? cfg.user : cmd.user;
  UserDb users;
  Identity id;
  if (Status st = users.resolve(user, &id); !st.ok()) report_error_and_exit(st);
  CommandVectors vectors;
  vectors.build(cmd.argv, cmd.env.empty() ? cfg.env : cmd.env, id);
  const std::string cwd = !cmd.cwd.empty() ? cmd.cwd : cfg.workdir.empty() ? std::string("/") : cfg.workdir;

  SpawnSpec sp = vectors.spawn_spec(id, cwd);
  // -1 keeps the init's own 0/1/2: the sandbox's /dev/null. (Into the init's cgroup: the sandbox's.)
  sp.stdin_fd = stdio[0];
  sp.stdout_fd = stdio[1];
  sp.stderr_fd = stdio[2];
  sp.nofile = child_nofile;
  SpawnError se;
  const uint64_t start = now_ns();
  const pid_t pid = spawn_process(sp, &se);
  // Only the command keeps the host's descriptors: a reader of its output sees EOF when it is done.
  for (int i = 0; i < 3; ++i)
    if (stdio[i] >= 0) close(stdio[i]);
  if (pid < 0) report_error_and_exit(spawn_failure_status(se, vectors, cwd, user.empty() ? "root" : user, "run"));

  const Deadline deadline = deadline_for(cfg, start);
  sigset_t wanted;  // blocked since start-up (main), so they queue for sigtimedwait
  sigemptyset(&wanted);
  sigaddset(&wanted, SIGCHLD);
  sigaddset(&wanted, SIGTERM);
  sigaddset(&wanted, SIGINT);
  int status = 0;
  proto::ExitStatus exit;
  bool killed = false;
  while (!reap(pid, &status)) {
    const uint64_t now = now_ns();
    if (!killed && deadline.ns != 0 && now >= deadline.ns) {
      // PID 1's kill(-1) reaches every other process of the sandbox: the whole tree, daemons included.
      kill(-1, SIGKILL);
      killed = true;
      if (deadline.is_timeout) exit.flags |= proto::kExitTimedOut;
      continue;
    }
    struct timespec wait = {};
    const bool bounded = !killed && deadline.ns != 0;
    if (bounded) {
      const uint64_t left = deadline.ns - now;
      wait.tv_sec = static_cast<time_t>(left / 1000000000u);
      wait.tv_nsec = static_cast<long>(left % 1000000000u);
    }
    siginfo_t info;
    const int sig = sigtimedwait(&wanted, &info, bounded ? &wait : nullptr);
    if ((sig == SIGTERM || sig == SIGINT) && !killed) {
      kill(-1, SIGKILL);  // asked to stop: the command ends killed
      killed = true;
    }
  }
  exit.run_ns = now_ns() - start;
  if (WIFEXITED(status)) {
    exit.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit.exit_code = -1;
    exit.signal = WTERMSIG(status);
  }
  report_and_exit(proto::InitMsg::kRunExit, exit.encode());
}

}  // namespace sandlet::guest
