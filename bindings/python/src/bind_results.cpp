// ExecResult, CompletionQueue and how queued completions become Python objects.
#include <pybind11/stl.h>

#include "errors.hpp"
#include "handles.hpp"

namespace py = pybind11;

namespace sandlet_py {

PyExecResult PyExecResult::from(const sandlet::ExecResult& r) {
  PyExecResult p;
  p.exit_code = r.exit_code;
  p.signal = r.signal;
  p.timed_out = r.timed_out;
  p.stdout_data = py::bytes(r.stdout_data);
  p.stderr_data = py::bytes(r.stderr_data);
  p.stdout_truncated = r.stdout_truncated;
  p.stderr_truncated = r.stderr_truncated;
  p.duration_ns = r.duration_ns;
  p.run_ns = r.run_ns;
  return p;
}

namespace {

py::object decode(const py::bytes& b) { return b.attr("decode")("utf-8", "replace"); }

std::string result_repr(const PyExecResult& r) {
  std::string s = "ExecResult(exit_code=" + std::to_string(r.exit_code);
  if (r.signal != 0) s += ", signal=" + std::to_string(r.signal);
  if (r.timed_out) s += ", timed_out=True";
  s += ", stdout=" + py::repr(r.stdout_data).cast<std::string>();
  s += ", stderr=" + py::repr(r.stderr_data).cast<std::string>();
  if (r.stdout_truncated || r.stderr_truncated) s += ", truncated=True";
  return s + ")";
}

}  // namespace

py::tuple fork_to_python(ForkData& fork) {
  const size_t n = fork.children.size();
  py::list children(n), errors(n);
  for (size_t i = 0; i < n; ++i) {
    children[i] = fork.children[i] ? py::cast(SandboxHandle(std::move(fork.children[i]))) : py::none();
    errors[i] = fork.errors[i].code != SANDLET_OK ? make_exception(fork.errors[i]) : py::none();
  }
  return py::make_tuple(fork.snapshot_json, children, errors);
}

py::object payload_to_python(Payload& payload) {
  struct Visitor {
    py::object operator()(std::monostate&) const { return py::none(); }
    py::object operator()(sandlet::ExecResult& r) const { return py::cast(PyExecResult::from(r)); }
    py::object operator()(ErrorInfo& e) const { return make_exception(e); }
    py::object operator()(OutputChunk& c) const { return py::make_tuple(c.stream, py::bytes(c.data)); }
    py::object operator()(std::shared_ptr<sandlet::Sandbox>& sb) const {
      return py::cast(SandboxHandle(std::move(sb)));
    }
    py::object operator()(FileData& f) const { return py::make_tuple(py::bytes(f.data), f.mode); }
    py::object operator()(BuildEventData& e) const {
      return py::make_tuple(e.step, e.steps, e.line, e.text, e.cached, e.stream, py::bytes(e.data));
    }
    py::object operator()(JsonText& j) const { return py::str(j.text); }
    py::object operator()(ForkData& f) const { return fork_to_python(f); }
  };
  return std::visit(Visitor{}, payload);
}

void bind_results(py::module_& m) {
  py::class_<PyExecResult>(m, "ExecResult", "The outcome of a command run in a sandbox.")
      .def_readonly("exit_code", &PyExecResult::exit_code, "Exit status; -1 when killed by a signal.")
      .def_readonly("signal", &PyExecResult::signal, "The signal that killed it; 0 when it exited.")
      .def_readonly("timed_out", &PyExecResult::timed_out, "True when the timeout expired (it was killed).")
      .def_readonly("stdout", &PyExecResult::stdout_data, "Captured standard output (empty when streamed).")
      .def_readonly("stderr", &PyExecResult::stderr_data, "Captured standard error (empty when streamed).")
      .def_readonly("stdout_truncated", &PyExecResult::stdout_truncated, "Output passed the limit and was cut.")
      .def_readonly("stderr_truncated", &PyExecResult::stderr_truncated, "Output passed the limit and was cut.")
      .def_readonly("duration_ns", &PyExecResult::duration_ns, "From the request to the exit, in ns.")
      .def_readonly("run_ns", &PyExecResult::run_ns, "From spawn to exit inside the sandbox, in ns.")
      .def_property_readonly("ok", [](const PyExecResult& r) { return r.exit_code == 0 && !r.timed_out; },
                             "True when it exited with status 0 (and did not time out).")
      .def_property_readonly("stdout_text", [](const PyExecResult& r) { return decode(r.stdout_data); },
                             "stdout decoded as UTF-8 (invalid bytes replaced).")
      .def_property_readonly("stderr_text", [](const PyExecResult& r) { return decode(r.stderr_data); },
                             "stderr decoded as UTF-8 (invalid bytes replaced).")
      .def("check",
           [](py::object self) -> py::object {
             const auto& r = self.cast<const PyExecResult&>();
             if (r.exit_code == 0 && !r.timed_out) return self;
             // PyErr_SetObject with a non-instance value calls CommandFailed(result).
             py::object cls = py::module_::import("sandlet._errors").attr("CommandFailed");
             PyErr_SetObject(cls.ptr(), self.ptr());
             throw py::error_already_set();
           },
           "Returns self if ok, else raises sandlet.CommandFailed carrying this result.")
      .def("__repr__", &result_repr);

  py::class_<CompletionQueue, std::shared_ptr<CompletionQueue>>(
      m, "CompletionQueue",
      "Where the library's event-loop thread leaves completions for Python (internal; see sandlet._aio).")
      .def(py::init<>())
      .def("fd", &CompletionQueue::fd, "An eventfd that is readable while completions are queued.")
      .def("drain",
           [](CompletionQueue& q) {
             std::vector<Completion> items = q.take();
             py::list out(items.size());
             for (size_t i = 0; i < items.size(); ++i)
               out[i] = py::make_tuple(items[i].token, static_cast<int>(items[i].kind),
                                       payload_to_python(items[i].payload));
             return out;
           },
           "Takes every queued completion as (token, kind, payload) tuples. Never blocks.")
      .def("wait",
           [](CompletionQueue& q, double timeout_s) {
             const int ms = timeout_s < 0 ? -1 : static_cast<int>(timeout_s * 1000);
             py::gil_scoped_release release;
             q.wait_readable(ms);
           },
           py::arg("timeout_s") = -1.0,
           "Blocks, with the GIL released, until something is queued, the timeout passes or a signal arrives.");

  m.attr("COMPLETION_DONE") = static_cast<int>(CompletionKind::kDone);
  m.attr("COMPLETION_RESULT") = static_cast<int>(CompletionKind::kResult);
  m.attr("COMPLETION_ERROR") = static_cast<int>(CompletionKind::kError);
  m.attr("COMPLETION_OUTPUT") = static_cast<int>(CompletionKind::kOutput);
  m.attr("COMPLETION_SANDBOX") = static_cast<int>(CompletionKind::kSandbox);
  m.attr("COMPLETION_FILE") = static_cast<int>(CompletionKind::kFile);
  m.attr("COMPLETION_BUILD_EVENT") = static_cast<int>(CompletionKind::kBuildEvent);
  m.attr("COMPLETION_JSON") = static_cast<int>(CompletionKind::kJson);
  m.attr("COMPLETION_FORK") = static_cast<int>(CompletionKind::kFork);
}

}  // namespace sandlet_py
