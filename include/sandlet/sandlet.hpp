/*
 * sandlet — header-only C++ wrapper over the C ABI in sandlet.h (C++17).
 *
 * Errors: every failing C call becomes a thrown sandlet::Error (the C error object is copied and freed).
 *
 * Ownership: Runtime, Spec and Sandbox are move-only RAII owners of one C handle each; the destructor
 * releases it (sandlet_runtime_close / sandlet_spec_delete / sandlet_sandbox_close). Results
 * (ExecResult, BackendInfo, SandboxInfo, strings) are plain copies: nothing they hold points into the
 * library. A Sandbox may outlive its Runtime (its calls then throw FAILED_PRECONDITION); closing the
 * last handle of an `owned` sandbox destroys it.
 *
 * Thread-safety: the library allows a runtime and its sandboxes to be used from any thread concurrently,
 * so const and non-const calls on one Runtime/Sandbox may overlap — except moving, assigning, close() and
 * destruction, which must not race with any other use of the same object. A Spec is a plain value: one
 * thread at a time.
 *
 * Callbacks (create_async, exec_async, destroy_async, ExecOptions::on_output) run on the runtime's
 * event-loop thread. They must not block and must not call the synchronous functions (those throw
 * FAILED_PRECONDITION there). Exceptions thrown by a callback are caught and dropped: nothing is ever
 * allowed to unwind into the C library. Move a Sandbox received in a callback out of it (e.g. into a
 * promise or a queue) rather than letting it be destroyed there: closing an `owned` sandbox's last
 * handle destroys it, which is blocking work.
 */
#ifndef SANDLET_SANDLET_HPP
#define SANDLET_SANDLET_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sandlet/sandlet.h"

