#include "runtime/sandbox.hpp"

#include <array>
#include <boost/json.hpp>
#include <cmath>
#include <csignal>
#include <future>

#include "common/error.hpp"
#include "runtime/agent/agent_call.hpp"
#include "runtime/agent/agent_client.hpp"
#include "runtime/audit/audit_records.hpp"
#include "runtime/agent/output_log.hpp"
#include "spec/exec_env.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {
namespace {

constexpr uint64_t kDefaultOutputLimit = 16ull << 20;

proto::TermSize term_size(uint32_t rows, uint32_t cols) {
  if (rows < 1 || cols < 1 || rows > proto::TermSize::kMax || cols > proto::TermSize::kMax)
    throw Error(Code::kInvalidArgument, "invalid exec field 'tty size': " + std::to_string(rows) + " rows x " +
                                            std::to_string(cols) + " columns, each must be 1.." +
                                            std::to_string(proto::TermSize::kMax));
  return proto::TermSize{static_cast<uint16_t>(rows), static_cast<uint16_t>(cols)};
}

}  // namespace

Sandbox::Sandbox(std::weak_ptr<SandboxOwner> owner, SandboxRecord record, std::shared_ptr<BackendSandbox> impl,
                 bool created_here)
    : owner_(std::move(owner)), record_(std::move(record)), impl_(std::move(impl)), base_env_(base_env(record_.spec)),
      created_here_(created_here), paused_(record_.state == SandboxState::kPaused) {}

Sandbox::~Sandbox() {
  // An owned sandbox dies with the last handle of the runtime that created it.
  auto owner = owner_.lock();
  if (!owner || owner->closed()) return;
  if (!created_here_ || destroyed_ || record_.spec.lifetime != Lifetime::kOwned) return;
  owner->in_background([owner, rec = record_, impl = impl_] {
    try {
      owner->end(rec, impl, end_reason::kReleased);
    } catch (...) {
    }
  });
}

std::shared_ptr<SandboxOwner> Sandbox::owner_checked() const {
  auto owner = owner_.lock();
  if (!owner || owner->closed()) throw Error(Code::kFailedPrecondition, "sandbox " + id() + ": its runtime is closed");
  if (destroyed_) throw Error(Code::kFailedPrecondition, "sandbox " + id() + " is destroyed");
  return owner;
}

sys::UniqueFd Sandbox::connect_for_call() {
  // The record is the truth across processes: a pause by label or by another runtime is undone here too.
  if (paused_ || owner_checked()->record_paused(id())) resume();
  return impl_->connect();
}

void ExecControl::signal(int signo) {
  if (signo <= 0 || signo >= 65) throw Error(Code::kInvalidArgument, "invalid signal number " + std::to_string(signo));
  if (auto call = call_.lock()) call->send(signal_frame(signo));
}

bool ExecControl::write_stdin(std::string_view data) {
  if (!stdin_open_)
    throw Error(Code::kFailedPrecondition, "exec stdin: the command was not started with an open stdin (option 'stdin_stream')");
  if (stdin_closed_->load()) throw Error(Code::kFailedPrecondition, "exec stdin: already closed");
  auto call = call_.lock();
  if (!call) return false;
  if (data.empty()) return true;
  call->send(stdin_frames(data));
  return call->wait_queue_below(kStdinBacklog);
}

void ExecControl::close_stdin() {
  if (!stdin_open_ || stdin_closed_->exchange(true)) return;
  if (auto call = call_.lock()) call->send(stdin_eof_frame());
}

void ExecControl::resize(uint32_t rows, uint32_t cols) {
  if (!tty_) throw Error(Code::kFailedPrecondition, "exec resize: the command has no terminal (option 'tty')");
  const proto::TermSize size = term_size(rows, cols);
  if (auto call = call_.lock()) call->send(resize_frame(size));
}

void ExecControl::cancel() {
  // Kill and wait for the agent's exit report, so that CANCELLED means "nothing of it runs any more".
  if (auto call = call_.lock()) call->cancel(signal_frame(SIGKILL), std::chrono::seconds(2));
}

