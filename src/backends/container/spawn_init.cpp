#include "backends/container/spawn_init.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "common/clone3_on_stack.hpp"
#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::container {

// Everything the child reads. It shares our memory (CLONE_VM), so this block must outlive the child's
// exec: PausedInit owns it until then.
struct PausedInit::ChildBlock {
  static constexpr size_t kStackSize = 64 * 1024;
  int go_read = -1;
  int go_write = -1;
  int setup_fd = -1;
  int exec_fd = -1;
  bool die_with_parent = false;
  static constexpr int kMaxJoin = 4;
  int join_fds[kMaxJoin] = {-1, -1, -1, -1};
  int join_count = 0;
  char self[2] = "0";  // what a v1 `tasks` write of the calling thread says
  char arg0[16] = "sandlet-init";
  char* argv[2] = {arg0, nullptr};
  char* envp[1] = {nullptr};
  alignas(16) char stack[kStackSize];
};

namespace {

constexpr uint64_t kNamespaces = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
                                 CLONE_NEWCGROUP;

#if defined(__x86_64__)
// A system call that touches nothing but registers: the child runs on our memory and our thread's TLS,
// so it must not write errno (it would clobber the creating thread's) or call into libc at all.
inline long raw_syscall(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
  long ret;
  register long r10 asm("r10") = d;
  register long r8 asm("r8") = e;
  asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8) : "rcx", "r11", "memory");
  return ret;
}
#else
// Elsewhere the child is a fork-style copy (no shared memory), so libc's wrapper is safe.
inline long raw_syscall(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
  long r = ::syscall(n, a, b, c, d, e);
  return r < 0 ? -errno : r;
}
#endif

// The child: waits for "go", becomes root inside its user namespace, execs the init. Raw system calls
// only (see raw_syscall); every failure exits with a distinct status that describe_init_exit() (init_setup.cpp) decodes.
int child_main(void* p) {
  auto* b = static_cast<PausedInit::ChildBlock*>(p);
  auto die = [](int code) {
    raw_syscall(SYS_exit, code);
    __builtin_unreachable();
  };
  // Our copy of the write end must go, or a parent that dies before "go" would leave us waiting forever.
  raw_syscall(SYS_close, b->go_write);
  // Own session: job-control signals to the creator's process group (Ctrl-C) must not reach the sandbox.
  raw_syscall(SYS_setsid);
  // Join the v1 groups (hybrid hosts) while the host maps our ids: we are single-threaded, so moving this
  // thread moves the process, and nothing runs inside before we are in all of them.
  for (int i = 0; i < b->join_count; ++i)
    if (raw_syscall(SYS_write, b->join_fds[i], reinterpret_cast<long>(b->self), 1) != 1) die(119);
  // Our cgroup namespace was rooted where the host thread's v1 groups are: root it at ours, so that
  // /proc/self/cgroup inside shows "/" and nothing of the host's layout.
  if (b->join_count > 0 && raw_syscall(SYS_unshare, CLONE_NEWCGROUP) < 0) die(119);
  char go = 0;
  long n;
  do n = raw_syscall(SYS_read, b->go_read, reinterpret_cast<long>(&go), 1); while (n == -EINTR);
  if (n != 1) die(120);
  if (raw_syscall(SYS_setresgid, 0, 0, 0) < 0 || raw_syscall(SYS_setgroups, 0, 0) < 0 ||
      raw_syscall(SYS_setresuid, 0, 0, 0) < 0)
    die(121);
  // After the id switch: changing credentials clears the parent-death signal.
  if (b->die_with_parent) raw_syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL);
  long null = raw_syscall(SYS_open, reinterpret_cast<long>("/dev/null"), O_RDWR);
  if (null < 0) die(122);
  // Park the two fds we keep above any target number, then place them: setup socket at 3, binary at 4.
  long setup = raw_syscall(SYS_fcntl, b->setup_fd, F_DUPFD, 100);
  long exe = raw_syscall(SYS_fcntl, b->exec_fd, F_DUPFD, 100);
  if (setup < 0 || exe < 0) die(123);
  for (int fd = 0; fd < 3; ++fd)
    if (raw_syscall(SYS_dup2, null, fd) < 0) die(124);
  if (raw_syscall(SYS_dup2, setup, 3) < 0 || raw_syscall(SYS_dup2, exe, 4) < 0) die(125);
  raw_syscall(SYS_fcntl, 4, F_SETFD, FD_CLOEXEC);
  raw_syscall(SYS_close_range, 5, ~0U, 0);
  // Signals stay blocked (the creating thread blocked them around clone3); the init resets its mask.
  raw_syscall(SYS_execveat, 4, reinterpret_cast<long>(""), reinterpret_cast<long>(b->argv),
              reinterpret_cast<long>(b->envp), AT_EMPTY_PATH);
  die(126);
  return 0;
}

}  // namespace

