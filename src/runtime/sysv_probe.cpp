#include "runtime/sysv_probe.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace sandlet {
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

bool SysvProbe::answer(int ipc_ns_fd) {
  if (::setns(ipc_ns_fd, CLONE_NEWIPC) != 0) return true;
  for (const char* f : {"/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg"})
    if (lists_objects(f)) return true;
  return false;
}

void SysvProbe::serve() {
  std::unique_lock lock(mutex_);
  for (;;) {
    asked_.wait(lock, [&] { return stopping_ || !questions_.empty(); });
    if (questions_.empty()) return;  // stopping, nothing left to answer
    Question* q = questions_.front();
    questions_.pop_front();
    lock.unlock();
    const bool a = answer(q->fd);
    lock.lock();
    q->answer = a;
    q->answered = true;
    answered_.notify_all();
  }
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

}  // namespace sandlet
