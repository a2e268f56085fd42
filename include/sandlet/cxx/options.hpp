// sandlet C++ wrapper: the options of exec, the one-shot run, the runtime and layer imports, and the C
// structs built from them (detail::C*Options, valid while the C++ options they view are alive). Part of
// sandlet.hpp (C++17 or later); may be included alone.
#ifndef SANDLET_CXX_OPTIONS_HPP
#define SANDLET_CXX_OPTIONS_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sandlet/sandlet.h"

namespace sandlet {
inline namespace cxx {  // see sandlet/cxx/error.hpp

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
  bool toolkit = false;            // true: run from the spec's protected toolkit (sandlet.h, "toolkit")
  bool stdin_stream = false;       // true: stdin stays open (ExecControl::write_stdin / close_stdin)
  bool tty = false;                // true: a pseudo-terminal for all three streams (sandlet.h, "tty")
  uint32_t tty_rows = 0, tty_cols = 0;  // 0 = 24 x 80
  // Optional streaming: called on the event-loop thread with each chunk (stream is SANDLET_STDOUT or
  // SANDLET_STDERR); the result's stdout_data/stderr_data then stay empty. Must not block for long.
  std::function<void(int stream, std::string_view data)> on_output;

  ExecOptions() = default;
  explicit ExecOptions(std::vector<std::string> args) : argv(std::move(args)) {}
};

// A shell session (Sandbox::open_session; sandlet_session.h).
struct SessionOptions {
  std::vector<std::string> argv;  // the shell; empty = bash if the sandbox has it, else /bin/sh
  std::vector<std::string> env;   // "KEY=VALUE", added to the spec's env
  std::string cwd;
  std::string user;
  uint64_t output_limit = 0;      // per command and stream; 0 = 16 MiB
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
    c_.toolkit = o.toolkit ? 1 : 0;
    c_.stdin_stream = o.stdin_stream ? 1 : 0;
    c_.tty = o.tty ? 1 : 0;
    c_.tty_rows = o.tty_rows;
    c_.tty_cols = o.tty_cols;
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

struct RuntimeOptions {
  uint32_t worker_threads = 0;   // 0 = library default
  bool skip_gc_on_open = false;  // true: do not sweep leftovers at open (faster open)
  bool disable_warm_pool = false;  // true: no sandboxes prepared ahead (see sandlet.h)
  bool create_soon = false;  // true: a create follows the open at once; prepare it meanwhile (see sandlet.h)
  std::string store;  // default store of layer_push/_pull (a URL, see sandlet_store.h); empty = $SANDLET_STORE
  // The node's loader of lazy layers, if this runtime starts it; 0 = the library's default (see sandlet.h):
  uint64_t cache_max_bytes = 0;
  uint32_t fetch_unit = 0;         // a multiple of 64 KiB, up to 64 MiB
  uint32_t fetch_concurrency = 0;  // 1..256
  uint32_t fill_timeout_ms = 0;    // >= 100
  // The root's audit log (sandlet_audit.h); 0 = the library's default:
  uint32_t audit_keep = 0;        // rotated files kept, <= 1000
  uint64_t audit_max_bytes = 0;   // rotation size, >= 65536
  std::string registries;  // OCI registries, JSON (sandlet.h); empty = $SANDLET_REGISTRIES
};

struct LayerImportOptions {
  std::string role;    // empty = "base"; "workspace", "toolkit" or "diff"
  std::string name;    // empty, or names the layer (an OCI image: the environment of its layers)
  std::string parent;  // empty, or the layer this one goes on top of
  bool no_dedupe = false;
  // Optional; called from the importing thread every few hundred files. Must not throw.
  std::function<void(uint64_t bytes, uint64_t total_bytes, uint64_t files)> progress;
};

struct LayerExportOptions {
  int zstd_level = 0;  // a path ending in ".zst": the zstd level (0 = the default)
  // Optional; called from the exporting thread every few hundred files. Must not throw.
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
  sandlet_layer_import_options_t c_ = SANDLET_LAYER_IMPORT_OPTIONS_INIT;
};

// The C view of LayerExportOptions; valid while `o` is alive.
inline sandlet_layer_export_options_t c_export_options(const LayerExportOptions& o) noexcept {
  sandlet_layer_export_options_t c = SANDLET_LAYER_EXPORT_OPTIONS_INIT;
  c.zstd_level = o.zstd_level;
  if (o.progress) {
    c.progress = &progress_trampoline;
    c.progress_user_data = const_cast<void*>(static_cast<const void*>(&o.progress));
  }
  return c;
}

}  // namespace detail

// ---- builds (Runtime::build) -------------------------------------------------------------------------

// A build's progress: a step begins (stream 0) or its RUN wrote output (SANDLET_STDOUT / SANDLET_STDERR).
// The views are valid only during the callback.
struct BuildEvent {
  uint32_t step = 0, steps = 0, line = 0;
  std::string_view text;  // the instruction as written
  std::string_view data;  // output chunk
  int stream = 0;
  bool cached = false;    // stream 0: its layer comes from the build cache
};

struct BuildOptions {
  std::string tag;                      // empty, or the environment to make of the result
  std::vector<std::string> build_args;  // "NAME=VALUE"
  std::vector<std::string> secrets;     // "id=NAME,src=FILE" or "id=NAME,env=VAR" (sandlet_build_options_t)
  std::string network;                  // RUN steps' network: "" / "none", or a policy as JSON (sandlet_build_options_t)
  bool no_cache = false;
  bool no_default_excludes = false;     // step layers keep /tmp and the other default snapshot excludes
  int cancel_fd = -1;                   // readable = cancel (see sandlet_build_options_t)
  // Optional; called on the building thread (see sandlet_build_options_t). Must not throw.
  std::function<void(const BuildEvent&)> progress;
};

namespace detail {

inline void build_progress_trampoline(void* user_data, const sandlet_build_event_t* ev) noexcept {
  try {
    const auto* fn = static_cast<const std::function<void(const BuildEvent&)>*>(user_data);
    if (fn == nullptr || !*fn || ev == nullptr) return;
    BuildEvent e;
    e.step = ev->step;
    e.steps = ev->steps;
    e.line = ev->line;
    e.text = ev->text != nullptr ? ev->text : "";
    e.data = std::string_view(static_cast<const char*>(ev->data), ev->data != nullptr ? ev->len : 0);
    e.stream = ev->stream;
    e.cached = ev->cached != 0;
    (*fn)(e);
  } catch (...) {
  }
}

// The C view of BuildOptions; valid while `o` (and `progress`, which it points to) is alive.
class CBuildOptions {
 public:
  CBuildOptions(const BuildOptions& o, const std::function<void(const BuildEvent&)>* progress) : args_(o.build_args), secrets_(o.secrets) {
    c_.tag = o.tag.empty() ? nullptr : o.tag.c_str();
    c_.build_args = args_.get_or_null();
    c_.secrets = secrets_.get_or_null();
    c_.network = o.network.empty() ? nullptr : o.network.c_str();
    c_.no_cache = o.no_cache ? 1 : 0;
    c_.no_default_excludes = o.no_default_excludes ? 1 : 0;
    c_.cancel_fd = o.cancel_fd;
    if (progress != nullptr && *progress) {
      c_.progress = &build_progress_trampoline;
      c_.progress_user_data = const_cast<void*>(static_cast<const void*>(progress));
    }
  }
  CBuildOptions(const CBuildOptions&) = delete;
  CBuildOptions& operator=(const CBuildOptions&) = delete;
  const sandlet_build_options_t* get() const noexcept { return &c_; }

 private:
  CStringArray args_;
  CStringArray secrets_;
  sandlet_build_options_t c_ = SANDLET_BUILD_OPTIONS_INIT;
};

}  // namespace detail

}  // inline namespace cxx
}  // namespace sandlet

#endif  // SANDLET_CXX_OPTIONS_HPP
