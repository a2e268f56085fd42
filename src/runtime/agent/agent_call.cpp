#include "runtime/agent/agent_call.hpp"

#include "common/error.hpp"

namespace asio = boost::asio;

namespace sandlet {
namespace {

// A frame the reader refused: another protocol version is a sandbox made by another sandlet release (or
// an agent that lies about it); anything else is an agent that breaks the protocol.
Error bad_frame_error(const proto::FrameReader& reader) {
  if (reader.error_kind() == proto::HeaderCheck::kBadVersion)
    return Error(Code::kFailedPrecondition,
                 "sandbox agent speaks agent protocol version " + std::to_string(reader.header().version) +
                     ", this library version " + std::to_string(proto::kAgentVersion) +
                     " (a sandbox made by another sandlet release?)");
  return Error(Code::kInternal, "sandbox agent broke the protocol: " + reader.error());
}

}  // namespace

AgentCall::AgentCall(asio::io_context& io, FrameHandler on_frame, Done done)
    : io_(io), socket_(io), on_frame_(std::move(on_frame)), done_(std::move(done)) {}

std::shared_ptr<AgentCall> AgentCall::start(asio::io_context& io, sys::UniqueFd fd, std::string request_frames,
                                            FrameHandler on_frame, Done done,
                                            std::optional<std::chrono::milliseconds> deadline) {
  auto call = std::make_shared<AgentCall>(io, std::move(on_frame), std::move(done));
  call->socket_.assign(asio::local::stream_protocol(), fd.release());
  call->queued_ = request_frames.size();
  call->outgoing_.push_back(std::move(request_frames));
  asio::post(io, [call, deadline] {
    if (deadline) call->arm_deadline(*deadline);
    call->write_next();
    call->read_next();
  });
  return call;
}

void AgentCall::send(std::string frame) {
  auto self = shared_from_this();
  {
    std::lock_guard lock(queue_mu_);
    queued_ += frame.size();
  }
  asio::post(socket_.get_executor(), [self, frame = std::move(frame)]() mutable {
    if (self->finished_) return self->wrote(frame.size());
    self->outgoing_.push_back(std::move(frame));
    self->write_next();
  });
}

bool AgentCall::wait_queue_below(uint64_t bytes) {
  std::unique_lock lock(queue_mu_);
  if (io_.get_executor().running_in_this_thread()) return !done_writing_;
  queue_cv_.wait(lock, [&] { return done_writing_ || queued_ <= bytes; });
  return !done_writing_;
}

void AgentCall::wrote(size_t n) {
  std::lock_guard lock(queue_mu_);
  queued_ -= n;
  queue_cv_.notify_all();
}

// One write in flight at a time; a write error shows up as a read error too, reported there.
void AgentCall::write_next() {
  if (writing_ || outgoing_.empty() || finished_) return;
  writing_ = true;
  auto self = shared_from_this();
  asio::async_write(socket_, asio::buffer(outgoing_.front()), [self](boost::system::error_code ec, size_t) {
    self->writing_ = false;
    if (ec) return;
    self->wrote(self->outgoing_.front().size());
    self->outgoing_.pop_front();
    self->write_next();
  });
}

void AgentCall::abort() {
  auto self = shared_from_this();
  asio::post(socket_.get_executor(), [self] {
    boost::system::error_code ignored;
    self->socket_.close(ignored);
    self->finish(std::make_exception_ptr(Error(Code::kCancelled, "cancelled by the caller")));
  });
}

void AgentCall::cancel(std::string kill_frame, std::chrono::milliseconds grace) {
  auto self = shared_from_this();
  {
    std::lock_guard lock(queue_mu_);
    queued_ += kill_frame.size();  // (written like any frame, so counted like one)
  }
  asio::post(socket_.get_executor(), [self, kill_frame = std::move(kill_frame), grace]() mutable {
    if (self->finished_ || self->cancelled_) return self->wrote(kill_frame.size());
    self->cancelled_ = true;
    self->outgoing_.push_back(std::move(kill_frame));
    self->write_next();
    self->cancel_timer_ = std::make_unique<asio::steady_timer>(self->socket_.get_executor(), grace);
    self->cancel_timer_->async_wait([self](boost::system::error_code ec) {
      if (ec || self->finished_) return;
      boost::system::error_code ignored;
      self->socket_.close(ignored);  // the agent kills what the call started when the connection drops
      self->finish(nullptr);
    });
  });
}

void AgentCall::arm_deadline(std::chrono::milliseconds after) {
  deadline_timer_ = std::make_unique<asio::steady_timer>(socket_.get_executor(), after);
  auto self = shared_from_this();
  deadline_timer_->async_wait([self, after](boost::system::error_code ec) {
    if (ec || self->finished_) return;
    boost::system::error_code ignored;
    self->socket_.close(ignored);  // the agent kills what the call started when the connection drops
    self->finish(std::make_exception_ptr(Error(
        Code::kDeadlineExceeded, "sandbox agent did not complete the call within " + std::to_string(after.count()) +
                                     " ms (the command's timeout plus a grace period): it is stuck or broken")));
  });
}

// The reader allocates a payload only after its header passed, and only as large as that type may be.
void AgentCall::read_next() {
  if (finished_) return;
  auto self = shared_from_this();
  const bool staged = reader_.space_size() < sizeof stage_;
  auto buffer = staged ? asio::buffer(stage_) : asio::buffer(reader_.space(), reader_.space_size());
  socket_.async_read_some(buffer, [self, staged](boost::system::error_code ec, size_t n) {
    if (self->finished_) return;
    if (ec) {
      self->on_read_error(ec);
      return;
    }
    self->on_read(staged, n);
  });
}

void AgentCall::on_read(bool staged, size_t n) {
  using Result = proto::FrameReader::Result;
  if (!staged) {
    const Result r = reader_.commit(n);
    if (r == Result::kBad) return finish(std::make_exception_ptr(bad_frame_error(reader_)));
    if (r == Result::kFrame && !deliver()) return;
    return read_next();
  }
  std::string_view in(stage_, n);
  while (!in.empty()) {
    const Result r = reader_.take(in);
    if (r == Result::kBad) return finish(std::make_exception_ptr(bad_frame_error(reader_)));
    if (r == Result::kFrame && !deliver()) return;  // (bytes after the final frame are ignored)
  }
  read_next();
}

bool AgentCall::deliver() {
  ++frames_;
  bool final_frame = false;
  try {
    final_frame = on_frame_(static_cast<proto::AgentMsg>(reader_.type()), reader_.payload());
  } catch (...) {
    finish(std::current_exception());
    return false;
  }
  if (final_frame) finish(nullptr);
  return !final_frame;
}

void AgentCall::on_read_error(const boost::system::error_code& ec) {
  std::string what;
  if (reader_.mid_frame())
    what = "sandbox agent connection lost mid-frame";
  else if (frames_ == 0)
    what = "sandbox agent closed the connection before replying (sandbox destroyed or dead?)";
  else
    what = "sandbox agent closed the connection before the request completed (sandbox destroyed or dead?)";
  finish(std::make_exception_ptr(Error(Code::kUnavailable, what + ": " + ec.message())));
}

void AgentCall::finish(std::exception_ptr error) {
  if (finished_) return;
  finished_ = true;
  {
    std::lock_guard lock(queue_mu_);
    done_writing_ = true;
    queue_cv_.notify_all();
  }
  if (cancel_timer_) cancel_timer_->cancel();
  if (deadline_timer_) deadline_timer_->cancel();
  if (cancelled_) error = std::make_exception_ptr(Error(Code::kCancelled, "cancelled by the caller"));
  boost::system::error_code ignored;
  socket_.close(ignored);
  auto done = std::move(done_);
  on_frame_ = nullptr;
  if (done) done(error);
}

}  // namespace sandlet
