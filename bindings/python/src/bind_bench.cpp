// The C-API baselines for the Python overhead benchmark (bench/python/bench_python.py): the same execs
// issued straight through sandlet.h from C++ in this process, so both sides share the runtime and sandbox.
#include <pybind11/stl.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "handles.hpp"

namespace py = pybind11;

namespace sandlet_py {

namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

struct CArgv {
  explicit CArgv(const std::vector<std::string>& argv) {
    for (const auto& a : argv) ptrs.push_back(a.c_str());
    ptrs.push_back(nullptr);
    opts.argv = ptrs.data();
  }
  std::vector<const char*> ptrs;
  sandlet_exec_options_t opts = SANDLET_EXEC_OPTIONS_INIT;
};

// n synchronous sandlet_sandbox_exec calls; the wall time of each, in ns.
std::vector<uint64_t> exec_sync_c(SandboxHandle& h, const std::vector<std::string>& argv, size_t n) {
  auto sb = h.get();
  CArgv c(argv);
  std::vector<uint64_t> out;
  out.reserve(n);
  py::gil_scoped_release release;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t t0 = now_ns();
    sandlet_exec_result_t* r = nullptr;
    sandlet_error_t* err = sandlet_sandbox_exec(sb->get(), &c.opts, &r);
    if (err != nullptr) throw sandlet::Error::take(err);
    sandlet_exec_result_delete(r);
    out.push_back(now_ns() - t0);
  }
  return out;
}

// `total` execs through sandlet_sandbox_exec_async, `concurrency` in flight, spread over the sandboxes;
// returns the wall time in seconds.
struct AsyncRun {
  std::mutex mu;
  std::condition_variable cv;
  size_t issued = 0, completed = 0, total = 0, failed = 0;
  std::vector<sandlet_sandbox_t*> sandboxes;
  CArgv* argv = nullptr;
};

void issue_one(AsyncRun* run);

void on_exec_done(void* user_data, sandlet_error_t* err, sandlet_exec_result_t* result) {
  auto* run = static_cast<AsyncRun*>(user_data);
  sandlet_exec_result_delete(result);
  if (err != nullptr) sandlet_error_delete(err);
  bool more;
  {
    std::lock_guard<std::mutex> lock(run->mu);
    run->completed++;
    if (err != nullptr) run->failed++;
    more = run->issued < run->total;
    if (more) run->issued++;
    if (run->completed == run->total) run->cv.notify_one();
  }
  if (more) issue_one(run);
}

void issue_one(AsyncRun* run) {
  sandlet_sandbox_t* sb;
  {
    std::lock_guard<std::mutex> lock(run->mu);
    sb = run->sandboxes[run->issued % run->sandboxes.size()];
  }
  sandlet_error_t* err = sandlet_sandbox_exec_async(sb, &run->argv->opts, &on_exec_done, run);
  if (err != nullptr) on_exec_done(run, err, nullptr);
}

double exec_async_c(const std::vector<SandboxHandle*>& handles, const std::vector<std::string>& argv, size_t total,
                    size_t concurrency) {
  if (handles.empty() || total == 0 || concurrency == 0)
    throw sandlet::Error(SANDLET_INVALID_ARGUMENT, "exec_async_c: need sandboxes, total > 0 and concurrency > 0");
  std::vector<std::shared_ptr<sandlet::Sandbox>> keep;
  AsyncRun run;
  for (auto* h : handles) {
    keep.push_back(h->get());
    run.sandboxes.push_back(keep.back()->get());
  }
  CArgv c(argv);
  run.argv = &c;
  run.total = total;
  py::gil_scoped_release release;
  const uint64_t t0 = now_ns();
  const size_t first = std::min(concurrency, total);
  {
    std::lock_guard<std::mutex> lock(run.mu);
    run.issued = first;
  }
  for (size_t i = 0; i < first; ++i) {
    sandlet_sandbox_t* sb = run.sandboxes[i % run.sandboxes.size()];
    sandlet_error_t* err = sandlet_sandbox_exec_async(sb, &c.opts, &on_exec_done, &run);
    if (err != nullptr) on_exec_done(&run, err, nullptr);
  }
  std::unique_lock<std::mutex> lock(run.mu);
  run.cv.wait(lock, [&] { return run.completed == run.total; });
  if (run.failed != 0)
    throw sandlet::Error(SANDLET_INTERNAL, "exec_async_c: " + std::to_string(run.failed) + " execs failed");
  return static_cast<double>(now_ns() - t0) / 1e9;
}

}  // namespace

void bind_bench(py::module_& m) {
  py::module_ b = m.def_submodule("_bench", "C-API baselines for bench/python (not a public API).");
  b.def("exec_sync_c", &exec_sync_c, py::arg("sandbox"), py::arg("argv"), py::arg("n"));
  b.def("exec_async_c", &exec_async_c, py::arg("sandboxes"), py::arg("argv"), py::arg("total"),
        py::arg("concurrency"));
}

}  // namespace sandlet_py
