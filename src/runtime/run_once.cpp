// One-shot runs: a new sandbox whose init starts one command itself (with the caller's descriptors as its
// stdio), reports its exit on the setup socket and ends; run_once returns then, the sandbox killed and
// hidden, its host state reclaimed on a worker (as destroy() does). Compared with create + exec + destroy there is no agent connection, no request
// round trip and no output relayed through this process: what `sandlet run` (and bwrap-style callers) need.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <future>

#include "common/error.hpp"
#include "proto/agent_protocol.hpp"
#include "runtime/exec_env.hpp"
#include "runtime/runtime.hpp"

namespace sandlet {
namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// Reads exactly n bytes; false at EOF or on error.
bool read_exact(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// The one frame a one-shot sandbox sends when its command has ended: kExit, or kError when it could not
// be started. EOF first means the sandbox died (killed, or destroyed by runtime close).
ExecOutcome read_report(int fd, const std::string& id) {
  char header[proto::kHeaderSize];
  proto::FrameHeader h;
  std::string payload;
  if (!read_exact(fd, header, sizeof header))
    throw Error(Code::kUnavailable, "sandbox " + id + " ended before its command did (killed or destroyed)");
  if (!proto::decode_header(header, &h)) throw Error(Code::kInternal, "sandbox " + id + " sent a malformed report");
  payload.resize(h.len);
  if (!read_exact(fd, payload.data(), payload.size()))
    throw Error(Code::kUnavailable, "sandbox " + id + " ended while reporting its command's exit");
  if (h.type == proto::Msg::kError) {
    proto::ErrorReply err;
    if (!proto::ErrorReply::decode(payload, &err)) throw Error(Code::kInternal, "sandbox " + id + " sent a malformed error");
    throw Error(static_cast<Code>(err.code), err.message, err.err_no);
  }
  proto::ExitStatus exit;
  if (h.type != proto::Msg::kExit || !proto::ExitStatus::decode(payload, &exit))
    throw Error(Code::kInternal, "sandbox " + id + " sent an unexpected report");
  ExecOutcome out;
  out.exit_code = exit.exit_code;
  out.signal = exit.signal;
  out.timed_out = exit.flags & proto::kExitTimedOut;
  out.run_ns = exit.run_ns;
  return out;
}

}  // namespace

ExecOutcome Runtime::run_once(const Spec& spec, const RunOnceParams& params) {
  check_not_on_loop("run");
  if (closed_) throw Error(Code::kFailedPrecondition, "runtime is closed");
  if (params.argv.empty() || params.argv[0].empty())
    throw Error(Code::kInvalidArgument, "invalid run field 'argv': a command is required");
  if (params.timeout_s < 0 || !std::isfinite(params.timeout_s))
    throw Error(Code::kInvalidArgument, "invalid run field 'timeout': must be >= 0");
  static const char* const kStdioFields[3] = {"stdin_fd", "stdout_fd", "stderr_fd"};
  for (int i = 0; i < 3; ++i)
    if (params.stdio[i] >= 0 && ::fcntl(params.stdio[i], F_GETFD) < 0)
      throw Error(Code::kInvalidArgument, std::string("invalid run field '") + kStdioFields[i] + "': " +
                                              std::to_string(params.stdio[i]) + " is not an open descriptor");
  if (params.cancel_fd >= 0 && ::fcntl(params.cancel_fd, F_GETFD) < 0)
    throw Error(Code::kInvalidArgument, "invalid run field 'cancel_fd': not an open descriptor");
  if (spec.lifetime != Lifetime::kOwned)
    throw Error(Code::kInvalidArgument, "invalid spec field 'lifetime': a one-shot run's sandbox is owned");
  const uint64_t begin = now_ns();

  OneShot one_shot;
  one_shot.argv = params.argv;
  one_shot.env = params.env;
  (void)merge_env({}, params.env);  // rejects an entry without '=' before anything is made
  one_shot.cwd = params.cwd;
  one_shot.user = params.user;
  one_shot.timeout_ms = static_cast<uint64_t>(std::ceil(params.timeout_s * 1000));
  for (int i = 0; i < 3; ++i) one_shot.stdio[i] = params.stdio[i];

  // Started on a worker, as every create: the parent-death signal binds to the thread that clones.
  // Registered there too, so that a close() (which joins the workers first) sees every started one.
  std::promise<Started> promise;
  auto future = promise.get_future();
  run_on_workers([this, &spec, &one_shot, &promise] {
    try {
      Started started = start_sandbox(spec, &one_shot);
      {
        std::lock_guard lock(mutex_);
        one_shots_[started.rec.id] = started.rec;
        reclaiming_.insert(started.rec.id);  // reclaimed through wait_one_shot, not by an exit watcher
      }
      promise.set_value(std::move(started));
    } catch (...) {
      promise.set_exception(std::current_exception());
    }
  });
  host_.netns->prefetch_first();
  Started started = future.get();
  ExecOutcome out = wait_one_shot(started, one_shot, params.cancel_fd);
  out.duration_ns = now_ns() - begin;
  return out;
}

ExecOutcome Runtime::wait_one_shot(Started& started, OneShot& one_shot, int cancel_fd) {
  const SandboxRecord& rec = started.rec;
  ExecOutcome out;
  std::exception_ptr error;
  try {
    pollfd p[2] = {{one_shot.report.get(), POLLIN, 0}, {cancel_fd, POLLIN, 0}};
    for (;;) {
      if (::poll(p, cancel_fd >= 0 ? 2 : 1, -1) < 0) {
        if (errno == EINTR) continue;
        throw_errno("poll a one-shot sandbox");
      }
      if (p[0].revents != 0) {
        out = read_report(one_shot.report.get(), rec.id);
        break;
      }
      if (p[1].revents != 0) throw Error(Code::kCancelled, "cancelled by the caller");
    }
  } catch (...) {
    error = std::current_exception();
  }
  // Killed (a no-op by now, unless cancelled) and hidden at once, as destroy() does; the rest -- reaping
  // the init, our child, and removing its cgroups, directory and uid range -- on a worker, which close()
  // waits for. (A closing runtime has no workers left: then here.)
  sys::UniqueFd ignored = kill_and_retire(rec);
  auto finish = [this, rec, pidfd = std::make_shared<sys::UniqueFd>(std::move(started.pidfd))] {
    siginfo_t info;
    while (::waitid(P_PIDFD, static_cast<id_t>(pidfd->get()), &info, WEXITED | __WALL) < 0 && errno == EINTR) {
    }
    try {
      reclaim(rec, sys::UniqueFd());
    } catch (...) {
      // Left for gc: the record stays in the retired directory.
    }
    {
      std::lock_guard lock(mutex_);
      one_shots_.erase(rec.id);
    }
    one_shots_done_.notify_all();
  };
  bool on_worker;
  {
    std::lock_guard lock(mutex_);  // close() sets closed_ under it before joining the workers
    on_worker = !closed_;
    if (on_worker) run_on_workers(finish);
  }
  if (!on_worker) finish();
  if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace sandlet
