#include "sys/fs_util.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "common/error.hpp"
#include "sys/fd.hpp"

namespace sandlet::sys {

std::optional<uint64_t> read_u64_file(const std::string& path) {
  std::optional<std::string> text;
  try {
    text = read_file_if_exists(path, 64);
  } catch (const Error&) {
    return std::nullopt;
  }
  if (!text || text->empty() || !std::isdigit(static_cast<unsigned char>((*text)[0]))) return std::nullopt;
  return std::strtoull(text->c_str(), nullptr, 10);
}

std::optional<std::string> read_file_if_exists(const std::string& path, size_t max) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    throw_errno("open " + path);
  }
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("read " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max) throw Error(Code::kDataLoss, "read " + path + ": file larger than " + std::to_string(max) + " bytes");
  }
  return out;
}

std::string read_file(const std::string& path, size_t max) {
  auto r = read_file_if_exists(path, max);
  if (!r) throw_errno("open " + path, ENOENT);
  return *r;
}

static void write_all(int fd, const std::string& data, const std::string& what) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("write " + what);
    }
    off += static_cast<size_t>(n);
  }
}

void write_file_atomic(const std::string& path, const std::string& data, mode_t mode, struct stat* written) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + random_hex(4);
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd) throw_errno("create " + tmp);
  try {
    write_all(fd.get(), data, tmp);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (!written) fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) < 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw_errno("rename " + tmp + " -> " + path, e);
  }
  // After the rename (which sets its ctime). The file is in place whatever happens here: no error.
  if (written && ::fstat(fd.get(), written) != 0) *written = {};
}

void write_new_file(const std::string& path, const std::string& data, mode_t mode) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd) throw_errno("create " + path);
  write_all(fd.get(), data, path);
}

void write_existing(const std::string& path, const std::string& data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) throw_errno("open " + path);
  write_all(fd.get(), data, path);
}

void write_existing_at(int dirfd, const char* name, const std::string& data) {
  UniqueFd fd(::openat(dirfd, name, O_WRONLY | O_CLOEXEC));
  if (!fd) throw_errno(std::string("open ") + name);
  write_all(fd.get(), data, name);
}

int try_write_existing(const std::string& path, const std::string& data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return errno;
  ssize_t n;
  do {
    n = ::write(fd.get(), data.data(), data.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno;
  return static_cast<size_t>(n) == data.size() ? 0 : EIO;
}

void mkdir_p(const std::string& path, mode_t mode) {
  if (path.empty()) return;
  // Top-down from the leaf: usually it or its parent exists already, so this is one or two syscalls
  // (a runtime open makes a dozen such paths).
  if (::mkdir(path.c_str(), mode) == 0 || errno == EEXIST) return;
  if (errno != ENOENT) throw_errno("mkdir " + path);
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos || slash == 0) throw_errno("mkdir " + path, ENOENT);
  mkdir_p(path.substr(0, slash), mode);
  if (::mkdir(path.c_str(), mode) < 0 && errno != EEXIST) throw_errno("mkdir " + path);
}

static void remove_tree_at(int parent, const char* name) {
  if (::unlinkat(parent, name, 0) == 0 || errno == ENOENT) return;
  if (errno != EISDIR && errno != EPERM) throw_errno(std::string("unlink ") + name);
  int dfd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) {
    if (errno == ENOENT) return;
    throw_errno(std::string("open ") + name);
  }
  DIR* d = ::fdopendir(dfd);
  if (!d) {
    ::close(dfd);
    throw_errno(std::string("fdopendir ") + name);
  }
  while (struct dirent* e = ::readdir(d)) {
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    remove_tree_at(dirfd(d), e->d_name);
  }
  ::closedir(d);
  if (::unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT) throw_errno(std::string("rmdir ") + name);
}

void remove_tree(const std::string& path) { remove_tree_at(AT_FDCWD, path.c_str()); }

namespace {
std::vector<std::string> read_dir(const std::string& path, bool dirs_only) {
  std::vector<std::string> out;
  DIR* d = ::opendir(path.c_str());
  if (!d) {
    if (errno == ENOENT) return out;
    throw_errno("opendir " + path);
  }
  while (struct dirent* e = ::readdir(d)) {
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    if (dirs_only) {
      bool dir = e->d_type == DT_DIR;
      if (e->d_type == DT_UNKNOWN) {
        struct stat st;
        dir = ::fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
      }
      if (!dir) continue;
    }
    out.emplace_back(e->d_name);
  }
  ::closedir(d);
  return out;
}
}  // namespace

std::vector<std::string> list_dir(const std::string& path) { return read_dir(path, false); }
std::vector<std::string> list_subdirs(const std::string& path) { return read_dir(path, true); }

std::optional<uint64_t> process_start_time(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  std::optional<std::string> stat;
  try {
    stat = read_file_if_exists(path, 4096);
  } catch (const Error&) {
    // A process reaped between the open and the read answers ESRCH: it is not that process any more.
    return std::nullopt;
  }
  if (!stat) return std::nullopt;
  // The command name (field 2) may contain spaces and parentheses: parse after the last ')'.
  size_t p = stat->rfind(')');
  if (p == std::string::npos) return std::nullopt;
  const char* s = stat->c_str() + p + 2;
  // After ')' come fields 3.. ; start time is field 22, i.e. the 20th token here.
  for (int field = 3; field < 22 && *s; ++field) {
    s = std::strchr(s, ' ');
    if (!s) return std::nullopt;
    ++s;
  }
  return std::strtoull(s, nullptr, 10);
}

uint64_t own_start_time() {
  // Keyed by pid: a forked child reads its own. The start is stored before the pid that vouches for it.
  static std::atomic<pid_t> cached_pid{0};
  static std::atomic<uint64_t> cached_start{0};
  const pid_t self = ::getpid();
  if (cached_pid.load() == self) return cached_start.load();
  const uint64_t start = process_start_time(self).value_or(0);
  cached_start.store(start);
  cached_pid.store(self);
  return start;
}

bool process_alive(pid_t pid, uint64_t start) {
  if (pid <= 0) return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  std::optional<std::string> stat;
  try {
    stat = read_file_if_exists(path, 4096);
  } catch (const Error&) {
    return false;  // reaped while we read it (ESRCH)
  }
  if (!stat) return false;
  size_t p = stat->rfind(')');
  if (p == std::string::npos || p + 2 >= stat->size()) return false;
  char state = (*stat)[p + 2];
  if (state == 'Z' || state == 'X') return false;  // exited, not yet reaped
  return process_start_time(pid) == std::optional<uint64_t>(start);
}

double now_unix_seconds() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

uint64_t now_monotonic_ns() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string random_hex(size_t bytes) {
  unsigned char buf[32];
  if (bytes > sizeof buf) bytes = sizeof buf;
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(buf + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("getrandom");
    }
    got += static_cast<size_t>(n);
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes; ++i) {
    out.push_back(hex[buf[i] >> 4]);
    out.push_back(hex[buf[i] & 15]);
  }
  return out;
}

UniqueFd lock_file(const std::string& path, int how) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) throw_errno("open lock " + path);
  while (::flock(fd.get(), how) != 0) {
    if (errno != EINTR) throw_errno("lock " + path);
  }
  return fd;
}

}  // namespace sandlet::sys
