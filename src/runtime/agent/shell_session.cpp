#include "runtime/agent/shell_session.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <utility>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet {
namespace {

constexpr uint64_t kDefaultLimit = 16ull << 20;
constexpr size_t kMaxTag = 16;          // an exit status or "e"
constexpr size_t kMaxBetween = 1u << 20;  // background output kept between two commands, per stream
constexpr double kHandshakeTimeout = 30;

// bash when the sandbox has it (what agents' commands assume), else the POSIX shell; never a login shell,
// no rc files: the session starts the same in every sandbox of an environment.
const std::vector<std::string>& default_shell() {
  static const std::vector<std::string> argv = {
      "/bin/sh", "-c", "command -v bash >/dev/null 2>&1 && exec bash --noprofile --norc; exec /bin/sh"};
  return argv;
}

// `text` as one single-quoted shell word: nothing in it is expanded.
std::string quoted(std::string_view text) {
  std::string q = "'";
  for (char c : text) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  q += '\'';
  return q;
}

// What the shell reads for one command: the command through eval (cd or export stay in the shell; `command`
// makes a syntax error the command's failure, where a POSIX shell would exit), its exit status on stdout and
// an end mark on stderr, both after a marker with this command's nonce.
std::string command_script(std::string_view command, const std::string& marker) {
  return "command eval " + quoted(command) + " </dev/null\nprintf '%s%d__\\n' '" + marker + "' \"$?\"\nprintf '%s__\\n' '" +
         marker + "e' >&2\n";
}

}  // namespace

// ---- MarkerScan -------------------------------------------------------------------------------------------

void MarkerScan::keep(std::string_view data) {
  const uint64_t room = text_.size() < limit_ ? limit_ - text_.size() : 0;
  if (data.size() > room) truncated_ = true;
  text_.append(data.substr(0, static_cast<size_t>(std::min<uint64_t>(room, data.size()))));
}

bool MarkerScan::feed(std::string_view data) {
  if (found_) {
    rest_.append(data.substr(0, std::min(data.size(), kMaxBetween - std::min(kMaxBetween, rest_.size()))));
    return true;
  }
  window_.append(data);
  for (;;) {
    const size_t pos = window_.find(prefix_);
    if (pos == std::string::npos) {
      // All but what could be the start of the prefix is output.
      const size_t hold = std::min(window_.size(), prefix_.size() - 1);
      keep(std::string_view(window_).substr(0, window_.size() - hold));
      window_.erase(0, window_.size() - hold);
      return false;
    }
    keep(std::string_view(window_).substr(0, pos));
    window_.erase(0, pos);
    const std::string_view after = std::string_view(window_).substr(prefix_.size());
    const size_t end = after.substr(0, kMaxTag + 3).find("__\n");
    if (end != std::string_view::npos) {
      tag_ = std::string(after.substr(0, end));
      rest_ = std::string(after.substr(end + 3, kMaxBetween));
      window_.clear();
      found_ = true;
      return true;
    }
    if (after.size() < kMaxTag + 3) return false;  // the rest of the marker line is still on its way
    keep(std::string_view(window_).substr(0, 1));  // the prefix, but no marker line: output after all
    window_.erase(0, 1);
  }
}

// ---- ShellSession -----------------------------------------------------------------------------------------

struct ShellSession::Shared {
  explicit Shared(uint64_t limit) : limit(limit) {}
  const uint64_t limit;
  std::mutex mu;
  std::condition_variable cv;
  std::optional<MarkerScan> scan[2];  // stdout, stderr of the command in flight
  std::string pending[2];             // output that came between commands
  bool busy = false;
  bool ended = false;
  bool timed_out = false;
  std::exception_ptr end_error;
  ExecOutcome shell_outcome;

  void on_output(int stream, std::string_view data) {
    std::lock_guard lock(mu);
    const int s = stream == 2 ? 1 : 0;
    if (scan[s]) {
      if (scan[s]->feed(data)) cv.notify_all();
    } else {
      pending[s].append(data.substr(0, std::min(data.size(), kMaxBetween - std::min(kMaxBetween, pending[s].size()))));
    }
  }

  void on_end(std::exception_ptr error, ExecOutcome outcome) {
    std::lock_guard lock(mu);
    ended = true;
    if (!timed_out) end_error = error;  // a cancel's CANCELLED is how a timeout ends, not an error
    shell_outcome = std::move(outcome);
    for (auto& sc : scan)
      if (sc && !sc->found()) sc->finish();
    cv.notify_all();
  }

  // Why run() is refused once the shell ended.
  std::string ended_message() const {
    if (end_error) {
      try {
        std::rethrow_exception(end_error);
      } catch (const std::exception& e) {
        return std::string("session: the shell ended: ") + e.what();
      }
    }
    if (timed_out) return "session: ended when a command timed out (the shell and everything it started were killed)";
    if (shell_outcome.signal) return "session: the shell was killed by signal " + std::to_string(shell_outcome.signal);
    return "session: the shell exited with status " + std::to_string(shell_outcome.exit_code);
  }
};

