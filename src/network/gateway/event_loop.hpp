// The gateway's single-threaded epoll loop. Handlers are registered by pointer; a handler retired during a
// batch of events is kept alive until the batch ends (retire()), so a later event of the same batch never
// reaches freed memory.
#pragma once
#include <sys/epoll.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "sys/fd.hpp"

namespace sandlet::netgw {

class Handler {
 public:
  virtual ~Handler() = default;
  virtual void on_event(uint32_t events) = 0;
  bool retired = false;
};

class EventLoop final {
 public:
  EventLoop();
  void add(int fd, uint32_t events, Handler* h);
  void modify(int fd, uint32_t events, Handler* h);
  void remove(int fd) noexcept;
  // Waits up to `timeout_ms` and dispatches; then frees what was retired. A handler that throws does not
  // end the loop: the failure goes to `on_error` and the next event is dispatched.
  void run_once(int timeout_ms);
  void retire(std::unique_ptr<Handler> h);
  std::function<void(const char* what)> on_error;

 private:
  sys::UniqueFd epfd_;
  std::vector<std::unique_ptr<Handler>> graveyard_;
};

}  // namespace sandlet::netgw
