// sandlet._sandlet.Runtime: open/close, create (sync and queued), attach, list, gc, the layer store,
// remote stores (push, pull, the loader's status), environments and builds (queued). Every blocking call releases the GIL.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "errors.hpp"
#include "sandlet/sandlet_jobs.h"
#include "handles.hpp"
#include "sandlet/sandlet_metrics.h"
#include "sandlet/sandlet_fncall.h"

namespace py = pybind11;

namespace sandlet_py {

namespace {
bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}
}  // namespace

RuntimeHandle::~RuntimeHandle() {
  // Closing waits for the library's callbacks; none of ours needs the GIL, so let other threads run.
  if (rt_ && PyGILState_Check() && !interpreter_finalizing()) {
    py::gil_scoped_release release;
    rt_.reset();
  }
}

std::shared_ptr<sandlet::Runtime> RuntimeHandle::get() const {
  if (!rt_) throw sandlet::Error(SANDLET_FAILED_PRECONDITION, "runtime " + root_ + " is closed");
  return rt_;
}

void RuntimeHandle::close() {
  std::shared_ptr<sandlet::Runtime> last = std::move(rt_);
  py::gil_scoped_release release;
  last.reset();
}

namespace {


// A FnCall request (sandlet_fncall.h) from the Python arguments; the strings stay alive in `store`.
struct CallArgs {
  std::string spec_json, script, stdin_data;
  std::vector<std::string> argv, env;
  std::vector<const char*> argv_p, env_p;
  sandlet_call_options_t o = SANDLET_CALL_OPTIONS_INIT;
  void fill(double timeout_s) {
    for (auto& a : argv) argv_p.push_back(a.c_str());
    argv_p.push_back(nullptr);
    for (auto& e : env) env_p.push_back(e.c_str());
    env_p.push_back(nullptr);
    o.spec_json = spec_json.c_str();
    if (!argv.empty()) o.argv = argv_p.data();
    if (!script.empty()) o.script = script.c_str();
    o.env = env_p.data();
    o.stdin_data = stdin_data.data();
    o.stdin_len = stdin_data.size();
    o.timeout_s = timeout_s;
  }
};

struct CallAsync {
  std::shared_ptr<CompletionQueue> q;
  uint64_t token;
};

void call_trampoline(void* user_data, sandlet_error_t* err, sandlet_exec_result_t* r) noexcept {
  std::unique_ptr<CallAsync> c(static_cast<CallAsync*>(user_data));
  if (err) {
    ErrorInfo e{static_cast<int>(sandlet_error_code(err)), sandlet_error_message(err), 0};
    sandlet_error_delete(err);
    c->q->push({c->token, CompletionKind::kError, std::move(e)});
  } else {
    c->q->push({c->token, CompletionKind::kResult, sandlet::ExecResult::take(r)});
  }
}

// Runs a blocking runtime call with the GIL released.
template <typename Fn>
auto blocking(const RuntimeHandle& h, Fn&& fn) {
  auto rt = h.get();
  py::gil_scoped_release release;
  return fn(*rt);
}

// Layer-import options; a Python progress callable is called with the GIL re-acquired (imports run on the
// calling thread). Its first exception is kept and raised once the import returns.
struct ImportOptions {
  sandlet::LayerImportOptions options;
  std::shared_ptr<py::object> progress_error = std::make_shared<py::object>();
};

ImportOptions import_options(const std::string& role, const std::string& name, const std::string& parent,
                             bool no_dedupe, py::object progress) {
  ImportOptions o;
  o.options.role = role;
  o.options.name = name;
  o.options.parent = parent;
  o.options.no_dedupe = no_dedupe;
  if (!progress.is_none()) {
    auto fn = std::make_shared<py::object>(std::move(progress));
    auto err = o.progress_error;
    o.options.progress = [fn, err](uint64_t bytes, uint64_t total, uint64_t files) {
      py::gil_scoped_acquire acquire;
      if (*err) return;
      try {
        (*fn)(bytes, total, files);
      } catch (py::error_already_set& e) {
        *err = e.value();
      }
    };
  }
  return o;
}

void raise_progress_error(const ImportOptions& o) {
  if (*o.progress_error) {
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(o.progress_error->ptr())), o.progress_error->ptr());
    throw py::error_already_set();
  }
}

