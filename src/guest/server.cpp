#include "guest/server.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <utility>

#include "proto/vm_channel.hpp"

namespace sandlet::guest {

uint64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t deadline_after(uint64_t now, uint64_t ms) {
  constexpr uint64_t kMaxMs = 1ull << 40;  // ~35 years
  return ms >= kMaxMs ? 0 : now + ms * 1000000ull;
}

Server::Server(proto::InitConfig cfg, InitFds fds, const struct rlimit* child_nofile)
    : cfg_(std::move(cfg)), fds_(fds), child_nofile_(child_nofile), cgroups_(fds.cgroup) {}

Status Server::init() {
  ep_ = epoll_create1(EPOLL_CLOEXEC);
  if (ep_ < 0) return errno_status(errno, "epoll_create1");
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigfd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sigfd_ < 0) return errno_status(errno, "signalfd");
  timerfd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timerfd_ < 0) return errno_status(errno, "timerfd_create");

  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.ptr = &listener_watch_;
  if (epoll_ctl(ep_, EPOLL_CTL_ADD, fds_.listener, &ev) != 0) return errno_status(errno, "watch listening socket");
  ev.data.ptr = &signals_watch_;
  if (epoll_ctl(ep_, EPOLL_CTL_ADD, sigfd_, &ev) != 0) return errno_status(errno, "watch signalfd");
  ev.data.ptr = &timer_watch_;
  if (epoll_ctl(ep_, EPOLL_CTL_ADD, timerfd_, &ev) != 0) return errno_status(errno, "watch timerfd");

  uint64_t now = now_ns();
  if (cfg_.max_lifetime_ms) {
    lifetime_deadline_ns_ = deadline_after(now, cfg_.max_lifetime_ms);
    want_deadline(lifetime_deadline_ns_);
  }
  idle_since_ns_ = now;
  if (cfg_.idle_timeout_ms) want_deadline(deadline_after(now, cfg_.idle_timeout_ms));
  cmd_scratch_.argv.reserve(64);
  cmd_scratch_.envp.reserve(64);
  return Status::Ok();
}

void Server::warm_up() {
  Identity id;
  (void)users_.resolve(cfg_.user, &id);  // an unknown user is the exec's error to report
  if (cgroups_.enabled()) {
    CgroupSlot slot;
    if (cgroups_.acquire(&slot).ok()) cgroups_.release(&slot);  // kept idle for the first exec
  }
}

void Server::run() {
  struct epoll_event evs[64];
  for (;;) {
    int n = epoll_wait(ep_, evs, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      log_line("epoll_wait failed (errno %d); exiting", errno);
      _exit(1);
    }
    for (int i = 0; i < n; ++i) dispatch(static_cast<Watch*>(evs[i].data.ptr), evs[i].events);
    // Objects closed during this batch may still be named by later events of the same batch.
    collect_garbage();
    track_idle();
  }
}

void Server::dispatch(Watch* w, uint32_t events) {
  switch (w->kind) {
    case Watch::kListener: on_accept(); break;
    case Watch::kSignals: on_signals(); break;
    case Watch::kTimer: on_timer(); break;
    case Watch::kConn: {
      Conn* c = static_cast<Conn*>(w->owner);
      if (c->dead) break;
      if (events & EPOLLIN) conn_read(c);
      if (!c->dead && (events & EPOLLOUT)) conn_flush(c);
      // HUP = the host closed both directions (a mere shutdown(SHUT_WR) shows up as read EOF only).
      if (!c->dead && (events & (EPOLLHUP | EPOLLERR))) conn_close(c);
      break;
    }
    case Watch::kExecStdout:
    case Watch::kExecStderr: {
      Exec* e = static_cast<Exec*>(w->owner);
      if (!e->dead) exec_pipe_readable(e, w->kind == Watch::kExecStdout ? 0 : 1);
      break;
    }
    case Watch::kExecStdin: {
      Exec* e = static_cast<Exec*>(w->owner);
      if (!e->dead) exec_stdin_writable(e);
      break;
    }
  }
}

// ---- listener, signals, timers ------------------------------------------------------------------------

