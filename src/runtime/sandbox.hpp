// A handle on one sandbox: exec, files, pause/resume, destroy. Backend-independent: it speaks the agent
// protocol over the channel its backend object connects.
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "proto/agent_protocol.hpp"
#include "runtime/agent/exec_outcome.hpp"
#include "runtime/record.hpp"
#include "runtime/sandbox_owner.hpp"
#include "runtime/snapshot/snapshot_types.hpp"
#include "runtime/agent/tree_transfer.hpp"

namespace sandlet {

class AgentCall;

// Control over a running exec: deliver a signal to all its processes, or cancel it (kill them all;
// the completion then reports CANCELLED); feed its stdin and resize its terminal when it was started with
// them. Harmless after the exec completed. Thread-safe.
class ExecControl final {
 public:
  ExecControl(std::weak_ptr<AgentCall> call, bool stdin_open, bool tty)
      : call_(std::move(call)), stdin_open_(stdin_open), tty_(tty),
        stdin_closed_(std::make_shared<std::atomic<bool>>(false)) {}
  void signal(int signo);
  void cancel();
  // More input (ExecParams::stdin_stream). Blocks while the agent is kStdinBacklog bytes behind (not on the
  // loop thread); false when the exec has ended. FAILED_PRECONDITION without an open stdin or after close_stdin.
  bool write_stdin(std::string_view data);
  void close_stdin();  // the end of stdin (idempotent); on a terminal it closes nothing (type ^D)
  // The terminal's new size (ExecParams::tty); the kernel sends SIGWINCH to its foreground processes.
  void resize(uint32_t rows, uint32_t cols);

  static constexpr uint64_t kStdinBacklog = 4u << 20;

 private:
  std::weak_ptr<AgentCall> call_;
  bool stdin_open_ = false;
  bool tty_ = false;
  std::shared_ptr<std::atomic<bool>> stdin_closed_;
};

struct ExecParams {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "K=V" added to the sandbox's environment
  std::string cwd;
  std::string user;
  std::string stdin_data;
  double timeout_s = 0;
  uint64_t output_limit = 0;  // 0 = 16 MiB
  bool kill_on_output_limit = false;
  bool keep_background = false;
  bool toolkit = false;  // run from the spec's protected toolkit (FAILED_PRECONDITION without one)
  bool stdin_stream = false;  // stdin stays open after stdin_data: ExecControl::write_stdin / close_stdin
  bool tty = false;           // a pseudo-terminal for stdin, stdout and stderr (all output on stdout); what
                              // ExecControl::write_stdin writes is typed into it
  uint32_t tty_rows = 24, tty_cols = 80;
  std::function<void(int stream, std::string_view data)> on_output;  // set = streaming
};

// Copies of whole trees (runtime/sandbox_tree.cpp; the semantics are sandlet_copy_options_t's in sandlet.h).
struct CopyOptions {
  std::string user;          // inside: whose credentials read or write (and, into it, who owns); "" = the spec's
  bool keep_owners = false;  // the source's owners (into a sandbox: done as root)
  bool follow_root = false;  // a symlink named as the source is followed
  bool outside_links = false;  // out of a sandbox: make symlinks that point outside the destination
  uint64_t max_bytes = 0;    // out of a sandbox: file data in all; 0 = 8 GiB
  uint64_t max_entries = 0;  // out of a sandbox: 0 = 1,048,576
  TreeProgress progress;
};

class Sandbox final : public std::enable_shared_from_this<Sandbox> {
 public:
  // `created_here`: made by this handle's runtime (an owned one then dies with its last handle).
  Sandbox(std::weak_ptr<SandboxOwner> owner, SandboxRecord record, std::shared_ptr<BackendSandbox> impl,
          bool created_here);
  ~Sandbox();

  const std::string& id() const { return record_.id; }
  // The sandbox's labels (fixed at create), as the audit log records them.
  std::map<std::string, std::string> labels() const {
    std::lock_guard lock(state_mutex_);
    return record_.spec.labels;
  }

  using ExecDone = std::function<void(std::exception_ptr, ExecOutcome)>;
  ExecControl exec_async(ExecParams params, ExecDone done);
  ExecOutcome exec(ExecParams params);

  void write_file(const std::string& path, std::string data, uint32_t mode);
  std::string read_file(const std::string& path, uint64_t max_bytes);
  // Completion on the loop thread: error, the data read (empty for writes), the file's mode.
  using FileDone = std::function<void(std::exception_ptr, std::string data, uint32_t mode)>;
  void write_file_async(const std::string& path, std::string data, uint32_t mode, FileDone done);
  void read_file_async(const std::string& path, uint64_t max_bytes, FileDone done);

