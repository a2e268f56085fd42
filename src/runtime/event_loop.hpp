// The runtime's event loop: one thread running a Boost.Asio io_context that drives every agent
// connection, exit watcher and asynchronous completion. Completions always run on this thread.
#pragma once
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace sandlet {

class EventLoop final {
 public:
  EventLoop() = default;
  ~EventLoop() { stop(); }
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  void start();
  // Lets the loop run out of work (pending handlers and watchers still run), then joins it. Idempotent.
  void stop();

  boost::asio::io_context& io() { return io_; }
  bool on_loop_thread() const { return std::this_thread::get_id() == thread_id_; }
  // Blocking calls from a completion would deadlock: FAILED_PRECONDITION instead.
  void check_not_on_loop(const char* what) const;
  template <class F>
  void post(F&& f) {
    boost::asio::post(io_, std::forward<F>(f));
  }
  // Destroys `obj` (an asio object bound to this loop) on the loop thread, where it may have operations
  // pending; once the loop has stopped, here.
  template <class T>
  void dispose(std::unique_ptr<T> obj) {
    if (!obj) return;
    std::unique_lock lock(mutex_);
    if (stopped_) {
      lock.unlock();
      obj.reset();
      return;
    }
    boost::asio::post(io_, [held = std::shared_ptr<T>(std::move(obj))]() mutable { held.reset(); });
  }

 private:
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread thread_;
  std::thread::id thread_id_;
  std::mutex mutex_;
  bool stopped_ = false;
};

}  // namespace sandlet
