// One-shot runs: a new sandbox whose init starts one command itself (with the caller's descriptors as its
// stdio), reports its exit on the setup socket and ends; run_once returns then, the sandbox killed and
// hidden, its host state reclaimed on a worker (as destroy() does). Compared with create + exec + destroy
// there is no agent connection, no request round trip and no output relayed through this process: what
// `sandlet run` (and bwrap-style callers) need.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cmath>
#include <boost/asio/steady_timer.hpp>
#include <future>

#include "common/error.hpp"
#include "runtime/agent/agent_client.hpp"
#include "spec/exec_env.hpp"
#include "runtime/audit/audit_records.hpp"
#include "runtime/agent/one_shot_report.hpp"
#include "runtime/runtime.hpp"
#include "sys/fs_util.hpp"

namespace asio = boost::asio;

namespace sandlet {
namespace {

// Reads the report socket whenever it is readable, without blocking the loop, and concludes once the
// report is complete or broken.
template <typename State, typename Conclude>
void wait_for_report(std::shared_ptr<State> st, Conclude conclude) {
  st->report.async_wait(asio::posix::stream_descriptor::wait_read, [st, conclude](boost::system::error_code ec) {
    if (ec || st->concluded) return;
    std::optional<ExecOutcome> out;
    try {
      out = st->reader->read_some(st->report.native_handle());
    } catch (...) {
      conclude(std::current_exception(), ExecOutcome());
      return;
    }
    if (out)
      conclude(nullptr, std::move(*out));
    else
      wait_for_report(st, conclude);
  });
}

}  // namespace

void Runtime::audit_one_shot(const SandboxRecord& rec, const RunOnceParams& params, double begin_wall,
                             const ExecOutcome* out, std::exception_ptr error) noexcept {
  try {
    ExecAudit a;
    a.argv = params.argv;
    a.cwd = params.cwd;
    a.user = params.user;
    a.start = begin_wall;
    a.end = sys::now_unix_seconds();
    a.one_shot = true;
    a.bytes_known = false;  // the command wrote to the caller's descriptors, not through this process
    audit_->write("exec", rec.id, rec.spec.labels, audit_exec_fields(a, out, error));
  } catch (...) {
  }
}

// The command of a one-shot run, validated (what fails here fails before anything is made).
OneShot Runtime::one_shot_of(const Spec& spec, const RunOnceParams& params) {
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
  check_command_args(params.argv, merge_env(base_env(spec), params.env), "run");  // (rejects an entry without '=')
  OneShot one_shot;
  one_shot.argv = params.argv;
  one_shot.env = params.env;
  one_shot.cwd = params.cwd;
  one_shot.user = params.user;
  one_shot.timeout_ms = static_cast<uint64_t>(std::ceil(params.timeout_s * 1000));
  for (int i = 0; i < 3; ++i) one_shot.stdio[i] = params.stdio[i];
  return one_shot;
}

// On a worker, as every create: the parent-death signal binds to the thread that clones. Registered here,
// so that close() (which joins the workers before waiting for one-shots) sees every started one; one
// that starts while the runtime closes is killed at once (its caller then sees it end).
Runtime::Started Runtime::start_one_shot(const Spec& spec, OneShot& one_shot) {
  Started started = start_sandbox(spec, &one_shot);
  Registry::Entry entry;
  entry.record = started.rec;
  entry.impl = started.impl;
  entry.one_shot = true;  // ended when its report arrives, not by an exit watcher
  registry_.add(std::move(entry));
  if (closed_) started.impl->kill();
  return started;
}

ExecOutcome Runtime::run_once(const Spec& given, const RunOnceParams& params) {
  check_not_on_loop("run");
  const Spec spec = with_local_environment(given);  // a registry image is pulled here, not on a worker
  if (Backend* b = backend_named(spec.backend); b && !(b->capabilities() & kCapOneShot)) {
    (void)one_shot_of(spec, params);  // the same checks, naming the run's fields
    return run_via_agent(spec, params);
  }
  const uint64_t begin = sys::now_monotonic_ns();
  const double begin_wall = sys::now_unix_seconds();
  OneShot one_shot = one_shot_of(spec, params);
  std::promise<Started> promise;
  auto future = promise.get_future();
  in_background([this, &spec, &one_shot, &promise] {
    try {
      promise.set_value(start_one_shot(spec, one_shot));
    } catch (...) {
      promise.set_exception(std::current_exception());
    }
  });
  if (Backend* b = backend_named(spec.backend)) b->expect_create();
  Started started = future.get();

  ExecOutcome out;
  std::exception_ptr error;
  try {
    OneShotReport report(started.rec.id, one_shot.timeout_ms);
    pollfd p[2] = {{one_shot.report.get(), POLLIN, 0}, {params.cancel_fd, POLLIN, 0}};
    for (;;) {
      if (::poll(p, params.cancel_fd >= 0 ? 2 : 1, report.poll_timeout_ms()) < 0) {
        if (errno == EINTR) continue;
        throw_errno("poll a one-shot sandbox");
      }
      if (p[0].revents != 0) {
        if (auto done = report.read_some(one_shot.report.get())) {
          out = std::move(*done);
          break;
        }
        continue;
      }
      if (p[1].revents != 0) throw Error(Code::kCancelled, "cancelled by the caller");
    }
  } catch (...) {
    error = std::current_exception();
  }
  out.duration_ns = sys::now_monotonic_ns() - begin;
  audit_one_shot(started.rec, params, begin_wall, error ? nullptr : &out, error);
  end(started.rec, started.impl, end_reason::kRunFinished);
  if (error) std::rethrow_exception(error);
  return out;
}

void Runtime::run_once_async(Spec spec, RunOnceParams params, RunDone done) {
  if (Backend* b = backend_named(spec.backend); b && !(b->capabilities() & kCapOneShot)) {
    (void)one_shot_of(spec, params);  // the same checks, naming the run's fields, before anything starts
    validate_spec(spec);
    return run_via_agent_async(std::move(spec), params, std::move(done));
  }
  // What one asynchronous run needs until its completion; its descriptors are watched on the loop.
  struct State {
    State(asio::io_context& io, Spec s, OneShot o, RunDone d)
        : spec(std::move(s)), one_shot(std::move(o)), done(std::move(d)), report(io), cancel(io), backstop(io) {}
    Spec spec;
    OneShot one_shot;
    RunDone done;
    Started started;
    asio::posix::stream_descriptor report, cancel;
    std::unique_ptr<OneShotReport> reader;
    asio::steady_timer backstop;
    uint64_t begin = sys::now_monotonic_ns();
    double begin_wall = sys::now_unix_seconds();
    RunOnceParams params;  // for the audit record (its descriptors are not used from here)
    bool concluded = false;
  };
  OneShot one_shot = one_shot_of(spec, params);
  const std::string backend = spec.backend;
  // The cancel descriptor is watched through a duplicate (the watcher owns and closes what it watches).
  sys::UniqueFd cancel;
  if (params.cancel_fd >= 0) {
    cancel.reset(::fcntl(params.cancel_fd, F_DUPFD_CLOEXEC, 3));
    if (!cancel) throw_errno("duplicate the cancel descriptor");
  }
  auto st = std::make_shared<State>(loop_.io(), std::move(spec), std::move(one_shot), std::move(done));
  if (cancel) st->cancel.assign(cancel.release());
  st->params = params;

  // Runs once, on the loop thread: the report (or the cancel, or the backstop) arrived.
  auto conclude = [this, st](std::exception_ptr error, ExecOutcome out) {
    if (st->concluded) return;
    st->concluded = true;
    boost::system::error_code ignored;
    st->cancel.close(ignored);
    st->backstop.cancel();
    if (!error) out.duration_ns = sys::now_monotonic_ns() - st->begin;
    st->report.close(ignored);
    audit_one_shot(st->started.rec, st->params, st->begin_wall, error ? nullptr : &out, error);
    end(st->started.rec, st->started.impl, end_reason::kRunFinished);
    st->done(error, std::move(out));
  };
  // Posts `fn` to the loop while the loop is sure to run it (closed_ is set under close_mutex_ before the
  // loop is let go); once the runtime is closing, runs `closing` here instead.
  auto on_loop = [this](std::function<void()> fn, const std::function<void()>& closing) {
    {
      std::lock_guard lock(close_mutex_);
      if (!closed_) {
        loop_.post(std::move(fn));
        return;
      }
    }
    closing();
  };
  in_background([this, st, conclude, on_loop] {
    try {
      st->started = start_one_shot(st->spec, st->one_shot);
      st->report.assign(st->one_shot.report.release());
    } catch (...) {
      auto report_error = [st, error = std::current_exception()] { st->done(error, ExecOutcome()); };
      on_loop(report_error, report_error);
      return;
    }
    st->reader = std::make_unique<OneShotReport>(st->started.rec.id, st->one_shot.timeout_ms);
    auto watch = [st, conclude] {
      wait_for_report(st, conclude);
      if (st->cancel.is_open())
        st->cancel.async_wait(asio::posix::stream_descriptor::wait_read, [conclude](boost::system::error_code ec) {
          if (!ec) conclude(std::make_exception_ptr(Error(Code::kCancelled, "cancelled by the caller")), {});
        });
      if (auto after = st->reader->backstop()) {
        st->backstop.expires_after(*after);
        st->backstop.async_wait([st, conclude](boost::system::error_code ec) {
          if (ec) return;
          try {
            st->reader->throw_backstop();
          } catch (...) {
            conclude(std::current_exception(), {});
          }
        });
      }
    };
    // Closing: the init was killed at registration, so its report socket comes to EOF.
    on_loop(watch, [st, conclude] {
      try {
        conclude(nullptr, st->reader->read_blocking(st->report.native_handle()));
      } catch (...) {
        conclude(std::current_exception(), {});
      }
    });
  });
  if (Backend* b = backend_named(backend)) b->expect_create();
}

}  // namespace sandlet
