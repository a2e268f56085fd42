// sandlet C++ wrapper: sandlet::Sandbox (exec, files, destroy) and sandlet::ExecControl. Part of
// sandlet.hpp (C++17 or later); may be included alone.
#ifndef SANDLET_CXX_SANDBOX_HPP
#define SANDLET_CXX_SANDBOX_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sandlet/cxx/error.hpp"
#include "sandlet/cxx/options.hpp"
#include "sandlet/cxx/results.hpp"
#include "sandlet/sandlet.h"

namespace sandlet {
inline namespace cxx {  // see sandlet/cxx/error.hpp

// ---- exec control -------------------------------------------------------------------------------------

// A running command started with Sandbox::exec_start. Releasing it does not cancel the command.
class ExecControl {
 public:
  ExecControl() noexcept = default;
  explicit ExecControl(sandlet_exec_control_t* c) noexcept : c_(c) {}
  ExecControl(ExecControl&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  ExecControl& operator=(ExecControl&& o) noexcept {
    if (this != &o) {
      sandlet_exec_control_delete(c_);
      c_ = std::exchange(o.c_, nullptr);
    }
    return *this;
  }
  ExecControl(const ExecControl&) = delete;
  ExecControl& operator=(const ExecControl&) = delete;
  ~ExecControl() { sandlet_exec_control_delete(c_); }

  // Delivers `signo` to every process of the command.
  void signal(int signo) { detail::check(sandlet_exec_control_signal(c_, signo)); }
  // Kills every process of the command; its callback then reports CANCELLED.
  void cancel() noexcept { sandlet_exec_control_cancel(c_); }
  // More stdin (ExecOptions::stdin_stream; with a tty, typed into it). Blocks while 4 MiB are in flight.
  void write_stdin(std::string_view data) {
    detail::check(sandlet_exec_control_write_stdin(c_, data.data(), data.size()));
  }
  void close_stdin() noexcept { sandlet_exec_control_close_stdin(c_); }
  // A new terminal size (ExecOptions::tty).
  void resize(uint32_t rows, uint32_t cols) { detail::check(sandlet_exec_control_resize(c_, rows, cols)); }

 private:
  sandlet_exec_control_t* c_ = nullptr;
};

// ---- shell sessions ------------------------------------------------------------------------------------

// One shell kept alive across run() calls (sandlet_session.h). Move-only; destroying it kills the shell.
class Session {
 public:
  Session() noexcept = default;
  explicit Session(sandlet_session_t* s) noexcept : s_(s) {}
  Session(Session&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Session& operator=(Session&& o) noexcept {
    if (this != &o) {
      sandlet_session_close(s_);
      s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() { sandlet_session_close(s_); }

  // Runs `command` in the shell: its stdout, stderr and exit code. timeout_s 0 = none; a timeout ends the session.
  ExecResult run(const std::string& command, double timeout_s = 0) {
    sandlet_exec_result_t* r = nullptr;
    detail::check(sandlet_session_run(s_, command.c_str(), timeout_s, &r));
    return ExecResult::take(r);
  }
  bool alive() const noexcept { return sandlet_session_alive(s_) != 0; }
  // Ends the shell from any thread (a run in flight returns CANCELLED); the object stays usable for alive().
  void kill() noexcept { sandlet_session_kill(s_); }
  void close() noexcept { sandlet_session_close(std::exchange(s_, nullptr)); }

 private:
  sandlet_session_t* s_ = nullptr;
};

// ---- snapshots and forks -------------------------------------------------------------------------------

struct SnapshotOptions {
  std::vector<std::string> exclude;  // paths (fnmatch globs) left out
  bool default_excludes = true;
  bool full = false;                 // every change since create, not since the last snapshot
  std::string name;
  uint32_t max_depth = 0;  // 0 = the runtime's
};

struct ForkOptions {
  size_t n = 1;
  std::vector<std::pair<std::string, std::string>> labels;
  std::vector<std::string> exclude;
  bool copy_secrets = false;
  bool detached = false;
  uint32_t max_depth = 0;
};

// Directory copies (sandlet_copy.h): the fields of sandlet_copy_options_t.
struct CopyOptions {
  std::string user;          // empty = the spec's user
  bool keep_owners = false;
  bool follow_links = false;
  bool allow_outside_links = false;  // out of a sandbox: make links that point outside the destination
  uint64_t max_bytes = 0;    // out of a sandbox; 0 = 8 GiB
  uint64_t max_entries = 0;  // out of a sandbox; 0 = 1,048,576
  std::function<void(const sandlet_copy_stats_t&)> progress;  // on the copying thread; throwing stops the copy
};

class Sandbox;
struct ForkResult;

namespace detail {

// The C structs of SnapshotOptions / ForkOptions; they point into this object, which must outlive the call.
class CSnapshotOptions {
 public:
  explicit CSnapshotOptions(const SnapshotOptions& o) {
    for (const auto& e : o.exclude) exclude_.push_back(e.c_str());
    c_.exclude = exclude_.data();
    c_.n_exclude = exclude_.size();
    c_.no_default_excludes = o.default_excludes ? 0 : 1;
    c_.full = o.full ? 1 : 0;
    c_.name = o.name.empty() ? nullptr : o.name.c_str();
    c_.max_depth = o.max_depth;
  }
  const sandlet_snapshot_options_t* get() const noexcept { return &c_; }

 private:
  std::vector<const char*> exclude_;
  sandlet_snapshot_options_t c_ = SANDLET_SNAPSHOT_OPTIONS_INIT;
};

class CForkOptions {
 public:
  explicit CForkOptions(const ForkOptions& o) {
    for (const auto& [k, v] : o.labels) kv_.push_back(k + "=" + v);
    for (const auto& l : kv_) labels_.push_back(l.c_str());
    for (const auto& e : o.exclude) exclude_.push_back(e.c_str());
    c_.n = o.n;
    c_.labels = labels_.data();
    c_.n_labels = labels_.size();
    c_.exclude = exclude_.data();
    c_.n_exclude = exclude_.size();
    c_.copy_secrets = o.copy_secrets ? 1 : 0;
    c_.detached = o.detached ? 1 : 0;
    c_.max_depth = o.max_depth;
  }
  const sandlet_fork_options_t* get() const noexcept { return &c_; }

 private:
  std::vector<std::string> kv_;
  std::vector<const char*> labels_, exclude_;
  sandlet_fork_options_t c_ = SANDLET_FORK_OPTIONS_INIT;
};

}  // namespace detail

// ---- sandbox ------------------------------------------------------------------------------------------

class Sandbox {
 public:
  using ExecCallback = std::function<void(const Error* err, ExecResult result)>;
  using DoneCallback = std::function<void(const Error* err)>;

  Sandbox() noexcept = default;  // empty; valid() == false
  // Adopts a C handle (takes ownership).
  explicit Sandbox(sandlet_sandbox_t* sb) noexcept : sb_(sb) {}

  Sandbox(Sandbox&& o) noexcept : sb_(std::exchange(o.sb_, nullptr)) {}
  Sandbox& operator=(Sandbox&& o) noexcept {
    if (this != &o) {
      sandlet_sandbox_close(sb_);
      sb_ = std::exchange(o.sb_, nullptr);
    }
    return *this;
  }
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;
  ~Sandbox() { sandlet_sandbox_close(sb_); }

  bool valid() const noexcept { return sb_ != nullptr; }
  explicit operator bool() const noexcept { return valid(); }
  sandlet_sandbox_t* get() const noexcept { return sb_; }
  sandlet_sandbox_t* release() noexcept { return std::exchange(sb_, nullptr); }
  // Releases the handle now (an `owned` sandbox whose last handle this is gets destroyed).
  void close() noexcept { sandlet_sandbox_close(std::exchange(sb_, nullptr)); }

  std::string id() const {
    const char* s = sandlet_sandbox_id(sb_);
    return s != nullptr ? std::string(s) : std::string();
  }

  // Kills every process of the sandbox and removes it; the handle stays open until close()/destruction.
  void destroy() { detail::check(sandlet_sandbox_destroy(sb_)); }
  void destroy_async(DoneCallback cb) {
    auto ctx = std::make_unique<DoneCallback>(std::move(cb));
    detail::check(sandlet_sandbox_destroy_async(sb_, &done_trampoline, ctx.get()));
    ctx.release();  // owned by the trampoline from here on
  }

  // Runs a command and waits for it and everything it started. A command that cannot be started throws
  // (NOT_FOUND / PERMISSION_DENIED); a command that ran and failed is a result with exit_code != 0.
  ExecResult exec(const ExecOptions& opts) {
    detail::CExecOptions c(opts, &opts.on_output);  // the call blocks, so opts.on_output outlives it
    sandlet_exec_result_t* r = nullptr;
    detail::check(sandlet_sandbox_exec(sb_, c.get(), &r));
    return ExecResult::take(r);
  }
  ExecResult exec(std::vector<std::string> argv) { return exec(ExecOptions(std::move(argv))); }

  // Starts a command; `cb` gets the error (NULL on success, valid only during the call) or the result.
  // If starting fails this throws and `cb` is never called.
  void exec_async(const ExecOptions& opts, ExecCallback cb) { start(opts, std::move(cb), nullptr); }

  // Like exec_async, and returns a control to signal or cancel the running command.
  ExecControl exec_start(const ExecOptions& opts, ExecCallback cb) {
    sandlet_exec_control_t* control = nullptr;
    start(opts, std::move(cb), &control);
    return ExecControl(control);
  }

  // Starts a shell session in this sandbox (blocks until the shell answers).
  Session open_session(const SessionOptions& opts = SessionOptions()) {
    detail::CStringArray argv(opts.argv), env(opts.env);
    sandlet_session_options_t c = SANDLET_SESSION_OPTIONS_INIT;
    c.argv = argv.get_or_null();
    c.env = env.get_or_null();
    c.cwd = opts.cwd.empty() ? nullptr : opts.cwd.c_str();
    c.user = opts.user.empty() ? nullptr : opts.user.c_str();
    c.output_limit = opts.output_limit;
    sandlet_session_t* s = nullptr;
    detail::check(sandlet_session_open(sb_, &c, &s));
    return Session(s);
  }

  // Creates or replaces `path` (parents created). mode 0 means 0644.
  void write_file(const std::string& path, std::string_view data, uint32_t mode = 0644) {
    detail::check(sandlet_sandbox_write_file(sb_, path.c_str(), data.data(), data.size(), mode));
  }
  // Reads a whole file; max_bytes 0 = library default (64 MiB); a larger file throws OUT_OF_RANGE.
  std::string read_file(const std::string& path, uint64_t max_bytes = 0) {
    void* data = nullptr;
    size_t len = 0;
    detail::check(sandlet_sandbox_read_file(sb_, path.c_str(), max_bytes, &data, &len));
    detail::CBuffer guard(static_cast<char*>(data));
    return data != nullptr ? std::string(static_cast<const char*>(data), len) : std::string();
  }

  // Asynchronous file calls. `cb` gets the error (NULL on success, valid only during the call) and, for
  // reads, the file's bytes and mode. `data` is copied before write_file_async returns. If the request
  // cannot be queued this throws and `cb` is never called.
  using FileCallback = std::function<void(const Error* err, std::string data, uint32_t mode)>;
  void write_file_async(const std::string& path, std::string_view data, uint32_t mode, FileCallback cb) {
    auto ctx = std::make_unique<FileCallback>(std::move(cb));
    detail::check(sandlet_sandbox_write_file_async(sb_, path.c_str(), data.data(), data.size(), mode,
                                                   &file_trampoline, ctx.get()));
    ctx.release();  // owned by the trampoline from here on
  }
  void read_file_async(const std::string& path, uint64_t max_bytes, FileCallback cb) {
    auto ctx = std::make_unique<FileCallback>(std::move(cb));
    detail::check(sandlet_sandbox_read_file_async(sb_, path.c_str(), max_bytes, &file_trampoline, ctx.get()));
    ctx.release();
  }

  // Whole trees (sandlet_copy.h): a host directory, file or link becomes `path` inside / `path` becomes
  // `host_path` / a tar stream on `fd` is unpacked at `path` / `path` is written to `fd` as tar.
  sandlet_copy_stats_t copy_in(const std::string& host_path, const std::string& path, const CopyOptions& o = {}) {
    return copy(o, [&](const sandlet_copy_options_t* c, sandlet_copy_stats_t* s) {
      return sandlet_sandbox_copy_in(sb_, host_path.c_str(), path.c_str(), c, s);
    });
  }
  sandlet_copy_stats_t copy_out(const std::string& path, const std::string& host_path, const CopyOptions& o = {}) {
    return copy(o, [&](const sandlet_copy_options_t* c, sandlet_copy_stats_t* s) {
      return sandlet_sandbox_copy_out(sb_, path.c_str(), host_path.c_str(), c, s);
    });
  }
  sandlet_copy_stats_t put_archive(int fd, const std::string& path, const CopyOptions& o = {}) {
    return copy(o, [&](const sandlet_copy_options_t* c, sandlet_copy_stats_t* s) {
      return sandlet_sandbox_put_archive(sb_, fd, path.c_str(), c, s);
    });
  }
  sandlet_copy_stats_t get_archive(const std::string& path, int fd, const CopyOptions& o = {}) {
    return copy(o, [&](const sandlet_copy_options_t* c, sandlet_copy_stats_t* s) {
      return sandlet_sandbox_get_archive(sb_, path.c_str(), fd, c, s);
    });
  }

  // Freezes every process of the sandbox / lets them run on (sandlet_sandbox_pause).
  void pause() { detail::check(sandlet_sandbox_pause(sb_)); }
  void resume() { detail::check(sandlet_sandbox_resume(sb_)); }
  // Replaces the network allowlist in one step (sandlet_sandbox_net_update).
  void net_update(const std::string& policy_json) { detail::check(sandlet_sandbox_net_update(sb_, policy_json.c_str())); }
  // Network denial counters as JSON (sandlet_sandbox_net_stats_json).
  std::string net_stats_json() {
    char* out = nullptr;
    detail::check(sandlet_sandbox_net_stats_json(sb_, &out));
    return detail::take_string(out);
  }
  // Seccomp denial counters as JSON (sandlet_sandbox_seccomp_stats_json).
  std::string seccomp_stats_json() {
    char* out = nullptr;
    detail::check(sandlet_sandbox_seccomp_stats_json(sb_, &out));
    return detail::take_string(out);
  }

  // Packs the sandbox's changes into a snapshot layer (sandlet_sandbox_snapshot); returns the result JSON.
  std::string snapshot(const SnapshotOptions& opts = {}) {
    detail::CSnapshotOptions c(opts);
    char* out = nullptr;
    detail::check(sandlet_sandbox_snapshot(sb_, c.get(), &out));
    return detail::take_string(out);
  }
  // The same without blocking (sandlet_sandbox_snapshot_async): `cb` runs once, on the runtime's event-loop
  // thread, with the error (NULL on success, valid only during the call) or the result JSON. If the request
  // cannot be queued this throws and `cb` is never called.
  using JsonCallback = std::function<void(const Error* err, std::string result_json)>;
  void snapshot_async(const SnapshotOptions& opts, JsonCallback cb) {
    detail::CSnapshotOptions c(opts);
    auto ctx = std::make_unique<JsonCallback>(std::move(cb));
    detail::check(sandlet_sandbox_snapshot_async(sb_, c.get(), &json_trampoline, ctx.get()));
    ctx.release();  // owned by the trampoline from here on
  }

  // One snapshot, then `opts.n` children on it (sandlet_sandbox_fork).
  ForkResult fork(const ForkOptions& opts);
  // The same without blocking (sandlet_sandbox_fork_async): `cb` runs once, on the runtime's event-loop
  // thread, with the error or the result (children the callback does not move out are closed after it).
  using ForkCallback = std::function<void(const Error* err, ForkResult result)>;
  void fork_async(const ForkOptions& opts, ForkCallback cb);

  // The sandbox's record (id, state, backend, labels, spec, created_at, ...) as a JSON object.
  std::string info_json() {
    char* out = nullptr;
    detail::check(sandlet_sandbox_info_json(sb_, &out));
    return detail::take_string(out);
  }

 private:
  template <class F>
  static sandlet_copy_stats_t copy(const CopyOptions& o, F&& call) {
    sandlet_copy_options_t c = SANDLET_COPY_OPTIONS_INIT;
    c.keep_owners = o.keep_owners ? 1 : 0;
    c.user = o.user.empty() ? nullptr : o.user.c_str();
    c.follow_links = o.follow_links ? 1 : 0;
    c.allow_outside_links = o.allow_outside_links ? 1 : 0;
    c.max_bytes = o.max_bytes;
    c.max_entries = o.max_entries;
    if (o.progress) {
      c.progress = [](void* ud, const sandlet_copy_stats_t* so_far) -> int {
        try {
          (*static_cast<const std::function<void(const sandlet_copy_stats_t&)>*>(ud))(*so_far);
          return 0;
        } catch (...) {
          return 1;  // (no exception crosses the C ABI) the copy stops with CANCELLED
        }
      };
      c.progress_user_data = const_cast<void*>(static_cast<const void*>(&o.progress));
    }
    sandlet_copy_stats_t stats{};
    detail::check(call(&c, &stats));
    return stats;
  }

  struct ExecContext {
    ExecCallback done;
    detail::OutputFn on_output;
  };

  void start(const ExecOptions& opts, ExecCallback cb, sandlet_exec_control_t** control) {
    // The library copies the options but not what output_user_data points to: keep the output callback
    // alive on the heap next to the completion callback until the completion trampoline runs.
    auto ctx = std::make_unique<ExecContext>(ExecContext{std::move(cb), opts.on_output});
    detail::CExecOptions c(opts, &ctx->on_output);
    detail::check(sandlet_sandbox_exec_start(sb_, c.get(), &exec_trampoline, ctx.get(), control));
    ctx.release();
  }

  static void exec_trampoline(void* user_data, sandlet_error_t* err, sandlet_exec_result_t* result) noexcept {
    std::unique_ptr<ExecContext> ctx(static_cast<ExecContext*>(user_data));
    try {
      if (err != nullptr) {
        sandlet_exec_result_delete(std::exchange(result, nullptr));  // NULL by contract; harmless otherwise
        Error e = Error::take(std::exchange(err, nullptr));
        if (ctx->done) ctx->done(&e, ExecResult());
      } else {
        ExecResult r = ExecResult::take(std::exchange(result, nullptr));
        if (ctx->done) ctx->done(nullptr, std::move(r));
      }
    } catch (...) {
      // Never unwind into C. Free whatever was not handed over yet (take() frees even when it throws).
      sandlet_error_delete(err);
      sandlet_exec_result_delete(result);
    }
  }

  static void file_trampoline(void* user_data, sandlet_error_t* err, const void* data, size_t len,
                              uint32_t mode) noexcept {
    std::unique_ptr<FileCallback> cb(static_cast<FileCallback*>(user_data));
    try {
      if (err != nullptr) {
        Error e = Error::take(std::exchange(err, nullptr));
        if (*cb) (*cb)(&e, std::string(), 0);
      } else if (*cb) {
        (*cb)(nullptr, data != nullptr ? std::string(static_cast<const char*>(data), len) : std::string(), mode);
      }
    } catch (...) {
      sandlet_error_delete(err);
    }
  }

  static void json_trampoline(void* user_data, sandlet_error_t* err, char* result_json) noexcept {
    std::unique_ptr<JsonCallback> cb(static_cast<JsonCallback*>(user_data));
    try {
      std::string json = detail::take_string(std::exchange(result_json, nullptr));
      if (err != nullptr) {
        Error e = Error::take(std::exchange(err, nullptr));
        if (*cb) (*cb)(&e, std::string());
      } else if (*cb) {
        (*cb)(nullptr, std::move(json));
      }
    } catch (...) {
      sandlet_error_delete(err);
      sandlet_free(result_json);
    }
  }

  static void fork_trampoline(void* user_data, sandlet_error_t* err, sandlet_fork_result_t* result) noexcept;

  static void done_trampoline(void* user_data, sandlet_error_t* err) noexcept {
    std::unique_ptr<DoneCallback> cb(static_cast<DoneCallback*>(user_data));
    try {
      if (err != nullptr) {
        Error e = Error::take(std::exchange(err, nullptr));
        if (*cb) (*cb)(&e);
      } else if (*cb) {
        (*cb)(nullptr);
      }
    } catch (...) {
      sandlet_error_delete(err);
    }
  }

  sandlet_sandbox_t* sb_ = nullptr;
};

// The children of a fork: child i is a sandbox, or the error it failed with.
struct ForkResult {
  std::string snapshot_json;             // the snapshot result the children were made from
  std::vector<Sandbox> children;         // invalid() where that child failed
  std::vector<std::string> errors;       // "" where that child is ready
  std::vector<sandlet_code_t> codes;     // SANDLET_OK where that child is ready
  std::vector<int> err_nos;              // the failed child's errno (0 where none applies)

  // Copies a C result and frees it (children not handed over yet are closed).
  static ForkResult take(sandlet_fork_result_t* r) {
    std::unique_ptr<sandlet_fork_result_t, void (*)(sandlet_fork_result_t*)> guard(r, &sandlet_fork_result_delete);
    ForkResult out;
    out.snapshot_json = sandlet_fork_result_snapshot_json(r);
    for (size_t i = 0; i < sandlet_fork_result_count(r); ++i) {
      const sandlet_error_t* e = sandlet_fork_result_error(r, i);
      out.errors.push_back(e ? sandlet_error_message(e) : "");
      out.codes.push_back(sandlet_error_code(e));
      out.err_nos.push_back(sandlet_error_errno(e));
      out.children.emplace_back(sandlet_fork_result_take(r, i));
    }
    return out;
  }
};

inline ForkResult Sandbox::fork(const ForkOptions& opts) {
  detail::CForkOptions c(opts);
  sandlet_fork_result_t* r = nullptr;
  detail::check(sandlet_sandbox_fork(sb_, c.get(), &r));
  return ForkResult::take(r);
}

inline void Sandbox::fork_async(const ForkOptions& opts, ForkCallback cb) {
  detail::CForkOptions c(opts);
  auto ctx = std::make_unique<ForkCallback>(std::move(cb));
  detail::check(sandlet_sandbox_fork_async(sb_, c.get(), &fork_trampoline, ctx.get()));
  ctx.release();  // owned by the trampoline from here on
}

inline void Sandbox::fork_trampoline(void* user_data, sandlet_error_t* err, sandlet_fork_result_t* result) noexcept {
  std::unique_ptr<ForkCallback> cb(static_cast<ForkCallback*>(user_data));
  try {
    if (err != nullptr) {
      sandlet_fork_result_delete(std::exchange(result, nullptr));  // NULL by contract; harmless otherwise
      Error e = Error::take(std::exchange(err, nullptr));
      if (*cb) (*cb)(&e, ForkResult());
    } else {
      ForkResult r = ForkResult::take(std::exchange(result, nullptr));
      if (*cb) (*cb)(nullptr, std::move(r));
    }
  } catch (...) {
    // Never unwind into C. Free whatever was not handed over yet.
    sandlet_error_delete(err);
    sandlet_fork_result_delete(result);
  }
}

}  // inline namespace cxx
}  // namespace sandlet

#endif  // SANDLET_CXX_SANDBOX_HPP
