#include "lazy/holder.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "common/error.hpp"
#include "lazy/fanotify_group.hpp"
#include "lazy/holder_state.hpp"
#include "lazy/loader_protocol.hpp"
#include "sys/fs_util.hpp"
#include "lazy/seqpacket.hpp"
#include "sys/unix_socket.hpp"

extern char** environ;

namespace sandlet::lazy {
namespace {

constexpr size_t kMaxControlMessage = 1u << 20;
constexpr uint32_t kPendingCapacity = 1u << 16;  // reads waiting at once that a successor can take over

// Every waiting reader holds one of this process's descriptors: as many as allowed, up to 64 Ki (a
// successor refuses by number every event a killed holder had read but not recorded, below this bound).
uint32_t raise_fd_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 1024;
  rlim_t want = std::min<rlim_t>(r.rlim_max, 1u << 16);
  if (r.rlim_cur < want) {
    r.rlim_cur = want;
    if (::setrlimit(RLIMIT_NOFILE, &r) != 0) ::getrlimit(RLIMIT_NOFILE, &r);
  }
  return static_cast<uint32_t>(std::min<rlim_t>(r.rlim_cur, 1u << 16));
}

class Holder final {
 public:
  explicit Holder(const HolderOptions& o)
      : opt_(o),
        state_(o.root, o.settings, o.adopt ? sys::UniqueFd(o.adopt->group) : open_pre_content_group(),
               o.adopt ? PendingTable::adopt(sys::UniqueFd(o.adopt->table))
                       : PendingTable::create(kPendingCapacity, raise_fd_limit())) {
    if (opt_.adopt) {
      ::fcntl(state_.group(), F_SETFD, FD_CLOEXEC);
      ::fcntl(state_.table_fd(), F_SETFD, FD_CLOEXEC);
    }
  }
  int run(int ready_fd = -1);

 private:
  void watch(int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno("epoll_ctl");
  }
  void unwatch(int fd) { ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr); }
  void flush_to_fetcher();
  void start_fetcher();
  void fetcher_died();
  void restart_fetcher_when_due();
  void on_fetcher_message();
  void dispatch(int fd);
  void fetcher_died_early() {  // the spawn itself failed: try again later
    failures_ = std::min(failures_ + 1, 6);
    restart_at_ns_ = sys::now_monotonic_ns() + (25'000'000ull << failures_);
  }
  void on_control(int fd);
  boost::json::object handle(const boost::json::object& req);

  HolderOptions opt_;
  HolderState state_;
  sys::UniqueFd epoll_, listen_, timer_, signals_;
  pid_t fetcher_pid_ = -1;
  sys::UniqueFd fetcher_pidfd_, fetcher_sock_;
  uint64_t restart_at_ns_ = 0;
  int failures_ = 0;
  std::map<int, sys::UniqueFd> clients_;
  double started_ = sys::now_unix_seconds();
  bool stop_ = false;
};

void Holder::flush_to_fetcher() {
  auto out = state_.take_outgoing();
  if (!fetcher_sock_) return;  // a new fetcher is told everything again when it starts
  for (const auto& m : out) {
    try {
      if (m.fd >= 0) {
        sys::send_with_fds(fetcher_sock_.get(), m.bytes, {m.fd});
      } else if (::send(fetcher_sock_.get(), m.bytes.data(), m.bytes.size(), MSG_NOSIGNAL) < 0) {
        throw_errno("send to the fetcher");
      }
    } catch (const Error&) {
      return;  // it is going away; its pidfd says so and the restart sends all again
    }
  }
}

