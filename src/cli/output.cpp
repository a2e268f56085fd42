#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "cli.hpp"

namespace sandlet::cli {

bool write_all(int fd, const void* data, size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    const ssize_t n = ::write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {  // an inherited non-blocking fd: wait until it drains
        pollfd pfd{fd, POLLOUT, 0};
        ::poll(&pfd, 1, -1);
        continue;
      }
      return false;
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool write_all(int fd, std::string_view s) { return write_all(fd, s.data(), s.size()); }

void print_error(std::string_view message) {
  std::string line = "sandlet: ";
  line += message;
  if (line.empty() || line.back() != '\n') line += '\n';
  write_all(STDERR_FILENO, line);
}

int for_each_operand(const std::vector<std::string>& operands, std::string_view command,
                     const std::function<void(const std::string&)>& act) {
  int status = 0;
  for (const auto& operand : operands) {
    try {
      act(operand);
      write_all(STDOUT_FILENO, operand + "\n");
    } catch (const Error& e) {
      print_error(std::string(command) + " " + operand + ": " + e.what());
      status = kExitRuntimeError;
    }
  }
  return status;
}

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line.append(width[i] - r[i].size() + 3, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  write_all(STDOUT_FILENO, out);
}

std::string format_age(double unix_seconds) {
  const double now = static_cast<double>(::time(nullptr));
  double d = now - unix_seconds;
  if (d < 0) d = 0;
  auto plural = [](long n, const char* unit) {
    return std::to_string(n) + " " + unit + (n == 1 ? "" : "s") + " ago";
  };
  if (d < 60) return plural(static_cast<long>(d), "second");
  if (d < 3600) return plural(static_cast<long>(d / 60), "minute");
  if (d < 86400) return plural(static_cast<long>(d / 3600), "hour");
  return plural(static_cast<long>(d / 86400), "day");
}

std::string read_local_file(const std::string& path, unsigned* mode_out) {
  int fd = STDIN_FILENO;
  if (path != "-") {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error(path + ": " + std::strerror(errno));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() {
      if (fd != STDIN_FILENO) ::close(fd);
    }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw std::runtime_error(path + ": " + std::strerror(errno));
  if (path != "-" && !S_ISREG(st.st_mode)) throw std::runtime_error(path + ": not a regular file");
  if (mode_out != nullptr) *mode_out = path == "-" ? 0644u : static_cast<unsigned>(st.st_mode & 07777);
  std::string data;
  if (S_ISREG(st.st_mode) && st.st_size > 0) data.reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(path + ": " + std::strerror(errno));
    }
    data.append(buf, static_cast<size_t>(n));
  }
  return data;
}

}  // namespace sandlet::cli
