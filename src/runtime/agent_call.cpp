#include "runtime/agent_call.hpp"

#include "common/error.hpp"

namespace asio = boost::asio;

namespace sandlet {

AgentCall::AgentCall(asio::io_context& io, FrameHandler on_frame, Done done)
    : socket_(io), on_frame_(std::move(on_frame)), done_(std::move(done)) {}

std::shared_ptr<AgentCall> AgentCall::start(asio::io_context& io, sys::UniqueFd fd, std::string request_frames,
                                            FrameHandler on_frame, Done done) {
  auto call = std::make_shared<AgentCall>(io, std::move(on_frame), std::move(done));
  call->socket_.assign(asio::local::stream_protocol(), fd.release());
  call->outgoing_.push_back(std::move(request_frames));
  asio::post(io, [call] {
    call->write_next();
    call->read_header();
  });
  return call;
}

void AgentCall::send(std::string frame) {
  auto self = shared_from_this();
  asio::post(socket_.get_executor(), [self, frame = std::move(frame)]() mutable {
    if (self->finished_) return;
    self->outgoing_.push_back(std::move(frame));
    self->write_next();
  });
}

// One write in flight at a time; a write error shows up as a read error too, reported there.
void AgentCall::write_next() {
  if (writing_ || outgoing_.empty() || finished_) return;
  writing_ = true;
  auto self = shared_from_this();
  asio::async_write(socket_, asio::buffer(outgoing_.front()), [self](boost::system::error_code ec, size_t) {
    self->writing_ = false;
    if (ec) return;
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
  asio::post(socket_.get_executor(), [self, kill_frame = std::move(kill_frame), grace]() mutable {
    if (self->finished_ || self->cancelled_) return;
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

void AgentCall::read_header() {
  auto self = shared_from_this();
  asio::async_read(socket_, asio::buffer(header_, sizeof header_), [self](boost::system::error_code ec, size_t) {
    if (ec) {
      self->finish(std::make_exception_ptr(Error(
          Code::kUnavailable, "sandbox agent closed the connection before replying (sandbox destroyed or dead?): " +
                                  ec.message())));
      return;
    }
    if (!proto::decode_header(self->header_, &self->frame_)) {
      self->finish(std::make_exception_ptr(Error(Code::kInternal, "sandbox agent sent a malformed frame header")));
      return;
    }
    self->read_payload();
  });
}

void AgentCall::read_payload() {
  auto self = shared_from_this();
  payload_.resize(frame_.len);
  asio::async_read(socket_, asio::buffer(payload_), [self](boost::system::error_code ec, size_t) {
    if (ec) {
      self->finish(std::make_exception_ptr(
          Error(Code::kUnavailable, "sandbox agent connection lost mid-frame: " + ec.message())));
      return;
    }
    bool final_frame = false;
    try {
      final_frame = self->on_frame_(self->frame_.type, self->payload_);
    } catch (...) {
      self->finish(std::current_exception());
      return;
    }
    if (final_frame)
      self->finish(nullptr);
    else
      self->read_header();
  });
}

void AgentCall::finish(std::exception_ptr error) {
  if (finished_) return;
  finished_ = true;
  if (cancel_timer_) cancel_timer_->cancel();
  if (cancelled_) error = std::make_exception_ptr(Error(Code::kCancelled, "cancelled by the caller"));
  boost::system::error_code ignored;
  socket_.close(ignored);
  auto done = std::move(done_);
  on_frame_ = nullptr;
  if (done) done(error);
}

}  // namespace sandlet
