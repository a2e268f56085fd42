// sandlet._sandlet.Session (sandlet_session.h): a shell kept alive across run() calls. open and run block
// with the GIL released, in slices: Python's signal handlers run in between, and an exception there
// (Ctrl-C) kills the session (the shell and everything it started are killed) before it propagates.
#include <pybind11/stl.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "errors.hpp"
#include "handles.hpp"

namespace py = pybind11;

namespace sandlet_py {
namespace {

class SessionHandle final {
 public:
  explicit SessionHandle(sandlet::Session s) : s_(std::make_shared<sandlet::Session>(std::move(s))) {}
  std::shared_ptr<sandlet::Session> get() const {
    if (!s_) throw sandlet::Error(SANDLET_FAILED_PRECONDITION, "session: this handle is closed");
    return s_;
  }
  bool alive() const noexcept { return s_ && s_->alive(); }
  // Kills the shell (safe while another thread's run is in flight: that run returns CANCELLED); the C
  // handle is freed with the last reference, which such a run holds until it returned.
  void close() noexcept {
    if (auto s = std::exchange(s_, nullptr)) {
      py::gil_scoped_release release;
      s->kill();
      s.reset();
    }
  }

 private:
  std::shared_ptr<sandlet::Session> s_;
};

// Runs `work` on a thread of its own and waits for it with the GIL released, 100 ms at a time; a Python
// signal handler that raises calls `interrupt` (which must make `work` return soon), waits, and re-raises.
template <class T>
T wait_interruptible(std::function<T()> work, std::function<void()> interrupt) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::optional<T> value;
    std::exception_ptr error;
  };
  auto st = std::make_shared<State>();
  std::thread([st, work = std::move(work)] {
    std::optional<T> v;
    std::exception_ptr e;
    try {
      v.emplace(work());
    } catch (...) {
      e = std::current_exception();
    }
    std::lock_guard lock(st->mu);
    st->value = std::move(v);
    st->error = e;
    st->done = true;
    st->cv.notify_all();
  }).detach();
  auto wait_slice = [&](std::chrono::milliseconds slice) {
    py::gil_scoped_release release;
    std::unique_lock lock(st->mu);
    return st->cv.wait_for(lock, slice, [&] { return st->done; });
  };
  while (!wait_slice(std::chrono::milliseconds(100))) {
    if (PyErr_CheckSignals() != 0) {
      py::error_already_set pending;
      {
        py::gil_scoped_release release;
        interrupt();
      }
      while (!wait_slice(std::chrono::milliseconds(1000))) {
      }
      throw pending;
    }
  }
  if (st->error) std::rethrow_exception(st->error);
  return std::move(*st->value);
}

}  // namespace

void bind_session(py::module_& m) {
  py::class_<SessionHandle>(m, "Session", "A shell kept alive across calls (low level; use sandlet.Session).")
      .def("run",
           [](SessionHandle& h, const std::string& command, double timeout_s) {
             auto s = h.get();
             sandlet::ExecResult r = wait_interruptible<sandlet::ExecResult>(
                 [s, command, timeout_s] { return s->run(command, timeout_s); }, [s] { s->kill(); });
             return PyExecResult::from(r);
           },
           py::arg("command"), py::arg("timeout_s") = 0.0)
      .def_property_readonly("alive", [](SessionHandle& h) { return h.alive(); })
      .def("close", &SessionHandle::close);

  auto cls = py::reinterpret_borrow<py::class_<SandboxHandle>>(m.attr("Sandbox"));
  cls.def(
      "open_session",
      [](SandboxHandle& h, std::vector<std::string> argv, std::vector<std::string> env, std::string cwd,
         std::string user, uint64_t output_limit) {
        auto sb = h.get();
        sandlet::SessionOptions o;
        o.argv = std::move(argv);
        o.env = std::move(env);
        o.cwd = std::move(cwd);
        o.user = std::move(user);
        o.output_limit = output_limit;
        py::gil_scoped_release release;
        return SessionHandle(sb->open_session(o));
      },
      py::arg("argv") = std::vector<std::string>(), py::arg("env") = std::vector<std::string>(),
      py::arg("cwd") = "", py::arg("user") = "", py::arg("output_limit") = 0);
}

}  // namespace sandlet_py
