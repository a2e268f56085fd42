// Exec lifecycle: spawn into a per-exec cgroup, forward output with limits and backpressure, feed
// stdin, deliver signals, enforce the timeout, and report the exit once the main process has exited
// and both output pipes reached EOF. Killing an exec always kills its whole tree.
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "guest/toolkit.hpp"
#include "guest/command.hpp"
#include "guest/server.hpp"
#include "guest/spawn.hpp"

namespace sandlet::guest {
namespace {

void close_pair(int p[2]) {
  if (p[0] >= 0) close(p[0]);
  if (p[1] >= 0) close(p[1]);
  p[0] = p[1] = -1;
}

// A new pseudo-terminal of the sandbox's own devpts: term[0] the master (non-blocking), term[1] the slave
// (TIOCGPTPEER: no path lookup the sandbox could redirect), owned by the command's user so that it may
// reopen its terminal (tty, sudo) as on a login terminal.
Status open_pty(const Identity& id, const proto::TermSize& size, int term[2]) {
  term[0] = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  if (term[0] < 0) return errno_status(errno, "open /dev/ptmx for the exec's terminal");
  int unlock = 0;
  struct winsize ws = {};
  ws.ws_row = size.rows;
  ws.ws_col = size.cols;
  if (ioctl(term[0], TIOCSPTLCK, &unlock) != 0 || ioctl(term[0], TIOCSWINSZ, &ws) != 0 ||
      (term[1] = ioctl(term[0], TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
    Status st = errno_status(errno, "set up the exec's terminal");
    close_pair(term);
    return st;
  }
  if (fchown(term[1], id.uid, static_cast<gid_t>(-1)) != 0) {
    Status st = errno_status(errno, "give the exec's terminal to its user");
    close_pair(term);
    return st;
  }
  return Status();
}

// Pipes for stdout, stderr and (has_stdin) stdin, or one terminal standing for all three; the agent's ends
// non-blocking. CLOEXEC everywhere: the child's dup2 onto 0/1/2 clears it for the copies it keeps.
Status open_exec_stdio(bool pty, bool has_stdin, const Identity& id, const proto::TermSize& size, int outp[2],
                       int errp[2], int inp[2]) {
  if (pty) {
    if (Status st = open_pty(id, size, outp); !st.ok()) return st;
    // The master twice: read for output, written for input (two epoll registrations need two descriptors).
    inp[0] = -1;
    inp[1] = fcntl(outp[0], F_DUPFD_CLOEXEC, 3);
    if (inp[1] < 0) {
      Status st = errno_status(errno, "set up the exec's terminal");
      close_pair(outp);
      return st;
    }
    return Status();
  }
  if (pipe2(outp, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0 || (has_stdin && pipe2(inp, O_CLOEXEC) != 0) ||
      fcntl(outp[0], F_SETFL, O_NONBLOCK) != 0 || fcntl(errp[0], F_SETFL, O_NONBLOCK) != 0 ||
      (has_stdin && fcntl(inp[1], F_SETFL, O_NONBLOCK) != 0)) {
    Status st = errno_status(errno, "create exec pipes");
    close_pair(outp);
    close_pair(errp);
    close_pair(inp);
    return st;
  }
  return Status();
}

}  // namespace

void Server::exec_start(Conn* c, std::string_view payload) {
  proto::ExecRequest req;
  if (!proto::ExecRequest::decode(payload, &req)) {
    conn_reject(c, "malformed exec request");
    return;
  }
  const std::string& user = req.user.empty() ? cfg_.user : req.user;
  Identity id;
  if (Status st = users_.resolve(user, &id); !st.ok()) {
    reply_error(c, st);
    return;
  }

  // The request's env is the complete environment; HOME/USER come from passwd only when absent.
  const std::vector<std::string>& env = req.env.empty() ? cfg_.env : req.env;
  ToolkitLaunch toolkit;
  if (req.flags & proto::kExecToolkit) {
    if (Status st = toolkit_launch(req.argv, env, &toolkit); !st.ok()) {
      reply_error(c, st);
      return;
    }
    cmd_scratch_.build(toolkit.argv, toolkit.env, id);
  } else {
    cmd_scratch_.build(req.argv, env, id);
  }
  const std::string& cwd = req.cwd.empty() ? (cfg_.workdir.empty() ? std::string("/") : cfg_.workdir) : req.cwd;

  const bool has_stdin = req.flags & proto::kExecHasStdin;
  const bool pty = req.flags & proto::kExecPty;
  int outp[2] = {-1, -1}, errp[2] = {-1, -1}, inp[2] = {-1, -1};
  if (Status st = open_exec_stdio(pty, has_stdin, id, req.term, outp, errp, inp); !st.ok()) {
    reply_error(c, st);
    return;
  }

  CgroupSlot cg;
  if (cgroups_.enabled()) {
    if (Status st = cgroups_.acquire(&cg); !st.ok()) {
      close_pair(outp);
      close_pair(errp);
      close_pair(inp);
      reply_error(c, st);
      return;
    }
  }

  SpawnSpec sp = cmd_scratch_.spawn_spec(id, cwd);
  sp.stdin_fd = pty ? outp[1] : has_stdin ? inp[0] : -1;
  sp.stdout_fd = outp[1];
  sp.stderr_fd = pty ? outp[1] : errp[1];
  sp.controlling_tty = pty;
  sp.cgroup_fd = cg.dirfd;
  sp.nofile = child_nofile_;
  sp.exec_fd = toolkit.exec_fd;
  sp.program_fd = toolkit.program_fd;
  SpawnError se;
  uint64_t start = now_ns();
  pid_t pid = spawn_process(sp, &se);
  close(outp[1]);
  if (errp[1] >= 0) close(errp[1]);
  if (inp[0] >= 0) close(inp[0]);
  if (pid < 0) {
    close(outp[0]);
    if (errp[0] >= 0) close(errp[0]);
    if (inp[1] >= 0) close(inp[1]);
    cgroups_.release(&cg);  // the failed child left nothing running behind
    reply_error(c, spawn_failure_status(se, cmd_scratch_, cwd, user.empty() ? "root" : user, "exec"));
    return;
  }

  Exec* e = new Exec;
  e->conn = c;
  e->pid = pid;
  e->pipe_fd[0] = outp[0];
  e->pipe_fd[1] = errp[0];
  e->stdin_fd = inp[1];
  e->pty = pty;
  e->start_ns = start;
  e->limit = req.output_limit;
  e->req_flags = req.flags;
  e->cg = cg;
  for (int i = 0; i < 2; ++i) {
    if (e->pipe_fd[i] < 0) continue;
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.ptr = &e->pipe_watch[i];
    epoll_ctl(ep_, EPOLL_CTL_ADD, e->pipe_fd[i], &ev);
  }
  execs_.push_back(e);
  c->exec = e;
  c->state = Conn::State::kExec;
  if (req.timeout_ms) {
    e->deadline_ns = deadline_after(start, req.timeout_ms);
    want_deadline(e->deadline_ns);
  }
  reply(c, proto::AgentMsg::kStarted, proto::encode_u32(static_cast<uint32_t>(pid)));
  conn_flush(c);
}

// `action` is one classify() allows here (frame_parse.hpp: stdin only when the exec takes it, before its end).
void Server::exec_frame(Conn* c, Action action, std::string_view payload) {
  Exec* e = c->exec;
  if (!e) return;
  switch (action) {
    case Action::kStdin:
      if (e->stdin_fd < 0) return;  // the command closed its stdin or exited: drop the bytes
      e->stdin_buf.append(payload.data(), payload.size());
      exec_stdin_flush(e);
      // Stop taking frames until the command consumed its input (resumed from exec_stdin_writable).
      if (e->stdin_fd >= 0 && e->stdin_buf.size() >= kStdinHigh) c->in_paused = true;
      return;
    case Action::kStdinEof:
      e->stdin_eof = true;
      if (e->stdin_buf.empty()) exec_stdin_close(e);
      return;
    case Action::kSignal: {
      int sig = 0;
      if (!decode_signal(payload, &sig)) break;
      exec_signal(e, sig);
      return;
    }
    case Action::kResize: {
      proto::TermSize size;
      if (!proto::TermSize::decode(payload, &size)) {
        conn_reject(c, "bad terminal size");
        return;
      }
      exec_resize(e, size);
      return;
    }
    default: break;
  }
  conn_reject(c, "bad signal number");  // (the only payload classify() leaves unchecked)
}

// The kernel tells the terminal's foreground process group (SIGWINCH). Not a terminal, or closed: ignored.
void Server::exec_resize(Exec* e, const proto::TermSize& size) {
  const int fd = !e->pty ? -1 : e->pipe_fd[0] >= 0 ? e->pipe_fd[0] : e->stdin_fd;
  if (fd < 0) return;
  struct winsize ws = {};
  ws.ws_row = size.rows;
  ws.ws_col = size.cols;
  ioctl(fd, TIOCSWINSZ, &ws);
}

void Server::exec_pipe_readable(Exec* e, int stream) {
  static char discard[64u << 10];
  if (e->pipes_paused) return;  // an event of this batch that arrived before the pause
  for (int round = 0; round < 16 && e->pipe_fd[stream] >= 0; ++round) {
    int fd = e->pipe_fd[stream];
    Conn* c = e->conn;
    ssize_t n;
    size_t want;
    if (c && e->count[stream] < e->limit) {
      want = static_cast<size_t>(std::min<uint64_t>(kPipeChunk, e->limit - e->count[stream]));
      char* p = c->out.reserve_tail(proto::kHeaderSize + want);
      n = read(fd, p + proto::kHeaderSize, want);
      if (n > 0) {
        proto::put_header(p, stream ? proto::AgentMsg::kStderr : proto::AgentMsg::kStdout, static_cast<uint32_t>(n));
        c->out.commit(proto::kHeaderSize + static_cast<size_t>(n));
        e->count[stream] += static_cast<uint64_t>(n);
      }
    } else {
      // Past the limit (or nobody listening): keep draining so the command never blocks on a full pipe.
      want = sizeof discard;
      n = read(fd, discard, want);
      if (n > 0 && c) {
        e->exit_flags |= stream ? proto::kExitStderrTruncated : proto::kExitStdoutTruncated;
        if ((e->req_flags & proto::kExecKillOnOutputLimit) && !(e->exit_flags & proto::kExitOutputLimitKilled)) {
          e->exit_flags |= proto::kExitOutputLimitKilled;
          exec_kill_tree(e);
        }
      }
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) {
      exec_pipe_close(e, stream);  // may finish the exec (and queue kExit)
      break;
    }
    if (static_cast<size_t>(n) < want) break;
    if (c && c->out.size() >= kOutHigh) break;
  }
  if (e->dead) return;
  Conn* c = e->conn;
  if (!c) return;
  conn_flush(c);
  if (!c->dead && c->exec == e && c->out.size() >= kOutHigh) exec_pause_pipes(e, true);
}

void Server::exec_pipe_close(Exec* e, int stream) {
  close(e->pipe_fd[stream]);  // also leaves the epoll set
  e->pipe_fd[stream] = -1;
  exec_maybe_finish(e);
}

// Backpressure: while the host reads slowly, the pipes leave the epoll set (a paused pipe that hangs up
// would otherwise report EPOLLHUP forever); the command then blocks on its full pipe.
void Server::exec_pause_pipes(Exec* e, bool pause) {
  if (e->pipes_paused == pause) return;
  e->pipes_paused = pause;
  for (int i = 0; i < 2; ++i) {
    if (e->pipe_fd[i] < 0) continue;
    if (pause) {
      epoll_ctl(ep_, EPOLL_CTL_DEL, e->pipe_fd[i], nullptr);
    } else {
      struct epoll_event ev = {};
      ev.events = EPOLLIN;
      ev.data.ptr = &e->pipe_watch[i];
      epoll_ctl(ep_, EPOLL_CTL_ADD, e->pipe_fd[i], &ev);
    }
  }
}

void Server::exec_stdin_flush(Exec* e) {
  while (!e->stdin_buf.empty()) {
    ssize_t n = write(e->stdin_fd, e->stdin_buf.data(), e->stdin_buf.size());
    if (n > 0) {
      e->stdin_buf.consume(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      if (!e->stdin_registered) {
        struct epoll_event ev = {};
        ev.events = EPOLLOUT;
        ev.data.ptr = &e->stdin_watch;
        epoll_ctl(ep_, EPOLL_CTL_ADD, e->stdin_fd, &ev);
        e->stdin_registered = true;
      }
      return;
    }
    exec_stdin_close(e);  // EPIPE: the command closed its stdin; later bytes are dropped
    return;
  }
  if (e->stdin_registered) {
    epoll_ctl(ep_, EPOLL_CTL_DEL, e->stdin_fd, nullptr);
    e->stdin_registered = false;
  }
  if (e->stdin_eof) exec_stdin_close(e);
}

void Server::exec_stdin_close(Exec* e) {
  if (e->stdin_fd >= 0) close(e->stdin_fd);
  e->stdin_fd = -1;
  e->stdin_registered = false;
  e->stdin_buf.clear();
  e->stdin_buf.trim(0);
}

void Server::exec_stdin_writable(Exec* e) {
  if (e->stdin_fd < 0) return;
  exec_stdin_flush(e);
  exec_resume_conn(e);
}

// Only called from event handlers, never while the connection's frames are being processed.
void Server::exec_resume_conn(Exec* e) {
  Conn* c = e->conn;
  if (!c || c->dead || !c->in_paused) return;
  if (e->stdin_fd >= 0 && e->stdin_buf.size() >= kStdinHigh / 2) return;
  c->in_paused = false;
  conn_process_frames(c);
  if (!c->dead) conn_read(c);
}

void Server::exec_exited(Exec* e, int status) {
  e->exited = true;
  e->wait_status = status;
  bool stragglers = !e->cg.valid() || ExecCgroups::populated(e->cg);
  if (stragglers && (e->req_flags & proto::kExecKeepBackground) && e->cg.valid()) {
    exec_detach_background(e);
    return;
  }
  // Stragglers (`sleep 100 &`) die with the main process: an exec owns every process it started.
  // (An empty group is not killed, so that it stays reusable; see cgroups.hpp.)
  if (stragglers) exec_kill_tree(e);
  exec_stdin_close(e);
  exec_resume_conn(e);
  exec_maybe_finish(e);
}

// keep_background: the command is done when its main process exits; what it left running (a server
// started with `&`) lives on in the exec's cgroup, whose output now drains into the void. The group is
// never reused and is removed once empty.
void Server::exec_detach_background(Exec* e) {
  e->cg.killed = true;
  e->deadline_ns = 0;  // the timeout bounded the command, not what it left behind
  for (int s = 0; s < 2 && !e->dead; ++s)
    if (e->pipe_fd[s] >= 0 && !e->pipes_paused) exec_pipe_readable(e, s);
  if (e->dead) return;
  exec_stdin_close(e);
  if (Conn* c = e->conn) {
    e->conn = nullptr;
    c->exec = nullptr;
    reply(c, proto::AgentMsg::kExit, exit_status(e).encode());
    conn_finish(c);
  }
  exec_pause_pipes(e, false);
  exec_maybe_finish(e);
}

proto::ExitStatus Server::exit_status(const Exec* e) const {
  proto::ExitStatus xs;
  if (WIFEXITED(e->wait_status)) {
    xs.exit_code = WEXITSTATUS(e->wait_status);
  } else if (WIFSIGNALED(e->wait_status)) {
    xs.exit_code = -1;
    xs.signal = WTERMSIG(e->wait_status);
  }
  xs.flags = e->exit_flags;
  xs.run_ns = now_ns() - e->start_ns;
  return xs;
}

void Server::exec_kill_tree(Exec* e) {
  if (e->cg.valid() && ExecCgroups::kill_all(&e->cg)) return;
  // Without cgroup.kill: the process group the command started (setsid in the child). Its number
  // stays reserved while any member lives, so this is safe even after the leader was reaped.
  if (e->pid > 0) kill(-e->pid, SIGKILL);
}

void Server::exec_signal(Exec* e, int sig) {
  if (sig <= 0 || sig >= NSIG) return;
  if (sig == SIGKILL) {
    exec_kill_tree(e);
    return;
  }
  if (e->cg.valid()) {
    ExecCgroups::signal_all(e->cg, sig);
  } else if (e->pid > 0) {
    kill(-e->pid, sig);
  }
}

void Server::exec_cancel(Exec* e) {
  e->conn = nullptr;
  exec_kill_tree(e);
  exec_stdin_close(e);
  exec_pause_pipes(e, false);  // drain into the void until EOF
}

void Server::exec_check_timeouts(uint64_t now) {
  for (Exec* e : execs_) {
    if (!e->deadline_ns || e->timed_out || now < e->deadline_ns) continue;
    e->timed_out = true;
    e->exit_flags |= proto::kExitTimedOut;
    exec_kill_tree(e);
  }
}

void Server::exec_maybe_finish(Exec* e) {
  if (e->dead || !e->exited || e->pipe_fd[0] >= 0 || e->pipe_fd[1] >= 0) return;
  e->dead = true;
  exec_stdin_close(e);
  proto::ExitStatus xs = exit_status(e);
  cgroups_.release(&e->cg);  // empty, or everything in it was killed when the main process exited
  execs_.erase(std::find(execs_.begin(), execs_.end(), e));
  dead_execs_.push_back(e);
  if (Conn* c = e->conn) {
    e->conn = nullptr;
    c->exec = nullptr;
    reply(c, proto::AgentMsg::kExit, xs.encode());
    conn_finish(c);
  }
}

}  // namespace sandlet::guest
