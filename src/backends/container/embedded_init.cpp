#include "backends/container/embedded_init.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <mutex>
#include <string>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

extern "C" const char sandlet_init_blob[];
extern "C" const char sandlet_init_blob_end[];
extern "C" const char sandlet_init_sha256[];

namespace sandlet::container {
namespace {

size_t blob_size() { return static_cast<size_t>(sandlet_init_blob_end - sandlet_init_blob); }

// The cached copy, if it is ours and intact enough to trust: a regular file in our private directory,
// owned by us, not writable by anyone, of the right size (its name is its content hash).
int open_cached(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 0222) ||
      static_cast<size_t>(st.st_size) != blob_size()) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int cached_init_fd(const std::string& dir) {
  struct statvfs vfs;
  if (dir.empty() || ::statvfs(dir.c_str(), &vfs) != 0 || (vfs.f_flag & ST_NOEXEC)) return -1;
  std::string path = dir + "/init-" + std::string(sandlet_init_sha256).substr(0, 16);
  if (int fd = open_cached(path); fd >= 0) return fd;
  // Write a private temp file, then rename: concurrent processes never see a partial binary.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int w = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0500);
  if (w < 0) return -1;
  // Executable by everyone: the sandbox's root is an unprivileged host uid (the directory stays private).
  ::fchmod(w, 0555);
  const char* p = sandlet_init_blob;
  size_t left = blob_size();
  while (left) {
    ssize_t n = ::write(w, p, left);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      ::close(w);
      ::unlink(tmp.c_str());
      return -1;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::close(w);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return -1;
  }
  // Copies of other builds go (a process already running one keeps its open fd; a new one re-creates it).
  const std::string mine = path.substr(dir.size() + 1);
  for (const auto& name : sys::list_dir(dir))
    if (name.rfind("init-", 0) == 0 && name != mine && name.find(".tmp.") == std::string::npos)
      ::unlink((dir + "/" + name).c_str());
  return open_cached(path);
}

}  // namespace

int embedded_init_fd(const std::string& cache_dir) {
  static std::once_flag once;
  static int fd = -1;
  static std::exception_ptr failure;
  std::call_once(once, [&cache_dir] {
    fd = cached_init_fd(cache_dir);
    if (fd >= 0) return;
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

}  // namespace sandlet::container