void Holder::start_fetcher() {
  sys::UniqueFd mine, theirs;
  seqpacket_pair(mine, theirs);
  const auto& s = opt_.settings;
  std::vector<std::string> args{opt_.self_exe, "fetch", "--fd", std::to_string(theirs.get()),
                                "--fetch-unit", std::to_string(s.fetch_unit),
                                "--concurrency", std::to_string(s.fetch_concurrency),
                                "--fill-timeout-ms", std::to_string(s.fill_timeout_ms)};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, theirs.get(), theirs.get());  // onto itself: clears close-on-exec
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, opt_.self_exe.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw_errno("start the fetcher " + opt_.self_exe, rc);
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) throw_errno("pidfd_open(fetcher)");
  fetcher_pid_ = pid;
  fetcher_pidfd_.reset(pidfd);
  fetcher_sock_ = std::move(mine);
  state_.set_fetcher_pid(pid);
  watch(fetcher_pidfd_.get());
  watch(fetcher_sock_.get());
  // First what it keeps for a successor (the group must never close while layers are attached).
  Keep k;
  k.root_len = static_cast<uint32_t>(opt_.root.size());
  k.cache_max_bytes = s.cache_max_bytes;
  std::string keep(reinterpret_cast<const char*>(&k), sizeof k);
  keep += opt_.root;
  try {
    sys::send_with_fds(fetcher_sock_.get(), keep, {state_.group(), opt_.lock_fd, state_.table_fd()});
  } catch (const Error&) {
    // It died already; its pidfd says so.
  }
  state_.queue_restart_messages();
  flush_to_fetcher();
}

void Holder::fetcher_died() {
  ::waitpid(fetcher_pid_, nullptr, 0);
  unwatch(fetcher_pidfd_.get());
  unwatch(fetcher_sock_.get());
  fetcher_pid_ = -1;
  state_.set_fetcher_pid(-1);
  fetcher_pidfd_.reset();
  fetcher_sock_.reset();
  state_.fetcher_lost();
  state_.take_outgoing();  // a new fetcher is told everything again
  // Back off when it keeps dying, from 50 ms to ~3 s. A first death is replaced at once: until then no
  // other process keeps the group, so this one's death would let unfilled ranges read as zeros.
  // (Started after the current batch of events: some may still name the dead one's descriptor numbers.)
  failures_ = std::min(failures_ + 1, 6);
  restart_at_ns_ = failures_ == 1 ? 0 : sys::now_monotonic_ns() + (25'000'000ull << failures_);
}

void Holder::restart_fetcher_when_due() {
  if (fetcher_pid_ >= 0 || sys::now_monotonic_ns() < restart_at_ns_) return;
  try {
    start_fetcher();
  } catch (const Error&) {
    fetcher_died_early();
  }
}

void Holder::on_fetcher_message() {
  for (;;) {
    Filled f;
    ssize_t n = ::recv(fetcher_sock_.get(), &f, sizeof f, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) return;  // EOF: the pidfd reports the death
    if (n != static_cast<ssize_t>(sizeof f) || f.type != static_cast<uint32_t>(FetchMsg::kFilled)) continue;
    failures_ = 0;
    state_.on_filled(f);
  }
}

boost::json::object Holder::handle(const boost::json::object& req) {
  auto* op = req.if_contains("op");
  std::string o = op && op->is_string() ? std::string(op->as_string()) : "";
  // Stopping: a layer attached now would lose its watch when this process exits.
  if (o == "attach" && stop_) throw Error(Code::kUnavailable, "loader stopping; retry");
  if (o == "attach") return state_.attach(req);
  if (o == "detach") return state_.detach(req);
  if (o == "status") return state_.status(::getpid(), fetcher_pid_, started_);
  if (o == "ping") return {{"ok", true}, {"pid", ::getpid()}, {"version", kProtocolVersion}};
  if (o == "stop_if_idle") {
    bool idle = state_.idle();
    if (idle) stop_ = true;
    return {{"ok", true}, {"stopping", idle}};
  }
  throw Error(Code::kInvalidArgument, "unknown loader request '" + o + "'");
}

