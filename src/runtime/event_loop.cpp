#include "runtime/event_loop.hpp"

#include <string>

#include "common/error.hpp"

namespace sandlet {

void EventLoop::start() {
  work_.emplace(boost::asio::make_work_guard(io_));
  thread_ = std::thread([this] {
    for (;;) {
      try {
        io_.run();
        break;
      } catch (...) {
        // A handler threw past its own guard: keep the loop alive; the handler's caller got its error.
      }
    }
  });
  // Known without waiting for the thread to run: nothing reaches the loop before the runtime's open returns.
  thread_id_ = thread_.get_id();
}

void EventLoop::stop() {
  work_.reset();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopped_ = true;  // from now on dispose() works inline
  }
  // What was posted while the thread was leaving runs here, on the stopping thread.
  io_.restart();
  io_.poll();
}

void EventLoop::check_not_on_loop(const char* what) const {
  if (on_loop_thread())
    throw Error(Code::kFailedPrecondition,
                std::string(what) + ": blocking call from a completion callback (use the _async form)");
}

}  // namespace sandlet