namespace sandlet {
// The wrapper's classes live in an inline namespace: users write sandlet::Runtime, but the mangled names
// (sandlet::cxx::Runtime) never collide with the library's own internal classes of the same names, so a
// program may link the library's objects statically (the CLI does) without breaking the one-definition rule.
inline namespace cxx {

// ---- errors -------------------------------------------------------------------------------------------

class Error : public std::runtime_error {
 public:
  Error(sandlet_code_t code, const std::string& message, int err_no = 0)
      : std::runtime_error(message), code_(code), errno_(err_no) {}

  sandlet_code_t code() const noexcept { return code_; }
  int err_no() const noexcept { return errno_; }
  const char* code_name() const noexcept { return sandlet_code_name(code_); }

  // Copies a C error and frees it (also when copying throws). `err` must not be NULL.
  static Error take(sandlet_error_t* err) {
    std::unique_ptr<sandlet_error_t, void (*)(sandlet_error_t*)> guard(err, &sandlet_error_delete);
    return Error(sandlet_error_code(err), sandlet_error_message(err), sandlet_error_errno(err));
  }

 private:
  sandlet_code_t code_;
  int errno_;
};

namespace detail {

inline void check(sandlet_error_t* err) {
  if (err != nullptr) throw Error::take(err);
}

struct FreeDeleter {
  void operator()(void* p) const noexcept { sandlet_free(p); }
};
using CBuffer = std::unique_ptr<char, FreeDeleter>;

// Takes a library-allocated string and returns a copy, freeing the original.
inline std::string take_string(char* s) {
  CBuffer guard(s);
  return s != nullptr ? std::string(s) : std::string();
}

}  // namespace detail

inline const char* version() noexcept { return sandlet_version_string(); }
inline uint32_t abi_version() noexcept { return sandlet_abi_version(); }

// ---- plain result types -------------------------------------------------------------------------------

struct BackendInfo {
  std::string name;     // "container", "fncall", "microvm", "fullvm"
  bool available = false;
  std::string reason;   // empty when available, else what this host lacks
};

struct SandboxInfo {
  std::string id;
  std::string state;    // "running", "dead", ...
  std::string json;     // the full record as a JSON object
};

struct ExecResult {
  int exit_code = -1;   // -1 when killed by a signal
  int signal = 0;       // 0 when it exited
  bool timed_out = false;
  std::string stdout_data;  // empty when ExecOptions::on_output was set (output went there)
  std::string stderr_data;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  uint64_t duration_ns = 0;  // request to exit
  uint64_t run_ns = 0;       // spawn to exit, inside the sandbox

  // Copies everything out of a C result and frees it.
  static ExecResult take(sandlet_exec_result_t* r) {
    std::unique_ptr<sandlet_exec_result_t, void (*)(sandlet_exec_result_t*)> guard(r, &sandlet_exec_result_delete);
    ExecResult out;
    out.exit_code = sandlet_exec_result_exit_code(r);
    out.signal = sandlet_exec_result_signal(r);
    out.timed_out = sandlet_exec_result_timed_out(r) != 0;
    size_t len = 0;
    const char* p = sandlet_exec_result_stdout(r, &len);
    if (p != nullptr) out.stdout_data.assign(p, len);
    len = 0;
    p = sandlet_exec_result_stderr(r, &len);
    if (p != nullptr) out.stderr_data.assign(p, len);
    out.stdout_truncated = sandlet_exec_result_stdout_truncated(r) != 0;
    out.stderr_truncated = sandlet_exec_result_stderr_truncated(r) != 0;
    out.duration_ns = sandlet_exec_result_duration_ns(r);
    out.run_ns = sandlet_exec_result_run_ns(r);
    return out;
  }
};

// ---- exec options -------------------------------------------------------------------------------------

struct ExecOptions {
  std::vector<std::string> argv;   // argv[0] required; resolved through PATH inside the sandbox
  std::vector<std::string> env;    // "KEY=VALUE", added to the spec's env
  std::string cwd;                 // empty = the spec's workdir
  std::string user;                // empty = the spec's user; "uid[:gid]" or a passwd name
  std::string stdin_data;          // fed to stdin, then EOF
  double timeout_s = 0;            // 0 = none; on expiry every process of the exec is killed
  uint64_t output_limit = 0;       // per stream; 0 = library default (16 MiB)
  bool kill_on_output_limit = false;
  bool keep_background = false;    // true: what the command leaves running (`server &`) outlives it
  // Optional streaming: called on the event-loop thread with each chunk (stream is SANDLET_STDOUT or
  // SANDLET_STDERR); the result's stdout_data/stderr_data then stay empty. Must not block for long.
  std::function<void(int stream, std::string_view data)> on_output;

  ExecOptions() = default;
  explicit ExecOptions(std::vector<std::string> args) : argv(std::move(args)) {}
};

// A one-shot run (Runtime::run): the command's standard streams are descriptors of this process, passed
// into the sandbox (-1 = /dev/null inside); cancel_fd, when readable, cancels the run (see sandlet_run).
struct RunOptions {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "KEY=VALUE", added to the spec's env
  std::string cwd;
  std::string user;
  double timeout_s = 0;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int cancel_fd = -1;

  RunOptions() = default;
  explicit RunOptions(std::vector<std::string> args) : argv(std::move(args)) {}
};

namespace detail {

using OutputFn = std::function<void(int, std::string_view)>;

inline void output_trampoline(void* user_data, int stream, const void* data, size_t len) noexcept {
  try {
    const auto* fn = static_cast<const OutputFn*>(user_data);
    if (fn != nullptr && *fn) (*fn)(stream, std::string_view(static_cast<const char*>(data), len));
  } catch (...) {
    // Never unwind into C; the chunk is dropped.
  }
}

// A NULL-terminated array of pointers into `strings` (which must outlive it), as the C options want.
class CStringArray {
 public:
  explicit CStringArray(const std::vector<std::string>& strings) {
    for (const auto& str : strings) ptrs_.push_back(str.c_str());
    ptrs_.push_back(nullptr);
  }
  const char* const* get() const noexcept { return ptrs_.data(); }
  const char* const* get_or_null() const noexcept { return ptrs_.size() > 1 ? ptrs_.data() : nullptr; }

 private:
  std::vector<const char*> ptrs_;
};

// Owns the pointer arrays a sandlet_exec_options_t points into; valid while `opts` is alive.
class CExecOptions {
 public:
  CExecOptions(const ExecOptions& o, const OutputFn* output) : argv_(o.argv), env_(o.env) {
    c_.argv = argv_.get();
    c_.env = env_.get_or_null();
    c_.cwd = o.cwd.empty() ? nullptr : o.cwd.c_str();
    c_.user = o.user.empty() ? nullptr : o.user.c_str();
    c_.stdin_data = o.stdin_data.empty() ? nullptr : o.stdin_data.data();
    c_.stdin_len = o.stdin_data.size();
    c_.timeout_s = o.timeout_s;
    c_.output_limit = o.output_limit;
    c_.kill_on_output_limit = o.kill_on_output_limit ? 1 : 0;
    c_.keep_background = o.keep_background ? 1 : 0;
    if (output != nullptr && *output) {
      c_.on_output = &output_trampoline;
      c_.output_user_data = const_cast<OutputFn*>(output);
    }
  }
  CExecOptions(const CExecOptions&) = delete;
  CExecOptions& operator=(const CExecOptions&) = delete;
  const sandlet_exec_options_t* get() const noexcept { return &c_; }

 private:
  CStringArray argv_, env_;
  sandlet_exec_options_t c_ = SANDLET_EXEC_OPTIONS_INIT;
};

// sandlet_run_options_t over a RunOptions (which must outlive it).
class CRunOptions {
 public:
  explicit CRunOptions(const RunOptions& o) : argv_(o.argv), env_(o.env) {
    c_.argv = argv_.get();
    c_.env = env_.get_or_null();
    c_.cwd = o.cwd.empty() ? nullptr : o.cwd.c_str();
    c_.user = o.user.empty() ? nullptr : o.user.c_str();
    c_.timeout_s = o.timeout_s;
    c_.stdin_fd = o.stdin_fd;
    c_.stdout_fd = o.stdout_fd;
    c_.stderr_fd = o.stderr_fd;
    c_.cancel_fd = o.cancel_fd;
  }
  CRunOptions(const CRunOptions&) = delete;
  CRunOptions& operator=(const CRunOptions&) = delete;
  const sandlet_run_options_t* get() const noexcept { return &c_; }

 private:
  CStringArray argv_, env_;
  sandlet_run_options_t c_ = SANDLET_RUN_OPTIONS_INIT;
};

}  // namespace detail

// ---- spec ---------------------------------------------------------------------------------------------

// What a sandbox looks like. Every setter validates and throws INVALID_ARGUMENT naming the field.
//   auto spec = sandlet::Spec().layer("/images/base").memory(512 << 20).label("task", "t1");
class Spec {
 public:
  Spec() { detail::check(sandlet_spec_new(&spec_)); }
  // JSON schema: see sandlet.h (sizes there accept "512M" and the like).
  static Spec from_json(std::string_view json) {
    sandlet_spec_t* s = nullptr;
    detail::check(sandlet_spec_from_json(json.data(), json.size(), &s));
    return Spec(s);
  }
  // Adopts a C handle (takes ownership).
  explicit Spec(sandlet_spec_t* s) noexcept : spec_(s) {}

  Spec(Spec&& o) noexcept : spec_(std::exchange(o.spec_, nullptr)) {}
  Spec& operator=(Spec&& o) noexcept {
    if (this != &o) {
      sandlet_spec_delete(spec_);
      spec_ = std::exchange(o.spec_, nullptr);
    }
    return *this;
  }
  Spec(const Spec&) = delete;
  Spec& operator=(const Spec&) = delete;
  ~Spec() { sandlet_spec_delete(spec_); }

  Spec clone() const { return from_json(to_json()); }
  std::string to_json() const {
    char* out = nullptr;
    detail::check(sandlet_spec_to_json(spec_, &out));
    return detail::take_string(out);
  }

  // Setters chain on lvalues (returning Spec&) and on temporaries (returning Spec&&, so that
  // `Spec s = Spec().layer(dir).memory(n);` moves instead of needing a copy).
#define SANDLET_SPEC_SETTER_(name, params, call)                          \
  Spec& name params& { return set(call); }                                \
  Spec&& name params&& { return std::move(set(call)); }
  SANDLET_SPEC_SETTER_(backend, (const std::string& name), sandlet_spec_set_backend(spec_, name.c_str()))
  // A host directory or a store layer (digest, unique hex prefix, name); stacked lowest first.
  SANDLET_SPEC_SETTER_(layer, (const std::string& layer), sandlet_spec_add_layer(spec_, layer.c_str()))
  // A store environment, "name" or "name@N".
  SANDLET_SPEC_SETTER_(environment, (const std::string& env), sandlet_spec_set_environment(spec_, env.c_str()))
  SANDLET_SPEC_SETTER_(env, (const std::string& key, const std::string& value),
                       sandlet_spec_set_env(spec_, key.c_str(), value.c_str()))
  SANDLET_SPEC_SETTER_(workdir, (const std::string& path), sandlet_spec_set_workdir(spec_, path.c_str()))
  SANDLET_SPEC_SETTER_(hostname, (const std::string& name), sandlet_spec_set_hostname(spec_, name.c_str()))
  SANDLET_SPEC_SETTER_(user, (const std::string& user), sandlet_spec_set_user(spec_, user.c_str()))
  SANDLET_SPEC_SETTER_(cpus, (double cpus), sandlet_spec_set_cpus(spec_, cpus))
  SANDLET_SPEC_SETTER_(memory, (uint64_t bytes), sandlet_spec_set_memory(spec_, bytes))
  SANDLET_SPEC_SETTER_(pids, (uint64_t pids), sandlet_spec_set_pids(spec_, pids))
  SANDLET_SPEC_SETTER_(disk, (uint64_t bytes), sandlet_spec_set_disk(spec_, bytes))
  SANDLET_SPEC_SETTER_(network, (const std::string& mode), sandlet_spec_set_network(spec_, mode.c_str()))
  SANDLET_SPEC_SETTER_(label, (const std::string& key, const std::string& value),
                       sandlet_spec_set_label(spec_, key.c_str(), value.c_str()))
  SANDLET_SPEC_SETTER_(lifetime, (const std::string& policy), sandlet_spec_set_lifetime(spec_, policy.c_str()))
  SANDLET_SPEC_SETTER_(max_lifetime, (double seconds), sandlet_spec_set_max_lifetime(spec_, seconds))
  SANDLET_SPEC_SETTER_(idle_timeout, (double seconds), sandlet_spec_set_idle_timeout(spec_, seconds))
#undef SANDLET_SPEC_SETTER_

  const sandlet_spec_t* get() const noexcept { return spec_; }
  sandlet_spec_t* get() noexcept { return spec_; }
  sandlet_spec_t* release() noexcept { return std::exchange(spec_, nullptr); }

 private:
  Spec& set(sandlet_error_t* err) {
    detail::check(err);
    return *this;
  }
  sandlet_spec_t* spec_ = nullptr;
};

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

 private:
  sandlet_exec_control_t* c_ = nullptr;
};

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

