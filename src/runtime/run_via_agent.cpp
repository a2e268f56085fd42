// A one-shot run on a backend that cannot start the command itself (no kCapOneShot, e.g. a microVM): the
// same run as create, one exec with the caller's descriptors, destroy. Output is streamed to the caller's
// descriptors as it comes, stdin is fed from theirs, the cancel descriptor cancels.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/error.hpp"
#include "runtime/runtime.hpp"
#include "runtime/sandbox.hpp"

namespace sandlet {
namespace {

void write_fully(int fd, std::string_view data) {
  while (fd >= 0 && !data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the caller's reader went away: the rest is dropped, as a pipe's would be
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

ExecOutcome Runtime::run_via_agent(const Spec& spec, const RunOnceParams& params) {
  std::shared_ptr<Sandbox> sb = create(spec);
  ExecParams ep;
  ep.argv = params.argv;
  ep.env = params.env;
  ep.cwd = params.cwd;
  ep.user = params.user;
  ep.timeout_s = params.timeout_s;
  ep.output_limit = UINT64_MAX;  // a run's output is streamed, not kept: no cap (as sandlet_run's)
  ep.stdin_stream = params.stdio[0] >= 0;
  const int out_fd = params.stdio[1], err_fd = params.stdio[2];
  ep.on_output = [out_fd, err_fd](int stream, std::string_view data) {
    write_fully(stream == 2 ? err_fd : out_fd, data);
  };
  struct Done {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::exception_ptr error;
    ExecOutcome out;
  };
  auto done = std::make_shared<Done>();
  std::exception_ptr error;
  ExecOutcome out;
  try {
    ExecControl control = sb->exec_async(std::move(ep), [done](std::exception_ptr e, ExecOutcome o) {
      std::lock_guard lock(done->mu);
      done->error = e;
      done->out = std::move(o);
      done->done = true;
      done->cv.notify_all();
    });
    // Feeds stdin and watches the cancel descriptor until the exec ends.
    bool stdin_open = params.stdio[0] >= 0;
    for (;;) {
      {
        std::unique_lock lock(done->mu);
        if (done->done) break;
      }
      pollfd p[2] = {{stdin_open ? params.stdio[0] : -1, POLLIN, 0}, {params.cancel_fd, POLLIN, 0}};
      int r = ::poll(p, 2, 50);
      if (r < 0 && errno != EINTR) throw_errno("poll a run's descriptors");
      if (r <= 0) continue;
      if (p[1].revents) {
        control.cancel();
        std::unique_lock lock(done->mu);
        done->cv.wait(lock, [&] { return done->done; });
        throw Error(Code::kCancelled, "cancelled by the caller");
      }
      if (p[0].revents) {
        char buf[65536];
        ssize_t n = ::read(params.stdio[0], buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0 || !control.write_stdin(std::string_view(buf, static_cast<size_t>(n)))) {
          control.close_stdin();
          stdin_open = false;
        }
      }
    }
    std::lock_guard lock(done->mu);
    if (done->error) std::rethrow_exception(done->error);
    out = std::move(done->out);
  } catch (...) {
    error = std::current_exception();
  }
  try {
    sb->destroy();
  } catch (...) {
    if (!error) error = std::current_exception();
  }
  if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace sandlet
