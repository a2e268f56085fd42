// The one errno -> status code table, for the host library (common/error.hpp) and the in-sandbox init
// (guest/status.cpp, built -fno-exceptions without a C library: so header-only and constexpr).
//
// It answers "a system call failed with errno E: which sandlet_code_t does the caller see?". The errno
// itself always travels with the error (sandlet_error_errno), so a caller who needs the precise reason
// reads that; the code is for the retry rules in sandlet.h.
//
// INVALID_ARGUMENT is not in this table on purpose. It is reserved for user input that the library has
// validated itself, and its message names the field ("invalid spec field 'layers[0]': ..."). A kernel
// EINVAL means the library asked the kernel for something it refused (a bug, or a kernel that lacks a
// flag): that is INTERNAL, with the operation and errno in the message. A path the user gave that the
// kernel then refuses is reported by what the kernel said about it (ENOENT: NOT_FOUND, EISDIR:
// FAILED_PRECONDITION, ENAMETOOLONG: OUT_OF_RANGE, ...), not as INVALID_ARGUMENT.
//
//   errno                                          code                 why
//   ENOENT ENOTDIR ESRCH ENXIO ENODEV              NOT_FOUND            the named object (or a parent
//                                                                       directory, or the process) is not there
//   EEXIST                                         ALREADY_EXISTS
//   EPERM EACCES EROFS                             PERMISSION_DENIED    refused by credentials, mode, seccomp
//                                                                       or a read-only mount
//   EISDIR ELOOP ENOTEMPTY EXDEV ENOEXEC           FAILED_PRECONDITION  the object is of the wrong kind or in
//                                                                       the wrong state for the call (a
//                                                                       directory read as a file, a symlink
//                                                                       where none is followed, not a binary);
//                                                                       retrying unchanged cannot help
//   EBUSY ETXTBSY EINTR                            UNAVAILABLE          busy right now; the same call may
//   ECONNREFUSED ECONNRESET ECONNABORTED EPIPE                          work later (the peer, e.g. a sandbox's
//   ENOTCONN ESHUTDOWN EHOSTUNREACH ENETUNREACH                         agent, is gone or not there yet)
//   ENETDOWN
//   ENOSPC EDQUOT ENOMEM EMFILE ENFILE EAGAIN      RESOURCE_EXHAUSTED   a limit was hit (disk, memory, pids,
//   EMLINK ENOBUFS EUSERS                                               descriptors); free something first
//   ENAMETOOLONG E2BIG EFBIG EOVERFLOW ERANGE      OUT_OF_RANGE         a size beyond what the kernel allows
//   ENOSYS EOPNOTSUPP(=ENOTSUP) EAFNOSUPPORT       UNIMPLEMENTED        this kernel or filesystem lacks it
//   EPROTONOSUPPORT
//   ETIMEDOUT                                      DEADLINE_EXCEEDED
//   ECANCELED                                      CANCELLED
//   EIO                                            DATA_LOSS            the storage could not give the data
//                                                                       back (e.g. a layer's blob failed)
//   EINVAL EBADF EFAULT ESPIPE, anything else, 0   INTERNAL             a bug or an unexpected kernel answer
//                                                                       (0: a failure that set no errno)
#pragma once
#include <cerrno>

#include "sandlet/sandlet.h"

namespace sandlet {

constexpr sandlet_code_t code_for_errno(int e) noexcept {
  switch (e) {
    case ENOENT: case ENOTDIR: case ESRCH: case ENXIO: case ENODEV:
      return SANDLET_NOT_FOUND;
    case EEXIST:
      return SANDLET_ALREADY_EXISTS;
    case EPERM: case EACCES: case EROFS:
      return SANDLET_PERMISSION_DENIED;
    case EISDIR: case ELOOP: case ENOTEMPTY: case EXDEV: case ENOEXEC:
      return SANDLET_FAILED_PRECONDITION;
    case EBUSY: case ETXTBSY: case EINTR: case ECONNREFUSED: case ECONNRESET: case ECONNABORTED: case EPIPE:
    case ENOTCONN: case ESHUTDOWN: case EHOSTUNREACH: case ENETUNREACH: case ENETDOWN:
      return SANDLET_UNAVAILABLE;
    case ENOSPC: case EDQUOT: case ENOMEM: case EMFILE: case ENFILE: case EAGAIN: case EMLINK: case ENOBUFS:
    case EUSERS:
      return SANDLET_RESOURCE_EXHAUSTED;
    case ENAMETOOLONG: case E2BIG: case EFBIG: case EOVERFLOW: case ERANGE:
      return SANDLET_OUT_OF_RANGE;
    case ENOSYS: case EOPNOTSUPP: case EAFNOSUPPORT: case EPROTONOSUPPORT:
      return SANDLET_UNIMPLEMENTED;
    case ETIMEDOUT:
      return SANDLET_DEADLINE_EXCEEDED;
    case ECANCELED:
      return SANDLET_CANCELLED;
    case EIO:
      return SANDLET_DATA_LOSS;
    default:
      return SANDLET_INTERNAL;
  }
}

}  // namespace sandlet