  // Freezes every process of the sandbox / lets them run on (sandlet_sandbox_pause).
  void pause() { detail::check(sandlet_sandbox_pause(sb_)); }
  void resume() { detail::check(sandlet_sandbox_resume(sb_)); }

  // The sandbox's record (id, state, backend, labels, spec, created_at, ...) as a JSON object.
  std::string info_json() {
    char* out = nullptr;
    detail::check(sandlet_sandbox_info_json(sb_, &out));
    return detail::take_string(out);
  }

 private:
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

// ---- runtime ------------------------------------------------------------------------------------------

struct RuntimeOptions {
  uint32_t worker_threads = 0;   // 0 = library default
  bool skip_gc_on_open = false;  // true: do not sweep leftovers at open (faster open)
  bool disable_warm_pool = false;  // true: no sandboxes prepared ahead (see sandlet.h)
  bool create_soon = false;  // true: a create follows the open at once; prepare it meanwhile (see sandlet.h)
};

struct LayerImportOptions {
  std::string role;    // empty = "base"; "workspace", "toolkit" or "diff"
  std::string name;    // empty, or names the layer (an OCI image: the environment of its layers)
  std::string parent;  // empty, or the layer this one goes on top of
  bool no_dedupe = false;
  // Optional; called from the importing thread every few hundred files. Must not throw.
  std::function<void(uint64_t bytes, uint64_t total_bytes, uint64_t files)> progress;
};

namespace detail {

inline void progress_trampoline(void* user_data, uint64_t bytes, uint64_t total, uint64_t files) noexcept {
  try {
    const auto* fn = static_cast<const decltype(LayerImportOptions::progress)*>(user_data);
    if (fn != nullptr && *fn) (*fn)(bytes, total, files);
  } catch (...) {
  }
}

// The C view of LayerImportOptions; valid while `o` is alive.
class CLayerOptions {
 public:
  explicit CLayerOptions(const LayerImportOptions& o) {
    c_.version = SANDLET_LAYER_IMPORT_OPTIONS_VERSION;
    c_.role = o.role.empty() ? nullptr : o.role.c_str();
    c_.name = o.name.empty() ? nullptr : o.name.c_str();
    c_.parent = o.parent.empty() ? nullptr : o.parent.c_str();
    c_.no_dedupe = o.no_dedupe ? 1 : 0;
    if (o.progress) {
      c_.progress = &progress_trampoline;
      c_.progress_user_data = const_cast<void*>(static_cast<const void*>(&o.progress));
    }
  }
  const sandlet_layer_import_options_t* get() const noexcept { return &c_; }