ShellSession::ShellSession(std::shared_ptr<Sandbox> sandbox, SessionParams params)
    : sandbox_(std::move(sandbox)),
      shared_(std::make_shared<Shared>(params.output_limit ? params.output_limit : kDefaultLimit)) {
  sandbox_->check_not_on_loop("session open");
  ExecParams exec;
  exec.argv = params.argv.empty() ? default_shell() : std::move(params.argv);
  exec.env = std::move(params.env);
  exec.cwd = std::move(params.cwd);
  exec.user = std::move(params.user);
  exec.stdin_stream = true;
  exec.output_limit = UINT64_MAX;  // the session caps each command's output itself
  std::weak_ptr<Shared> weak = shared_;
  exec.on_output = [weak](int stream, std::string_view data) {
    if (auto sh = weak.lock()) sh->on_output(stream, data);
  };
  control_.emplace(sandbox_->exec_async(std::move(exec), [weak](std::exception_ptr error, ExecOutcome outcome) {
    if (auto sh = weak.lock()) sh->on_end(std::move(error), std::move(outcome));
  }));
  try {
    ExecOutcome hello = run("", kHandshakeTimeout);
    if (hello.timed_out) throw Error(Code::kDeadlineExceeded, "session: the shell did not answer within 30 s");
    if (!alive()) {
      std::lock_guard lock(shared_->mu);
      throw Error(Code::kFailedPrecondition, shared_->ended_message());
    }
  } catch (...) {
    close();
    throw;
  }
}

ShellSession::~ShellSession() { close(); }

bool ShellSession::alive() const {
  std::lock_guard lock(shared_->mu);
  return !shared_->ended;
}

ExecOutcome ShellSession::run(std::string_view command, double timeout_s) {
  if (command.find('\0') != std::string_view::npos)
    throw Error(Code::kInvalidArgument, "invalid session command: it contains a NUL byte");
  if (timeout_s < 0 || !std::isfinite(timeout_s))
    throw Error(Code::kInvalidArgument, "invalid session field 'timeout': must be >= 0");
  sandbox_->check_not_on_loop("session run");
  Shared& sh = *shared_;
  const std::string marker = "__sandlet_" + sys::random_hex(12) + "_";
  const uint64_t start = sys::now_monotonic_ns();
  std::unique_lock lock(sh.mu);
  if (sh.ended) {
    // A shell that could not start at all (its error) is UNAVAILABLE or what the sandbox said; one that
    // ended is a session in the wrong state.
    if (sh.end_error) std::rethrow_exception(sh.end_error);
    throw Error(Code::kFailedPrecondition, sh.ended_message());
  }
  if (sh.busy) throw Error(Code::kFailedPrecondition, "session: another command is running in it");
  sh.busy = true;
  for (int s = 0; s < 2; ++s) {
    sh.scan[s].emplace(marker, sh.limit);
    sh.scan[s]->feed(std::exchange(sh.pending[s], {}));
  }
  lock.unlock();
  try {
    control_->write_stdin(command_script(command, marker));
  } catch (...) {
    std::lock_guard relock(sh.mu);
    sh.busy = false;
    throw;
  }
  lock.lock();
  auto done = [&] { return sh.ended || (sh.scan[0]->found() && sh.scan[1]->found()); };
  bool finished = true;
  if (timeout_s > 0)
    finished = sh.cv.wait_for(lock, std::chrono::nanoseconds(static_cast<int64_t>(timeout_s * 1e9)), done);
  else
    sh.cv.wait(lock, done);
  if (!finished) {
    sh.timed_out = true;
    lock.unlock();
    control_->cancel();  // the shell and all it started; the end is reported to on_end
    lock.lock();
    sh.cv.wait(lock, [&] { return sh.ended; });
  }
  ExecOutcome out;
  out.stdout_data = std::move(sh.scan[0]->text());
  out.stderr_data = std::move(sh.scan[1]->text());
  out.stdout_truncated = sh.scan[0]->truncated();
  out.stderr_truncated = sh.scan[1]->truncated();
  const bool completed = sh.scan[0]->found() && sh.scan[1]->found();
  if (completed) {
    const std::string& tag = sh.scan[0]->tag();
    const bool number = !tag.empty() && tag.size() <= 3 && std::all_of(tag.begin(), tag.end(), ::isdigit);
    out.exit_code = number ? std::stoi(tag) : -1;
    sh.pending[0] = sh.scan[0]->take_rest();
    sh.pending[1] = sh.scan[1]->take_rest();
  } else if (sh.timed_out) {
    out.timed_out = true;
  } else {  // the shell ended during the command (`exit 3`): its status is the command's
    out.exit_code = sh.shell_outcome.exit_code;
    out.signal = sh.shell_outcome.signal;
  }
  sh.scan[0].reset();
  sh.scan[1].reset();
  sh.busy = false;
  out.duration_ns = sys::now_monotonic_ns() - start;
  if (!completed && !out.timed_out && sh.end_error) std::rethrow_exception(sh.end_error);
  return out;
}

void ShellSession::close() {
  {
    std::lock_guard lock(shared_->mu);
    if (shared_->ended || !control_) return;
  }
  control_->cancel();  // the shell and everything it left running
  // The end normally comes within milliseconds (cancel falls back to dropping the connection after 2 s);
  // bounded, in case the runtime was closed under the session.
  std::unique_lock lock(shared_->mu);
  shared_->cv.wait_for(lock, std::chrono::seconds(5), [&] { return shared_->ended; });
}

}  // namespace sandlet
