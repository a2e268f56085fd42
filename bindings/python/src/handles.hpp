// The Python-visible handles. Each holds its library object through a shared_ptr: a call copies the pointer
// (with the GIL held) before releasing the GIL, so close() from another Python thread never frees an object
// a call is still using; the last holder releases it.
#pragma once
#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "completion_queue.hpp"
#include "sandlet/sandlet.hpp"

namespace sandlet_py {

struct PyExecResult {
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  pybind11::bytes stdout_data;
  pybind11::bytes stderr_data;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  uint64_t duration_ns = 0;
  uint64_t run_ns = 0;

  static PyExecResult from(const sandlet::ExecResult& r);  // needs the GIL
};

class SandboxHandle final {
 public:
  explicit SandboxHandle(std::shared_ptr<sandlet::Sandbox> sb) : sb_(std::move(sb)), id_(sb_->id()) {}
  const std::string& id() const noexcept { return id_; }
  bool closed() const noexcept { return sb_ == nullptr; }
  // Throws FAILED_PRECONDITION once closed. (In a fork()ed child the library itself refuses every call and
  // makes closing a no-op: see sandlet.h.)
  std::shared_ptr<sandlet::Sandbox> get() const;
  // Idempotent. Closing the last handle of an `owned` sandbox destroys it (in the background).
  void close() noexcept { sb_.reset(); }

 private:
  std::shared_ptr<sandlet::Sandbox> sb_;
  std::string id_;
};

class RuntimeHandle final {
 public:
  explicit RuntimeHandle(std::shared_ptr<sandlet::Runtime> rt) : rt_(std::move(rt)), root_(rt_->root()) {}
  ~RuntimeHandle();
  RuntimeHandle(RuntimeHandle&&) noexcept = default;
  RuntimeHandle& operator=(RuntimeHandle&&) noexcept = default;
  const std::string& root() const noexcept { return root_; }
  bool closed() const noexcept { return rt_ == nullptr; }
  std::shared_ptr<sandlet::Runtime> get() const;  // throws FAILED_PRECONDITION once closed
  // Idempotent; blocks (destroys owned sandboxes, waits for callbacks) with the GIL released.
  void close();

 private:
  std::shared_ptr<sandlet::Runtime> rt_;
  std::string root_;
};

class ExecControlHandle final {
 public:
  explicit ExecControlHandle(sandlet::ExecControl c) : control_(std::move(c)) {}
  void signal(int signo) { control_.signal(signo); }
  void cancel() noexcept { control_.cancel(); }
  void write_stdin(std::string_view data) { control_.write_stdin(data); }  // call without the GIL
  void close_stdin() noexcept { control_.close_stdin(); }
  void resize(uint32_t rows, uint32_t cols) { control_.resize(rows, cols); }

 private:
  sandlet::ExecControl control_;
};

// The Python objects a completion's payload becomes (needs the GIL).
pybind11::object payload_to_python(Payload& payload);
// (snapshot_json, [Sandbox or None], [exception or None]): a fork's outcome (needs the GIL).
pybind11::tuple fork_to_python(ForkData& fork);

void bind_results(pybind11::module_& m);
void bind_spec(pybind11::module_& m);
void bind_sandbox(pybind11::module_& m);
void bind_copy(pybind11::module_& m);  // after bind_sandbox: adds to its Sandbox class
void bind_session(pybind11::module_& m);  // after bind_sandbox: adds Session and Sandbox.open_session
void bind_runtime(pybind11::module_& m);
void bind_bench(pybind11::module_& m);
void bind_audit(pybind11::module_& m);  // bind_audit.cpp

}  // namespace sandlet_py
