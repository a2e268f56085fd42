// Whether a sandbox's IPC namespace holds SysV objects (shared memory, semaphores, message queues). The
// files of /proc/sysvipc show the reading thread's own IPC namespace, so one long-lived thread of the host
// process joins each namespace asked about in turn (setns), reads them there and returns to its own: no
// other thread of the process ever changes namespace, none is started per question, and none keeps a
// sandbox's namespace alive.
#pragma once
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace sandlet::container {

class SysvProbe final {
 public:
  SysvProbe() = default;
  ~SysvProbe();
  SysvProbe(const SysvProbe&) = delete;
  SysvProbe& operator=(const SysvProbe&) = delete;

  // `ipc_ns_fd`: an open /proc/<pid>/ns/ipc. True when that namespace holds a SysV object, or when it
  // cannot be read (the caller then treats it as dirty). Any thread; questions are answered in order.
  bool has_objects(int ipc_ns_fd);

 private:
  struct Question {
    int fd = -1;
    bool answer = true;
    bool answered = false;
  };
  void serve();
  static bool answer(int ipc_ns_fd, int home_fd);  // on the probe thread

  std::mutex mutex_;
  std::condition_variable asked_, answered_;
  std::deque<Question*> questions_;
  bool stopping_ = false;
  std::thread thread_;  // started at the first question
};

}  // namespace sandlet::container