void Holder::on_control(int fd) {
  std::string buf(kMaxControlMessage, '\0');
  ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    unwatch(fd);
    clients_.erase(fd);
    return;
  }
  buf.resize(static_cast<size_t>(n));
  boost::json::object reply;
  try {
    boost::system::error_code ec;
    auto v = boost::json::parse(buf, ec);
    if (ec || !v.is_object()) throw Error(Code::kInvalidArgument, "loader request is not a JSON object");
    reply = handle(v.as_object());
  } catch (const Error& e) {
    reply = {{"ok", false}, {"code", static_cast<int>(e.code())}, {"error", e.what()}};
  } catch (const std::exception& e) {
    reply = {{"ok", false}, {"code", static_cast<int>(Code::kInternal)}, {"error", e.what()}};
  }
  flush_to_fetcher();
  std::string text = boost::json::serialize(reply);
  (void)::send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

int Holder::run(int ready_fd) {
  sys::mkdir_p(loader_dir(opt_.root), 0700);
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  listen_ = seqpacket_listen(control_socket_path(opt_.root));
  timer_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  itimerspec its{{0, 100'000'000}, {0, 100'000'000}};
  ::timerfd_settime(timer_.get(), 0, &its, nullptr);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGPIPE);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  signals_.reset(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  if (opt_.adopt) {
    state_.adopt_blobs(opt_.adopt->blobs);
    state_.adopt_pending();
  }
  // A successor reads no new event before the dead holder's are answered (their numbers could collide).
  bool gated = state_.waiting_for_adopted();
  if (!gated) watch(state_.group());
  watch(listen_.get());
  watch(timer_.get());
  watch(signals_.get());
  state_.reattach_mounted();
  start_fetcher();
  if (ready_fd >= 0) {
    (void)::write(ready_fd, "r", 1);
    ::close(ready_fd);
  }
  while (!stop_) {
    epoll_event evs[64];
    int n = ::epoll_wait(epoll_.get(), evs, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("epoll_wait");
    }
    for (int i = 0; i < n; ++i) {
      int fd = evs[i].data.fd;
      // Nothing may end this process while layers are attached: their unfilled ranges would read as zeros.
      try {
        dispatch(fd);
      } catch (...) {
      }
    }
    try {
      restart_fetcher_when_due();
      flush_to_fetcher();
      if (gated && !state_.waiting_for_adopted()) {
        watch(state_.group());
        gated = false;
      }
    } catch (...) {
    }
  }
  ::unlink(control_socket_path(opt_.root).c_str());
  if (fetcher_pid_ > 0) {
    ::kill(fetcher_pid_, SIGKILL);
    ::waitpid(fetcher_pid_, nullptr, 0);
  }
  return 0;
}

void Holder::dispatch(int fd) {
  if (fd == state_.group()) {
    state_.on_access_events();
  } else if (fd == listen_.get()) {
    int c = ::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c >= 0) {
      clients_.emplace(c, sys::UniqueFd(c));
      watch(c);
    }
  } else if (fd == timer_.get()) {
    uint64_t ticks;
    (void)::read(timer_.get(), &ticks, sizeof ticks);
    state_.on_tick(sys::now_monotonic_ns());
  } else if (fd == signals_.get()) {
    signalfd_siginfo si;
    while (::read(signals_.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      // A stop while layers are attached would let their unfilled ranges read as zeros: refused.
      if (si.ssi_signo != SIGPIPE && state_.idle()) stop_ = true;
    }
  } else if (fetcher_pidfd_ && fd == fetcher_pidfd_.get()) {
    fetcher_died();
  } else if (fetcher_sock_ && fd == fetcher_sock_.get()) {
    on_fetcher_message();
  } else if (clients_.count(fd)) {
    on_control(fd);
  }
}

}  // namespace

int run_holder(const HolderOptions& options) { return run_holder_ready(options, -1); }

int run_holder_ready(const HolderOptions& options, int ready_fd) {
  Holder h(options);
  return h.run(ready_fd);
}

}  // namespace sandlet::lazy
