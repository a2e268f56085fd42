#include "guest/spawn.hpp"

#include "common/clone3_on_stack.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace sandlet::guest {
namespace {

// Mirrors the kernel's struct clone_args (v2, with cgroup); <linux/sched.h> clashes with <sched.h>.
struct CloneArgs {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup;
};
constexpr uint64_t kCloneIntoCgroup = 0x200000000ULL;
constexpr size_t kChildStackSize = 128 * 1024;

struct ChildCtx {
  const SpawnSpec* spec;
  int cgroup_procs_fd;  // only on the clone() fallback path: the child joins its cgroup itself
  volatile int err;
  volatile int step;
  volatile size_t exec_path_len;
};

char* child_stack() {
  // One stack is enough: CLONE_VFORK keeps the parent suspended until the child has exec'd or exited.
  static char* stack = nullptr;
  if (!stack) {
    void* p = mmap(nullptr, kChildStackSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    stack = static_cast<char*>(p);
  }
  return stack;
}

// execvpe() without its malloc (we share the parent's heap): same PATH rules, no ENOEXEC /bin/sh retry.
// *tried: the length of the path given to the execve whose errno stands (the kernel counts it in ARG_MAX).
void exec_search(const char* file, char* const* argv, char* const* envp, const char* path, volatile size_t* tried) {
  if (!*file) { errno = ENOENT; return; }
  *tried = std::strlen(file);
  if (std::strchr(file, '/')) { execve(file, argv, envp); return; }
  size_t flen = std::strlen(file);
  char buf[4096];
  bool saw_eacces = false;
  for (const char* p = path;;) {
    const char* end = std::strchr(p, ':');
    if (!end) end = p + std::strlen(p);
    size_t dlen = static_cast<size_t>(end - p);
    if (dlen + flen + 2 <= sizeof buf) {
      char* o = buf;
      if (dlen) {  // an empty entry means the current directory
        std::memcpy(o, p, dlen);
        o += dlen;
        *o++ = '/';
      }
      std::memcpy(o, file, flen + 1);
      execve(buf, argv, envp);
      switch (errno) {
        case EACCES: saw_eacces = true; break;
        case ENOENT: case ENOTDIR: case ESTALE: case ENODEV: case ETIMEDOUT: case ENAMETOOLONG: break;
        default: *tried = static_cast<size_t>(o - buf) + flen; return;
      }
    }
    if (!*end) break;
    p = end + 1;
  }
  errno = saw_eacces ? EACCES : ENOENT;
}

// The parent resumes when the child's old mm is released, which execve and _exit do *before* they
// close the child's copy of the fd table. Until then the child still holds references to every agent
// fd, so a connection or pipe the agent closes in that window stays registered in its epoll set (epoll
// forgets a file only at its last close) and later reports events for a freed object. Closing
// everything but 0-2 ourselves, before execve/_exit, removes the window.
void close_inherited_fds(unsigned from = 3) { syscall(SYS_close_range, from, ~0u, 0); }

// A toolkit exec's descriptors at fixed places: the program at 3 (inherited), what to exec at 4
// (close-on-exec). Copied above 4 first (either may already sit at 3 or 4); close_range(5) drops the copies.
bool place_toolkit_fds(const SpawnSpec& s) {
  const int exe = fcntl(s.exec_fd, F_DUPFD_CLOEXEC, 5);
  const int prog = s.program_fd >= 0 ? fcntl(s.program_fd, F_DUPFD_CLOEXEC, 5) : -1;
  if (exe < 0 || (s.program_fd >= 0 && prog < 0)) return false;
  if (prog >= 0 ? dup2(prog, 3) < 0 : (close(3), false)) return false;  // dup2 clears close-on-exec
  return dup3(exe, 4, O_CLOEXEC) >= 0;
}

[[noreturn]] void child_fail(ChildCtx* c, SpawnStep step) {
  c->err = errno;
  c->step = static_cast<int>(step);
  close_inherited_fds();
  _exit(127);
}

// Runs in the child on its own stack, sharing memory with the suspended parent: syscalls only.
int child_main(void* arg) {
  auto* c = static_cast<ChildCtx*>(arg);
  const SpawnSpec& s = *c->spec;
  if (c->cgroup_procs_fd >= 0 && write(c->cgroup_procs_fd, "0", 1) != 1) child_fail(c, SpawnStep::kCgroup);
  if (setsid() < 0) child_fail(c, SpawnStep::kSetsid);
  // The host gives PID 1 oom_score_adj -1000; commands must stay killable. (A vfork child has its own
  // oom_score_adj: the kernel does not propagate this write to the parent sharing the mm.)
  int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (oom >= 0) {
    ssize_t r = write(oom, "0", 1);
    (void)r;
    close(oom);
  }
  // Without CAP_SYS_PTRACE no command (not even uid 0) can ptrace the non-dumpable agent.
  if (prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0) != 0) child_fail(c, SpawnStep::kCaps);
  // Nor CAP_SYS_RESOURCE (not in the usual container set either): it would let root inside lift the
  // namespace counters the init set to 0 (see forbid_new_namespaces).
  if (prctl(PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0) != 0) child_fail(c, SpawnStep::kCaps);
  // The working directory is entered as root first, then (if that failed) as the user: a user's command
  // may start in a directory only root may enter (an image's WORKDIR /root, say), as container runtimes
  // allow; a directory only the user may enter (root squashed on a mount) still works.
  const bool in_cwd = s.cwd && chdir(s.cwd) == 0;
  // Raw syscalls: glibc's set*id wrappers coordinate threads through shared state we must not touch.
  if (syscall(SYS_setgroups, s.ngroups, s.groups) != 0) child_fail(c, SpawnStep::kGroups);
  if (syscall(SYS_setresgid, s.gid, s.gid, s.gid) != 0) child_fail(c, SpawnStep::kSetgid);
  if (syscall(SYS_setresuid, s.uid, s.uid, s.uid) != 0) child_fail(c, SpawnStep::kSetuid);
  if (s.cwd && !in_cwd && chdir(s.cwd) != 0) child_fail(c, SpawnStep::kChdir);
  if (s.stdin_fd >= 0 && dup2(s.stdin_fd, 0) < 0) child_fail(c, SpawnStep::kStdio);
  if ((s.stdout_fd >= 0 && dup2(s.stdout_fd, 1) < 0) || (s.stderr_fd >= 0 && dup2(s.stderr_fd, 2) < 0))
    child_fail(c, SpawnStep::kStdio);
  if (s.controlling_tty && ioctl(0, TIOCSCTTY, 0) != 0) child_fail(c, SpawnStep::kStdio);
  // After stdio: a pipe may sit at 3 or 4.
  if (s.exec_fd >= 0 && !place_toolkit_fds(s)) child_fail(c, SpawnStep::kStdio);
  if (s.nofile) setrlimit(RLIMIT_NOFILE, s.nofile);
  // The agent ignores SIGPIPE and blocks what it reads through signalfd; commands start clean.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (s.exec_fd >= 0) {
    close_inherited_fds(5);
    c->exec_path_len = 0;
    syscall(SYS_execveat, 4, "", s.argv, s.envp, AT_EMPTY_PATH);
    child_fail(c, SpawnStep::kExec);
  }
  close_inherited_fds();  // also what O_CLOEXEC would do, only earlier (see close_inherited_fds)
  exec_search(s.argv[0], const_cast<char* const*>(s.argv), const_cast<char* const*>(s.envp), s.path, &c->exec_path_len);
  child_fail(c, SpawnStep::kExec);
}

}  // namespace