namespace {

// A microVM's next connection: an agent-port stream's socket, made non-blocking; -2 when the descriptor
// was for another port (closed); -1 with errno when nothing is waiting.
int receive_passed_conn(int ctl) {
  uint8_t port = 0xff;
  char cbuf[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {&port, 1};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  ssize_t n = recvmsg(ctl, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0) return -1;
  if (n == 0) {  // PID 1 is gone: nothing will ever connect again
    errno = EAGAIN;
    return -1;
  }
  int fd = -1;
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
    __builtin_memcpy(&fd, CMSG_DATA(c), sizeof fd);
  if (fd < 0) return -2;
  if (port != proto::vmchan::kAgentPort) {
    close(fd);
    return -2;
  }
  fcntl(fd, F_SETFL, O_NONBLOCK);
  return fd;
}

}  // namespace

void Server::on_accept() {
  for (;;) {
    int fd = fds_.listener_passes_fds ? receive_passed_conn(fds_.listener)
                                      : accept4(fds_.listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd == -2) continue;  // a descriptor for another port: closed
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Level-triggered: stop watching until a connection frees its fds, instead of spinning.
        epoll_ctl(ep_, EPOLL_CTL_DEL, fds_.listener, nullptr);
        listener_paused_ = true;
        log_line("accept: out of resources (errno %d); pausing", errno);
      }
      return;
    }
    Conn* c = new Conn;
    c->fd = fd;
    c->events = EPOLLIN;
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.ptr = &c->watch;
    if (epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      close(fd);
      delete c;
      continue;
    }
    ++nconns_;
    idle_since_ns_ = 0;
    conn_read(c);  // the host usually sent its request right after connecting
  }
}

void Server::on_signals() {
  struct signalfd_siginfo si[16];
  bool child = false;
  for (;;) {
    ssize_t n = read(sigfd_, si, sizeof si);
    if (n <= 0) break;
    for (size_t i = 0; i < static_cast<size_t>(n) / sizeof si[0]; ++i) {
      if (si[i].ssi_signo == SIGCHLD) {
        child = true;
      } else if (si[i].ssi_pid == 0) {
        // SIGTERM/SIGINT from outside our pid namespace (the host): exit; the kernel then kills every
        // process of the sandbox. From inside (ssi_pid != 0) it is ignored, as for any PID 1.
        _exit(0);
      }
    }
  }
  if (child) reap_children();
}

void Server::reap_children() {
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    for (Exec* e : execs_) {
      if (e->pid == pid && !e->exited) {
        exec_exited(e, status);
        break;
      }
    }
    // Anything else is an orphan reparented to us, or a child that failed before exec: just reaped.
  }
}

void Server::want_deadline(uint64_t ns) {
  if (!ns || (armed_ns_ && armed_ns_ <= ns)) return;
  armed_ns_ = ns;
  struct itimerspec its = {};
  its.it_value.tv_sec = static_cast<time_t>(ns / 1000000000ull);
  its.it_value.tv_nsec = static_cast<long>(ns % 1000000000ull);
  timerfd_settime(timerfd_, TFD_TIMER_ABSTIME, &its, nullptr);
}

// The timer is only ever moved earlier (cheap on the exec path); when it fires, every deadline is
// checked and it is re-armed for the earliest one still pending.
void Server::on_timer() {
  uint64_t ticks;
  while (read(timerfd_, &ticks, sizeof ticks) > 0) {}
  armed_ns_ = 0;
  uint64_t now = now_ns();
  if (kept_until_ns_ && now >= kept_until_ns_) _exit(0);
  uint64_t idle_deadline = 0;
  if (!kept_until_ns_ && cfg_.idle_timeout_ms && idle_since_ns_)
    idle_deadline = deadline_after(idle_since_ns_, cfg_.idle_timeout_ms);
  if ((lifetime_deadline_ns_ && now >= lifetime_deadline_ns_) || (idle_deadline && now >= idle_deadline)) {
    if (!cfg_.keep_ms) _exit(0);
    // Kept for debugging: everything else in the sandbox stops where it is (pid 1's kill(-1) spares pid 1),
    // files and state stay, calls are still served; the agent exits, ending the sandbox, keep_ms later.
    kill(-1, SIGSTOP);
    kept_until_ns_ = deadline_after(now, cfg_.keep_ms);
    lifetime_deadline_ns_ = 0;
    idle_deadline = 0;
    want_deadline(kept_until_ns_);
  }
  exec_check_timeouts(now);
  want_deadline(lifetime_deadline_ns_);
  want_deadline(idle_deadline);
  for (Exec* e : execs_)
    if (e->deadline_ns && !e->timed_out) want_deadline(e->deadline_ns);
}