ExecControl Sandbox::exec_async(ExecParams params, ExecDone done) {
  auto owner = owner_checked();
  if (params.argv.empty() || params.argv[0].empty())
    throw Error(Code::kInvalidArgument, "invalid exec field 'argv': a command is required");
  if (params.timeout_s < 0 || !std::isfinite(params.timeout_s))
    throw Error(Code::kInvalidArgument, "invalid exec field 'timeout': must be >= 0");

  if (params.toolkit && record_.spec.toolkit.empty())
    throw Error(Code::kFailedPrecondition, "sandbox " + id() + " has no toolkit (spec field 'toolkit'): exec option 'toolkit' refused");

  // What the audit record of this exec says (written when it completes, however it ends).
  auto audit = std::make_shared<ExecAudit>();
  audit->argv = params.argv;
  audit->cwd = params.cwd;
  audit->user = params.user;
  audit->keep_background = params.keep_background;
  audit->streaming = static_cast<bool>(params.on_output);
  audit->start = sys::now_unix_seconds();

  proto::ExecRequest req;
  req.argv = std::move(params.argv);
  req.env = merge_env(base_env_, params.env);
  req.cwd = std::move(params.cwd);
  req.user = std::move(params.user);
  req.timeout_ms = static_cast<uint64_t>(std::ceil(params.timeout_s * 1000));
  req.output_limit = params.output_limit ? params.output_limit : kDefaultOutputLimit;
  if (params.kill_on_output_limit) req.flags |= proto::kExecKillOnOutputLimit;
  if (params.keep_background) req.flags |= proto::kExecKeepBackground;
  if (params.toolkit) req.flags |= proto::kExecToolkit;
  if (!params.stdin_data.empty() || params.stdin_stream || params.tty) req.flags |= proto::kExecHasStdin;
  if (params.tty) {
    req.flags |= proto::kExecPty;
    req.term = term_size(params.tty_rows, params.tty_cols);
  }

  // checked before anything is sent
  std::string frames = exec_request_frames(req, params.stdin_data, params.stdin_stream || params.tty);
  audit->output_limit = req.output_limit;

  // A spec that keeps its logs at expiry keeps each exec's last output too (a streaming one's as it passes).
  std::string output_log_path =
      record_.spec.on_expiry != OnExpiry::kDestroy ? owner->output_log_path(id()) : std::string();
  std::shared_ptr<std::array<output_log::TailKeeper, 2>> tails;
  if (!output_log_path.empty() && params.on_output) {
    tails = std::make_shared<std::array<output_log::TailKeeper, 2>>();
    params.on_output = [tails, inner = std::move(params.on_output)](int stream, std::string_view data) {
      (*tails)[stream == 2 ? 1 : 0].add(data);
      inner(stream, data);
    };
  }

  struct State {
    State(uint64_t limit, ExecReplies::OnOutput on_output) : replies(limit, std::move(on_output)) {}
    ExecReplies replies;
    uint64_t start_ns = sys::now_monotonic_ns();
  };
  auto state = std::make_shared<State>(req.output_limit, std::move(params.on_output));
  auto on_frame = [state](proto::AgentMsg type, std::string_view payload) { return state->replies.on_frame(type, payload); };
  std::string sandbox_id = id();
  std::shared_ptr<AuditLog> log = owner->audit();
  AuditLabels labels = this->labels();
  sys::UniqueFd connection;
  try {
    connection = connect_for_call();
  } catch (...) {
    audit->end = sys::now_unix_seconds();
    try {
      log->write("exec", sandbox_id, labels, audit_exec_fields(*audit, nullptr, std::current_exception()));
    } catch (...) {
    }
    throw;
  }
  owner->exec_began(sandbox_id);
  std::weak_ptr<SandboxOwner> weak_owner = owner_;
  auto on_done = [state, done = std::move(done), sandbox_id, audit, log, labels, weak_owner, output_log_path,
                  tails](std::exception_ptr error) {
    ExecOutcome& outcome = state->replies.outcome;
    outcome.duration_ns = sys::now_monotonic_ns() - state->start_ns;
    if (auto o = weak_owner.lock()) o->exec_ended(sandbox_id);
    audit->end = sys::now_unix_seconds();
    audit->stdout_bytes = state->replies.received(1);
    audit->stderr_bytes = state->replies.received(2);
    try {
      log->write("exec", sandbox_id, labels, audit_exec_fields(*audit, &outcome, error));
    } catch (...) {  // the record could not even be built: the exec's result matters more
    }
    if (!output_log_path.empty())
      output_log::append(output_log_path, sandbox_id, labels, *audit, error ? nullptr : &outcome,
                         tails ? std::string_view((*tails)[0].text()) : std::string_view(outcome.stdout_data),
                         tails ? std::string_view((*tails)[1].text()) : std::string_view(outcome.stderr_data), error);
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const Error& e) {
        error = std::make_exception_ptr(Error(e.code(), "exec in sandbox " + sandbox_id + ": " + e.what(), e.err_no()));
      } catch (...) {
      }
    }
    done(error, std::move(outcome));
  };
  try {
    return ExecControl(AgentCall::start(owner->io(), std::move(connection), std::move(frames), std::move(on_frame),
                                        std::move(on_done), exec_backstop(req.timeout_ms)),
                       params.stdin_stream || params.tty, params.tty);  // a terminal is typed into while it lives
  } catch (...) {
    owner->exec_ended(sandbox_id);  // not started: its busy interval ends here (on_done never runs)
    throw;
  }
}

