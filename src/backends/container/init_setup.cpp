#include "backends/container/init_setup.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "common/error.hpp"
#include "proto/frame_reader.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::container {
namespace {

// What a stuck init is doing, for the error message: state and kernel wait channel.
std::string describe_stuck(pid_t pid) {
  std::string base = "/proc/" + std::to_string(pid);
  auto stat = sys::read_file_if_exists(base + "/stat", 4096).value_or("?");
  auto wchan = sys::read_file_if_exists(base + "/wchan", 256).value_or("?");
  auto stack = sys::read_file_if_exists(base + "/stack", 4096).value_or("");
  size_t p = stat.rfind(')');
  std::string state = p != std::string::npos && p + 2 < stat.size() ? stat.substr(p + 2, 1) : "?";
  for (auto& c : stack)
    if (c == '\n') c = ' ';
  return "init pid " + std::to_string(pid) + " state " + state + ", waiting in " + wchan + " [" + stack + "]";
}

// Reads one frame from the setup socket, waiting at most `timeout_ms` in all; false at end of file. Reads
// never go past the frame: a one-shot sandbox's report follows on the same socket.
bool read_setup_frame(int fd, proto::FrameReader& reader, int timeout_ms, pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    int r = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r == 0)
      throw Error(Code::kDeadlineExceeded, "sandbox init did not report ready within " +
                                               std::to_string(timeout_ms / 1000) + " s (" + describe_stuck(pid) + ")");
    ssize_t n = ::read(fd, reader.space(), reader.space_size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    switch (reader.commit(static_cast<size_t>(n))) {
      case proto::FrameReader::Result::kNeedMore: continue;
      case proto::FrameReader::Result::kFrame: return true;
      case proto::FrameReader::Result::kBad:
        throw Error(Code::kInternal, "sandbox init broke its set-up protocol: " + reader.error());
    }
  }
}

}  // namespace

std::string describe_init_exit(int pidfd) {
  siginfo_t info = {};
  if (::waitid(P_PIDFD, static_cast<id_t>(pidfd), &info, WEXITED | WNOWAIT | WNOHANG | __WALL) == 0 &&
      info.si_pid != 0) {
    if (info.si_code == CLD_EXITED) {
      switch (info.si_status) {
        case 119: return "could not join its v1 cgroups";
        case 120: return "could not be started";
        case 121: return "could not switch to root inside its user namespace";
        case 122: return "could not open /dev/null";
        case 123:
        case 124:
        case 125: return "could not place its descriptors";
        case 126: return "could not exec the embedded init";
        default: return "exit status " + std::to_string(info.si_status);
      }
    }
    return "killed by signal " + std::to_string(info.si_status);
  }
  return "no exit status";
}

void expect_setup_reply(int setup_fd, int init_pidfd, pid_t init_pid, proto::InitMsg want, const char* step,
                        int timeout_ms) {
  proto::FrameReader reader(proto::kInitToHost);
  if (!read_setup_frame(setup_fd, reader, timeout_ms, init_pid))
    throw Error(Code::kInternal, std::string("sandbox init exited during ") + step + " (" + describe_init_exit(init_pidfd) + ")");
  check_setup_reply(static_cast<proto::InitMsg>(reader.type()), reader.payload(), want, step);
}

void check_setup_reply(proto::InitMsg type, std::string_view payload, proto::InitMsg want, const char* step) {
  if (type == proto::InitMsg::kError) {
    proto::ErrorReply err;
    if (!proto::ErrorReply::decode(payload, &err))
      throw Error(Code::kInternal, std::string("sandbox init sent a malformed error during ") + step);
    throw Error(static_cast<Code>(err.code), "sandbox setup failed: " + err.message, err.err_no);
  }
  if (type != want) {
    const proto::FrameType* got = proto::kInitToHost.find(static_cast<uint8_t>(type));
    throw Error(Code::kInternal, std::string("sandbox init sent '") + (got ? got->name : "?") + "' during " + step);
  }
}

}  // namespace sandlet::container
