#include "guest/status.hpp"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace sandlet::guest {

uint32_t code_from_errno(int e) {
  switch (e) {
    case 0: return SANDLET_OK;
    case ENOENT: case ENOTDIR: case ESRCH: return SANDLET_NOT_FOUND;
    case EEXIST: return SANDLET_ALREADY_EXISTS;
    case EPERM: case EACCES: case EROFS: return SANDLET_PERMISSION_DENIED;
    case EINVAL: case ENAMETOOLONG: case ELOOP: case EISDIR: return SANDLET_INVALID_ARGUMENT;
    case ENOSPC: case ENOMEM: case EMFILE: case ENFILE: case EAGAIN: case EDQUOT: case E2BIG:
      return SANDLET_RESOURCE_EXHAUSTED;
    case ENOSYS: case EOPNOTSUPP: return SANDLET_UNIMPLEMENTED;
    case ETIMEDOUT: return SANDLET_DEADLINE_EXCEEDED;
    case ECANCELED: return SANDLET_CANCELLED;
    default: return SANDLET_INTERNAL;
  }
}

Status make_status(uint32_t code, int e, const std::string& message) {
  Status s;
  s.code = code;
  s.err_no = e;
  s.message = message;
  return s;
}

Status errno_status(int e, const std::string& what) {
  return make_status(code_from_errno(e) == SANDLET_OK ? static_cast<uint32_t>(SANDLET_INTERNAL) : code_from_errno(e), e,
                     what + ": " + std::strerror(e));
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
