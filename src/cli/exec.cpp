// `sandlet exec`, and the exec machinery shared with `run`: streaming output, Ctrl-C, exit statuses.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>

#include "cli.hpp"

namespace sandlet::cli {
namespace {

constexpr int kHandledSignals[] = {SIGINT, SIGTERM, SIGHUP};

std::atomic<int> g_notify_fd{-1};
std::atomic<int> g_signal_count{0};
struct sigaction g_previous[std::size(kHandledSignals)];

extern "C" void on_signal(int sig) {
  const int saved_errno = errno;
  if (g_signal_count.fetch_add(1) > 0) SignalGuard::die_by(sig);  // second Ctrl-C: give up at once
  const unsigned char byte = static_cast<unsigned char>(sig);
  const int fd = g_notify_fd.load();
  if (fd >= 0) (void)!::write(fd, &byte, 1);
  errno = saved_errno;
}

constexpr std::string_view kExecUsage =
    "Usage: sandlet exec [OPTIONS] ID [--] CMD [ARG...]\n"
    "\n"
    "Run a command in an existing sandbox; its stdout and stderr are streamed as they come\n"
    "(without a size limit).\n"
    "\n"
    "Options:\n"
    "  -e, --env K=V        Add an environment variable (repeatable; a bare K copies it from here)\n"
    "  -w, --workdir DIR    Working directory inside the sandbox\n"
    "  -u, --user USER      uid[:gid] or a user name from the sandbox's /etc/passwd\n"
    "  -i, --interactive    Stream this process's stdin to the command as it comes\n"
    "  -t, --tty            Give the command a pseudo-terminal (stdout and stderr merged, as on a\n"
    "                       terminal); with -i this terminal goes raw and its size is followed\n"
    "      --timeout S      Kill the command and everything it started after S seconds\n"
    "      --keep-background  Let processes the command leaves running (server &) outlive it;\n"
    "                       by default they are killed when the command exits\n"
    "      --toolkit        Run the command from the sandbox's protected toolkit (/.sandlet/toolkit):\n"
    "                       found there only, with its PATH and loader (the spec's \"toolkit\")\n"
    "      --root DIR       State directory (default: $SANDLET_ROOT, else /var/lib/sandlet)\n"
    "  -h, --help           Print this help\n"
    "\n"
    "Exit status: the command's; 128+N if it was killed by signal N; 124 if --timeout expired;\n"
    "126 if it cannot be executed, 127 if it was not found; 1 on other errors, 2 on usage errors.\n"
    "Ctrl-C ends the CLI; the library then kills the command and everything it started\n"
    "(with -it, Ctrl-C is typed into the command's terminal instead).\n";

}  // namespace

// ---- SignalGuard --------------------------------------------------------------------------------------

SignalGuard::SignalGuard() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return;  // no pipe: signals keep their default action
  read_fd_ = p[0];
  write_fd_ = p[1];
  g_notify_fd.store(write_fd_);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int s : kHandledSignals) sigaddset(&sa.sa_mask, s);  // one handler at a time
  for (size_t i = 0; i < std::size(kHandledSignals); ++i) {
    ::sigaction(kHandledSignals[i], &sa, &g_previous[i]);
    // A signal ignored on entry (nohup, background job of a non-interactive shell) stays ignored.
    if (g_previous[i].sa_handler == SIG_IGN) ::sigaction(kHandledSignals[i], &g_previous[i], nullptr);
  }
}

SignalGuard::~SignalGuard() {
  if (read_fd_ < 0) return;
  for (size_t i = 0; i < std::size(kHandledSignals); ++i) ::sigaction(kHandledSignals[i], &g_previous[i], nullptr);
  g_notify_fd.store(-1);
  ::close(read_fd_);
  ::close(write_fd_);
}

int SignalGuard::drain(bool* done) {
  if (read_fd_ < 0) return 0;
  unsigned char buf[64];
  for (;;) {
    const ssize_t n = ::read(read_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == 0) {
        if (done != nullptr) *done = true;
      } else if (first_signal_ == 0) {
        first_signal_ = buf[i];
      }
    }
  }
  return first_signal_;
}

void SignalGuard::die_by(int sig) {
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  ::sigaction(sig, &sa, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);  // inside the handler the signal is blocked
  ::raise(sig);
  ::_exit(128 + sig);  // only if the signal's default action did not end us
}

// ---- helpers ------------------------------------------------------------------------------------------

std::optional<std::pair<std::string, std::string>> parse_env_flag(const std::string& flag) {
  const size_t eq = flag.find('=');
  const std::string key = flag.substr(0, eq);
  if (key.empty()) throw UsageError("invalid --env '" + flag + "': expected KEY=VALUE");
  if (eq != std::string::npos) return std::make_pair(key, flag.substr(eq + 1));
  const char* v = std::getenv(key.c_str());
  if (v == nullptr) return std::nullopt;
  return std::make_pair(key, std::string(v));
}

double parse_seconds(const std::string& text, std::string_view option) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || errno != 0 || !std::isfinite(v) || v < 0)
    throw UsageError("invalid " + std::string(option) + " '" + text + "': expected a number of seconds >= 0");
  return v;
}

// ---- running a command --------------------------------------------------------------------------------

namespace {

struct Completion {
  std::mutex mu;
  std::optional<Error> error;
  ExecResult result;
};

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

}  // namespace

