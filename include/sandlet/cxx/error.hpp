// sandlet C++ wrapper: sandlet::Error (every failing C call becomes one) and the helpers that take what the
// C ABI hands out. Part of sandlet.hpp (C++17 or later); may be included alone.
#ifndef SANDLET_CXX_ERROR_HPP
#define SANDLET_CXX_ERROR_HPP

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "sandlet.hpp (the C++ wrapper) needs C++17 or later; from C, include sandlet/sandlet.h"
#endif

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "sandlet/sandlet.h"

namespace sandlet {
// The wrapper's classes live in an inline namespace: users write sandlet::Runtime, but the mangled names
// (sandlet::cxx::Runtime) never collide with the library's own internal classes of the same names, so a
// program may link the library's objects statically (the CLI does) without breaking the one-definition rule.
inline namespace cxx {

// ---- errors -------------------------------------------------------------------------------------------

class Error : public std::runtime_error {
 public:
  Error(sandlet_code_t code, const std::string& message, int err_no = 0)
      : std::runtime_error(message), code_(code), errno_(err_no) {}

  sandlet_code_t code() const noexcept { return code_; }
  int err_no() const noexcept { return errno_; }
  const char* code_name() const noexcept { return sandlet_code_name(code_); }

  // Copies a C error and frees it (also when copying throws). `err` must not be NULL.
  static Error take(sandlet_error_t* err) {
    std::unique_ptr<sandlet_error_t, void (*)(sandlet_error_t*)> guard(err, &sandlet_error_delete);
    return Error(sandlet_error_code(err), sandlet_error_message(err), sandlet_error_errno(err));
  }

 private:
  sandlet_code_t code_;
  int errno_;
};

namespace detail {

inline void check(sandlet_error_t* err) {
  if (err != nullptr) throw Error::take(err);
}

struct FreeDeleter {
  void operator()(void* p) const noexcept { sandlet_free(p); }
};
using CBuffer = std::unique_ptr<char, FreeDeleter>;

// Takes a library-allocated string and returns a copy, freeing the original.
inline std::string take_string(char* s) {
  CBuffer guard(s);
  return s != nullptr ? std::string(s) : std::string();
}

}  // namespace detail

inline const char* version() noexcept { return sandlet_version_string(); }
inline uint32_t abi_version() noexcept { return sandlet_abi_version(); }

}  // inline namespace cxx
}  // namespace sandlet

#endif  // SANDLET_CXX_ERROR_HPP