ExecOutcome Sandbox::exec(ExecParams params) {
  owner_checked()->check_not_on_loop("exec");
  std::promise<ExecOutcome> promise;
  auto future = promise.get_future();
  exec_async(std::move(params), [&promise](std::exception_ptr error, ExecOutcome outcome) {
    if (error)
      promise.set_exception(error);
    else
      promise.set_value(std::move(outcome));
  });
  return future.get();
}

void Sandbox::call_async(std::string frames, AgentCall::FrameHandler on_frame, std::function<void(std::exception_ptr)> done,
                         uint64_t bytes) {
  auto owner = owner_checked();
  AgentCall::start(owner->io(), connect_for_call(), std::move(frames), std::move(on_frame), std::move(done),
                   file_backstop(bytes));
}

void Sandbox::write_file_async(const std::string& path, std::string data, uint32_t mode, FileDone done) {
  const uint64_t bytes = data.size();
  call_async(write_file_frames(path, data, mode), write_file_reply,
             [done = std::move(done)](std::exception_ptr error) { done(error, std::string(), 0); }, bytes);
}

void Sandbox::read_file_async(const std::string& path, uint64_t max_bytes, FileDone done) {
  if (!max_bytes) max_bytes = 64ull << 20;
  std::string frame = read_file_frame(path, max_bytes);
  auto replies = std::make_shared<ReadFileReplies>(max_bytes);
  call_async(
      std::move(frame), [replies](proto::AgentMsg type, std::string_view payload) { return replies->on_frame(type, payload); },
      [replies, done = std::move(done)](std::exception_ptr error) {
        done(error, std::move(replies->data), replies->mode);
      },
      max_bytes);
}

void Sandbox::write_file(const std::string& path, std::string data, uint32_t mode) {
  owner_checked()->check_not_on_loop("write_file");
  std::promise<void> promise;
  auto future = promise.get_future();
  write_file_async(path, std::move(data), mode, [&promise](std::exception_ptr error, std::string, uint32_t) {
    if (error)
      promise.set_exception(error);
    else
      promise.set_value();
  });
  future.get();
}

std::string Sandbox::read_file(const std::string& path, uint64_t max_bytes) {
  owner_checked()->check_not_on_loop("read_file");
  std::promise<std::string> promise;
  auto future = promise.get_future();
  read_file_async(path, max_bytes, [&promise](std::exception_ptr error, std::string data, uint32_t) {
    if (error)
      promise.set_exception(error);
    else
      promise.set_value(std::move(data));
  });
  return future.get();
}

void Sandbox::destroy() {
  std::lock_guard lock(state_mutex_);
  auto owner = owner_.lock();
  if (!owner || owner->closed()) {
    if (destroyed_) return;
    throw Error(Code::kFailedPrecondition, "sandbox " + id() + ": its runtime is closed");
  }
  if (destroyed_) return;
  destroyed_ = true;
  owner->end(record_, impl_, end_reason::kExplicit);
  owner->forget(id());
}

void Sandbox::destroy_async(std::function<void(std::exception_ptr)> done) {
  auto owner = owner_checked();
  auto self = shared_from_this();
  owner->in_background([self, owner, done = std::move(done)] {
    std::exception_ptr error;
    try {
      self->destroy();
    } catch (...) {
      error = std::current_exception();
    }
    boost::asio::post(owner->io(), [done, error] { done(error); });
  });
}

SnapshotResult Sandbox::snapshot(const SnapshotOptions& options) {
  auto owner = owner_checked();
  SandboxRecord rec;
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (destroyed_) throw Error(Code::kFailedPrecondition, "sandbox " + id() + " is destroyed");
    rec = record_;
  }
  return owner->snapshot(rec, *impl_, options);
}

