#include "runtime/embedded_init.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mutex>

#include "common/error.hpp"

extern "C" const char sandlet_init_blob[];
extern "C" const char sandlet_init_blob_end[];

namespace sandlet {

int embedded_init_fd() {
  static std::once_flag once;
  static int fd = -1;
  static std::exception_ptr failure;
  std::call_once(once, [] {
    try {
      int m = ::memfd_create("sandlet-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
      if (m < 0) throw_errno("memfd_create for sandlet-init");
      const char* p = sandlet_init_blob;
      size_t left = static_cast<size_t>(sandlet_init_blob_end - sandlet_init_blob);
      while (left) {
        ssize_t n = ::write(m, p, left);
        if (n < 0) {
          if (errno == EINTR) continue;
          int e = errno;
          ::close(m);
          throw_errno("write sandlet-init memfd", e);
        }
        p += n;
        left -= static_cast<size_t>(n);
      }
      // Sealed: nothing (not even a bug in this process) can alter the binary every sandbox runs.
      ::fchmod(m, 0555);
      if (::fcntl(m, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
        int e = errno;
        ::close(m);
        throw_errno("seal sandlet-init memfd", e);
      }
      fd = m;
    } catch (...) {
      failure = std::current_exception();
    }
  });
  if (failure) std::rethrow_exception(failure);
  return fd;
}

}  // namespace sandlet