  // `host_path` (a directory, file or link) becomes `path` inside; an existing directory there is merged into.
  TreeCopyStats copy_in(const std::string& host_path, const std::string& path, const CopyOptions& options);
  // `path` inside becomes `host_path`, written so that nothing leaves it (tree/tree_apply.hpp, strict).
  TreeCopyStats copy_out(const std::string& path, const std::string& host_path, const CopyOptions& options);
  // A tar stream read from `fd` is unpacked at `path` / `path` is written to `fd` as a tar stream whose
  // entries are named under the path's last component. Blocking (not on the loop thread), as the others.
  TreeCopyStats put_archive(int fd, const std::string& path, const CopyOptions& options);
  TreeCopyStats get_archive(const std::string& path, int fd, const CopyOptions& options);

  // Kills every process and removes all host state. Idempotent.
  void destroy();
  // The same on a worker; `done` runs on the loop thread.
  void destroy_async(std::function<void(std::exception_ptr)> done);
  // Freezes every process of the sandbox (memory, files and connections stay) / lets them run on. An exec
  // or file call on a paused sandbox resumes it first. UNIMPLEMENTED where the backend cannot. A pause
  // then gives back what memory the host allows (BackendSandbox::reclaim_memory) and returns those bytes.
  uint64_t pause();
  void resume();
  // Replaces the network allowlist in one step (`policy_json`: {"allow": [...], "dns": [...]}; "allow": []
  // denies all); the record's spec follows. docs/NETWORK.md says what happens to open connections.
  void net_update(std::string_view policy_json);
  // {"filtered": bool, "connect_denied": N, "sendmsg_denied": N, "egress_dropped": N, "denied": [...]}
  std::string net_stats_json() const;
  // {"counted": bool, "denied": N, "by_syscall": {name: N}, "records": [...]} (docs/POLICY.md)
  std::string seccomp_stats_json() const;
  // Packs the sandbox's changes (since it was created, or since its last snapshot) into a store layer of role
  // "diff"; its processes are frozen only while the changed data is copied. Blocks (not on the loop thread).
  SnapshotResult snapshot(const SnapshotOptions& options);
  // One snapshot, then `options.n` new sandboxes on its layers (the child identity of sandlet.h). Blocks until
  // every child is ready or has failed (per-child errors in the result).
  ForkResult fork(const ForkOptions& options);
  // Runs a blocking call of this handle (snapshot, fork) on a thread of the runtime's; `done` gets its
  // result on the loop thread.
  void blocking_async(std::function<std::string()> work, std::function<void(std::exception_ptr, std::string)> done) {
    owner_checked()->long_call(std::move(work), std::move(done));
  }
  // FnCall's hooks, checked against the backend's capabilities (UNIMPLEMENTED naming it when it lacks one):
  // the running sandbox's cpus/memory/pids limits changed in place (0 = unlimited) ...
  void set_limits(const Limits& limits);
  // ... and the host's reuse check: a mark taken while the sandbox is clean, and whether it still is.
  // can_check_reuse() is false where the backend cannot tell (a call's sandbox is then never reused).
  bool can_check_reuse() const;
  std::unique_ptr<BackendSandbox::ReuseMark> reuse_mark() const;
  bool unchanged_since(const BackendSandbox::ReuseMark& mark) const;
  bool destroyed() const { return destroyed_; }
  // INTERNAL when called on the runtime's event-loop thread (a blocking call there would wait on itself).
  void check_not_on_loop(const char* what) const { owner_checked()->check_not_on_loop(what); }
  // Marks the handle unusable without ending the sandbox (the runtime is doing or has done that).
  void mark_ended() { destroyed_ = true; }
  // The public view of the record (documented in sandlet.h): id, backend, state, spec, ...
  std::string info_json() const;

 private:
  std::shared_ptr<SandboxOwner> owner_checked() const;
  // Before a call that needs the agent: resumes a paused sandbox; returns a new connection to the agent.
  sys::UniqueFd connect_for_call();
  TreeCopyStats put_tree(TreeSource& source, const std::string& path, const CopyOptions& options);
  TreeCopyStats get_tree(const std::string& path, TreeSink& sink, const CopyOptions& options);
  // A file call moving up to `bytes`: given up on after file_backstop(bytes) (agent_client.hpp).
  void call_async(std::string frames, std::function<bool(proto::AgentMsg, std::string_view)> on_frame,
                  std::function<void(std::exception_ptr)> done, uint64_t bytes);

  std::weak_ptr<SandboxOwner> owner_;
  SandboxRecord record_;  // guarded by state_mutex_ once shared (its state changes on pause/resume)
  const std::shared_ptr<BackendSandbox> impl_;
  const std::vector<std::string> base_env_;  // the spec's environment, computed once (every exec starts from it)
  const bool created_here_;
  std::atomic<bool> destroyed_{false};
  std::atomic<bool> paused_{false};
  mutable std::mutex state_mutex_;  // destroy, pause and resume one at a time
};

}  // namespace sandlet
