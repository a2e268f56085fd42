// The C ABI's error object. One allocation holds the struct and its message; when even that allocation
// fails, the error returned is a static one (RESOURCE_EXHAUSTED, "out of memory", ENOMEM) that every
// accessor reads like any other and sandlet_error_delete leaves alone: a failure is never reported as NULL,
// which would mean success.
#pragma once
#include <string_view>

#include "sandlet/sandlet.h"

struct sandlet_error {
  sandlet_code_t code;
  int err_no;
  const char* message;  // NUL-terminated: into the same allocation, or static for the out-of-memory error
};

namespace sandlet::capi {

// The static out-of-memory error (never freed).
sandlet_error_t* out_of_memory_error() noexcept;
bool is_static_error(const sandlet_error_t* err) noexcept;

// A new error owned by the caller, or the static out-of-memory error when it cannot be allocated. Never NULL.
sandlet_error_t* make_error(sandlet_code_t code, std::string_view message, int err_no = 0) noexcept;

}  // namespace sandlet::capi
