// Internal error type. Core code throws sandlet::Error; the C ABI shims catch
// everything and turn it into a sandlet_error_t, so nothing crosses the ABI.
#pragma once
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "common/errno_code.hpp"
#include "sandlet/sandlet.h"

namespace sandlet {

enum class Code : int {
  kOk = SANDLET_OK,
  kCancelled = SANDLET_CANCELLED,
  kUnknown = SANDLET_UNKNOWN,
  kInvalidArgument = SANDLET_INVALID_ARGUMENT,
  kDeadlineExceeded = SANDLET_DEADLINE_EXCEEDED,
  kNotFound = SANDLET_NOT_FOUND,
  kAlreadyExists = SANDLET_ALREADY_EXISTS,
  kPermissionDenied = SANDLET_PERMISSION_DENIED,
  kResourceExhausted = SANDLET_RESOURCE_EXHAUSTED,
  kFailedPrecondition = SANDLET_FAILED_PRECONDITION,
  kAborted = SANDLET_ABORTED,
  kOutOfRange = SANDLET_OUT_OF_RANGE,
  kUnimplemented = SANDLET_UNIMPLEMENTED,
  kInternal = SANDLET_INTERNAL,
  kUnavailable = SANDLET_UNAVAILABLE,
  kDataLoss = SANDLET_DATA_LOSS,
};

class Error : public std::runtime_error {
 public:
  Error(Code code, std::string message, int err_no = 0)
      : std::runtime_error(std::move(message)), code_(code), errno_(err_no) {}
  Code code() const noexcept { return code_; }
  int err_no() const noexcept { return errno_; }

 private:
  Code code_;
  int errno_;
};

// The status code for a failed system call's errno (the table and its reasons: common/errno_code.hpp).
inline Code code_from_errno(int e) { return static_cast<Code>(code_for_errno(e)); }

// Throws an Error built from errno: "<what>: <strerror> (errno N)".
[[noreturn]] inline void throw_errno(const std::string& what, int e = errno) {
  throw Error(code_from_errno(e), what + ": " + std::strerror(e) + " (errno " + std::to_string(e) + ")", e);
}

[[noreturn]] inline void throw_invalid(const std::string& field, const std::string& why) {
  throw Error(Code::kInvalidArgument, "invalid spec field '" + field + "': " + why);
}

}  // namespace sandlet
