// The exit watch of a sandbox this process started: an asio descriptor over its backend object's
// exit_fd(). The descriptor stays the object's: the watch never closes it (it is released, which also
// takes it out of the reactor), and it keeps the object alive for as long as it exists, so that the number
// it watches cannot be closed and reused under it. (A duplicate per sandbox would do too, but every open
// descriptor is copied into each new sandbox's first process at clone time.) Destroy it on the loop thread,
// or once the loop has stopped (EventLoop::dispose).
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <memory>

#include "backends/backend.hpp"

namespace sandlet {

class ExitWatch final {
 public:
  ExitWatch(boost::asio::io_context& io, std::shared_ptr<BackendSandbox> impl)
      : impl_(std::move(impl)), desc_(io, impl_->exit_fd()) {}
  ~ExitWatch() {
    boost::system::error_code ignored;
    desc_.cancel(ignored);
    (void)desc_.release();
  }
  ExitWatch(const ExitWatch&) = delete;
  ExitWatch& operator=(const ExitWatch&) = delete;
  boost::asio::posix::stream_descriptor& descriptor() { return desc_; }

 private:
  std::shared_ptr<BackendSandbox> impl_;  // declared first: destroyed after the descriptor is released
  boost::asio::posix::stream_descriptor desc_;
};

}  // namespace sandlet
