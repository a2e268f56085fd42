#include "cold_start_infra.hpp"

#include "common.hpp"
#include "proc.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

extern char **environ;

namespace bench {
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {
std::string errno_text() { return std::strerror(errno); }

int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void write_all(int fd, const char *p, std::size_t n, const char *what) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw BenchError(std::string(what) + ": write: " + errno_text());
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

// posix_spawn of argv with stdin/stdout from the given fds (-1: /dev/null), stderr inherited.
pid_t spawn_with(const std::vector<std::string> &args, int in_fd, int out_fd) {
  std::vector<char *> argv;
  for (const auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (in_fd >= 0) posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
  else posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (out_fd >= 0) posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  else posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw BenchError("posix_spawn(" + args[0] + "): " + std::strerror(rc));
  return pid;
}
}  // namespace

int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw BenchError("socket: " + errno_text());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
    close(fd);
    throw BenchError("bind 127.0.0.1:0: " + errno_text());
  }
  close(fd);
  return ntohs(a.sin_port);
}

bool wait_port(int port, int timeout_ms) {
  const auto deadline = now_ns() + static_cast<std::uint64_t>(timeout_ms) * 1'000'000ull;
  while (now_ns() < deadline) {
    const int fd = connect_loopback(port);
    if (fd >= 0) {
      close(fd);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// ---------------------------------------------------------------------------------------------------
Nginx::Nginx(const fs::path &prefix, const fs::path &www) {
  fs::create_directories(prefix / "tmp");
  for (int attempt = 0; attempt < 3 && pid_ < 0; ++attempt) {
    port_ = free_loopback_port();
    std::ofstream conf(prefix / "nginx.conf", std::ios::trunc);
    // `user root`: the worker reads the bench's 0700 temp directories. DAV methods take a push (store-kind
    // http); sendfile and range requests (on by default for static files) serve the pulls.
    conf << "user root;\nworker_processes 1;\ndaemon off;\npid " << (prefix / "nginx.pid").string() << ";\n"
         << "error_log " << (prefix / "error.log").string() << " warn;\n"
         << "events { worker_connections 1024; }\n"
         << "http {\n  access_log off;\n  sendfile on;\n  tcp_nopush on;\n  keepalive_requests 100000;\n"
         << "  default_type application/octet-stream;\n"
         << "  client_body_temp_path " << (prefix / "tmp/body").string() << ";\n"
         << "  proxy_temp_path " << (prefix / "tmp/proxy").string() << ";\n"
         << "  fastcgi_temp_path " << (prefix / "tmp/fastcgi").string() << ";\n"
         << "  uwsgi_temp_path " << (prefix / "tmp/uwsgi").string() << ";\n"
         << "  scgi_temp_path " << (prefix / "tmp/scgi").string() << ";\n"
         << "  server {\n    listen 127.0.0.1:" << port_ << ";\n    root " << www.string() << ";\n"
         << "    location / {\n      dav_methods PUT DELETE MKCOL;\n      create_full_put_path on;\n"
         << "      client_max_body_size 0;\n    }\n  }\n}\n";
    conf.close();
    if (!conf) throw BenchError("cannot write " + (prefix / "nginx.conf").string());
    const pid_t pid = spawn_with({"/usr/sbin/nginx", "-q", "-p", prefix.string(), "-c",
                                  (prefix / "nginx.conf").string()}, -1, -1);
    if (wait_port(port_, 5000)) {
      pid_ = pid;
    } else {
      kill_tree(pid);  // lost the port to someone else, most likely: try another
    }
  }
  if (pid_ < 0) throw BenchError("nginx did not start (see " + (prefix / "error.log").string() + ")");
}

Nginx::~Nginx() { kill_tree(pid_); }

std::string Nginx::version() const { return capture_output("/usr/sbin/nginx -v 2>&1 | cat"); }

// ---------------------------------------------------------------------------------------------------
ThrottleProxy::ThrottleProxy(const fs::path &script, int upstream_port, double rate_mbps, double max_lifetime_s) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) throw BenchError("pipe2: " + errno_text());
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    throw BenchError("pipe2: " + errno_text());
  }
  std::ostringstream rate, life;
  rate << rate_mbps;
  life << max_lifetime_s;
  try {
    pid_ = spawn_with({"/usr/bin/python3", script.string(), "--upstream", "127.0.0.1:" + std::to_string(upstream_port),
                       "--rate-mbps", rate.str(), "--max-lifetime-s", life.str()},
                      in[0], out[1]);
  } catch (...) {
    for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
    throw;
  }
  close(in[0]);
  close(out[1]);
  stdin_fd_ = in[1];
  std::string line;
  pollfd p{out[0], POLLIN, 0};
  const auto deadline = now_ns() + 10'000'000'000ull;
  while (line.find('\n') == std::string::npos && now_ns() < deadline) {
    if (poll(&p, 1, 200) <= 0) continue;
    char buf[256];
    const ssize_t r = read(out[0], buf, sizeof buf);
    if (r <= 0) break;
    line.append(buf, static_cast<std::size_t>(r));
  }
  close(out[0]);
  try {
    const json::object o = json::parse(line).as_object();
    port_ = static_cast<int>(o.at("listen").to_number<int>());
    control_port_ = static_cast<int>(o.at("control").to_number<int>());
  } catch (const std::exception &) {
    kill_tree(pid_);
    close(stdin_fd_);
    throw BenchError("throttle_proxy.py did not report its ports (got '" + line + "')");
  }
}

