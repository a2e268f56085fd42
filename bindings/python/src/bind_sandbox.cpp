// sandlet._sandlet.Sandbox: synchronous calls release the GIL; *_async calls queue their completion on a
// CompletionQueue under a caller-chosen token and return at once. Exec, files, pause, snapshot and fork.
#include <pybind11/stl.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "errors.hpp"
#include "handles.hpp"

namespace py = pybind11;

namespace sandlet_py {

std::shared_ptr<sandlet::Sandbox> SandboxHandle::get() const {
  if (!sb_) throw sandlet::Error(SANDLET_FAILED_PRECONDITION, "sandbox " + id_ + ": this handle is closed");
  return sb_;
}

namespace {

// Exec arguments as the Python layer normalised them (sandlet/_common.py).
sandlet::ExecOptions exec_options(std::vector<std::string> argv, std::vector<std::string> env, std::string cwd,
                                  std::string user, std::string stdin_data, double timeout_s,
                                  uint64_t output_limit, bool kill_on_output_limit, bool keep_background,
                                  bool toolkit, bool stdin_stream = false, bool tty = false, uint32_t tty_rows = 0,
                                  uint32_t tty_cols = 0) {
  sandlet::ExecOptions o(std::move(argv));
  o.env = std::move(env);
  o.cwd = std::move(cwd);
  o.user = std::move(user);
  o.stdin_data = std::move(stdin_data);
  o.timeout_s = timeout_s;
  o.output_limit = output_limit;
  o.kill_on_output_limit = kill_on_output_limit;
  o.keep_background = keep_background;
  o.toolkit = toolkit;
  o.stdin_stream = stdin_stream;
  o.tty = tty;
  o.tty_rows = tty_rows;
  o.tty_cols = tty_cols;
  return o;
}

// A synchronous exec that still answers Ctrl-C: wait in slices with the GIL released and run Python's
// signal handlers in between; if one raises, the command is cancelled (all its processes killed) first.
struct ExecWaiter {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::optional<ErrorInfo> error;
  sandlet::ExecResult result;
};

PyExecResult exec_sync(SandboxHandle& h, const sandlet::ExecOptions& opts) {
  auto sb = h.get();
  auto w = std::make_shared<ExecWaiter>();
  std::optional<sandlet::ExecControl> control;
  // Waits up to `slice` for the completion; the GIL is released meanwhile.
  auto wait_slice = [&](std::chrono::milliseconds slice) {
    std::unique_lock<std::mutex> lock(w->mu);
    return w->cv.wait_for(lock, slice, [&] { return w->done; });
  };
  bool done;
  {
    // Start and the first wait share one GIL release: an exec is a few hundred microseconds.
    py::gil_scoped_release release;
    control.emplace(sb->exec_start(opts, [w](const sandlet::Error* e, sandlet::ExecResult r) {
      std::lock_guard<std::mutex> lock(w->mu);
      if (e != nullptr) w->error = ErrorInfo::from(*e);
      else w->result = std::move(r);
      w->done = true;
      w->cv.notify_one();
    }));
    done = wait_slice(std::chrono::milliseconds(100));
  }
  while (!done) {
    if (PyErr_CheckSignals() != 0) {
      py::error_already_set pending;  // e.g. KeyboardInterrupt: kill the command, then let it propagate
      control->cancel();
      {
        py::gil_scoped_release release;
        while (!wait_slice(std::chrono::milliseconds(1000))) {
        }
      }
      throw pending;
    }
    py::gil_scoped_release release;
    done = wait_slice(std::chrono::milliseconds(100));
  }
  if (w->error) throw sandlet::Error(static_cast<sandlet_code_t>(w->error->code), w->error->message, w->error->err_no);
  return PyExecResult::from(w->result);
}

ExecControlHandle exec_start(SandboxHandle& h, std::shared_ptr<CompletionQueue> q, uint64_t token,
                             sandlet::ExecOptions opts, bool stream) {
  auto sb = h.get();
  if (stream)
    opts.on_output = [q, token](int s, std::string_view data) {
      q->push({token, CompletionKind::kOutput, OutputChunk{s, std::string(data)}});
    };
  return ExecControlHandle(sb->exec_start(opts, [q, token](const sandlet::Error* e, sandlet::ExecResult r) {
    if (e != nullptr) q->push({token, CompletionKind::kError, ErrorInfo::from(*e)});
    else q->push({token, CompletionKind::kResult, std::move(r)});
  }));
}

void push_file(const std::shared_ptr<CompletionQueue>& q, uint64_t token, const sandlet::Error* e, std::string data,
               uint32_t mode) {
  if (e != nullptr) q->push({token, CompletionKind::kError, ErrorInfo::from(*e)});
  else q->push({token, CompletionKind::kFile, FileData{std::move(data), mode}});
}

sandlet::SnapshotOptions snapshot_options(std::vector<std::string> exclude, bool default_excludes, bool full,
                                          std::string name, uint32_t max_depth) {
  sandlet::SnapshotOptions o;
  o.exclude = std::move(exclude);
  o.default_excludes = default_excludes;
  o.full = full;
  o.name = std::move(name);
  o.max_depth = max_depth;
  return o;
}

void push_error(const std::shared_ptr<CompletionQueue>& q, uint64_t token, const sandlet::Error& e) {
  q->push({token, CompletionKind::kError, ErrorInfo::from(e)});
}

#define SANDLET_PY_EXEC_ARGS                                                                             \
  py::arg("argv"), py::arg("env") = std::vector<std::string>(), py::arg("cwd") = "", py::arg("user") = "", \
      py::arg("stdin") = py::bytes(), py::arg("timeout_s") = 0.0, py::arg("output_limit") = 0,             \
      py::arg("kill_on_output_limit") = false, py::arg("keep_background") = false, \
      py::arg("toolkit") = false, py::arg("stdin_stream") = false, py::arg("tty") = false,  \
      py::arg("tty_rows") = 0, py::arg("tty_cols") = 0

}  // namespace

void bind_sandbox(py::module_& m) {
  py::class_<ExecControlHandle>(m, "ExecControl", "Signals, cancels, feeds or resizes a running command.")
      .def("signal", &ExecControlHandle::signal, py::arg("signo"), "Delivers a signal to every process of it.")
      .def("cancel", &ExecControlHandle::cancel, "Kills every process of it; its completion becomes Cancelled.")
      .def("write_stdin",
           [](ExecControlHandle& c, const py::bytes& data) {
             std::string copy = data;
             py::gil_scoped_release release;  // may wait while the sandbox is 4 MiB behind
             c.write_stdin(copy);
           },
           py::arg("data"), "Feeds its stdin (started with stdin_stream, or typed into its terminal).")
      .def("close_stdin", &ExecControlHandle::close_stdin, "Ends its stdin.")
      .def("resize", &ExecControlHandle::resize, py::arg("rows"), py::arg("cols"), "Sets its terminal's size.");

  py::class_<SandboxHandle>(m, "Sandbox", "A handle on one sandbox (low level; use sandlet.Sandbox).")
      .def_property_readonly("id", &SandboxHandle::id)
      .def_property_readonly("closed", &SandboxHandle::closed)
      .def("close", &SandboxHandle::close)
      .def("info_json", [](SandboxHandle& h) {
        auto sb = h.get();
        py::gil_scoped_release release;
        return sb->info_json();
      })
      .def("destroy", [](SandboxHandle& h) {
        auto sb = h.get();
        py::gil_scoped_release release;
        sb->destroy();
      })
      .def("pause", [](SandboxHandle& h) {
        auto sb = h.get();
        py::gil_scoped_release release;
        sb->pause();
      })
      .def("net_update", [](SandboxHandle& h, const std::string& policy_json) {
        auto sb = h.get();
        py::gil_scoped_release release;
        sb->net_update(policy_json);
      }, py::arg("policy_json"))
      .def("net_stats_json", [](SandboxHandle& h) {
        auto sb = h.get();
        py::gil_scoped_release release;
        return sb->net_stats_json();
      })
      .def("seccomp_stats_json", [](SandboxHandle& h) {
        auto sb = h.get();
        py::gil_scoped_release release;
        return sb->seccomp_stats_json();
      })
      .def("resume", [](SandboxHandle& h) {
        auto sb = h.get();
        py::gil_scoped_release release;
        sb->resume();
      })
      .def("destroy_async",
           [](SandboxHandle& h, std::shared_ptr<CompletionQueue> q, uint64_t token) {
             h.get()->destroy_async([q, token](const sandlet::Error* e) {
               if (e != nullptr) q->push({token, CompletionKind::kError, ErrorInfo::from(*e)});
               else q->push({token, CompletionKind::kDone, std::monostate{}});
             });
           },
           py::arg("queue"), py::arg("token"))
      .def("exec",
           [](SandboxHandle& h, std::vector<std::string> argv, std::vector<std::string> env, std::string cwd,
              std::string user, std::string stdin_data, double timeout_s, uint64_t output_limit,
              bool kill_on_output_limit, bool keep_background, bool toolkit, bool stdin_stream, bool tty,
              uint32_t tty_rows, uint32_t tty_cols) {
             if (stdin_stream)
               throw sandlet::Error(SANDLET_INVALID_ARGUMENT, "exec: stdin_stream needs exec_start (a handle to write it through)");
             return exec_sync(h, exec_options(std::move(argv), std::move(env), std::move(cwd), std::move(user),
                                              std::move(stdin_data), timeout_s, output_limit, kill_on_output_limit,
                                              keep_background, toolkit, false, tty, tty_rows, tty_cols));
           },
           SANDLET_PY_EXEC_ARGS)
      .def("exec_start",
           [](SandboxHandle& h, std::shared_ptr<CompletionQueue> q, uint64_t token, bool stream,
              std::vector<std::string> argv, std::vector<std::string> env, std::string cwd, std::string user,
              std::string stdin_data, double timeout_s, uint64_t output_limit, bool kill_on_output_limit,
              bool keep_background, bool toolkit, bool stdin_stream, bool tty, uint32_t tty_rows,
              uint32_t tty_cols) {
             return exec_start(h, std::move(q), token,
                               exec_options(std::move(argv), std::move(env), std::move(cwd), std::move(user),
                                            std::move(stdin_data), timeout_s, output_limit, kill_on_output_limit,
                                            keep_background, toolkit, stdin_stream, tty, tty_rows, tty_cols),
                               stream);
           },
           py::arg("queue"), py::arg("token"), py::arg("stream"), SANDLET_PY_EXEC_ARGS)
      .def("write_file",
           [](SandboxHandle& h, const std::string& path, const std::string& data, uint32_t mode) {
             auto sb = h.get();
             py::gil_scoped_release release;
             sb->write_file(path, data, mode);
           },
           py::arg("path"), py::arg("data"), py::arg("mode") = 0644)
      .def("read_file",
           [](SandboxHandle& h, const std::string& path, uint64_t max_bytes) {
             auto sb = h.get();
             std::string data;
             {
               py::gil_scoped_release release;
               data = sb->read_file(path, max_bytes);
             }
             return py::bytes(data);
           },
           py::arg("path"), py::arg("max_bytes") = 0)
      .def("write_file_async",
           [](SandboxHandle& h, std::shared_ptr<CompletionQueue> q, uint64_t token, const std::string& path,
              const std::string& data, uint32_t mode) {
             h.get()->write_file_async(path, data, mode, [q, token](const sandlet::Error* e, std::string d, uint32_t md) {
               push_file(q, token, e, std::move(d), md);
             });
           },
           py::arg("queue"), py::arg("token"), py::arg("path"), py::arg("data"), py::arg("mode") = 0644)
      .def("read_file_async",
           [](SandboxHandle& h, std::shared_ptr<CompletionQueue> q, uint64_t token, const std::string& path,
              uint64_t max_bytes) {
             h.get()->read_file_async(path, max_bytes, [q, token](const sandlet::Error* e, std::string d, uint32_t md) {
               push_file(q, token, e, std::move(d), md);
             });
           },
           py::arg("queue"), py::arg("token"), py::arg("path"), py::arg("max_bytes") = 0)
      .def("snapshot",
           [](SandboxHandle& h, std::vector<std::string> exclude, bool default_excludes, bool full, std::string name,
              uint32_t max_depth) {
             auto sb = h.get();
             auto o = snapshot_options(std::move(exclude), default_excludes, full, std::move(name), max_depth);
             py::gil_scoped_release release;
             return sb->snapshot(o);
           },
           py::arg("exclude"), py::arg("default_excludes"), py::arg("full"), py::arg("name"), py::arg("max_depth"),
           "Snapshots the sandbox; returns the snapshot result JSON.")
      .def("snapshot_async",
           [](SandboxHandle& h, std::shared_ptr<CompletionQueue> q, uint64_t token, std::vector<std::string> exclude,
              bool default_excludes, bool full, std::string name, uint32_t max_depth) {
             auto o = snapshot_options(std::move(exclude), default_excludes, full, std::move(name), max_depth);
             h.get()->snapshot_async(o, [q, token](const sandlet::Error* e, std::string json) {
               if (e != nullptr) push_error(q, token, *e);
               else q->push({token, CompletionKind::kJson, JsonText{std::move(json)}});
             });
           },
           py::arg("queue"), py::arg("token"), py::arg("exclude"), py::arg("default_excludes"), py::arg("full"),
           py::arg("name"), py::arg("max_depth"))
      .def("fork",
           [](SandboxHandle& h, size_t n, std::vector<std::pair<std::string, std::string>> labels,
              std::vector<std::string> exclude, bool copy_secrets) {
             auto sb = h.get();
             sandlet::ForkOptions o{n, std::move(labels), std::move(exclude), copy_secrets};
             ForkData d;
             {
               py::gil_scoped_release release;
               d = ForkData::from(sb->fork(o));
             }
             return fork_to_python(d);
           },
           py::arg("n"), py::arg("labels"), py::arg("exclude"), py::arg("copy_secrets"),
           "One snapshot, then n children on it: (snapshot_json, [Sandbox or None], [exception or None]).")
      .def("fork_async",
           [](SandboxHandle& h, std::shared_ptr<CompletionQueue> q, uint64_t token, size_t n,
              std::vector<std::pair<std::string, std::string>> labels, std::vector<std::string> exclude,
              bool copy_secrets) {
             sandlet::ForkOptions o{n, std::move(labels), std::move(exclude), copy_secrets};
             h.get()->fork_async(o, [q, token](const sandlet::Error* e, sandlet::ForkResult r) {
               if (e != nullptr) push_error(q, token, *e);
               else q->push({token, CompletionKind::kFork, ForkData::from(std::move(r))});
             });
           },
           py::arg("queue"), py::arg("token"), py::arg("n"), py::arg("labels"), py::arg("exclude"),
           py::arg("copy_secrets"));
}

}  // namespace sandlet_py