 private:
  sandlet_layer_import_options_t c_{};
};

}  // namespace detail

class Runtime {
 public:
  using CreateCallback = std::function<void(const Error* err, Sandbox sb)>;

  Runtime() noexcept = default;  // empty; valid() == false
  explicit Runtime(sandlet_runtime_t* rt) noexcept : rt_(rt) {}  // adopts a C handle

  // Opens (creating if needed) the runtime rooted at `root`; NULL means $SANDLET_ROOT, else /var/lib/sandlet.
  static Runtime open(const char* root = nullptr, const RuntimeOptions& options = RuntimeOptions()) {
    sandlet_runtime_options_t c = SANDLET_RUNTIME_OPTIONS_INIT;
    c.worker_threads = options.worker_threads;
    c.skip_gc_on_open = options.skip_gc_on_open ? 1 : 0;
    c.disable_warm_pool = options.disable_warm_pool ? 1 : 0;
    c.create_soon = options.create_soon ? 1 : 0;
    sandlet_runtime_t* rt = nullptr;
    detail::check(sandlet_runtime_open(root, &c, &rt));
    return Runtime(rt);
  }
  static Runtime open(const std::string& root, const RuntimeOptions& options = RuntimeOptions()) {
    return open(root.c_str(), options);
  }

  Runtime(Runtime&& o) noexcept : rt_(std::exchange(o.rt_, nullptr)) {}
  Runtime& operator=(Runtime&& o) noexcept {
    if (this != &o) {
      sandlet_runtime_close(rt_);
      rt_ = std::exchange(o.rt_, nullptr);
    }
    return *this;
  }
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  ~Runtime() { sandlet_runtime_close(rt_); }