PausedInit PausedInit::spawn(const InitSpawnParams& params) {
  int go[2];
  if (::pipe2(go, O_CLOEXEC) < 0) throw_errno("pipe for init start");
  UniqueFd go_read(go[0]), go_write(go[1]);

  // Default-initialised: the members get their initialisers, the 64 KiB stack is not zeroed (zeroing
  // it faulted in 16 pages per create; the child touches one or two).
  auto block = std::make_unique_for_overwrite<ChildBlock>();
  block->go_read = go_read.get();
  block->go_write = go_write.get();
  block->setup_fd = params.setup_fd;
  block->exec_fd = params.exec_fd;
  block->die_with_parent = params.die_with_parent;
  if (params.join_v1_fds.size() > static_cast<size_t>(ChildBlock::kMaxJoin))
    throw Error(Code::kInternal, "too many v1 cgroups to join");
  for (int fd : params.join_v1_fds) block->join_fds[block->join_count++] = fd;

  int pidfd = -1;
  struct clone_args args = {};
  args.flags = kNamespaces | CLONE_PIDFD | CLONE_INTO_CGROUP | (params.new_netns ? CLONE_NEWNET : 0);
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = 0;  // no SIGCHLD into the host application; we reap through the pidfd (__WALL)
  args.cgroup = static_cast<uint64_t>(params.cgroup_fd);

  // No handler of the host application may run on the child's stack before it execs.
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  long pid;
#if defined(__x86_64__)
  // CLONE_VM: no copy of the host's page tables and no copy-on-write faults afterwards — a trainer
  // process with tens of GB mapped would otherwise pay milliseconds per sandbox.
  args.flags |= CLONE_VM;
  args.stack = reinterpret_cast<uint64_t>(block->stack);
  args.stack_size = ChildBlock::kStackSize;
  pid = sandlet_clone3_on_stack(&args, sizeof args, &child_main, block.get());
  int clone_errno = pid < 0 ? static_cast<int>(-pid) : 0;
#else
  pid = ::syscall(SYS_clone3, &args, sizeof args);
  int clone_errno = pid < 0 ? errno : 0;
  if (pid == 0) {
    child_main(block.get());
    ::_exit(127);
  }
#endif
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (pid < 0) throw_errno("clone3 sandbox init (namespaces + CLONE_INTO_CGROUP)", clone_errno);

  PausedInit init;
  init.pid_ = static_cast<pid_t>(pid);
  init.pidfd_.reset(pidfd);
  init.go_fd_ = std::move(go_write);
  init.block_ = std::move(block);
  return init;
}

PausedInit::PausedInit() = default;

PausedInit::PausedInit(PausedInit&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      pidfd_(std::move(o.pidfd_)),
      go_fd_(std::move(o.go_fd_)),
      block_(std::move(o.block_)),
      released_(std::exchange(o.released_, true)) {}

PausedInit::~PausedInit() {
  if (released_ || pid_ <= 0) return;
  ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
  siginfo_t info;
  while (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &info, WEXITED | __WALL) < 0 && errno == EINTR) {
  }
  // Only now is the child's stack free.
}

void PausedInit::map_ids(uid_t base, uint32_t count) const {
  char path[64];
  std::string map = "0 " + std::to_string(base) + " " + std::to_string(count) + "\n";
  std::snprintf(path, sizeof path, "/proc/%d/uid_map", pid_);
  sys::write_existing(path, map);
  std::snprintf(path, sizeof path, "/proc/%d/gid_map", pid_);
  sys::write_existing(path, map);
}

void PausedInit::resume() {
  char go = 1;
  if (::write(go_fd_.get(), &go, 1) != 1) throw_errno("start sandbox init");
  go_fd_.reset();
}

UniqueFd PausedInit::release() {
  // The init has exec'd (it answered over the setup socket): it no longer uses our memory.
  released_ = true;
  block_.reset();
  return std::move(pidfd_);
}

}  // namespace sandlet::container
