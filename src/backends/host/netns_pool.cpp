#include "backends/host/netns_pool.hpp"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::host {
namespace {

UniqueFd open_own_netns() {
  UniqueFd fd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!fd) throw_errno("open /proc/thread-self/ns/net");
  return fd;
}

// Runs in the new namespace: /proc/sys/net/* files opened now belong to it.
void configure_current() {
  UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock) throw_errno("socket for loopback setup");
  struct ifreq ifr = {};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(sock.get(), SIOCGIFFLAGS, &ifr) < 0) throw_errno("get flags of lo");
  ifr.ifr_flags |= IFF_UP;
  if (::ioctl(sock.get(), SIOCSIFFLAGS, &ifr) < 0) throw_errno("bring lo up");
  sys::write_existing("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0");
  sys::write_existing("/proc/sys/net/ipv4/ping_group_range", "0 2147483647");
}

}  // namespace

UniqueFd NetnsPool::make() {
  UniqueFd home = open_own_netns();
  if (::unshare(CLONE_NEWNET) < 0) throw_errno("unshare network namespace");
  UniqueFd made;
  try {
    configure_current();
    made = open_own_netns();
  } catch (...) {
    ::setns(home.get(), CLONE_NEWNET);
    throw;
  }
  if (::setns(home.get(), CLONE_NEWNET) < 0) throw_errno("return to the host network namespace");
  return made;
}

NetnsPool::NetnsPool(size_t target) : target_(target) {}

NetnsPool::~NetnsPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (prefetch_thread_.joinable()) prefetch_thread_.join();
}

void NetnsPool::prefetch_first() {
  std::lock_guard lock(mutex_);
  if (takes_ > 0 || prefetching_ || prefetch_thread_.joinable() || stopping_) return;
  try {
    prefetch_thread_ = SideThread([this] {
      UniqueFd fd;
      try {
        fd = make();
      } catch (const Error&) {
        // take() then makes its own and reports the error.
      }
      std::lock_guard done(mutex_);
      if (fd) ready_.push_back(std::move(fd));
      prefetching_ = false;
      prefetched_.notify_all();
    });
    prefetching_ = true;
  } catch (const Error&) {
    // No thread to spare: the first take() makes its namespace itself.
  }
}

UniqueFd NetnsPool::pop_ready_locked() {
  // Only a process that creates more than one sandbox gets the refill thread.
  if (++takes_ == 2 && !stopping_ && target_ > 0) thread_ = std::thread([this] { refill_loop(); });
  UniqueFd fd;
  if (!ready_.empty()) {
    fd = std::move(ready_.front());
    ready_.pop_front();
  }
  wake_.notify_one();
  return fd;
}

UniqueFd NetnsPool::take() {
  {
    std::unique_lock lock(mutex_);
    // The first one is on its way. (Still running while prefetching_: it clears that under this lock.)
    if (prefetching_) prefetch_thread_.allow_all_cpus();  // our CPU is free while we wait
    prefetched_.wait(lock, [this] { return !prefetching_; });
    if (UniqueFd fd = pop_ready_locked()) return fd;
  }
  return make();
}

UniqueFd NetnsPool::try_take() {
  std::lock_guard lock(mutex_);
  if (ready_.empty()) return UniqueFd();
  return pop_ready_locked();
}

void NetnsPool::refill_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || ready_.size() < target_; });
    if (stopping_) return;
    lock.unlock();
    UniqueFd fd;
    try {
      fd = make();
    } catch (const Error&) {
      // Creates fall back to making their own and report the error there.
    }
    lock.lock();
    if (!fd) {
      wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; });
      continue;
    }
    ready_.push_back(std::move(fd));
  }
}

ScopedNetns::ScopedNetns(int target) : home_(open_own_netns()) {
  // (Opening our own namespace costs a few microseconds; not worth a cache that could go stale.)
  if (::setns(target, CLONE_NEWNET) < 0) throw_errno("enter the sandbox's network namespace");
}

ScopedNetns::~ScopedNetns() { ::setns(home_.get(), CLONE_NEWNET); }

}  // namespace sandlet::host
