#include "sys/side_thread.hpp"

#include <sched.h>

#include <cstring>
#include <memory>
#include <utility>

#include "common/error.hpp"

namespace sandlet::sys {
namespace {

void* run_body(void* arg) {
  std::unique_ptr<std::function<void()>> body(static_cast<std::function<void()>*>(arg));
  (*body)();
  return nullptr;
}

// The calling thread's CPUs (`all`) and the same without the one it runs on now (`elsewhere`); false
// when that leaves none (or the kernel would not tell): the thread then goes where the scheduler puts it.
bool cpus_other_than_current(cpu_set_t* all, cpu_set_t* elsewhere) {
  const int here = ::sched_getcpu();
  if (here < 0 || ::sched_getaffinity(0, sizeof(*all), all) < 0) return false;
  *elsewhere = *all;
  CPU_CLR(here, elsewhere);
  return CPU_COUNT(elsewhere) > 0;
}

}  // namespace

SideThread::SideThread(std::function<void()> body) {
  auto arg = std::make_unique<std::function<void()>>(std::move(body));
  cpu_set_t elsewhere;
  int err = EINVAL;
  if (cpus_other_than_current(&creators_cpus_, &elsewhere)) {
    pthread_attr_t attr;
    if (::pthread_attr_init(&attr) == 0) {
      ::pthread_attr_setaffinity_np(&attr, sizeof(elsewhere), &elsewhere);
      err = ::pthread_create(&thread_, &attr, run_body, arg.get());
      ::pthread_attr_destroy(&attr);
      kept_off_ = err == 0;
    }
  }
  // (EINVAL: the set changed under us, e.g. a CPU went offline; anywhere will do.)
  if (err == EINVAL) err = ::pthread_create(&thread_, nullptr, run_body, arg.get());
  if (err != 0) throw Error(Code::kResourceExhausted, std::string("start a thread: ") + std::strerror(err), err);
  arg.release();  // run_body owns it now
  started_ = true;
}

SideThread::SideThread(SideThread&& o) noexcept
    : thread_(o.thread_),
      started_(std::exchange(o.started_, false)),
      kept_off_(std::exchange(o.kept_off_, false)),
      creators_cpus_(o.creators_cpus_) {}

SideThread& SideThread::operator=(SideThread&& o) noexcept {
  if (this != &o) {
    join();
    thread_ = o.thread_;
    started_ = std::exchange(o.started_, false);
    kept_off_ = std::exchange(o.kept_off_, false);
    creators_cpus_ = o.creators_cpus_;
  }
  return *this;
}

void SideThread::allow_all_cpus() {
  if (!started_ || !kept_off_) return;
  ::pthread_setaffinity_np(thread_, sizeof(creators_cpus_), &creators_cpus_);  // best effort
  kept_off_ = false;
}

void SideThread::join() {
  if (started_) ::pthread_join(thread_, nullptr);
  started_ = false;
  kept_off_ = false;
}

}  // namespace sandlet::sys