pid_t spawn_process(const SpawnSpec& spec, SpawnError* error) {
  static bool no_clone3 = false;  // e.g. a seccomp profile answering ENOSYS for clone3 (Docker's does)
  ChildCtx ctx{&spec, -1, 0, 0, 0};
  char* stack = child_stack();
  if (!stack) {
    *error = {SpawnStep::kClone, ENOMEM};
    return -1;
  }
  long pid = -ENOSYS;
#if defined(__SANITIZE_ADDRESS__)
  // Test builds: the previous child's frames left redzones in the shadow of the reused stack.
  __asan_unpoison_memory_region(stack, kChildStackSize);
#endif
#if defined(__x86_64__)
  if (!no_clone3) {
    CloneArgs ca = {};
    ca.flags = CLONE_VM | CLONE_VFORK | (spec.cgroup_fd >= 0 ? kCloneIntoCgroup : 0);
    ca.exit_signal = SIGCHLD;
    ca.stack = reinterpret_cast<uint64_t>(stack);
    ca.stack_size = kChildStackSize;
    ca.cgroup = spec.cgroup_fd >= 0 ? static_cast<uint64_t>(spec.cgroup_fd) : 0;
    pid = sandlet_clone3_on_stack(&ca, sizeof ca, child_main, &ctx);
    if (pid == -ENOSYS) no_clone3 = true;
  }
#else
  no_clone3 = true;
#endif
  if (no_clone3) {
    if (spec.cgroup_fd >= 0) {
      ctx.cgroup_procs_fd = openat(spec.cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
      if (ctx.cgroup_procs_fd < 0) {
        *error = {SpawnStep::kCgroup, errno};
        return -1;
      }
    }
    pid = clone(child_main, stack + kChildStackSize, CLONE_VM | CLONE_VFORK | SIGCHLD, &ctx);
    if (pid < 0) pid = -errno;
    if (ctx.cgroup_procs_fd >= 0) close(ctx.cgroup_procs_fd);
  }
  if (pid < 0) {
    *error = {SpawnStep::kClone, static_cast<int>(-pid)};
    return -1;
  }
  if (ctx.step != 0) {
    *error = {static_cast<SpawnStep>(ctx.step), ctx.err, ctx.exec_path_len};
    return -1;
  }
  return static_cast<pid_t>(pid);
}

const char* spawn_step_name(SpawnStep step) {
  switch (step) {
    case SpawnStep::kNone: return "spawn";
    case SpawnStep::kClone: return "clone";
    case SpawnStep::kCgroup: return "join exec cgroup";
    case SpawnStep::kSetsid: return "setsid";
    case SpawnStep::kCaps: return "drop CAP_SYS_PTRACE/CAP_SYS_RESOURCE";
    case SpawnStep::kGroups: return "setgroups";
    case SpawnStep::kSetgid: return "setgid";
    case SpawnStep::kSetuid: return "setuid";
    case SpawnStep::kChdir: return "chdir";
    case SpawnStep::kStdio: return "set up stdio";
    case SpawnStep::kExec: return "exec";
  }
  return "spawn";
}

}  // namespace sandlet::guest
