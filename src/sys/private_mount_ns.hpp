// A thread of this process that lives in a mount namespace of its own, rooted at an empty tmpfs: none of
// the host's mounts is in it. Some interfaces take mounts only as paths in the caller's namespace (on
// kernels whose OverlayFS cannot take layers as descriptors, it privately clones each layer it is given
// by path, which must be attached in the mounting thread's namespace). Attaching detached mounts here
// serves them without the host's namespace ever holding a sandbox mount; the namespace dies with the
// process, so a crash leaves nothing behind.
#pragma once
#include <sys/types.h>

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>

namespace sandlet::sys {

class PrivateMountNamespace final {
 public:
  // The process's one instance, started on the first call (and again in a forked child, where the
  // parent's thread does not exist). Throws when the namespace cannot be made.
  static PrivateMountNamespace& get();

  // Runs `job` on that thread ("/" is its empty tmpfs, the cwd too) and waits; rethrows what it threw.
  // Jobs run one at a time.
  void run(const std::function<void()>& job);

 private:
  PrivateMountNamespace() = default;
  void start();
  void serve();  // the thread's body
  std::mutex run_mutex_;  // one caller at a time
  std::mutex m_;
  std::condition_variable cv_;
  const std::function<void()>* job_ = nullptr;
  std::exception_ptr error_;
  bool done_ = false;
  bool started_ = false;
  std::string start_error_;  // why the namespace could not be made ("" = it was)
  pid_t pid_ = 0;            // the process that started the thread
};

}  // namespace sandlet::sys
