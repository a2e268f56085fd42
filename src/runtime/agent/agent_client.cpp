#include "runtime/agent/agent_client.hpp"

#include <algorithm>

#include <linux/limits.h>
#include <sys/resource.h>

#include "common/error.hpp"
#include "proto/arg_limits.hpp"

namespace sandlet {
namespace {

constexpr size_t kChunk = 256 * 1024;  // stdin and file data per frame

void append_chunked(std::string& frames, proto::AgentMsg type, std::string_view data) {
  for (size_t off = 0; off < data.size(); off += kChunk) frames += proto::frame(type, data.substr(off, kChunk));
}

uint64_t host_stack_limit() {
  struct rlimit r;
  if (::getrlimit(RLIMIT_STACK, &r) != 0) return 8u << 20;
  return r.rlim_cur == RLIM_INFINITY ? ~0ull : static_cast<uint64_t>(r.rlim_cur);
}

void check_path(const std::string& path) {
  if (path.empty() || path[0] != '/')
    throw Error(Code::kInvalidArgument, "invalid file path '" + path + "': must be absolute inside the sandbox");
  if (path.size() >= PATH_MAX)
    throw Error(Code::kInvalidArgument, "invalid file path: " + std::to_string(path.size()) +
                                            " bytes, over the kernel's limit of " + std::to_string(PATH_MAX - 1) +
                                            " (PATH_MAX)");
}

const char* stream_name(int stream) { return stream == 1 ? "stdout" : "stderr"; }

// "unexpected 'pong' reply to an exec"
[[noreturn]] void unexpected(proto::AgentMsg type, const char* request) {
  const proto::FrameType* t = proto::kAgentToHost.find(static_cast<uint8_t>(type));
  throw Error(Code::kInternal, std::string("sandbox agent broke the protocol: unexpected '") + (t ? t->name : "?") +
                                   "' reply to " + request);
}

}  // namespace

[[noreturn]] void throw_protocol_violation(const std::string& what) {
  throw Error(Code::kInternal, "sandbox agent broke the protocol: " + what);
}

[[noreturn]] void throw_agent_error(std::string_view payload) {
  proto::ErrorReply err;
  if (!proto::ErrorReply::decode(payload, &err)) throw_protocol_violation("malformed error reply");
  throw Error(static_cast<Code>(err.code), err.message, err.err_no);
}

// ---- requests --------------------------------------------------------------------------------------------

void check_command_args(const std::vector<std::string>& argv, const std::vector<std::string>& env, const char* what) {
  const proto::ArgProblem p = proto::check_exec_args(argv, env, host_stack_limit);
  if (!p.ok()) throw Error(Code::kInvalidArgument, proto::describe(p, what), E2BIG);
}

std::string exec_request_frames(const proto::ExecRequest& req, std::string_view stdin_data, bool stdin_open) {
  check_command_args(req.argv, req.env, "exec");
  std::string payload = req.encode();
  if (payload.size() > proto::kMaxExecRequest)
    throw Error(Code::kInvalidArgument, "invalid exec request: " + std::to_string(payload.size()) +
                                            " bytes, over the agent protocol's limit of " +
                                            std::to_string(proto::kMaxExecRequest) + " (fields 'cwd' and 'user' too long?)");
  std::string frames = proto::frame(proto::AgentMsg::kExec, payload);
  append_chunked(frames, proto::AgentMsg::kStdin, stdin_data);
  if (!stdin_data.empty() && !stdin_open) frames += proto::frame(proto::AgentMsg::kStdinEof, "");
  return frames;
}

std::string stdin_frames(std::string_view data) {
  std::string frames;
  append_chunked(frames, proto::AgentMsg::kStdin, data);
  return frames;
}

std::string stdin_eof_frame() { return proto::frame(proto::AgentMsg::kStdinEof, ""); }

std::string resize_frame(const proto::TermSize& size) { return proto::frame(proto::AgentMsg::kResize, size.encode()); }

std::string signal_frame(int signo) {
  return proto::frame(proto::AgentMsg::kSignal, proto::encode_u32(static_cast<uint32_t>(signo)));
}

std::string write_file_frames(const std::string& path, std::string_view data, uint32_t mode) {
  check_path(path);
  proto::WriteFileRequest req;
  req.path = path;
  req.mode = mode ? mode : 0644;
  std::string frames = proto::frame(proto::AgentMsg::kWriteFile, req.encode());
  append_chunked(frames, proto::AgentMsg::kFileData, data);
  frames += proto::frame(proto::AgentMsg::kFileEof, "");
  return frames;
}

std::string read_file_frame(const std::string& path, uint64_t max_bytes) {
  check_path(path);
  proto::ReadFileRequest req;
  req.path = path;
  req.max_bytes = max_bytes;
  return proto::frame(proto::AgentMsg::kReadFile, req.encode());
}

std::optional<std::chrono::milliseconds> exec_backstop(uint64_t timeout_ms) {
  constexpr uint64_t kMaxMs = 1ull << 40;  // ~35 years: "never" (as the agent reads it)
  if (timeout_ms == 0 || timeout_ms >= kMaxMs) return std::nullopt;
  return std::chrono::milliseconds(timeout_ms) + kBackstopGrace;
}

std::chrono::milliseconds file_backstop(uint64_t bytes) {
  constexpr uint64_t kBytesPerMs = (4u << 20) / 1000;
  return std::chrono::milliseconds(60000 + std::min<uint64_t>(bytes, 1ull << 40) / kBytesPerMs);
}

// ---- replies ---------------------------------------------------------------------------------------------

ExecReplies::ExecReplies(uint64_t output_limit, OnOutput on_output)
    : limit_(output_limit), on_output_(std::move(on_output)) {}

bool ExecReplies::on_frame(proto::AgentMsg type, std::string_view payload) {
  using proto::AgentMsg;
  switch (type) {
    case AgentMsg::kError:
      throw_agent_error(payload);
    case AgentMsg::kStarted:
      if (started_) throw_protocol_violation("a second 'started' reply to one exec");
      started_ = true;
      return false;
    case AgentMsg::kStdout:
    case AgentMsg::kStderr: {
      const int stream = type == AgentMsg::kStdout ? 1 : 2;
      if (!started_) throw_protocol_violation(std::string(stream_name(stream)) + " before the exec started");
      uint64_t& got = received_[stream - 1];
      // The agent stops at the limit; a host that trusted it would buffer whatever a forged one sends.
      if (payload.size() > limit_ - got)
        throw_protocol_violation("more " + std::string(stream_name(stream)) + " than the exec's output limit of " +
                                 std::to_string(limit_) + " bytes");
      got += payload.size();
      if (on_output_) {
        try {
          on_output_(stream, payload);
        } catch (...) {
          // A throwing output callback must not tear the connection; drop the exception.
        }
      } else {
        (stream == 1 ? outcome.stdout_data : outcome.stderr_data).append(payload);
      }
      return false;
    }
    case AgentMsg::kExit: {
      if (!started_) throw_protocol_violation("an exit status before the exec started");
      proto::ExitStatus st;
      if (!proto::ExitStatus::decode(payload, &st)) throw_protocol_violation("malformed exit status");
      outcome.exit_code = st.exit_code;
      outcome.signal = st.signal;
      outcome.timed_out = st.flags & proto::kExitTimedOut;
      outcome.stdout_truncated = st.flags & proto::kExitStdoutTruncated;
      outcome.stderr_truncated = st.flags & proto::kExitStderrTruncated;
      outcome.run_ns = st.run_ns;
      return true;
    }
    default:
      unexpected(type, "an exec");
  }
}

bool ReadFileReplies::on_frame(proto::AgentMsg type, std::string_view payload) {
  switch (type) {
    case proto::AgentMsg::kError:
      throw_agent_error(payload);
    case proto::AgentMsg::kFileChunk:
      if (payload.size() > max_ - data.size())
        throw Error(Code::kOutOfRange, "file larger than the read limit of " + std::to_string(max_) + " bytes");
      data.append(payload);
      return false;
    case proto::AgentMsg::kFileDone: {
      proto::FileDone done;
      if (!proto::FileDone::decode(payload, &done)) throw_protocol_violation("malformed file-done reply");
      if (done.size != data.size())
        throw_protocol_violation("file-done reports " + std::to_string(done.size) + " bytes, " +
                                 std::to_string(data.size()) + " were sent");
      mode = done.mode;
      return true;
    }
    default:
      unexpected(type, "a file read");
  }
}

bool write_file_reply(proto::AgentMsg type, std::string_view payload) {
  if (type == proto::AgentMsg::kError) throw_agent_error(payload);
  if (type != proto::AgentMsg::kOk)
    unexpected(type, "a file write");
  return true;
}

bool ping_reply(proto::AgentMsg type, std::string_view payload) {
  if (type == proto::AgentMsg::kError) throw_agent_error(payload);
  if (type != proto::AgentMsg::kPong)
    unexpected(type, "a ping");
  return true;
}

}  // namespace sandlet
