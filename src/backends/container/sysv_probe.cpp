#include "backends/container/sysv_probe.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace sandlet::container {
namespace {

// True when the file lists an object: any line after its header (or when it cannot be read whole).
bool lists_objects(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char buf[4096];
  size_t have = 0;
  bool failed = false;
  while (have < sizeof buf) {
    const ssize_t n = ::read(fd, buf + have, sizeof buf - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) failed = true;
    if (n <= 0) break;
    have += static_cast<size_t>(n);
  }
  ::close(fd);
  if (failed || have == sizeof buf) return true;  // a full buffer: far more than the header alone
  return std::count(buf, buf + have, '\n') != 1;
}

}  // namespace

SysvProbe::~SysvProbe() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  asked_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool SysvProbe::answer(int ipc_ns_fd, int home_fd) {
  if (home_fd < 0 || ::setns(ipc_ns_fd, CLONE_NEWIPC) != 0) return true;
  bool found = false;
  for (const char* f : {"/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg"})
    if (!found && lists_objects(f)) found = true;
  // Back home: a thread left in a sandbox's namespace would keep it, and every object in it, alive after
  // the sandbox is gone.
  if (::setns(home_fd, CLONE_NEWIPC) != 0) found = true;
  return found;
}

void SysvProbe::serve() {
  // The namespace this thread started in (the process's), opened before it joins any other.
  const int home_fd = ::open("/proc/thread-self/ns/ipc", O_RDONLY | O_CLOEXEC);
  std::unique_lock lock(mutex_);
  for (;;) {
    asked_.wait(lock, [&] { return stopping_ || !questions_.empty(); });
    if (questions_.empty()) break;  // stopping, nothing left to answer
    Question* q = questions_.front();
    questions_.pop_front();
    lock.unlock();
    const bool a = answer(q->fd, home_fd);
    lock.lock();
    q->answer = a;
    q->answered = true;
    answered_.notify_all();
  }
  lock.unlock();
  if (home_fd >= 0) ::close(home_fd);
}

bool SysvProbe::has_objects(int ipc_ns_fd) {
  if (ipc_ns_fd < 0) return true;
  Question q;
  q.fd = ipc_ns_fd;
  std::unique_lock lock(mutex_);
  if (stopping_) return true;
  if (!thread_.joinable()) thread_ = std::thread([this] { serve(); });
  questions_.push_back(&q);
  asked_.notify_one();
  answered_.wait(lock, [&] { return q.answered; });
  return q.answer;
}

}  // namespace sandlet::container
