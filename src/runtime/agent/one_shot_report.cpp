#include "runtime/agent/one_shot_report.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/error.hpp"
#include "runtime/agent/agent_client.hpp"

namespace sandlet {

OneShotReport::OneShotReport(std::string id, uint64_t timeout_ms)
    : id_(std::move(id)), backstop_(exec_backstop(timeout_ms)) {
  if (backstop_) deadline_ = std::chrono::steady_clock::now() + *backstop_;
}

int OneShotReport::poll_timeout_ms() const {
  if (!backstop_) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - std::chrono::steady_clock::now());
  if (left.count() <= 0) throw_backstop();
  return static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

void OneShotReport::throw_backstop() const {
  throw Error(Code::kDeadlineExceeded, "sandbox " + id_ + " did not report its command's end within " +
                                           std::to_string(backstop_ ? backstop_->count() : 0) +
                                           " ms (the command's timeout plus a grace period): it is stuck or broken");
}

ExecOutcome OneShotReport::read_blocking(int fd) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, poll_timeout_ms());
    if (r < 0 && errno != EINTR) throw_errno("poll the report of sandbox " + id_);
    if (r <= 0) continue;  // EINTR, or the backstop (poll_timeout_ms throws)
    if (auto out = read_some(fd)) return *out;
  }
}

std::optional<ExecOutcome> OneShotReport::read_some(int fd) {
  const ssize_t n = ::read(fd, reader_.space(), reader_.space_size());
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN) return std::nullopt;
    throw_errno("read the report of sandbox " + id_);
  }
  if (n == 0)
    throw Error(Code::kUnavailable, reader_.mid_frame()
                                        ? "sandbox " + id_ + " ended while reporting its command's exit"
                                        : "sandbox " + id_ + " ended before its command did (killed or destroyed)");
  switch (reader_.commit(static_cast<size_t>(n))) {
    case proto::FrameReader::Result::kNeedMore: return std::nullopt;
    case proto::FrameReader::Result::kBad:
      throw Error(Code::kInternal, "sandbox " + id_ + " sent a malformed report: " + reader_.error());
    case proto::FrameReader::Result::kFrame: break;
  }
  return conclude();
}

std::optional<ExecOutcome> OneShotReport::feed(std::string_view bytes) {
  switch (reader_.take(bytes)) {
    case proto::FrameReader::Result::kNeedMore: return std::nullopt;
    case proto::FrameReader::Result::kBad:
      throw Error(Code::kInternal, "sandbox " + id_ + " sent a malformed report: " + reader_.error());
    case proto::FrameReader::Result::kFrame: break;
  }
  return conclude();
}

std::optional<ExecOutcome> OneShotReport::conclude() {
  const auto type = static_cast<proto::InitMsg>(reader_.type());
  if (type == proto::InitMsg::kError) {
    proto::ErrorReply err;
    if (!proto::ErrorReply::decode(reader_.payload(), &err))
      throw Error(Code::kInternal, "sandbox " + id_ + " sent a malformed error report");
    throw Error(static_cast<Code>(err.code), err.message, err.err_no);
  }
  proto::ExitStatus exit;
  if (type != proto::InitMsg::kRunExit)
    throw Error(Code::kInternal, "sandbox " + id_ + " sent an unexpected report (not an exit or an error)");
  if (!proto::ExitStatus::decode(reader_.payload(), &exit))
    throw Error(Code::kInternal, "sandbox " + id_ + " sent a malformed exit status");
  ExecOutcome out;
  out.exit_code = exit.exit_code;
  out.signal = exit.signal;
  out.timed_out = exit.flags & proto::kExitTimedOut;
  out.run_ns = exit.run_ns;
  return out;
}

}  // namespace sandlet
