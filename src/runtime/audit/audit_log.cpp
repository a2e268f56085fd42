#include "runtime/audit/audit_log.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace json = boost::json;

namespace sandlet {
namespace {

// Holds a flock of the lock file for a scope (LOCK_SH or LOCK_EX); released on exit.
class FileLock final {
 public:
  FileLock(int fd, int how) : fd_(fd) {
    while (::flock(fd_, how) < 0)
      if (errno != EINTR) throw_errno("lock the audit log");
  }
  ~FileLock() { ::flock(fd_, LOCK_UN); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace

AuditLog::AuditLog(std::string dir, AuditOptions options)
    : dir_(std::move(dir)), path_(dir_ + "/audit.jsonl"), lock_path_(dir_ + "/audit.lock"), options_(options) {}

bool AuditLog::ensure_open() {
  if (fd_ && lock_fd_) return true;
  try {
    sys::mkdir_p(dir_, 0700);
    if (::chmod(dir_.c_str(), 0700) < 0) throw_errno("chmod " + dir_);
    if (!lock_fd_) {
      lock_fd_.reset(::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
      if (!lock_fd_) throw_errno("open " + lock_path_);
    }
    return true;
  } catch (const std::exception& e) {
    stats_.last_error = e.what();
    return false;
  }
}

// The live file as this process holds it: reopened when the path names another file (a rotation by any
// process) or none. Called with a lock of lock_fd_ held, so no rotation runs meanwhile.
static sys::UniqueFd reopen_if_moved(const std::string& path, sys::UniqueFd fd, ino_t* ino, dev_t* dev) {
  struct stat st;
  if (fd && ::stat(path.c_str(), &st) == 0 && st.st_ino == *ino && st.st_dev == *dev) return fd;
  sys::UniqueFd fresh(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fresh) throw_errno("open " + path);
  if (::fstat(fresh.get(), &st) < 0) throw_errno("stat " + path);
  *ino = st.st_ino;
  *dev = st.st_dev;
  return fresh;
}

void AuditLog::rotate_if_needed(size_t incoming) {
  struct stat st;
  if (::fstat(fd_.get(), &st) < 0) throw_errno("stat " + path_);
  if (st.st_size == 0 || static_cast<uint64_t>(st.st_size) + incoming <= options_.max_bytes) return;
  // Oldest first: .keep-1 -> .keep, ..., live -> .1 (a missing one is a gap, not an error).
  for (uint32_t i = options_.keep; i > 1; --i) {
    const std::string from = path_ + "." + std::to_string(i - 1), to = path_ + "." + std::to_string(i);
    if (::rename(from.c_str(), to.c_str()) < 0 && errno != ENOENT) throw_errno("rotate " + from);
  }
  if (options_.keep == 0) {
    if (::unlink(path_.c_str()) < 0 && errno != ENOENT) throw_errno("rotate " + path_);
  } else if (::rename(path_.c_str(), (path_ + ".1").c_str()) < 0) {
    throw_errno("rotate " + path_);
  }
  ++stats_.rotations;
  fd_ = reopen_if_moved(path_, std::move(fd_), &ino_, &dev_);
}

void AuditLog::append(const std::string& line) {
  {
    FileLock shared(lock_fd_.get(), LOCK_SH);
    fd_ = reopen_if_moved(path_, std::move(fd_), &ino_, &dev_);
    struct stat st;
    if (::fstat(fd_.get(), &st) < 0) throw_errno("stat " + path_);
    if (st.st_size == 0 || static_cast<uint64_t>(st.st_size) + line.size() <= options_.max_bytes) {
      write_line(fd_.get(), line);
      return;
    }
  }
  // Full: rotate (unless another process just did) and write under the exclusive lock.
  FileLock exclusive(lock_fd_.get(), LOCK_EX);
  fd_ = reopen_if_moved(path_, std::move(fd_), &ino_, &dev_);
  rotate_if_needed(line.size());
  write_line(fd_.get(), line);
}

void AuditLog::write(const char* event, const std::string& sandbox, const AuditLabels& labels,
                     json::object fields) noexcept {
  std::lock_guard lock(mutex_);
  try {
    bool cut = false;
    std::string line = audit_line(event, sandbox, labels, std::move(fields), &cut);
    if (cut) ++stats_.truncated;
    if (!ensure_open()) {
      ++stats_.failed;
      return;
    }
    append(line);
    ++stats_.written;
  } catch (const std::exception& e) {
    ++stats_.failed;
    try {
      stats_.last_error = e.what();
    } catch (...) {
    }
  } catch (...) {
    ++stats_.failed;
  }
}

void AuditLog::denial(const std::string& sandbox, const AuditLabels& labels, const std::string& kind,
                      json::object details) noexcept {
  try {
    json::object f;
    f["kind"] = kind;
    f["details"] = std::move(details);
    write("denial", sandbox, labels, std::move(f));
  } catch (...) {
    std::lock_guard lock(mutex_);
    ++stats_.failed;
  }
}

void AuditLog::policy(const std::string& sandbox, const AuditLabels& labels, const std::string& relaxation,
                      json::object details) noexcept {
  try {
    json::object f;
    f["relaxation"] = relaxation;
    f["details"] = std::move(details);
    write("policy", sandbox, labels, std::move(f));
  } catch (...) {
    std::lock_guard lock(mutex_);
    ++stats_.failed;
  }
}

AuditLog::Stats AuditLog::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace sandlet
