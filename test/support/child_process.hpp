// Test support: a child process the test owns (started with posix_spawn-like fork/exec, output to a log
// file, killed and reaped by the destructor), a private temp directory removed at the end, and small
// waits. Header-only, used by the store servers and the fault proxy.
#pragma once
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace test_support {

class TempDir final {
 public:
  explicit TempDir(const std::string& tag) {
    std::string tmpl = "/tmp/sandlet-" + tag + ".XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
}

// The first executable of that name on PATH (or the path itself when it has a '/'); "" when none.
inline std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::string dirs = std::string(path ? path : "") + ":/usr/sbin:/sbin";
  std::stringstream ss(dirs);
  for (std::string dir; std::getline(ss, dir, ':');)
    if (!dir.empty() && ::access((dir + "/" + name).c_str(), X_OK) == 0) return dir + "/" + name;
  return "";
}

// A loopback port nobody listened on a moment ago (the kernel's pick).
inline uint16_t free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

inline bool port_answers(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

class ChildProcess final {
 public:
  // Runs argv with stdout and stderr appended to `log`; extra_env is added to the environment.
  ChildProcess(const std::vector<std::string>& argv, const std::string& log,
               const std::vector<std::string>& extra_env = {}) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (out >= 0) {
        ::dup2(out, 1);
        ::dup2(out, 2);
      }
      const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (null >= 0) ::dup2(null, 0);
      ::setpgid(0, 0);  // its own group: the destructor kills whatever it started too
      for (const auto& e : extra_env) ::putenv(const_cast<char*>(e.c_str()));
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);  // (also here: a stop() right after the fork must find the group)
  }
  ~ChildProcess() { stop(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Has it exited? (Reaps it; exit_status() then tells how.)
  bool exited() {
    if (pid_ <= 0) return true;
    if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
      pid_ = -1;
      return true;
    }
    return false;
  }
  int exit_status() const { return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_); }

  // SIGTERM to its group, up to 3 s of grace, then SIGKILL; always reaped.
  void stop() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGTERM);
    for (int i = 0; i < 300 && !exited(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, &status_, 0);
      pid_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
  int status_ = 0;
};

// Polls `ready` every 20 ms for up to `seconds`; false on timeout or when `child` exited meanwhile.
template <typename Ready>
bool wait_until(ChildProcess& child, double seconds, Ready ready) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (ready()) return true;
    if (child.exited()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ready();
}

// The integer value of "key": N in a flat JSON object (enough for the helpers' ready files).
inline long json_int(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\"");
  if (at == std::string::npos) return -1;
  return std::strtol(json.c_str() + json.find(':', at) + 1, nullptr, 10);
}

inline std::string json_string(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\"");
  if (at == std::string::npos) return "";
  const size_t open = json.find('"', json.find(':', at) + 1);
  return json.substr(open + 1, json.find('"', open + 1) - open - 1);
}

// The interpreter for the Python helpers: $SANDLET_STORE_TEST_PYTHON, else the build's.
inline std::string test_python() {
  if (const char* p = std::getenv("SANDLET_STORE_TEST_PYTHON")) return p;
#ifdef SANDLET_STORE_TEST_PYTHON
  return SANDLET_STORE_TEST_PYTHON;
#else
  return "/usr/bin/python3";
#endif
}

}  // namespace test_support