// The one-shot run's options, from the extension's positional arguments.
sandlet::RunOptions run_options(std::vector<std::string> argv, std::vector<std::string> env, std::string cwd,
                                std::string user, double timeout_s, int stdin_fd, int stdout_fd, int stderr_fd,
                                int cancel_fd) {
  sandlet::RunOptions o(std::move(argv));
  o.env = std::move(env);
  o.cwd = std::move(cwd);
  o.user = std::move(user);
  o.timeout_s = timeout_s;
  o.stdin_fd = stdin_fd;
  o.stdout_fd = stdout_fd;
  o.stderr_fd = stderr_fd;
  o.cancel_fd = cancel_fd;
  return o;
}

}  // namespace

void bind_runtime(py::module_& m) {
  py::class_<RuntimeHandle>(m, "Runtime", "A runtime handle (low level; use sandlet.Runtime).")
      .def(py::init([](std::optional<std::string> root, uint32_t worker_threads, bool skip_gc_on_open,
                       bool disable_warm_pool, bool create_soon, std::optional<std::string> store,
                       uint64_t cache_max_bytes, uint32_t fetch_unit, uint32_t fetch_concurrency,
                       uint32_t fill_timeout_ms, uint32_t audit_keep, uint64_t audit_max_bytes,
                       std::optional<std::string> registries) {
             sandlet::RuntimeOptions o;
             o.worker_threads = worker_threads;
             o.skip_gc_on_open = skip_gc_on_open;
             o.disable_warm_pool = disable_warm_pool;
             o.create_soon = create_soon;
             o.store = store.value_or("");
             o.cache_max_bytes = cache_max_bytes;
             o.fetch_unit = fetch_unit;
             o.fetch_concurrency = fetch_concurrency;
             o.fill_timeout_ms = fill_timeout_ms;
             o.audit_keep = audit_keep;
             o.audit_max_bytes = audit_max_bytes;
             o.registries = registries.value_or("");
             std::shared_ptr<sandlet::Runtime> rt;
             {
               py::gil_scoped_release release;
               rt = std::make_shared<sandlet::Runtime>(
                   sandlet::Runtime::open(root ? root->c_str() : nullptr, o));
             }
             return RuntimeHandle(std::move(rt));
           }),
           py::arg("root") = py::none(), py::arg("worker_threads") = 0, py::arg("skip_gc_on_open") = false,
           py::arg("disable_warm_pool") = false, py::arg("create_soon") = false, py::arg("store") = py::none(),
           py::arg("cache_max_bytes") = 0, py::arg("fetch_unit") = 0, py::arg("fetch_concurrency") = 0,
           py::arg("fill_timeout_ms") = 0, py::arg("audit_keep") = 0, py::arg("audit_max_bytes") = 0,
           py::arg("registries") = py::none())
      .def_property_readonly("root", &RuntimeHandle::root)
      .def_property_readonly("closed", &RuntimeHandle::closed)
      .def_property_readonly("audit_path", [](RuntimeHandle& h) { return h.get()->audit_path(); })
      .def("close", &RuntimeHandle::close)
      .def("backends",
           [](RuntimeHandle& h) {
             std::vector<std::tuple<std::string, bool, std::string, uint32_t, std::string, std::string>> out;
             for (auto& b : h.get()->backends())
               out.emplace_back(b.name, b.available, b.reason, b.capabilities, b.summary, b.details_json);
             return out;
           })
      .def("gc", [](RuntimeHandle& h) { return blocking(h, [](sandlet::Runtime& rt) { return rt.gc(); }); })
      .def("features_json",
           [](RuntimeHandle& h) { return blocking(h, [](sandlet::Runtime& rt) { return rt.features_json(); }); })
      .def("stats_json", [](RuntimeHandle& h) { return h.get()->stats_json(); })
      // Metrics read every record of the root: off the GIL.
      .def("metrics_text",
           [](RuntimeHandle& h) {
             return blocking(h, [](sandlet::Runtime& rt) {
               char* out = nullptr;
               sandlet::detail::check(sandlet_runtime_metrics_text(rt.get(), &out));
               return sandlet::detail::take_string(out);
             });
           })
      .def("metrics_json",
           [](RuntimeHandle& h) {
             return blocking(h, [](sandlet::Runtime& rt) {
               char* out = nullptr;
               sandlet::detail::check(sandlet_runtime_metrics_json(rt.get(), &out));
               return sandlet::detail::take_string(out);
             });
           })
      .def("pause_jobs",
           [](RuntimeHandle& h, const std::string& selector, bool pause) {
             return blocking(h, [&](sandlet::Runtime& rt) {
               char* out = nullptr;
               sandlet::detail::check(pause ? sandlet_runtime_pause(rt.get(), selector.c_str(), &out)
                                            : sandlet_runtime_resume(rt.get(), selector.c_str(), &out));
               std::string text(out);
               sandlet_free(out);
               return text;
             });
           },
           py::arg("selector"), py::arg("pause"))
      .def("set_call_pool",
           [](RuntimeHandle& h, const sandlet::Spec& spec, uint32_t min_idle, uint32_t max_size,
              const std::string& reuse, double freeze_after_s, double destroy_frozen_after_s) {
             const std::string key = spec.to_json();  // what `call` passes: the same spec, the same pool
             sandlet_fncall_pool_options_t o = SANDLET_FNCALL_POOL_OPTIONS_INIT;
             o.min_idle = min_idle;
             o.max_size = max_size;
             o.reuse = reuse.c_str();
             o.freeze_after_s = freeze_after_s;
             o.destroy_frozen_after_s = destroy_frozen_after_s;
             blocking(h, [&](sandlet::Runtime& rt) {
               sandlet::detail::check(sandlet_runtime_set_fncall_pool(rt.get(), key.c_str(), &o));
               return 0;
             });
           },
           py::arg("spec"), py::arg("min_idle"), py::arg("max_size"), py::arg("reuse"), py::arg("freeze_after_s"),
           py::arg("destroy_frozen_after_s"))
      .def("call_stats_json",
           [](RuntimeHandle& h) {
             return blocking(h, [](sandlet::Runtime& rt) {
               char* out = nullptr;
               sandlet::detail::check(sandlet_runtime_fncall_stats_json(rt.get(), &out));
               return sandlet::detail::take_string(out);
             });
           })
      .def("set_admission",
           [](RuntimeHandle& h, uint64_t max_sandboxes, uint64_t max_memory, uint64_t max_pids, double max_cpus,
              uint64_t max_initializing, double timeout_s, uint64_t max_queue) {
             sandlet_admission_options_t o = SANDLET_ADMISSION_OPTIONS_INIT;
             o.max_sandboxes = max_sandboxes;
             o.max_memory = max_memory;
             o.max_pids = max_pids;
             o.max_cpus = max_cpus;
             o.max_initializing = max_initializing;
             o.timeout_s = timeout_s;
             o.max_queue = max_queue;
             blocking(h, [&](sandlet::Runtime& rt) {
               sandlet::detail::check(sandlet_runtime_set_admission(rt.get(), &o));
               return 0;
             });
           },
           py::arg("max_sandboxes"), py::arg("max_memory"), py::arg("max_pids"), py::arg("max_cpus"),
           py::arg("max_initializing"), py::arg("timeout_s"), py::arg("max_queue"))
      .def("logs",
           [](RuntimeHandle& h, const std::string& id) {
             return blocking(h, [&](sandlet::Runtime& rt) { return rt.logs(id); });
           },
           py::arg("id"))
      .def("expired", [](RuntimeHandle& h) { return blocking(h, [](sandlet::Runtime& rt) { return rt.expired(); }); })
      .def("forget_expired",
           [](RuntimeHandle& h, const std::string& id) {
             blocking(h, [&](sandlet::Runtime& rt) {
               rt.forget_expired(id);
               return 0;
             });
           },
           py::arg("id"))
      .def("list",
           [](RuntimeHandle& h, const std::string& label_filter) {
             auto items = blocking(h, [&](sandlet::Runtime& rt) { return rt.list(label_filter); });
             std::vector<std::tuple<std::string, std::string, std::string>> out;
             for (auto& s : items) out.emplace_back(std::move(s.id), std::move(s.state), std::move(s.json));
             return out;
           },
           py::arg("label_filter") = "")
      .def("create",
           [](RuntimeHandle& h, const sandlet::Spec& spec) {
             auto sb = blocking(h, [&](sandlet::Runtime& rt) { return rt.create(spec); });
             return SandboxHandle(std::make_shared<sandlet::Sandbox>(std::move(sb)));
           },
           py::arg("spec"))
      .def("create_async",
           [](RuntimeHandle& h, std::shared_ptr<CompletionQueue> q, uint64_t token, const sandlet::Spec& spec) {
             h.get()->create_async(spec, [q, token](const sandlet::Error* e, sandlet::Sandbox sb) {
               if (e != nullptr) q->push({token, CompletionKind::kError, ErrorInfo::from(*e)});
               else q->push({token, CompletionKind::kSandbox, std::make_shared<sandlet::Sandbox>(std::move(sb))});
             });
           },
           py::arg("queue"), py::arg("token"), py::arg("spec"))
      .def("run",
           [](RuntimeHandle& h, const sandlet::Spec& spec, std::vector<std::string> argv, std::vector<std::string> env,
              std::string cwd, std::string user, double timeout_s, int stdin_fd, int stdout_fd, int stderr_fd,
              int cancel_fd) {
             sandlet::RunOptions o = run_options(std::move(argv), std::move(env), std::move(cwd), std::move(user),
                                                 timeout_s, stdin_fd, stdout_fd, stderr_fd, cancel_fd);
             auto r = blocking(h, [&](sandlet::Runtime& rt) { return rt.run(spec, o); });
             return PyExecResult::from(r);
           },
           py::arg("spec"), py::arg("argv"), py::arg("env"), py::arg("cwd"), py::arg("user"), py::arg("timeout_s"),
           py::arg("stdin_fd"), py::arg("stdout_fd"), py::arg("stderr_fd"), py::arg("cancel_fd"))
      .def("call",
           [](RuntimeHandle& h, const sandlet::Spec& spec, std::vector<std::string> argv, std::string script,
              std::vector<std::string> env, py::bytes stdin_data, double timeout_s) {
             CallArgs a;
             a.spec_json = spec.to_json();
             a.argv = std::move(argv);
             a.script = std::move(script);
             a.env = std::move(env);
             a.stdin_data = stdin_data;
             a.fill(timeout_s);
             auto r = blocking(h, [&](sandlet::Runtime& rt) {
               sandlet_exec_result_t* out = nullptr;
               sandlet::detail::check(sandlet_call(rt.get(), &a.o, &out));
               return sandlet::ExecResult::take(out);
             });
             return PyExecResult::from(r);
           },
           py::arg("spec"), py::arg("argv"), py::arg("script"), py::arg("env"), py::arg("stdin"), py::arg("timeout_s"))
      .def("call_async",
           [](RuntimeHandle& h, std::shared_ptr<CompletionQueue> q, uint64_t token, const sandlet::Spec& spec,
              std::vector<std::string> argv, std::string script, std::vector<std::string> env, py::bytes stdin_data,
              double timeout_s) {
             CallArgs a;
             a.spec_json = spec.to_json();
             a.argv = std::move(argv);
             a.script = std::move(script);
             a.env = std::move(env);
             a.stdin_data = stdin_data;
             a.fill(timeout_s);
             auto* c = new CallAsync{std::move(q), token};
             if (sandlet_error_t* e = sandlet_call_async(h.get()->get(), &a.o, &call_trampoline, c)) {
               delete c;
               sandlet::detail::check(e);
             }
           },
           py::arg("queue"), py::arg("token"), py::arg("spec"), py::arg("argv"), py::arg("script"), py::arg("env"),
           py::arg("stdin"), py::arg("timeout_s"))
      .def("run_async",
           [](RuntimeHandle& h, std::shared_ptr<CompletionQueue> q, uint64_t token, const sandlet::Spec& spec,
              std::vector<std::string> argv, std::vector<std::string> env, std::string cwd, std::string user,
              double timeout_s, int stdin_fd, int stdout_fd, int stderr_fd, int cancel_fd) {
             sandlet::RunOptions o = run_options(std::move(argv), std::move(env), std::move(cwd), std::move(user),
                                                 timeout_s, stdin_fd, stdout_fd, stderr_fd, cancel_fd);
             h.get()->run_async(spec, o, [q, token](const sandlet::Error* e, sandlet::ExecResult r) {
               if (e != nullptr) q->push({token, CompletionKind::kError, ErrorInfo::from(*e)});
               else q->push({token, CompletionKind::kResult, std::move(r)});
             });
           },
           py::arg("queue"), py::arg("token"), py::arg("spec"), py::arg("argv"), py::arg("env"), py::arg("cwd"),
           py::arg("user"), py::arg("timeout_s"), py::arg("stdin_fd"), py::arg("stdout_fd"), py::arg("stderr_fd"),
           py::arg("cancel_fd"))
      .def("build_async",
           [](RuntimeHandle& h, std::shared_ptr<CompletionQueue> q, uint64_t token, const std::string& recipe,
              const std::string& context, const std::string& tag, std::vector<std::string> build_args, bool no_cache,
              bool keep_tmp, int cancel_fd, bool progress, std::vector<std::string> secrets, std::string network) {
             sandlet::BuildOptions o;
             o.network = std::move(network);
             o.tag = tag;
             o.build_args = std::move(build_args);
             o.secrets = std::move(secrets);
             o.no_cache = no_cache;
             o.no_default_excludes = keep_tmp;
             o.cancel_fd = cancel_fd;
             // Events and the completion are queued from the build's thread; Python reads them on its own.
             if (progress) {
               o.progress = [q, token](const sandlet::BuildEvent& e) {
                 q->push({token, CompletionKind::kBuildEvent,
                          BuildEventData{e.step, e.steps, e.line, std::string(e.text), e.cached, e.stream,
                                         std::string(e.data)}});
               };
             }
             h.get()->build_async(recipe, context, o, [q, token](const sandlet::Error* e, std::string json) {
               if (e != nullptr) q->push({token, CompletionKind::kError, ErrorInfo::from(*e)});
               else q->push({token, CompletionKind::kJson, JsonText{std::move(json)}});
             });
           },
           py::arg("queue"), py::arg("token"), py::arg("recipe"), py::arg("context"), py::arg("tag"),
           py::arg("build_args"), py::arg("no_cache"), py::arg("keep_tmp"), py::arg("cancel_fd"), py::arg("progress"),
           py::arg("secrets"), py::arg("network") = "")
      .def("fork_snapshot",
           [](RuntimeHandle& h, const std::string& snapshot, const sandlet::Spec* base, size_t n,
              std::vector<std::pair<std::string, std::string>> labels, bool copy_secrets) {
             sandlet::ForkOptions o{n, std::move(labels), {}, copy_secrets};
             ForkData d = blocking(h, [&](sandlet::Runtime& rt) { return ForkData::from(rt.fork_snapshot(snapshot, base, o)); });
             return fork_to_python(d);
           },
           py::arg("snapshot"), py::arg("base"), py::arg("n"), py::arg("labels"), py::arg("copy_secrets"),
           "n children of a snapshot layer: (snapshot_json, [Sandbox or None], [exception or None]).")
      .def("attach",
           [](RuntimeHandle& h, const std::string& id) {
             auto sb = blocking(h, [&](sandlet::Runtime& rt) { return rt.attach(id); });
             return SandboxHandle(std::make_shared<sandlet::Sandbox>(std::move(sb)));
           },
           py::arg("id"))
      .def("layer_import",
           [](RuntimeHandle& h, const std::string& path, const std::string& role, const std::string& name,
              const std::string& parent, bool no_dedupe, py::object progress) {
             ImportOptions o = import_options(role, name, parent, no_dedupe, std::move(progress));
             std::string out = blocking(h, [&](sandlet::Runtime& rt) { return rt.layer_import(path, o.options); });
             raise_progress_error(o);
             return out;
           },
           py::arg("path"), py::arg("role") = "", py::arg("name") = "", py::arg("parent") = "",
           py::arg("no_dedupe") = false, py::arg("progress") = py::none())
      .def("layer_export",
           [](RuntimeHandle& h, const std::string& ref, const std::string& path, int zstd_level) {
             sandlet::LayerExportOptions o;
             o.zstd_level = zstd_level;
             return blocking(h, [&](sandlet::Runtime& rt) { return rt.layer_export(ref, path, o); });
           },
           py::arg("ref"), py::arg("path"), py::arg("zstd_level") = 0)
      .def("layer_list", [](RuntimeHandle& h) { return blocking(h, [](sandlet::Runtime& rt) { return rt.layer_list(); }); })
      .def("layer_inspect",
           [](RuntimeHandle& h, const std::string& ref) {
             return blocking(h, [&](sandlet::Runtime& rt) { return rt.layer_inspect(ref); });
           },
           py::arg("ref"))
      .def("layer_remove",
           [](RuntimeHandle& h, const std::string& ref) {
             blocking(h, [&](sandlet::Runtime& rt) { rt.layer_remove(ref); return 0; });
           },
           py::arg("ref"))
      .def("layer_gc", [](RuntimeHandle& h) { return blocking(h, [](sandlet::Runtime& rt) { return rt.layer_gc(); }); })
      .def("layer_merge",
           [](RuntimeHandle& h, const std::vector<std::string>& refs, const std::string& role, const std::string& name,
              bool no_dedupe) {
             ImportOptions o = import_options(role, name, "", no_dedupe, py::none());
             return blocking(h, [&](sandlet::Runtime& rt) { return rt.layer_merge(refs, o.options); });
           },
           py::arg("refs"), py::arg("role") = "", py::arg("name") = "", py::arg("no_dedupe") = false)
      .def("layer_push",
           [](RuntimeHandle& h, const std::string& ref, std::optional<std::string> store) {
             return blocking(h, [&](sandlet::Runtime& rt) { return rt.layer_push(ref, store); });
           },
           py::arg("ref"), py::arg("store") = py::none())
      .def("layer_pull",
           [](RuntimeHandle& h, const std::string& ref, std::optional<std::string> store, bool lazy) {
             return blocking(h, [&](sandlet::Runtime& rt) { return rt.layer_pull(ref, store, lazy); });
           },
           py::arg("ref"), py::arg("store") = py::none(), py::arg("lazy") = false)
      .def("image_pull",
           [](RuntimeHandle& h, const std::string& ref, const std::string& name, py::object progress) {
             // The callable is held through a shared_ptr: copies of the std::function (made without the GIL)
             // never touch its reference count. A callback that raises is raised again after the pull.
             std::function<void(const char*, size_t, size_t, uint64_t, uint64_t)> fn;
             auto err = std::make_shared<py::object>();
             if (!progress.is_none()) {
               auto cb = std::make_shared<py::object>(std::move(progress));
               fn = [cb, err](const char* phase, size_t layer, size_t layers, uint64_t bytes, uint64_t total) {
                 py::gil_scoped_acquire gil;
                 if (*err) return;
                 try {
                   (*cb)(phase, layer, layers, bytes, total);
                 } catch (py::error_already_set& e) {
                   *err = e.value();
                 }
               };
             }
             std::string out = blocking(h, [&](sandlet::Runtime& rt) { return rt.image_pull(ref, name, fn); });
             if (*err) {
               PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err->ptr())), err->ptr());
               throw py::error_already_set();
             }
             return out;
           },
           py::arg("ref"), py::arg("name") = "", py::arg("progress") = py::none())
      .def("loader_status",
           [](RuntimeHandle& h) { return blocking(h, [](sandlet::Runtime& rt) { return rt.loader_status(); }); })
      .def("env_create",
           [](RuntimeHandle& h, const std::string& name, const std::vector<std::string>& layers,
              const std::string& defaults_json) {
             return blocking(h, [&](sandlet::Runtime& rt) { return rt.env_create(name, layers, defaults_json); });
           },
           py::arg("name"), py::arg("layers"), py::arg("defaults_json") = "")
      .def("env_list", [](RuntimeHandle& h) { return blocking(h, [](sandlet::Runtime& rt) { return rt.env_list(); }); })
      .def("env_remove",
           [](RuntimeHandle& h, const std::string& name) {
             blocking(h, [&](sandlet::Runtime& rt) { rt.env_remove(name); return 0; });
           },
           py::arg("name"));
}

}  // namespace sandlet_py
