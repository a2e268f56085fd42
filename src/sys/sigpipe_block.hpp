// A write(2) to a pipe or socket whose reader is gone raises SIGPIPE, whose default action ends the
// process; a library must not change the process's signal disposition. So the writing thread blocks
// SIGPIPE around the write and swallows one it raised (scoped: construct before the write).
#pragma once
#include <pthread.h>
#include <signal.h>
#include <time.h>

namespace sandlet::sys {

class SigpipeBlock final {
 public:
  SigpipeBlock() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe, &old_);
  }
  ~SigpipeBlock() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    if (!was_pending_) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe, nullptr, &zero) > 0) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t old_;
  bool was_pending_ = false;
};

}  // namespace sandlet::sys
