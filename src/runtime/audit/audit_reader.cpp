#include "runtime/audit/audit_reader.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <vector>

#include "common/error.hpp"
#include "runtime/audit/audit_text.hpp"

namespace json = boost::json;

namespace sandlet {
namespace {

constexpr size_t kMaxRotated = 1000;  // rotated files looked for (the writer's `keep` is bounded by this)

// The shared lock of the log while the set of files is looked at; none when the lock file is missing (no
// writer has set the log up yet).
class SharedLock final {
 public:
  explicit SharedLock(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) {
    if (fd_)
      while (::flock(fd_.get(), LOCK_SH) < 0)
        if (errno != EINTR) throw_errno("lock " + path);
  }
  ~SharedLock() {
    if (fd_) ::flock(fd_.get(), LOCK_UN);
  }

 private:
  sys::UniqueFd fd_;
};

}  // namespace

AuditReader::AuditReader(std::string path, AuditFilter filter)
    : path_(std::move(path)), lock_path_(path_.substr(0, path_.rfind('/') + 1) + "audit.lock"), filter_(std::move(filter)) {
  if (filter_.since > 0) since_text_ = audit_time(filter_.since);
}

AuditReader::File AuditReader::open_file(const std::string& path) {
  File f;
  f.fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!f.fd) {
    if (errno == ENOENT) return f;
    throw_errno("open " + path);
  }
  struct stat st;
  if (::fstat(f.fd.get(), &st) < 0) throw_errno("stat " + path);
  f.ino = st.st_ino;
  f.dev = st.st_dev;
  return f;
}

void AuditReader::refresh() {
  SharedLock lock(lock_path_);
  if (!cur_.fd) {
    // Nothing read yet (the log may not have existed): everything there is, oldest first.
    std::vector<File> rotated;
    for (size_t i = 1; i <= kMaxRotated; ++i) {
      File f = open_file(path_ + "." + std::to_string(i));
      if (!f.fd) break;
      rotated.push_back(std::move(f));
    }
    for (auto it = rotated.rbegin(); it != rotated.rend(); ++it) pending_.push_back(std::move(*it));
    if (File live = open_file(path_); live.fd) pending_.push_back(std::move(live));
    return;
  }
  struct stat st;
  if (::stat(path_.c_str(), &st) == 0 && st.st_ino == cur_.ino && st.st_dev == cur_.dev) return;  // still live
  // cur_ was rotated: the files newer than it are the rotated ones before it in the numbering, then the live one.
  std::vector<File> newer;
  // (Not found: rotated out of the kept set, so every kept file is newer.)
  for (size_t i = 1; i <= kMaxRotated; ++i) {
    File f = open_file(path_ + "." + std::to_string(i));
    if (!f.fd || (f.ino == cur_.ino && f.dev == cur_.dev)) break;
    newer.push_back(std::move(f));
  }
  for (auto it = newer.rbegin(); it != newer.rend(); ++it) pending_.push_back(std::move(*it));
  if (File live = open_file(path_); live.fd) pending_.push_back(std::move(live));
}

bool AuditReader::read_line(std::string* line) {
  for (;;) {
    size_t nl = buf_.find('\n', buf_pos_);
    if (nl != std::string::npos) {
      line->assign(buf_, buf_pos_, nl - buf_pos_);
      buf_pos_ = nl + 1;
      if (buf_pos_ > 65536) {
        buf_.erase(0, buf_pos_);
        buf_pos_ = 0;
      }
      return true;
    }
    if (!cur_.fd) return false;
    char chunk[65536];
    ssize_t n = ::read(cur_.fd.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("read " + path_);
    if (n == 0) return false;
    buf_.append(chunk, static_cast<size_t>(n));
    if (buf_.size() - buf_pos_ > 4 * kAuditMaxLine) {  // no newline this long: not a record
      buf_.clear();
      buf_pos_ = 0;
      ++skipped_;
    }
  }
}

bool AuditReader::matches(const std::string& line) {
  json::error_code ec;
  json::value v = json::parse(line, ec);
  if (ec || !v.is_object()) {
    ++skipped_;
    return false;
  }
  const json::object& o = v.get_object();
  if (!filter_.sandbox.empty()) {
    const json::value* id = o.if_contains("sandbox");
    if (!id || !id->is_string() || id->get_string() != filter_.sandbox) return false;
  }
  if (!filter_.labels.empty()) {
    const json::value* labels = o.if_contains("labels");
    if (!labels || !labels->is_object()) return false;
    for (const auto& [k, want] : filter_.labels) {
      const json::value* got = labels->get_object().if_contains(k);
      if (!got || !got->is_string() || got->get_string() != want) return false;
    }
  }
  if (!since_text_.empty()) {
    const json::value* ts = o.if_contains("ts");
    if (!ts || !ts->is_string() || std::string_view(ts->get_string()) < since_text_) return false;
  }
  return true;
}

bool AuditReader::next(std::string* line) {
  for (;;) {
    if (read_line(line)) {
      if (matches(*line)) return true;
      continue;
    }
    if (!pending_.empty()) {
      // A file that was rotated is final: a fragment at its end (a short write) is dropped.
      if (buf_pos_ < buf_.size()) ++skipped_;
      buf_.clear();
      buf_pos_ = 0;
      cur_ = std::move(pending_.front());
      pending_.pop_front();
      continue;
    }
    refresh();
    if (pending_.empty()) return false;
    // cur_ was rotated (or the log appeared): the loop reads what cur_ got before that first, then the newer ones.
  }
}

}  // namespace sandlet
