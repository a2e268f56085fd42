#include "runtime/one_shot_report.hpp"

#include <poll.h>
#include <unistd.h>

#include "common/error.hpp"
#include "proto/agent_protocol.hpp"

namespace sandlet {
namespace {

// Reads exactly n bytes; false at EOF or on error.
bool read_exact(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) {  // the event loop's descriptors are non-blocking
      pollfd w{fd, POLLIN, 0};
      ::poll(&w, 1, -1);
      continue;
    }
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

// The one frame a one-shot sandbox sends when its command has ended: kExit, or kError when it could not
// be started. EOF first means the sandbox died (killed, or destroyed by runtime close).
ExecOutcome read_report(int fd, const std::string& id) {
  char header[proto::kHeaderSize];
  proto::FrameHeader h;
  std::string payload;
  if (!read_exact(fd, header, sizeof header))
    throw Error(Code::kUnavailable, "sandbox " + id + " ended before its command did (killed or destroyed)");
  if (!proto::decode_header(header, &h)) throw Error(Code::kInternal, "sandbox " + id + " sent a malformed report");
  payload.resize(h.len);
  if (!read_exact(fd, payload.data(), payload.size()))
    throw Error(Code::kUnavailable, "sandbox " + id + " ended while reporting its command's exit");
  if (h.type == proto::Msg::kError) {
    proto::ErrorReply err;
    if (!proto::ErrorReply::decode(payload, &err)) throw Error(Code::kInternal, "sandbox " + id + " sent a malformed error");
    throw Error(static_cast<Code>(err.code), err.message, err.err_no);
  }
  proto::ExitStatus exit;
  if (h.type != proto::Msg::kExit || !proto::ExitStatus::decode(payload, &exit))
    throw Error(Code::kInternal, "sandbox " + id + " sent an unexpected report");
  ExecOutcome out;
  out.exit_code = exit.exit_code;
  out.signal = exit.signal;
  out.timed_out = exit.flags & proto::kExitTimedOut;
  out.run_ns = exit.run_ns;
  return out;
}


}  // namespace sandlet
