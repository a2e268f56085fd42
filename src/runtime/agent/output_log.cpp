#include "runtime/agent/output_log.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <deque>

#include "runtime/audit/audit_text.hpp"
#include "sys/fd.hpp"

namespace json = boost::json;

namespace sandlet::output_log {
namespace {

constexpr size_t kMaxReadBytes = kCompactAt + kAuditMaxLine;  // a file larger than this is read from its end

// The complete lines of `text`, last kKeptRecords of them.
std::deque<std::string_view> last_lines(std::string_view text) {
  std::deque<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) break;  // a line being written (or cut by a crash)
    if (nl > pos) lines.push_back(text.substr(pos, nl - pos));
    if (lines.size() > kKeptRecords) lines.pop_front();
    pos = nl + 1;
  }
  return lines;
}

// The last kMaxReadBytes of the open file, from a line start when the read began mid-file.
std::string read_end(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return {};
  const off_t size = st.st_size;
  const off_t from = size > static_cast<off_t>(kMaxReadBytes) ? size - static_cast<off_t>(kMaxReadBytes) : 0;
  std::string data(static_cast<size_t>(size - from), '\0');
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n = ::pread(fd, data.data() + got, data.size() - got, from + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  if (from > 0) {
    size_t nl = data.find('\n');
    data.erase(0, nl == std::string::npos ? data.size() : nl + 1);
  }
  return data;
}

// Rewrites the locked file to its last kKeptRecords lines.
void compact(int fd) {
  const std::string data = read_end(fd);  // (the lines below point into it)
  std::string kept;
  for (std::string_view line : last_lines(data)) (kept += line) += '\n';
  if (::ftruncate(fd, 0) != 0) return;
  write_line(fd, kept);  // O_APPEND: at the new end, i.e. offset 0
}

}  // namespace

std::string_view tail(std::string_view data, size_t max) {
  return data.size() > max ? data.substr(data.size() - max) : data;
}

void TailKeeper::add(std::string_view chunk) {
  if (chunk.size() >= kTailBytes) {
    text_.assign(tail(chunk));
    return;
  }
  text_.append(chunk);
  if (text_.size() > 2 * kTailBytes) text_.erase(0, text_.size() - kTailBytes);  // amortised
}

void append(const std::string& path, const std::string& sandbox, const std::map<std::string, std::string>& labels,
            const ExecAudit& audit, const ExecOutcome* outcome, std::string_view stdout_tail,
            std::string_view stderr_tail, std::exception_ptr error) noexcept {
  try {
    json::object fields = audit_exec_fields(audit, outcome, error);
    fields["stdout"] = std::string(tail(stdout_tail));
    fields["stderr"] = std::string(tail(stderr_tail));
    bool cut = false;
    const std::string line = audit_line("output", sandbox, labels, std::move(fields), &cut);
    sys::UniqueFd fd(::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) return;  // the sandbox's directory is gone (it ended meanwhile)
    // Concurrent execs (of any process) append whole lines; the lock orders a compaction against them.
    if (::flock(fd.get(), LOCK_EX) != 0) return;
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return;
    if (static_cast<size_t>(st.st_size) > kCompactAt) {
      compact(fd.get());
      write_line(fd.get(), line);
      return;
    }
    // After a line a crash cut short, this record starts a line of its own (the cut one is skipped on read).
    char last = '\n';
    if (st.st_size > 0 && ::pread(fd.get(), &last, 1, st.st_size - 1) == 1 && last != '\n') {
      write_line(fd.get(), "\n" + line);
      return;
    }
    write_line(fd.get(), line);
  } catch (...) {
  }
}

json::array read_last(const std::string& path) noexcept {
  json::array out;
  try {
    sys::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) return out;
    if (::flock(fd.get(), LOCK_SH) != 0) return out;
    const std::string data = read_end(fd.get());
    for (std::string_view line : last_lines(data)) {
      json::error_code ec;
      json::value v = json::parse(line, ec);
      if (!ec && v.is_object()) out.push_back(std::move(v));
    }
  } catch (...) {
    out.clear();
  }
  return out;
}

}  // namespace sandlet::output_log