ThrottleProxy::~ThrottleProxy() {
  if (stdin_fd_ >= 0) close(stdin_fd_);
  kill_tree(pid_);
}

json::object ThrottleProxy::stats() const {
  const int fd = connect_loopback(control_port_);
  if (fd < 0) throw BenchError("throttle proxy control port: connect: " + errno_text());
  std::string text;
  char buf[1024];
  for (ssize_t r; (r = read(fd, buf, sizeof buf)) != 0;) {
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    text.append(buf, static_cast<std::size_t>(r));
  }
  close(fd);
  try {
    return json::parse(text).as_object();
  } catch (const std::exception &) {
    throw BenchError("throttle proxy control port answered '" + text + "'");
  }
}

std::uint64_t ThrottleProxy::down_bytes() const { return stats().at("down_bytes").to_number<std::uint64_t>(); }

// ---------------------------------------------------------------------------------------------------
std::uint64_t http_get_to_fd(int port, const std::string &path, int out_fd) {
  const std::string what = "GET http://127.0.0.1:" + std::to_string(port) + path;
  const int fd = connect_loopback(port);
  if (fd < 0) throw BenchError(what + ": connect: " + errno_text());
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  write_all(fd, req.data(), req.size(), what.c_str());
  std::vector<char> buf(1 << 20);
  std::string head;
  std::uint64_t body = 0, expected = UINT64_MAX;
  bool in_body = false;
  for (;;) {
    const ssize_t r = read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw BenchError(what + ": read: " + errno_text());
    if (r == 0) break;
    const char *p = buf.data();
    std::size_t n = static_cast<std::size_t>(r);
    if (!in_body) {
      head.append(p, n);
      const auto end = head.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (head.size() > 65536) throw BenchError(what + ": response header too long");
        continue;
      }
      if (head.compare(0, 9, "HTTP/1.1 ") != 0 && head.compare(0, 9, "HTTP/1.0 ") != 0)
        throw BenchError(what + ": not an HTTP response");
      if (head.compare(9, 3, "200") != 0) throw BenchError(what + ": " + head.substr(0, head.find('\r')));
      std::string lower = head.substr(0, end);
      for (auto &ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (const auto cl = lower.find("\r\ncontent-length:"); cl != std::string::npos)
        expected = std::stoull(lower.substr(cl + 17));
      const std::string rest = head.substr(end + 4);
      in_body = true;
      if (!rest.empty()) write_all(out_fd, rest.data(), rest.size(), what.c_str());
      body += rest.size();
      continue;
    }
    write_all(out_fd, p, n, what.c_str());
    body += n;
  }
  if (!in_body) throw BenchError(what + ": connection closed before the body");
  if (expected != UINT64_MAX && body != expected)
    throw BenchError(what + ": body of " + std::to_string(body) + " bytes, Content-Length " + std::to_string(expected));
  return body;
}

