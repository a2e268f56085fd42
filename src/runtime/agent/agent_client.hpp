// The host's side of the agent protocol, above the frame reader: the frames of each request (checked
// before anything is sent) and, for each request, the replies it accepts, in the order the agent must
// send them and within the caps the host asked for. What an agent sends is hostile input (root inside the
// sandbox may have replaced it): anything else fails the call with INTERNAL "broke the protocol".
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proto/agent_protocol.hpp"
#include "runtime/agent/exec_outcome.hpp"

namespace sandlet {

// ---- requests --------------------------------------------------------------------------------------------

// The exec request and its stdin (then its end, unless `stdin_open`: more comes through stdin_frames).
// INVALID_ARGUMENT when argv and env exceed the kernel's limits for the stack limit this process has (what
// a container sandbox inherits), naming the sizes and the limit.
std::string exec_request_frames(const proto::ExecRequest& req, std::string_view stdin_data, bool stdin_open = false);
// Later input of an exec that keeps its stdin open, its end, and a new size of its terminal.
std::string stdin_frames(std::string_view data);
std::string stdin_eof_frame();
std::string resize_frame(const proto::TermSize& size);
// The same check for a one-shot run's command ("run" fields).
void check_command_args(const std::vector<std::string>& argv, const std::vector<std::string>& env, const char* what);
std::string signal_frame(int signo);
std::string write_file_frames(const std::string& path, std::string_view data, uint32_t mode);
std::string read_file_frame(const std::string& path, uint64_t max_bytes);
// When the host gives up on a silent agent: the exec's timeout plus a grace period (none without timeout).
std::optional<std::chrono::milliseconds> exec_backstop(uint64_t timeout_ms);
constexpr std::chrono::milliseconds kBackstopGrace{5000};
// The same for a file call moving up to `bytes` (it has no timeout of its own): a minute, plus a second
// for every 4 MiB.
std::chrono::milliseconds file_backstop(uint64_t bytes);

// ---- replies ---------------------------------------------------------------------------------------------

// An exec: kStarted, then stdout/stderr (each at most `output_limit` bytes in all), then kExit; or kError.
class ExecReplies final {
 public:
  using OnOutput = std::function<void(int stream, std::string_view data)>;
  ExecReplies(uint64_t output_limit, OnOutput on_output);
  // True on the final frame; throws the agent's error, or INTERNAL for a frame out of place.
  bool on_frame(proto::AgentMsg type, std::string_view payload);
  ExecOutcome outcome;
  uint64_t received(int stream) const { return received_[stream == 2 ? 1 : 0]; }  // bytes of stdout (1) / stderr (2)

 private:
  uint64_t limit_;
  OnOutput on_output_;
  bool started_ = false;
  uint64_t received_[2] = {0, 0};
};

// A file read: kFileChunk (at most `max_bytes` in all), then kFileDone with the size received; or kError.
class ReadFileReplies final {
 public:
  explicit ReadFileReplies(uint64_t max_bytes) : max_(max_bytes) {}
  bool on_frame(proto::AgentMsg type, std::string_view payload);
  std::string data;
  uint32_t mode = 0;

 private:
  uint64_t max_;
};

// A file write: kOk, or kError.
bool write_file_reply(proto::AgentMsg type, std::string_view payload);
// A ping: kPong, or kError.
bool ping_reply(proto::AgentMsg type, std::string_view payload);

// A kError payload as the Error it carries (INTERNAL when malformed).
[[noreturn]] void throw_agent_error(std::string_view payload);
[[noreturn]] void throw_protocol_violation(const std::string& what);

}  // namespace sandlet