  bool valid() const noexcept { return rt_ != nullptr; }
  explicit operator bool() const noexcept { return valid(); }
  sandlet_runtime_t* get() const noexcept { return rt_; }
  sandlet_runtime_t* release() noexcept { return std::exchange(rt_, nullptr); }

  // Destroys every `owned` sandbox this runtime created and waits for in-flight callbacks.
  // Must not be called from a callback (nor may the destructor run there).
  void close() noexcept { sandlet_runtime_close(std::exchange(rt_, nullptr)); }

  std::string root() const {
    const char* s = sandlet_runtime_root(rt_);
    return s != nullptr ? std::string(s) : std::string();
  }

  std::vector<BackendInfo> backends() const {
    const sandlet_backend_info_t* arr = nullptr;
    size_t n = 0;
    detail::check(sandlet_runtime_backends(rt_, &arr, &n));
    std::vector<BackendInfo> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      BackendInfo b;
      b.name = arr[i].name != nullptr ? arr[i].name : "";
      b.available = arr[i].available != 0;
      b.reason = arr[i].reason != nullptr ? arr[i].reason : "";
      out.push_back(std::move(b));
    }
    return out;
  }

  // Counters of this runtime (warm pool hits and misses, ...) as JSON (sandlet_runtime_stats_json).
  std::string stats_json() const {
    char* out = nullptr;
    detail::check(sandlet_runtime_stats_json(rt_, &out));
    return detail::take_string(out);
  }