void Server::track_idle() {
  if (!cfg_.idle_timeout_ms || kept_until_ns_ || idle_since_ns_ || nconns_ || !execs_.empty()) return;
  idle_since_ns_ = now_ns();
  want_deadline(deadline_after(idle_since_ns_, cfg_.idle_timeout_ms));
}

void Server::collect_garbage() {
  for (Conn* c : dead_conns_) delete c;
  dead_conns_.clear();
  for (Exec* e : dead_execs_) delete e;
  dead_execs_.clear();
}

// ---- connections ---------------------------------------------------------------------------------------

void Server::conn_read(Conn* c) {
  while (!c->dead && !c->read_eof && !c->in_paused && c->state != Conn::State::kDone) {
    constexpr size_t kChunk = 64u << 10;
    char* p = c->in.reserve_tail(kChunk);
    ssize_t n = read(c->fd, p, kChunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) conn_close(c);
      break;
    }
    if (n == 0) {
      c->read_eof = true;
      if (c->state == Conn::State::kExec && c->exec && c->exec->stdin_fd >= 0 && !c->exec->stdin_eof) {
        c->exec->stdin_eof = true;  // a half-closed request stream also ends stdin
        if (c->exec->stdin_buf.empty()) exec_stdin_close(c->exec);
      }
      if (c->state == Conn::State::kNew || c->state == Conn::State::kWrite || c->state == Conn::State::kPutTree) {
        conn_close(c);  // the request can never be completed
        break;
      }
      break;
    }
    c->in.commit(static_cast<size_t>(n));
    conn_process_frames(c);
    if (static_cast<size_t>(n) < kChunk) break;  // drained; epoll says when more arrives
  }
  if (!c->dead) conn_update_events(c);
}

void Server::conn_process_frames(Conn* c) {
  while (!c->dead && !c->in_paused && c->state != Conn::State::kDone) {
    const FrameView f = next_agent_frame(c->in.data(), c->in.size());
    if (f.kind == FrameView::kBad) {
      conn_reject(c, proto::describe(f.check, f.header, proto::kHostToAgent));
      return;
    }
    if (f.kind == FrameView::kNeedMore) {
      // One allocation for a large frame, not many; only once its header passed (its type's maximum).
      if (f.total > c->in.size()) c->in.reserve_tail(f.total - c->in.size());
      return;
    }
    conn_handle_frame(c, static_cast<proto::AgentMsg>(f.header.type), f.payload);
    if (c->dead) return;
    c->in.consume(f.total);
  }
}

void Server::conn_handle_frame(Conn* c, proto::AgentMsg type, std::string_view payload) {
  const bool takes_stdin = c->exec && (c->exec->req_flags & proto::kExecHasStdin);
  const bool stdin_eof = c->exec && c->exec->stdin_eof;
  const char* why = nullptr;
  const Action action = classify(c->state, type, takes_stdin, stdin_eof, &why);
  switch (action) {
    case Action::kPing: reply(c, proto::AgentMsg::kPong); conn_finish(c); return;
    case Action::kExecStart: exec_start(c, payload); return;
    case Action::kWriteStart: write_start(c, payload); return;
    case Action::kReadStart: read_start(c, payload); return;
    case Action::kPutTreeStart: tree_put_start(c, payload); return;
    case Action::kGetTreeStart: tree_get_start(c, payload); return;
    case Action::kStdin: case Action::kStdinEof: case Action::kSignal: case Action::kResize: exec_frame(c, action, payload); return;
    case Action::kTreeEntry: tree_put_frame(c, action, payload); return;
    case Action::kFileData: case Action::kFileEof:
      if (c->state == Conn::State::kPutTree)
        tree_put_frame(c, action, payload);
      else
        write_frame(c, action, payload);
      return;
    case Action::kIgnore: return;
    case Action::kReject: conn_reject(c, why); return;
  }
}

