// Shared pieces of the `sandlet` command-line front end: global options, command entry points, and the
// helpers several commands use. The CLI is a thin layer over sandlet.hpp: it parses arguments, builds a
// spec JSON for the library to validate, and prints.
#pragma once
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "sandlet/sandlet.hpp"

namespace sandlet::cli {

// Exit statuses of the CLI itself (a command's own status is passed through by run/exec).
constexpr int kExitRuntimeError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitTimedOut = 124;        // like timeout(1)
constexpr int kExitCannotExecute = 126;   // like the shells
constexpr int kExitNotFound = 127;

struct Global {
  std::optional<std::string> root;  // --root; unset = the library's default ($SANDLET_ROOT, /var/lib/sandlet)
};

// One command: its name (for messages), its option table, its help text.
struct CommandContext {
  Global global;
  std::string name;
  // The command a usage error's hint points at ("layer pull"): set once the command (and the sub-command
  // of a group) is known, so that "See 'sandlet layer pull --help'" names the help that lists its options.
  std::string help_for;
};

// For the groups that parse their verb as an operand (net, policy): the first operand of `args` when it is
// one of `verbs` becomes part of ctx.help_for, before the options are parsed (`defs`: which take values).
void help_for_verb(CommandContext& ctx, const std::vector<OptionDef>& defs, const std::vector<std::string>& args,
                   std::initializer_list<std::string_view> verbs);

// Parses `args` for a command; handles --help (prints `usage`, returns false: exit 0) and --root.
bool parse_command(CommandContext& ctx, const std::vector<OptionDef>& defs, const std::vector<std::string>& args,
                   OperandMode mode, std::string_view usage, ParsedArgs* out);

// Opens the runtime under --root. `sweep` = let the library collect leftovers at open: the commands that
// create (run, create) and the inventory ones (ps, rm, gc) do; exec and cp, which act on one existing
// sandbox, skip it (a sweep reads every record of the root: its cost grows with the sandboxes there).
// `create_soon`: a create follows at once (run, create), so the open starts preparing it.
Runtime open_runtime(const Global& g, bool sweep, bool create_soon = false);

// Commands. Each returns the process exit status; sandlet::Error and UsageError propagate to main.
int cmd_run(CommandContext& ctx, const std::vector<std::string>& args);
int cmd_create(CommandContext& ctx, const std::vector<std::string>& args);
int cmd_call(CommandContext& ctx, const std::vector<std::string>& args);  // run_create.cpp (FnCall)
int cmd_exec(CommandContext& ctx, const std::vector<std::string>& args);
int cmd_ps(CommandContext& ctx, const std::vector<std::string>& args);
int cmd_rm(CommandContext& ctx, const std::vector<std::string>& args);
int cmd_gc(CommandContext& ctx, const std::vector<std::string>& args);
int cmd_logs(CommandContext& ctx, const std::vector<std::string>& args);  // logs.cpp
int cmd_pause(CommandContext& ctx, const std::vector<std::string>& args);
int cmd_resume(CommandContext& ctx, const std::vector<std::string>& args);
int cmd_cp(CommandContext& ctx, const std::vector<std::string>& args);
int cmd_layer(CommandContext& ctx, const std::vector<std::string>& args);  // layer_env.cpp
int cmd_env(CommandContext& ctx, const std::vector<std::string>& args);
int cmd_doctor(CommandContext& ctx, const std::vector<std::string>& args);  // doctor.cpp
int cmd_build(CommandContext& ctx, const std::vector<std::string>& args);   // build.cpp
int cmd_snapshot(CommandContext& ctx, const std::vector<std::string>& args);  // snapshot_fork.cpp
int cmd_fork(CommandContext& ctx, const std::vector<std::string>& args);
int cmd_loader(CommandContext& ctx, const std::vector<std::string>& args);  // store.cpp
int cmd_audit(CommandContext& ctx, const std::vector<std::string>& args);   // audit.cpp
int cmd_net(CommandContext& ctx, const std::vector<std::string>& args);     // net.cpp
int cmd_policy(CommandContext& ctx, const std::vector<std::string>& args);  // policy.cpp
int cmd_metrics(CommandContext& ctx, const std::vector<std::string>& args);  // metrics.cpp
int cmd_serve(CommandContext& ctx, const std::vector<std::string>& args);    // serve.cpp

// ---- exec machinery shared by run and exec (exec.cpp) ----------------------------------------------

// Options common to run and exec that shape the command.
struct CommandOptions {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // exec only ("K=V"); run puts --env into the spec
  std::string cwd, user;         // exec only
  double timeout_s = 0;
  bool keep_background = false;  // exec --keep-background
  bool toolkit = false;          // exec --toolkit
  std::string stdin_data;        // -i: the CLI's whole stdin, read before the sandbox work starts
};

// "K=V" stays; a bare "K" takes K's value from the CLI's environment (docker-like) and is dropped if unset.
// Throws UsageError for an empty key.
std::optional<std::pair<std::string, std::string>> parse_env_flag(const std::string& flag);
// Parses a non-negative number of seconds for a CLI-only option; throws UsageError naming `option`.
double parse_seconds(const std::string& text, std::string_view option);

// Runs the command with its output streamed to fds 1 and 2 and returns the exit status to propagate
// (the command's, 128+signal, 124 timeout, 126/127 cannot execute / not found).
// `owned_sandbox`: on SIGINT/SIGTERM/SIGHUP destroy the sandbox and die by that signal (run);
// otherwise die by it at once (exec: the library kills an exec whose connection closes, and nothing is
// left to clean up on our side). A second signal kills the CLI immediately.
class SignalGuard;
// The exec options the command asks for, its output streamed whole (no per-stream cap: the CLI buffers
// nothing, so a cap would only truncate `exec ID -- cat big > file`). stdin and output are the caller's.
ExecOptions streamed_exec_options(const CommandOptions& cmd);
int run_command(Sandbox& sb, const CommandOptions& cmd, bool owned_sandbox, SignalGuard& guard);
// exec -i / -t (exec_interactive.cpp): stdin streamed as it comes (`forward_stdin`), and/or a pseudo-terminal
// inside (`tty`; with -i this terminal raw and its size followed). Exit statuses as run_command's.
int run_interactive(Sandbox& sb, const CommandOptions& cmd, bool forward_stdin, bool tty, SignalGuard& guard);
// The CLI's exit status for a command's result (printing why when it timed out or lost output), and for
// an error starting it (printed; 127 not found, 126 not executable, 2 bad input, else 1).
int status_for_result(const ExecResult& r, const CommandOptions& cmd);
int status_for_start_error(const Error& e);

// Ctrl-C handling. While a guard lives, SIGINT/SIGTERM/SIGHUP only write their number into a self-pipe
// (SA_RESTART, so library calls on other threads are not disturbed); the main thread polls that pipe
// together with the exec's completion and decides what to clean up. We chose this over the default
// action so that `run` destroys its sandbox at once instead of leaving the teardown to the next sweep.
// Install the guard before any blocking step whose interruption should be handled (run: before create).
class SignalGuard final {
 public:
  SignalGuard();
  ~SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

