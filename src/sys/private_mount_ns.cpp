#include "sys/private_mount_ns.hpp"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "common/error.hpp"

namespace sandlet::sys {
namespace {

std::string failed(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// On this thread only: a new mount namespace whose root is a fresh tmpfs. Returns why not, or "".
std::string enter_empty_namespace() {
  // (unshare(CLONE_NEWNS) implies CLONE_FS: the thread gets its own root and cwd; other threads keep theirs.)
  if (::unshare(CLONE_NEWNS) != 0) return failed("unshare(CLONE_NEWNS)");
  // Our copy of the host's mounts must not propagate anything back, and pivot_root needs private mounts.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return failed("make mounts private");
  const char* base = nullptr;
  for (const char* d : {"/tmp", "/mnt", "/run", "/dev"}) {
    struct stat st;
    if (::stat(d, &st) == 0 && S_ISDIR(st.st_mode)) {
      base = d;
      break;
    }
  }
  if (!base) return "no /tmp, /mnt, /run or /dev to mount the namespace's root on";
  if (::mount("sandlet-ns", base, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700,size=1m") != 0)
    return failed("mount tmpfs");
  if (::chdir(base) != 0) return failed("chdir");
  // pivot_root(".", ".") stacks the old root on the new one; detaching it drops every host mount from
  // this namespace (they would otherwise stay pinned by it for the life of the process).
  if (::syscall(SYS_pivot_root, ".", ".") != 0) return failed("pivot_root (is this process chrooted?)");
  if (::umount2(".", MNT_DETACH) != 0) return failed("detach the host's mounts");
  if (::chdir("/") != 0) return failed("chdir /");
  return "";
}

}  // namespace

PrivateMountNamespace& PrivateMountNamespace::get() {
  static std::mutex instance_mutex;
  static PrivateMountNamespace* instance = nullptr;
  std::lock_guard lock(instance_mutex);
  // Never destroyed: its thread sleeps until the process exits. A forked child gets its own (the
  // parent's thread was not copied; its object is left as it is).
  if (!instance || instance->pid_ != ::getpid()) {
    instance = new PrivateMountNamespace();
    instance->start();
  }
  if (!instance->start_error_.empty())
    throw Error(Code::kUnimplemented, "cannot make a private mount namespace: " + instance->start_error_);
  return *instance;
}

void PrivateMountNamespace::start() {
  pid_ = ::getpid();
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  // No handler of the host application ever runs on this thread.
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  pthread_t thread;
  int rc = pthread_create(
      &thread, &attr, [](void* self) -> void* { static_cast<PrivateMountNamespace*>(self)->serve(); return nullptr; },
      this);
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    start_error_ = std::string("pthread_create: ") + std::strerror(rc);
    return;
  }
  std::unique_lock lock(m_);
  cv_.wait(lock, [this] { return started_; });
}

void PrivateMountNamespace::serve() {
  std::string why = enter_empty_namespace();
  std::unique_lock lock(m_);
  start_error_ = why;
  started_ = true;
  cv_.notify_all();
  if (!why.empty()) return;  // the thread ends; get() reports why
  for (;;) {
    cv_.wait(lock, [this] { return job_ != nullptr && !done_; });
    try {
      (*job_)();
    } catch (...) {
      error_ = std::current_exception();
    }
    done_ = true;
    cv_.notify_all();
  }
}

void PrivateMountNamespace::run(const std::function<void()>& job) {
  std::lock_guard one(run_mutex_);
  std::unique_lock lock(m_);
  job_ = &job;
  done_ = false;
  error_ = nullptr;
  cv_.notify_all();
  cv_.wait(lock, [this] { return done_; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace sandlet::sys