[[gnu::cold]] void Server::conn_reject(Conn* c, const std::string& why) {
  log_line("agent: rejected a request: %s", why.c_str());
  if (Exec* e = c->exec) {
    c->exec = nullptr;
    exec_cancel(e);  // whatever it started is killed, as when the host goes away
  }
  if (c->state == Conn::State::kWrite) write_abort(c);
  if (c->rjob.fd >= 0) read_end(c);
  // In this agent's own protocol version: a host of another version learns which one this is.
  reply_error(c, make_status(SANDLET_INTERNAL, EPROTO, "sandbox agent rejected the request: " + why));
}

void Server::reply(Conn* c, proto::AgentMsg type, std::string_view payload) {
  append_frame(c->out, type, payload.data(), payload.size());
}

void Server::reply_error(Conn* c, const Status& s) {
  proto::ErrorReply r;
  r.code = s.code == SANDLET_OK ? static_cast<uint32_t>(SANDLET_INTERNAL) : s.code;
  r.err_no = s.err_no;
  r.message = s.message;
  reply(c, proto::AgentMsg::kError, r.encode());
  conn_finish(c);
}

void Server::conn_finish(Conn* c) {
  c->state = Conn::State::kDone;
  c->close_after_flush = true;
  conn_flush(c);
}

void Server::conn_flush(Conn* c) {
  for (;;) {
    bool blocked = false;
    while (!c->out.empty()) {
      ssize_t n = send(c->fd, c->out.data(), c->out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c->out.consume(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) {
        blocked = true;
        break;
      }
      conn_close(c);  // the host is gone
      return;
    }
    // A file or tree being read refills the queue as soon as it runs low (the pumps only append).
    if (c->state == Conn::State::kRead && c->out.size() < kOutLow) {
      read_pump(c);
      if (!blocked) continue;
    }
    if (c->state == Conn::State::kGetTree && c->out.size() < kOutLow) {
      tree_get_pump(c);
      if (!blocked) continue;
    }
    break;
  }
  if (c->out.empty() && c->close_after_flush) {
    conn_close(c);
    return;
  }
  if (c->exec && c->exec->pipes_paused && c->out.size() < kOutLow) exec_pause_pipes(c->exec, false);
  conn_update_events(c);
}

void Server::conn_update_events(Conn* c) {
  uint32_t want = 0;
  if (!c->read_eof && !c->in_paused && c->state != Conn::State::kDone) want |= EPOLLIN;
  if (!c->out.empty()) want |= EPOLLOUT;
  if (want == c->events) return;
  struct epoll_event ev = {};
  ev.events = want;
  ev.data.ptr = &c->watch;
  epoll_ctl(ep_, EPOLL_CTL_MOD, c->fd, &ev);
  c->events = want;
}

void Server::conn_close(Conn* c) {
  if (c->dead) return;
  c->dead = true;
  // Explicit DEL: close() only unregisters once no other process holds the socket (see spawn.cpp).
  epoll_ctl(ep_, EPOLL_CTL_DEL, c->fd, nullptr);
  close(c->fd);
  c->fd = -1;
  if (c->exec) {
    Exec* e = c->exec;
    c->exec = nullptr;
    exec_cancel(e);  // the host went away before the exec ended: kill the whole tree
  }
  if (c->state == Conn::State::kWrite) write_abort(c);
  if (c->rjob.fd >= 0) read_end(c);
  c->tput.reset();  // (a half-written file's temporary name is removed)
  c->tget.reset();
  --nconns_;
  dead_conns_.push_back(c);
  if (listener_paused_) {
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.ptr = &listener_watch_;
    if (epoll_ctl(ep_, EPOLL_CTL_ADD, fds_.listener, &ev) == 0) listener_paused_ = false;
  }
}

}  // namespace sandlet::guest