  int read_fd() const { return read_fd_; }
  int write_fd() const { return write_fd_; }
  // Reads whatever is in the pipe without blocking. A 0 byte means "exec completed" (sets *done);
  // anything else is a signal number. Returns the first signal seen so far, or 0.
  int drain(bool* done = nullptr);
  int pending() { return drain(); }
  // Restores the default action for `sig`, unblocks and raises it: the process dies by that signal, so
  // the parent shell sees a real Ctrl-C. Async-signal-safe.
  [[noreturn]] static void die_by(int sig);

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  int first_signal_ = 0;
};

// ---- output (output.cpp) ---------------------------------------------------------------------------

// write(2) until done (EINTR/EAGAIN handled); false on a hard error such as EPIPE.
bool write_all(int fd, const void* data, size_t len);
bool write_all(int fd, std::string_view s);
// "sandlet: <message>\n" on stderr.
void print_error(std::string_view message);
// For commands that act on several operands (rm, layer rm, env rm): runs `act` on each, prints the operand
// when it succeeded and "<command> OPERAND: error" when it threw, and goes on. Returns the exit status.
int for_each_operand(const std::vector<std::string>& operands, std::string_view command,
                     const std::function<void(const std::string&)>& act);
// Prints rows as left-aligned columns separated by three spaces; rows[0] is the header.
void print_table(const std::vector<std::vector<std::string>>& rows);
// "5 seconds ago", "3 minutes ago", ... from a Unix time in seconds.
std::string format_age(double unix_seconds);
// Reads a whole file (or stdin for "-"); throws std::runtime_error with "<path>: <strerror>".
std::string read_local_file(const std::string& path, unsigned* mode_out);

}  // namespace sandlet::cli
