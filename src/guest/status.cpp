#include "guest/status.hpp"

#include "common/errno_code.hpp"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace sandlet::guest {

Status make_status(uint32_t code, int e, const std::string& message) {
  Status s;
  s.code = code;
  s.err_no = e;
  s.message = message;
  return s;
}

Status errno_status(int e, const std::string& what) {
  return make_status(code_for_errno(e), e, what + ": " + std::strerror(e));
}

Status errno_statusf(int e, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return errno_status(e, buf);
}

void log_line(const char* fmt, ...) {
  char buf[512];
  int n = snprintf(buf, sizeof buf, "sandlet-init: ");
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t len = static_cast<size_t>(n) + (static_cast<size_t>(m) < sizeof buf - n - 1 ? m : sizeof buf - n - 2);
  buf[len++] = '\n';
  ssize_t r = write(2, buf, len);
  (void)r;
}

}  // namespace sandlet::guest
