// A one-shot run on a backend that cannot start the command itself (no kCapOneShot, e.g. a microVM): the
// same run as create, one exec with the caller's descriptors, destroy. The exec's output arrives on the
// event-loop thread, which must never block: it is queued (bounded) and written to the caller's
// descriptors by the calling thread as they take it. The caller's stdin is fed by a thread of its own
// (feeding blocks while the agent is behind), so that the cancel descriptor is watched throughout.
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <string>
#include <thread>

#include "common/error.hpp"
#include "runtime/runtime.hpp"
#include "runtime/sandbox.hpp"
#include "sys/sigpipe_block.hpp"

namespace sandlet {
namespace {

// Output not yet taken by the caller beyond this is dropped (and the result says truncated): a guest
// must not grow the host's memory without bound through a slow reader.
constexpr size_t kOutputQueueMax = 64u << 20;
constexpr size_t kWriteChunk = 4096;  // <= PIPE_BUF: a write after POLLOUT does not block on a pipe

struct RunState {
  std::mutex mu;
  bool done = false;
  std::exception_ptr error;
  ExecOutcome out;
  std::string queued[2];  // stdout, stderr
  bool truncated[2] = {false, false};
  int wake[2] = {-1, -1};  // a pipe: the loop thread says "more output" or "done"
  ~RunState() {
    for (int fd : wake)
      if (fd >= 0) ::close(fd);
  }
  void poke() {
    const char c = 1;
    (void)!::write(wake[1], &c, 1);
  }
};

}  // namespace

ExecOutcome Runtime::run_via_agent(const Spec& spec, const RunOnceParams& params) {
  auto st = std::make_shared<RunState>();
  if (::pipe2(st->wake, O_CLOEXEC | O_NONBLOCK) != 0) throw_errno("pipe");
  std::shared_ptr<Sandbox> sb = create(spec);
  ExecParams ep;
  ep.argv = params.argv;
  ep.env = params.env;
  ep.cwd = params.cwd;
  ep.user = params.user;
  ep.timeout_s = params.timeout_s;
  ep.output_limit = UINT64_MAX;  // streamed to the caller, not kept
  ep.stdin_stream = params.stdio[0] >= 0;
  const int out_fd[2] = {params.stdio[1], params.stdio[2]};
  ep.on_output = [st, out_fd](int stream, std::string_view data) {
    const int i = stream == 2 ? 1 : 0;
    if (out_fd[i] < 0) return;
    std::lock_guard lock(st->mu);
    const size_t room = kOutputQueueMax - std::min(kOutputQueueMax, st->queued[i].size());
    if (data.size() > room) st->truncated[i] = true;
    st->queued[i].append(data.substr(0, room));
    st->poke();
  };

  std::exception_ptr error;
  ExecOutcome out;
  std::atomic<bool> stop_feeding{false};
  std::thread feeder;
  try {
    ExecControl control = sb->exec_async(std::move(ep), [st](std::exception_ptr e, ExecOutcome o) {
      std::lock_guard lock(st->mu);
      st->error = e;
      st->out = std::move(o);
      st->done = true;
      st->poke();
    });
    if (params.stdio[0] >= 0) {
      feeder = std::thread([&stop_feeding, control, in = params.stdio[0]]() mutable {
        char buf[65536];
        while (!stop_feeding) {
          pollfd p = {in, POLLIN, 0};
          int r = ::poll(&p, 1, 50);
          if (r < 0 && errno != EINTR) break;
          if (r <= 0) continue;
          ssize_t n = ::read(in, buf, sizeof buf);
          if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
          try {
            if (n <= 0 || !control.write_stdin(std::string_view(buf, static_cast<size_t>(n)))) break;
          } catch (const Error&) {
            break;
          }
        }
        try {
          control.close_stdin();
        } catch (const Error&) {
        }
      });
    }
    // Output to the caller, the cancel descriptor, the end. Once the runtime closes, output the caller has
    // not taken is dropped (truncated): close() must not wait on a reader.
    std::string pending[2];
    bool cancelled = false;
    bool closing = false;
    for (;;) {
      bool finished;
      {
        std::lock_guard lock(st->mu);
        for (int i = 0; i < 2; ++i) {
          pending[i] += st->queued[i];
          st->queued[i].clear();
        }
        finished = st->done;
      }
      if (closing)
        for (int i = 0; i < 2; ++i)
          if (!pending[i].empty()) {
            pending[i].clear();
            std::lock_guard lock(st->mu);
            st->truncated[i] = true;
          }
      if (finished && pending[0].empty() && pending[1].empty()) break;
      if (closing && !finished) break;  // the loop that would complete the exec may be stopping
      pollfd p[5] = {{st->wake[0], POLLIN, 0},
                     {cancelled ? -1 : params.cancel_fd, POLLIN, 0},
                     {pending[0].empty() ? -1 : out_fd[0], POLLOUT, 0},
                     {pending[1].empty() ? -1 : out_fd[1], POLLOUT, 0},
                     {closing ? -1 : closing_.get(), POLLIN, 0}};
      if (::poll(p, 5, -1) < 0 && errno != EINTR) throw_errno("poll a run's descriptors");
      if (p[4].revents) closing = true;
      if (p[0].revents) {
        char drain[64];
        while (::read(st->wake[0], drain, sizeof drain) > 0) {}
      }
      if (p[1].revents && !cancelled) {
        cancelled = true;
        control.cancel();
      }
      for (int i = 0; i < 2; ++i) {
        if (!(p[2 + i].revents & (POLLOUT | POLLERR | POLLHUP))) continue;
        ssize_t n;
        {
          sys::SigpipeBlock quiet;  // a caller's reader that went away must not end the caller's process
          n = ::write(out_fd[i], pending[i].data(), std::min(pending[i].size(), kWriteChunk));
        }
        if (n > 0) pending[i].erase(0, static_cast<size_t>(n));
        else if (n < 0 && errno != EAGAIN && errno != EINTR) pending[i].clear();  // the reader went away
      }
    }
    stop_feeding = true;
    if (feeder.joinable()) feeder.join();
    std::lock_guard lock(st->mu);
    if (cancelled) throw Error(Code::kCancelled, "cancelled by the caller");
    if (!st->done) throw Error(Code::kUnavailable, "the runtime closed during the run");
    if (st->error) std::rethrow_exception(st->error);
    out = std::move(st->out);
    out.stdout_truncated = out.stdout_truncated || st->truncated[0];
    out.stderr_truncated = out.stderr_truncated || st->truncated[1];
  } catch (...) {
    error = std::current_exception();
  }
  stop_feeding = true;
  if (feeder.joinable()) feeder.join();
  try {
    sb->destroy();
  } catch (...) {
    if (!error && !closed_) error = std::current_exception();  // a closed runtime ended it already
  }
  if (error) std::rethrow_exception(error);
  return out;
}

void Runtime::run_via_agent_async(Spec spec, RunOnceParams params, RunDone done) {
  start_tracked(agent_runs_, [this, spec = std::move(spec), params, done = std::move(done)]() mutable {
    std::exception_ptr error;
    ExecOutcome out;
    try {
      out = run_via_agent(spec, params);
    } catch (...) {
      error = std::current_exception();
    }
    loop_.post([done = std::move(done), error, out = std::move(out)]() mutable { done(error, std::move(out)); });
  });
}

}  // namespace sandlet
