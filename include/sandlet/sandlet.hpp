/*
 * sandlet — header-only C++ wrapper over the C ABI in sandlet.h. Needs C++17 or later.
 *
 * This header includes the parts, one purpose each, under sandlet/cxx/: error.hpp (sandlet::Error),
 * results.hpp (ExecResult, BackendInfo, SandboxInfo), options.hpp (ExecOptions, RunOptions, RuntimeOptions,
 * LayerImportOptions), spec.hpp (Spec), sandbox.hpp (Sandbox, ExecControl), runtime.hpp (Runtime),
 * audit.hpp (AuditReader).
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

#include "sandlet/cxx/audit.hpp"
#include "sandlet/cxx/error.hpp"
#include "sandlet/cxx/options.hpp"
#include "sandlet/cxx/results.hpp"
#include "sandlet/cxx/runtime.hpp"
#include "sandlet/cxx/sandbox.hpp"
#include "sandlet/cxx/spec.hpp"

#endif  // SANDLET_SANDLET_HPP
