// The C handles and the one place C++ errors become sandlet_error_t. No exception crosses the ABI.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "capi/build_jobs.hpp"
#include "capi/error_object.hpp"
#include "common/error.hpp"
#include "runtime/runtime.hpp"
#include "runtime/sandbox.hpp"
#include "sandlet/sandlet.h"
#include "spec/spec.hpp"

namespace sandlet::capi {

// How many fork()s this process descends from (a pthread_atfork child handler bumps it): comparing it is
// how a call notices it runs in a forked child, without a getpid() syscall on every call.
unsigned fork_generation() noexcept;

// Runtime and sandbox handles remember the process that opened them: the runtime's threads exist only there.
// In a fork()ed child every call on them fails with FAILED_PRECONDITION and closing them leaks them on
// purpose — a child must neither destroy its parent's sandboxes nor wait on threads it does not have.
struct OpenedBy {
  pid_t pid = ::getpid();  // for the error message
  unsigned generation = fork_generation();
  bool forked() const noexcept { return fork_generation() != generation; }
};

}  // namespace sandlet::capi

struct sandlet_runtime {
  std::shared_ptr<sandlet::Runtime> rt;
  sandlet::RuntimeOptions options;  // as opened: the default store of push and pull (capi_store.cpp)
  std::vector<sandlet_backend_info_t> backend_infos;
  sandlet::capi::OpenedBy opened;
  std::unique_ptr<sandlet::capi::BuildJobs> builds = std::make_unique<sandlet::capi::BuildJobs>();
};

struct sandlet_spec {
  sandlet::Spec spec;
};

struct sandlet_sandbox {
  std::shared_ptr<sandlet::Sandbox> sb;
  sandlet::capi::OpenedBy opened;
};

struct sandlet_exec_control {
  sandlet::ExecControl control;
};

struct sandlet_exec_result {
  sandlet::ExecOutcome outcome;
};

struct sandlet_sandbox_list {
  std::vector<sandlet::ListedSandbox> items;
};

namespace sandlet::capi {

// Converts the exception in flight to an error object.
inline sandlet_error_t* current_error() noexcept {
  try {
    throw;
  } catch (const Error& e) {
    return make_error(static_cast<sandlet_code_t>(e.code()), e.what(), e.err_no());
  } catch (const std::bad_alloc&) {
    return out_of_memory_error();  // the same content, without allocating when memory is short
  } catch (const std::exception& e) {
    return make_error(SANDLET_INTERNAL, e.what());
  } catch (...) {
    return make_error(SANDLET_INTERNAL, "unknown internal error");
  }
}

inline sandlet_error_t* error_from(std::exception_ptr p) noexcept {
  try {
    std::rethrow_exception(p);
  } catch (...) {
    return current_error();
  }
}

// Hands an exec's or a one-shot run's outcome to its C completion: the error, or a new result; both
// then owned by the callback.
inline void complete_exec(sandlet_exec_cb cb, void* user_data, std::exception_ptr error, sandlet::ExecOutcome outcome) {
  if (error) {
    cb(user_data, error_from(error), nullptr);
    return;
  }
  auto* r = new (std::nothrow) sandlet_exec_result;
  if (!r) {
    cb(user_data, out_of_memory_error(), nullptr);
    return;
  }
  r->outcome = std::move(outcome);
  cb(user_data, nullptr, r);
}

// Runs `f`; returns NULL on success or the error it threw.
template <class F>
sandlet_error_t* guard(F&& f) noexcept {
  try {
    f();
    return nullptr;
  } catch (...) {
    return current_error();
  }
}

inline sandlet_error_t* null_arg(const char* name) noexcept {
  char message[128];
  std::snprintf(message, sizeof message, "argument '%s' must not be NULL", name);
  return make_error(SANDLET_INVALID_ARGUMENT, message);
}

inline char* dup_string(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

}  // namespace sandlet::capi

#define SANDLET_REQUIRE(arg) \
  do {                        \
    if (!(arg)) return sandlet::capi::null_arg(#arg); \
  } while (0)

namespace sandlet::capi {

inline sandlet_error_t* forked_error(const char* what, pid_t opener) noexcept {
  char message[160];
  std::snprintf(message, sizeof message,
                "%s handle was opened by process %d; handles do not survive fork(): open a new runtime in this process",
                what, static_cast<int>(opener));
  return make_error(SANDLET_FAILED_PRECONDITION, message);
}

inline sandlet_error_t* check_handle(const sandlet_runtime* rt, const char* name) noexcept {
  if (!rt) return null_arg(name);
  return rt->opened.forked() ? forked_error("runtime", rt->opened.pid) : nullptr;
}

inline sandlet_error_t* check_handle(const sandlet_sandbox* sb, const char* name) noexcept {
  if (!sb) return null_arg(name);
  return sb->opened.forked() ? forked_error("sandbox", sb->opened.pid) : nullptr;
}

}  // namespace sandlet::capi

// A runtime or sandbox argument: not NULL, and used in the process that opened it.
#define SANDLET_REQUIRE_HANDLE(arg)                                                     \
  do {                                                                                  \
    if (sandlet_error_t* handle_error_ = sandlet::capi::check_handle(arg, #arg)) return handle_error_; \
  } while (0)