// ---------------------------------------------------------------------------------------------------
std::uint64_t drop_page_cache(const fs::path &p) {
  std::uint64_t bytes = 0;
  const auto advise = [&](const fs::path &f) {
    const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return;
    struct stat st {};
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
      fdatasync(fd);  // dirty pages are not dropped: write them first
      posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      bytes += static_cast<std::uint64_t>(st.st_size);
    }
    close(fd);
  };
  std::error_code ec;
  const fs::path top = fs::canonical(p, ec);
  if (ec) return 0;
  if (fs::is_regular_file(top, ec)) {
    advise(top);
    return bytes;
  }
  for (auto it = fs::recursive_directory_iterator(top, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_symlink(ec)) {  // the top-level links of the served directory (image.tar) are followed
      if (it.depth() == 0) bytes += drop_page_cache(it->path());
      continue;
    }
    if (it->is_regular_file(ec)) advise(it->path());
  }
  return bytes;
}

namespace {
template <typename F>
void walk_one_fs(const fs::path &p, F &&f) {
  struct stat top {};
  if (lstat(p.c_str(), &top) != 0) return;
  std::set<std::pair<dev_t, ino_t>> seen;
  std::vector<fs::path> todo{p};
  while (!todo.empty()) {
    const fs::path cur = todo.back();
    todo.pop_back();
    struct stat st {};
    if (lstat(cur.c_str(), &st) != 0 || st.st_dev != top.st_dev) continue;
    if (st.st_nlink > 1 && !S_ISDIR(st.st_mode) && !seen.insert({st.st_dev, st.st_ino}).second) continue;
    f(st);
    if (S_ISDIR(st.st_mode)) {
      std::error_code ec;
      for (auto it = fs::directory_iterator(cur, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
        todo.push_back(it->path());
    }
  }
}
}  // namespace

std::uint64_t allocated_bytes(const fs::path &p) {
  std::uint64_t n = 0;
  walk_one_fs(p, [&](const struct stat &st) { n += static_cast<std::uint64_t>(st.st_blocks) * 512; });
  return n;
}

std::uint64_t apparent_bytes(const fs::path &p) {
  std::uint64_t n = 0;
  walk_one_fs(p, [&](const struct stat &st) {
    if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode)) n += static_cast<std::uint64_t>(st.st_size);
  });
  return n;
}

// ---------------------------------------------------------------------------------------------------
BlockDevice::BlockDevice(const fs::path &on) : on_(on) {
  struct stat st {};
  if (stat(on.c_str(), &st) != 0) return;
  name_ = std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  const fs::path p = fs::path("/sys/dev/block") / name_ / "stat";
  if (fs::exists(p)) stat_ = p;
}

std::uint64_t BlockDevice::written_bytes() const {
  const int fd = open(on_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    syncfs(fd);
    close(fd);
  }
  if (stat_.empty()) return 0;
  std::ifstream in(stat_);
  std::uint64_t v[7] = {};
  for (auto &x : v) in >> x;
  return v[6] * 512;
}

bool stop_foreign_process(pid_t pid, int grace_ms) {
  if (pid <= 1 || kill(pid, 0) != 0) return true;
  kill(pid, SIGTERM);
  const auto deadline = now_ns() + static_cast<std::uint64_t>(grace_ms) * 1'000'000ull;
  while (now_ns() < deadline) {
    if (kill(pid, 0) != 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return kill(pid, 0) != 0;
}

}  // namespace bench