int status_for_start_error(const Error& e) {
  print_error(e.what());
  switch (e.code()) {
    case SANDLET_NOT_FOUND: return kExitNotFound;
    case SANDLET_PERMISSION_DENIED: return kExitCannotExecute;
    // A bad spec (run creates its sandbox in the same call) or option value. (A user or directory that does
    // not exist in the sandbox is NOT_FOUND, hence 127, as for a missing command: how the agent reports it.)
    case SANDLET_INVALID_ARGUMENT: return kExitUsage;
    default: return kExitRuntimeError;
  }
}

int status_for_result(const ExecResult& r, const CommandOptions& cmd) {
  if (r.stdout_truncated) print_error("the command's stdout passed the output limit; the rest was dropped");
  if (r.stderr_truncated) print_error("the command's stderr passed the output limit; the rest was dropped");
  if (r.timed_out) {
    print_error("command timed out after " + format_seconds(cmd.timeout_s) + " s; it was killed");
    return kExitTimedOut;
  }
  if (r.signal > 0) return 128 + r.signal;
  if (r.exit_code < 0) return kExitRuntimeError;  // killed, cause unknown
  return r.exit_code;
}

ExecOptions streamed_exec_options(const CommandOptions& cmd) {
  ExecOptions opts;
  opts.argv = cmd.argv;
  opts.env = cmd.env;
  opts.cwd = cmd.cwd;
  opts.user = cmd.user;
  opts.timeout_s = cmd.timeout_s;
  opts.keep_background = cmd.keep_background;
  opts.toolkit = cmd.toolkit;
  // Streaming buffers nothing and the agent applies backpressure, so the library's default per-stream
  // cap (meant for collected output) would only truncate the stream.
  opts.output_limit = UINT64_MAX;
  return opts;
}

int run_command(Sandbox& sb, const CommandOptions& cmd, bool owned_sandbox, SignalGuard& guard) {
  ExecOptions opts = streamed_exec_options(cmd);
  opts.stdin_data = cmd.stdin_data;
  // Streamed straight to our fds with write(2): no buffering, so output shows as it is produced.
  // A write error (e.g. EPIPE after `| head`) drops the chunk; SIGPIPE's default action ends the CLI.
  opts.on_output = [](int stream, std::string_view data) {
    write_all(stream == SANDLET_STDERR ? STDERR_FILENO : STDOUT_FILENO, data);
  };

  auto completion = std::make_shared<Completion>();
  const int notify_fd = guard.write_fd();
  try {
    sb.exec_async(opts, [completion, notify_fd](const Error* err, ExecResult result) {
      {
        std::lock_guard<std::mutex> lock(completion->mu);
        if (err != nullptr) completion->error = *err;
        else completion->result = std::move(result);
      }
      const unsigned char done = 0;
      (void)!::write(notify_fd, &done, 1);
    });
  } catch (const Error& e) {
    return status_for_start_error(e);
  }

  bool done = false;
  bool handled_signal = false;
  for (;;) {
    const int sig = guard.drain(&done);
    if (sig != 0 && !handled_signal) {
      handled_signal = true;
      if (!owned_sandbox) SignalGuard::die_by(sig);
      // Killing the sandbox ends the command (and everything it started); wait for the completion.
      try {
        sb.destroy();
      } catch (const Error& e) {
        print_error(e.what());
      }
    }
    if (done) break;
    pollfd p{guard.read_fd(), POLLIN, 0};
    ::poll(&p, 1, -1);  // EINTR just loops
  }

  std::lock_guard<std::mutex> lock(completion->mu);
  if (handled_signal) return 128 + guard.pending();  // the caller dies by the signal after cleanup
  if (completion->error) return status_for_start_error(*completion->error);
  return status_for_result(completion->result, cmd);
}

// ---- sandlet exec -------------------------------------------------------------------------------------

int cmd_exec(CommandContext& ctx, const std::vector<std::string>& args) {
  static const std::vector<OptionDef> kDefs = {
      {"env", 'e', true}, {"workdir", 'w', true}, {"user", 'u', true},
      {"interactive", 'i', false}, {"tty", 't', false}, {"timeout", 0, true}, {"keep-background", 0, false},
      {"toolkit", 0, false},
  };
  ParsedArgs a;
  if (!parse_command(ctx, kDefs, args, OperandMode::kStopAtFirst, kExecUsage, &a)) return 0;

  std::vector<std::string> operands = a.operands;
  if (operands.size() >= 2 && operands[1] == "--") operands.erase(operands.begin() + 1);
  if (operands.empty()) throw UsageError("requires a sandbox ID and a command");
  if (operands.size() < 2) throw UsageError("requires a command after the sandbox ID");

  CommandOptions cmd;
  const std::string id = operands[0];
  cmd.argv.assign(operands.begin() + 1, operands.end());
  for (const auto& e : a.all("env"))
    if (auto kv = parse_env_flag(e)) cmd.env.push_back(kv->first + "=" + kv->second);
  if (const auto* v = a.last("workdir")) cmd.cwd = *v;
  if (const auto* v = a.last("user")) cmd.user = *v;
  if (const auto* v = a.last("timeout")) cmd.timeout_s = parse_seconds(*v, "--timeout");
  const bool interactive = a.has("interactive"), tty = a.has("tty");
  cmd.keep_background = a.has("keep-background");
  cmd.toolkit = a.has("toolkit");

  SignalGuard guard;
  Runtime rt = open_runtime(ctx.global, /*sweep=*/false);
  Sandbox sb = rt.attach(id);
  if (interactive || tty) return run_interactive(sb, cmd, interactive, tty, guard);
  return run_command(sb, cmd, /*owned_sandbox=*/false, guard);
}

}  // namespace sandlet::cli
