#include "completion_queue.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sandlet_py {

CompletionQueue::CompletionQueue() : efd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (efd_ < 0) {
    const int e = errno;
    throw sandlet::Error(SANDLET_RESOURCE_EXHAUSTED, std::string("completion queue: eventfd: ") + std::strerror(e), e);
  }
}

CompletionQueue::~CompletionQueue() {
  if (efd_ >= 0) close(efd_);
}

void CompletionQueue::push(Completion c) noexcept {
  bool was_empty;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was_empty = items_.empty();
    items_.push_back(std::move(c));
  }
  // One wake-up per batch: the reader drains everything at once.
  if (was_empty) {
    const uint64_t one = 1;
    ssize_t n;
    do {
      n = write(efd_, &one, sizeof one);
    } while (n < 0 && errno == EINTR);
  }
}

std::vector<Completion> CompletionQueue::take() {
  std::vector<Completion> out;
  std::lock_guard<std::mutex> lock(mu_);
  // Reset the counter under the lock: a push after this sees an empty queue and signals again.
  uint64_t value;
  ssize_t n;
  do {
    n = read(efd_, &value, sizeof value);
  } while (n < 0 && errno == EINTR);
  out.swap(items_);
  return out;
}

void CompletionQueue::wait_readable(int timeout_ms) const {
  // EINTR returns early on purpose: the caller then checks Python's signal handlers (Ctrl-C).
  pollfd p{efd_, POLLIN, 0};
  (void)poll(&p, 1, timeout_ms);
}

}  // namespace sandlet_py