  // Sweeps what crashed or expired runs left behind; returns how many sandboxes were removed.
  size_t gc() {
    size_t removed = 0;
    detail::check(sandlet_runtime_gc(rt_, &removed));
    return removed;
  }

  // All sandboxes under this root (from every process); label_filter is "" or "key=value".
  std::vector<SandboxInfo> list(const std::string& label_filter = std::string()) const {
    sandlet_sandbox_list_t* l = nullptr;
    detail::check(sandlet_runtime_list(rt_, label_filter.empty() ? nullptr : label_filter.c_str(), &l));
    std::unique_ptr<sandlet_sandbox_list_t, void (*)(sandlet_sandbox_list_t*)> guard(l, &sandlet_sandbox_list_delete);
    std::vector<SandboxInfo> out;
    const size_t n = sandlet_sandbox_list_count(l);
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      SandboxInfo s;
      const char* v = sandlet_sandbox_list_id(l, i);
      s.id = v != nullptr ? v : "";
      v = sandlet_sandbox_list_state(l, i);
      s.state = v != nullptr ? v : "";
      v = sandlet_sandbox_list_json(l, i);
      s.json = v != nullptr ? v : "";
      out.push_back(std::move(s));
    }
    return out;
  }

  Sandbox create(const Spec& spec) {
    sandlet_sandbox_t* sb = nullptr;
    detail::check(sandlet_sandbox_create(rt_, spec.get(), &sb));
    return Sandbox(sb);
  }

  // Creates a sandbox, runs one command in it with the given descriptors, destroys it (sandlet_run).
  ExecResult run(const Spec& spec, const RunOptions& opts) {
    detail::CRunOptions c(opts);
    sandlet_exec_result_t* r = nullptr;
    detail::check(sandlet_run(rt_, spec.get(), c.get(), &r));
    return ExecResult::take(r);
  }
  // The same without blocking (sandlet_run_async): `cb` runs once, on the event-loop thread.
  using RunCallback = std::function<void(const Error* err, ExecResult result)>;
  void run_async(const Spec& spec, const RunOptions& opts, RunCallback cb) {
    detail::CRunOptions c(opts);
    auto ctx = std::make_unique<RunCallback>(std::move(cb));
    detail::check(sandlet_run_async(rt_, spec.get(), c.get(), &run_trampoline, ctx.get()));
    ctx.release();  // owned by the trampoline from here on
  }
  // `cb` gets the error (NULL on success, valid only during the call) or the new sandbox. If the request
  // cannot even be queued this throws and `cb` is never called.
  void create_async(const Spec& spec, CreateCallback cb) {
    auto ctx = std::make_unique<CreateCallback>(std::move(cb));
    detail::check(sandlet_sandbox_create_async(rt_, spec.get(), &create_trampoline, ctx.get()));
    ctx.release();  // owned by the trampoline from here on
  }

  // ---- layer store and environments (blocking; results are the C ABI's JSON documents) ----

  // Imports a directory, tar / tar.gz / tar.zst, OCI layout or `docker save` tarball.
  // Returns {"layers":[...],"existed":[...],"environment":"..."}.
  std::string layer_import(const std::string& path, const LayerImportOptions& options = LayerImportOptions()) {
    detail::CLayerOptions c(options);
    char* out = nullptr;
    detail::check(sandlet_layer_import(rt_, path.c_str(), c.get(), &out));
    return detail::take_string(out);
  }
  std::string layer_list() { return json_call(&sandlet_layer_list); }
  std::string layer_inspect(const std::string& ref) {
    char* out = nullptr;
    detail::check(sandlet_layer_inspect(rt_, ref.c_str(), &out));
    return detail::take_string(out);
  }
  void layer_remove(const std::string& ref) { detail::check(sandlet_layer_remove(rt_, ref.c_str())); }
  std::string layer_gc() { return json_call(&sandlet_layer_gc); }
  std::string layer_merge(const std::vector<std::string>& refs,
                          const LayerImportOptions& options = LayerImportOptions()) {
    std::vector<const char*> c_refs;
    for (const auto& r : refs) c_refs.push_back(r.c_str());
    detail::CLayerOptions c(options);
    char* out = nullptr;
    detail::check(sandlet_layer_merge(rt_, c_refs.data(), c_refs.size(), c.get(), &out));
    return detail::take_string(out);
  }
  // `defaults_json` empty or {"env":{...},"workdir":"/abs","user":"uid[:gid]"}; returns the version's JSON.
  std::string env_create(const std::string& name, const std::vector<std::string>& layers,
                         const std::string& defaults_json = std::string()) {
    std::vector<const char*> c_layers;
    for (const auto& l : layers) c_layers.push_back(l.c_str());
    char* out = nullptr;
    detail::check(sandlet_env_create(rt_, name.c_str(), c_layers.data(), c_layers.size(),
                                     defaults_json.empty() ? nullptr : defaults_json.c_str(), &out));
    return detail::take_string(out);
  }
  std::string env_list() { return json_call(&sandlet_env_list); }
  void env_remove(const std::string& name) { detail::check(sandlet_env_remove(rt_, name.c_str())); }

  // Opens a handle on an existing sandbox by id (also one created by another process).
  Sandbox attach(const std::string& id) {
    sandlet_sandbox_t* sb = nullptr;
    detail::check(sandlet_sandbox_attach(rt_, id.c_str(), &sb));
    return Sandbox(sb);
  }

 private:
  std::string json_call(sandlet_error_t* (*fn)(sandlet_runtime_t*, char**)) {
    char* out = nullptr;
    detail::check(fn(rt_, &out));
    return detail::take_string(out);
  }

  static void run_trampoline(void* user_data, sandlet_error_t* err, sandlet_exec_result_t* result) noexcept {
    std::unique_ptr<RunCallback> cb(static_cast<RunCallback*>(user_data));
    try {
      if (err != nullptr) {
        sandlet_exec_result_delete(std::exchange(result, nullptr));  // NULL by contract; harmless otherwise
        Error e = Error::take(std::exchange(err, nullptr));
        if (*cb) (*cb)(&e, ExecResult());
      } else {
        ExecResult r = ExecResult::take(std::exchange(result, nullptr));
        if (*cb) (*cb)(nullptr, std::move(r));
      }
    } catch (...) {
      // Never unwind into C. Free whatever was not handed over yet.
      sandlet_error_delete(err);
      sandlet_exec_result_delete(result);
    }
  }

  static void create_trampoline(void* user_data, sandlet_error_t* err, sandlet_sandbox_t* sb) noexcept {
    std::unique_ptr<CreateCallback> cb(static_cast<CreateCallback*>(user_data));
    Sandbox owned(sb);  // closed on every path unless the callback moves it out
    try {
      if (err != nullptr) {
        Error e = Error::take(std::exchange(err, nullptr));
        if (*cb) (*cb)(&e, Sandbox());
      } else if (*cb) {
        (*cb)(nullptr, std::move(owned));
      }
    } catch (...) {
      sandlet_error_delete(err);
    }
  }

  sandlet_runtime_t* rt_ = nullptr;
};

}  // inline namespace cxx
}  // namespace sandlet

#endif  // SANDLET_SANDLET_HPP
