// One request to a sandbox's agent over the channel its backend provides, driven by the runtime's Asio
// event loop: sends the request frames, then reads the replies through the one frame reader
// (proto/frame_reader.hpp: every header checked against the agent -> host table before its payload is
// read) and hands each frame to a handler until it reports the final one. A broken or forged agent can
// only fail this call: a bad frame, an early end of the connection or a missed deadline completes it with
// an error; nothing it sends is allocated beyond its type's maximum.
#pragma once
#include <boost/asio.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "proto/agent_protocol.hpp"
#include "proto/frame_reader.hpp"
#include "sys/fd.hpp"

namespace sandlet {

class AgentCall final : public std::enable_shared_from_this<AgentCall> {
 public:
  // Returns true when `type` was the final frame of the call; throws to fail the call.
  using FrameHandler = std::function<bool(proto::AgentMsg type, std::string_view payload)>;
  using Done = std::function<void(std::exception_ptr)>;

  // Starts the exchange on `io`'s thread over `connected`, a stream connected to the agent (the backend
  // made it: a Unix socket for containers). `done` runs exactly once, on the loop thread. With a
  // `deadline`, a call whose final reply has not come by then is closed and completes with
  // DEADLINE_EXCEEDED (the host's backstop against a silent agent; the agent enforces timeouts itself).
  static std::shared_ptr<AgentCall> start(boost::asio::io_context& io, sys::UniqueFd connected,
                                          std::string request_frames, FrameHandler on_frame, Done done,
                                          std::optional<std::chrono::milliseconds> deadline = std::nullopt);
  // Closes the connection; the agent then kills whatever the call started. The call completes with
  // CANCELLED (unless it already completed). Thread-safe.
  void abort();
  // Cancels an exec deterministically: sends `kill_frame` (SIGKILL to every process of the exec) and
  // completes with CANCELLED once the agent reports the exit — so when the caller hears CANCELLED nothing
  // of the command runs any more. If no exit comes within `grace`, falls back to abort(). Thread-safe.
  void cancel(std::string kill_frame, std::chrono::milliseconds grace);
  // Queues one more frame to the agent (e.g. a signal for a running exec). Thread-safe.
  void send(std::string frame);
  // Blocks while more than `bytes` of queued frames wait to be written, so that a fast producer of stdin
  // cannot queue without bound; returns at once once the call finished, or on the loop thread itself
  // (which would wait on its own writes). False once the call finished.
  bool wait_queue_below(uint64_t bytes);

  AgentCall(boost::asio::io_context& io, FrameHandler on_frame, Done done);

 private:
  void write_next();
  void wrote(size_t n);  // a frame of `n` bytes left the queue
  void read_next();
  void on_read(bool staged, size_t n);
  bool deliver();  // hands the reader's frame to the handler; false once the call finished
  void on_read_error(const boost::system::error_code& ec);
  void arm_deadline(std::chrono::milliseconds after);
  void finish(std::exception_ptr error);

  boost::asio::io_context& io_;
  boost::asio::local::stream_protocol::socket socket_;
  std::deque<std::string> outgoing_;  // front is being written
  std::mutex queue_mu_;                // guards queued_ and done_writing_ for wait_queue_below
  std::condition_variable queue_cv_;
  uint64_t queued_ = 0;                // bytes sent through send() and not written yet
  bool done_writing_ = false;          // the call finished: nothing more is written
  bool writing_ = false;
  proto::FrameReader reader_{proto::kAgentToHost};
  // Small frames are read many per system call through this (a forged agent's one-byte frames would
  // otherwise cost the loop two reads each); large payloads go straight into the reader.
  char stage_[4096];
  size_t frames_ = 0;  // replies received so far
  FrameHandler on_frame_;
  Done done_;
  bool finished_ = false;
  bool cancelled_ = false;
  std::unique_ptr<boost::asio::steady_timer> cancel_timer_;
  std::unique_ptr<boost::asio::steady_timer> deadline_timer_;
};

}  // namespace sandlet
