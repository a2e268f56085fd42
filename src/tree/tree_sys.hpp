// The *at system calls the tree code uses, as raw syscall(2)s: the in-sandbox agent has no C library
// wrappers for most of them, and the host's glibc gives the same calls (src/tree runs in both).
#pragma once
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace sandlet::tree::sys {

// openat2 with `resolve`; before 5.6 (ENOSYS), openat with O_NOFOLLOW on the last component only when
// the caller asked for no symlinks at all (the weaker check is the best that kernel offers).
inline int open_resolved(int dirfd, const char* path, uint64_t flags, uint64_t resolve, uint64_t mode = 0) {
  struct open_how how = {};
  how.flags = flags | O_CLOEXEC;
  how.mode = mode;
  how.resolve = resolve;
  int fd = static_cast<int>(syscall(SYS_openat2, dirfd, path, &how, sizeof how));
  if (fd < 0 && errno == ENOSYS) {
    const int extra = (resolve & RESOLVE_NO_SYMLINKS) ? O_NOFOLLOW : 0;
    fd = static_cast<int>(syscall(SYS_openat, dirfd, path, static_cast<int>(flags | O_CLOEXEC) | extra, mode));
  }
  return fd;
}

// All of [p, p+n) to fd, through EINTR and short writes; false with errno set otherwise.
inline bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

inline int stat_at(int dirfd, const char* name, struct stat* st, int flags = AT_SYMLINK_NOFOLLOW) {
  return static_cast<int>(syscall(SYS_newfstatat, dirfd, name, st, flags));
}
inline long getdents(int fd, void* buf, size_t n) { return syscall(SYS_getdents64, fd, buf, n); }
inline long read_link_at(int dirfd, const char* name, char* buf, size_t n) {
  return syscall(SYS_readlinkat, dirfd, name, buf, n);
}
inline int link_at(int olddir, const char* oldname, int newdir, const char* newname) {
  return static_cast<int>(syscall(SYS_linkat, olddir, oldname, newdir, newname, 0));
}
inline int symlink_at(const char* target, int dirfd, const char* name) {
  return static_cast<int>(syscall(SYS_symlinkat, target, dirfd, name));
}
inline int mkfifo_at(int dirfd, const char* name, mode_t mode) {
  return static_cast<int>(syscall(SYS_mknodat, dirfd, name, S_IFIFO | mode, 0));
}
inline int mkdir_at(int dirfd, const char* name, mode_t mode) {
  return static_cast<int>(syscall(SYS_mkdirat, dirfd, name, mode));
}
inline int unlink_at(int dirfd, const char* name, int flags) {
  return static_cast<int>(syscall(SYS_unlinkat, dirfd, name, flags));
}
inline int rename_at(int dirfd, const char* from, const char* to) {
  return static_cast<int>(syscall(SYS_renameat, dirfd, from, dirfd, to));
}
inline int chown_at(int dirfd, const char* name, uint32_t uid, uint32_t gid) {
  return static_cast<int>(syscall(SYS_fchownat, dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW));
}
inline int chmod_at(int dirfd, const char* name, mode_t mode) {
  return static_cast<int>(syscall(SYS_fchmodat, dirfd, name, mode));
}
// Access and modification time both `sec`.`nsec`; `name` "" with AT_EMPTY_PATH for the fd itself.
inline int set_times(int dirfd, const char* name, int64_t sec, uint32_t nsec, int flags) {
  struct timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = static_cast<time_t>(sec);
  ts[0].tv_nsec = ts[1].tv_nsec = static_cast<long>(nsec);
  return static_cast<int>(syscall(SYS_utimensat, dirfd, name, ts, flags));
}

}  // namespace sandlet::tree::sys
