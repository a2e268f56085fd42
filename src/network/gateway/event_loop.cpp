#include "network/gateway/event_loop.hpp"

#include <cerrno>
#include <exception>

#include "common/error.hpp"

namespace sandlet::netgw {

EventLoop::EventLoop() : epfd_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (!epfd_) throw_errno("epoll_create1");
}

void EventLoop::add(int fd, uint32_t events, Handler* h) {
  epoll_event e{};
  e.events = events;
  e.data.ptr = h;
  if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &e) != 0) throw_errno("epoll add");
}

void EventLoop::modify(int fd, uint32_t events, Handler* h) {
  epoll_event e{};
  e.events = events;
  e.data.ptr = h;
  if (::epoll_ctl(epfd_.get(), EPOLL_CTL_MOD, fd, &e) != 0) throw_errno("epoll modify");
}

void EventLoop::remove(int fd) noexcept { (void)::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, fd, nullptr); }

void EventLoop::run_once(int timeout_ms) {
  epoll_event events[64];
  const int n = ::epoll_wait(epfd_.get(), events, 64, timeout_ms);
  for (int i = 0; i < n; ++i) {
    auto* h = static_cast<Handler*>(events[i].data.ptr);
    if (h->retired) continue;
    try {
      h->on_event(events[i].events);
    } catch (const std::exception& e) {
      if (on_error) on_error(e.what());
    } catch (...) {
      if (on_error) on_error("an unknown exception");
    }
  }
  // Newest first: a handler retired after its owner in the same batch may still refer to it (a resolver
  // session to its sandbox's port).
  while (!graveyard_.empty()) graveyard_.pop_back();
}

void EventLoop::retire(std::unique_ptr<Handler> h) {
  h->retired = true;
  graveyard_.push_back(std::move(h));
}

}  // namespace sandlet::netgw