ForkResult Sandbox::fork(const ForkOptions& options) {
  auto owner = owner_checked();
  check_fork_count(options.n);  // before the snapshot: a bad count makes nothing
  if (!(owner->backend_capabilities(record_.backend) & kCapFork))
    throw Error(Code::kUnimplemented, "forks are not supported by the " + record_.backend + " backend");
  SnapshotOptions snap;
  snap.machine = options.machine;
  snap.exclude = options.exclude;
  snap.default_excludes = false;  // a fork continues the trajectory: every file
  snap.max_depth = options.max_depth;
  SnapshotResult taken = snapshot(snap);
  SandboxRecord rec;
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    rec = record_;
  }
  return owner->fork_from(rec, std::move(taken), options);
}

void Sandbox::set_limits(const Limits& limits) {
  auto owner = owner_checked();
  if (!(owner->backend_capabilities(record_.backend) & kCapSetLimits))
    throw Error(Code::kUnimplemented, "changing a running sandbox's limits is not supported by the " + record_.backend + " backend");
  impl_->set_limits(limits);
}

bool Sandbox::can_check_reuse() const { return owner_checked()->backend_capabilities(record_.backend) & kCapReuseCheck; }

std::unique_ptr<BackendSandbox::ReuseMark> Sandbox::reuse_mark() const {
  if (!can_check_reuse())
    throw Error(Code::kUnimplemented, "a reuse check is not supported by the " + record_.backend + " backend");
  return impl_->reuse_mark();
}

bool Sandbox::unchanged_since(const BackendSandbox::ReuseMark& mark) const { return impl_->unchanged_since(mark); }

uint64_t Sandbox::pause() {
  auto owner = owner_checked();
  if (!(owner->backend_capabilities(record_.backend) & kCapPause))
    throw Error(Code::kUnimplemented, "pause is not supported by the " + record_.backend + " backend");
  std::lock_guard lock(state_mutex_);
  if (paused_ && owner->record_paused(id())) return 0;
  if (record_.state == SandboxState::kPaused) record_.state = SandboxState::kRunning;  // resumed elsewhere
  check_transition(id(), record_.state, SandboxState::kPaused);
  impl_->pause();
  record_.state = SandboxState::kPaused;
  paused_ = true;
  owner->persist(record_);
  owner->audit()->write("pause", id(), record_.spec.labels, {});
  return impl_->reclaim_memory();
}

void Sandbox::resume() {
  auto owner = owner_checked();
  std::lock_guard lock(state_mutex_);
  if (!paused_ && !owner->record_paused(id())) return;
  impl_->resume();
  record_.state = SandboxState::kRunning;
  paused_ = false;
  owner->persist(record_);
  owner->audit()->write("resume", id(), record_.spec.labels, {});
}

void Sandbox::net_update(std::string_view policy_json) {
  const NetworkPolicy policy = parse_network_text(policy_json);
  auto owner = owner_checked();
  std::lock_guard lock(state_mutex_);
  impl_->net_update(policy);
  record_.spec.network.allow = policy.allow;
  record_.spec.network.dns = policy.dns;
  owner->persist(record_);
  owner->audit()->write("net_update", id(), record_.spec.labels,
                        boost::json::object{{"network", boost::json::parse(network_to_json(record_.spec.network))}});
}

std::string Sandbox::net_stats_json() const {
  (void)owner_checked();
  return boost::json::serialize(impl_->net_stats());
}

std::string Sandbox::seccomp_stats_json() const {
  (void)owner_checked();
  return boost::json::serialize(impl_->seccomp_stats());
}

std::string Sandbox::info_json() const {
  SandboxRecord rec;
  {
    std::lock_guard lock(state_mutex_);
    rec = record_;
  }
  // Paused or resumed by another process (or by label) since: the persisted record says so.
  if (!destroyed_ && (rec.state == SandboxState::kRunning || rec.state == SandboxState::kPaused))
    if (auto owner = owner_.lock(); owner && !owner->closed())
      rec.state = owner->record_paused(id()) ? SandboxState::kPaused : SandboxState::kRunning;
  const char* state = destroyed_ ? "destroyed" : impl_->alive() ? state_name(rec.state) : "dead";
  return public_record_json(rec, state);
}

}  // namespace sandlet
