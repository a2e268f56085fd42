// `sandlet exec -i` / `-t` / `-it`: stdin streamed into the command as it comes, and a pseudo-terminal
// inside the sandbox with this terminal in raw mode and its size followed (SIGWINCH), as `docker exec -it`.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>

#include "cli.hpp"

namespace sandlet::cli {
namespace {

std::atomic<int> g_winch_fd{-1};

extern "C" void on_winch(int) {
  const int saved_errno = errno;
  const unsigned char byte = 1;
  const int fd = g_winch_fd.load();
  if (fd >= 0) (void)!::write(fd, &byte, 1);
  errno = saved_errno;
}

// This terminal in raw mode (every key goes to the command, Ctrl-C included) while it lives.
class RawTerminal final {
 public:
  explicit RawTerminal(int fd) : fd_(fd) {
    if (::tcgetattr(fd_, &saved_) != 0) return;
    struct termios raw = saved_;
    ::cfmakeraw(&raw);
    if (::tcsetattr(fd_, TCSADRAIN, &raw) == 0) active_ = true;
  }
  ~RawTerminal() { restore(); }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;
  void restore() {
    if (active_) ::tcsetattr(fd_, TCSADRAIN, &saved_);
    active_ = false;
  }

 private:
  int fd_;
  struct termios saved_ {};
  bool active_ = false;
};

// SIGWINCH into a self-pipe while it lives.
class WinchPipe final {
 public:
  WinchPipe() {
    int p[2];
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return;
    read_fd_ = p[0];
    write_fd_ = p[1];
    g_winch_fd.store(write_fd_);
    struct sigaction sa {};
    sa.sa_handler = on_winch;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGWINCH, &sa, &previous_);
  }
  ~WinchPipe() {
    if (read_fd_ < 0) return;
    ::sigaction(SIGWINCH, &previous_, nullptr);
    g_winch_fd.store(-1);
    ::close(read_fd_);
    ::close(write_fd_);
  }
  WinchPipe(const WinchPipe&) = delete;
  WinchPipe& operator=(const WinchPipe&) = delete;
  int read_fd() const { return read_fd_; }
  void drain() {
    unsigned char buf[64];
    while (::read(read_fd_, buf, sizeof buf) > 0) {
    }
  }

 private:
  int read_fd_ = -1, write_fd_ = -1;
  struct sigaction previous_ {};
};

// The size of the terminal on `fd`, if it is one.
std::optional<std::pair<uint32_t, uint32_t>> terminal_size(int fd) {
  struct winsize ws {};
  if (::ioctl(fd, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0) return std::nullopt;
  return std::make_pair(static_cast<uint32_t>(ws.ws_row), static_cast<uint32_t>(ws.ws_col));
}

struct Completion {
  std::mutex mu;
  std::optional<Error> error;
  ExecResult result;
};

}  // namespace

int run_interactive(Sandbox& sb, const CommandOptions& cmd, bool forward_stdin, bool tty, SignalGuard& guard) {
  const bool local_terminal = ::isatty(STDIN_FILENO) != 0;
  if (tty && forward_stdin && !local_terminal)
    throw UsageError("the input device is not a terminal: -it needs one (use -i alone to stream stdin)");

  ExecOptions opts = streamed_exec_options(cmd);
  opts.stdin_stream = forward_stdin;
  opts.tty = tty;
  if (tty) {
    auto size = terminal_size(STDOUT_FILENO);
    if (!size) size = terminal_size(STDIN_FILENO);
    if (size) {
      opts.tty_rows = size->first;
      opts.tty_cols = size->second;
    }
    // A terminal session gets the TERM of ours, as a login over ssh does.
    const char* term = std::getenv("TERM");
    opts.env.push_back(std::string("TERM=") + (term != nullptr && *term ? term : "xterm"));
  }
  opts.on_output = [](int stream, std::string_view data) {
    write_all(stream == SANDLET_STDERR ? STDERR_FILENO : STDOUT_FILENO, data);
  };

  auto completion = std::make_shared<Completion>();
  const int notify_fd = guard.write_fd();
  ExecControl control;
  try {
    control = sb.exec_start(opts, [completion, notify_fd](const Error* err, ExecResult result) {
      {
        std::lock_guard<std::mutex> lock(completion->mu);
        if (err != nullptr) completion->error = *err;
        else completion->result = std::move(result);
      }
      const unsigned char done = 0;
      (void)!::write(notify_fd, &done, 1);
    });
  } catch (const Error& e) {
    return status_for_start_error(e);
  }

  // Raw only once the command runs: an error before that prints on a normal terminal.
  std::optional<RawTerminal> raw;
  if (tty && forward_stdin) raw.emplace(STDIN_FILENO);
  WinchPipe winch;

  bool done = false;
  bool stdin_open = forward_stdin;
  char buf[64 << 10];
  for (;;) {
    const int sig = guard.drain(&done);
    if (sig != 0) {
      // Our own end (SIGTERM, SIGHUP; Ctrl-C too when no terminal is raw): the library kills the command
      // when this process's connection closes.
      if (raw) raw->restore();
      SignalGuard::die_by(sig);
    }
    if (done) break;
    pollfd p[3] = {{guard.read_fd(), POLLIN, 0}, {winch.read_fd(), POLLIN, 0}, {stdin_open ? STDIN_FILENO : -1, POLLIN, 0}};
    if (::poll(p, 3, -1) < 0) continue;  // EINTR
    if (p[1].revents & POLLIN) {
      winch.drain();
      if (tty)
        if (auto size = terminal_size(STDOUT_FILENO)) {
          try {
            control.resize(size->first, size->second);
          } catch (const Error&) {  // the command ended meanwhile: its completion follows
          }
        }
    }
    if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n > 0) {
        try {
          control.write_stdin(std::string_view(buf, static_cast<size_t>(n)));
        } catch (const Error&) {
          stdin_open = false;
        }
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        stdin_open = false;
        control.close_stdin();
      }
    }
  }
  if (raw) raw->restore();

  std::lock_guard<std::mutex> lock(completion->mu);
  if (completion->error) return status_for_start_error(*completion->error);
  return status_for_result(completion->result, cmd);
}

}  // namespace sandlet::cli
