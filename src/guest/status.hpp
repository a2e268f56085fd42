// Status values for the agent: the agent is built with -fno-exceptions, so every fallible step returns
// one of these (the same type the tree code returns).
#pragma once
#include <cerrno>
#include <cstdint>
#include <string>

#include "common/status_value.hpp"

namespace sandlet::guest {

using Status = StatusValue;

// "<what>: <strerror(e)>" with the code for e from the shared table (common/errno_code.hpp).
Status errno_status(int e, const std::string& what);
// Same, formatted printf-style: errno_statusf(ENOENT, "mount %s", path).
Status errno_statusf(int e, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
Status make_status(uint32_t code, int e, const std::string& message);

// Writes a diagnostic line to fd 2 (the host decides where that goes; /dev/null by default).
void log_line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace sandlet::guest
