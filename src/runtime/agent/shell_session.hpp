// A shell kept alive across calls: each run() hands one command to the same shell process (so cd, exported
// variables, functions and background jobs carry over) and returns that command's stdout, stderr and exit
// code, as separate streams and without echo: the shell reads from a pipe, not a terminal, and each
// command is followed by an end marker carrying a random nonce the command cannot know. docs/SHELLS.md.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/agent/exec_outcome.hpp"
#include "runtime/sandbox.hpp"

namespace sandlet {

struct SessionParams {
  std::vector<std::string> argv;  // the shell, reading commands from stdin; empty = bash if present, else /bin/sh
  std::vector<std::string> env;   // "K=V" added to the sandbox's environment
  std::string cwd;
  std::string user;
  uint64_t output_limit = 0;      // per command and stream; 0 = 16 MiB (beyond: dropped, flagged truncated)
};

// One stream of the shell's output during one command: what came before the end marker (up to the limit),
// and what followed it (a background job's output, kept for the next command).
class MarkerScan final {
 public:
  MarkerScan(std::string prefix, uint64_t limit) : prefix_(std::move(prefix)), limit_(limit) {}
  // Adds output; true once the marker line (prefix, up to 16 characters, "__\n") is complete.
  bool feed(std::string_view data);
  bool found() const { return found_; }
  std::string& text() { return text_; }        // the command's output (valid once found, or at the end)
  const std::string& tag() const { return tag_; }  // what stood between the prefix and "__"
  bool truncated() const { return truncated_; }
  std::string take_rest() { return std::move(rest_); }
  void finish() { keep(std::exchange(window_, {})); }  // the stream ended without the marker

 private:
  void keep(std::string_view data);  // into text_, within the limit

  std::string prefix_;
  uint64_t limit_;
  std::string window_;  // bytes not yet known to be output: a possible start of the marker
  std::string text_, tag_, rest_;
  bool found_ = false;
  bool truncated_ = false;
};

class ShellSession final {
 public:
  // Starts the shell and checks that it answers (so a missing shell, user or cwd fails here). Blocking.
  ShellSession(std::shared_ptr<Sandbox> sandbox, SessionParams params);
  ~ShellSession();
  ShellSession(const ShellSession&) = delete;
  ShellSession& operator=(const ShellSession&) = delete;

  // Runs `command` (shell syntax, stdin /dev/null) in the shell and waits for it. A timeout (0 = none) kills
  // the shell and everything it started and ends the session: the outcome says timed_out, later runs fail
  // with FAILED_PRECONDITION. A shell that exits (`exit 3`) ends the session the same way, with its status.
  // One command at a time (FAILED_PRECONDITION otherwise); not on the runtime's loop thread.
  ExecOutcome run(std::string_view command, double timeout_s);
  bool alive() const;
  // Kills the shell and everything it started; waits until the sandbox reported it. Idempotent.
  void close();

 private:
  struct Shared;  // what the exec's callbacks (on the loop thread) share with the caller's thread

  std::shared_ptr<Sandbox> sandbox_;
  std::optional<ExecControl> control_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace sandlet
