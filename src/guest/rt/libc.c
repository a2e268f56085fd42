/* The C library functions sandlet-init calls, on raw system calls (see rt/README.md for why the init
   does not link glibc). Declarations come from the system headers, so a signature that drifts from
   them fails to compile. Errors set errno and return -1, as the libc functions do. */
#undef _FORTIFY_SOURCE
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "format.h"
#include "syscall.h"

#define SC(nr, a, b, c, d, e, f) finish(SANDLET_RT_SYSCALL(nr, a, b, c, d, e, f))

static int errno_value;

static long finish(long r) {
  if (r < 0 && r > -4096) {
    errno_value = (int)-r;
    return -1;
  }
  return r;
}

/* ---- process entry and exit ----------------------------------------------------------------------- */

int *__errno_location(void) { return &errno_value; }

char **environ;

extern void (*__preinit_array_start[])(int, char **, char **) __attribute__((visibility("hidden")));
extern void (*__preinit_array_end[])(int, char **, char **) __attribute__((visibility("hidden")));
extern void (*__init_array_start[])(int, char **, char **) __attribute__((visibility("hidden")));
extern void (*__init_array_end[])(int, char **, char **) __attribute__((visibility("hidden")));
int main(int argc, char **argv, char **envp);

/* Called by _start (start.S) with the initial stack pointer. */
__attribute__((noreturn, used)) void sandlet_rt_start(long *sp) {
  int argc = (int)sp[0];
  char **argv = (char **)(sp + 1);
  environ = argv + argc + 1;
  for (size_t i = 0; i < (size_t)(__preinit_array_end - __preinit_array_start); i++)
    __preinit_array_start[i](argc, argv, environ);
  for (size_t i = 0; i < (size_t)(__init_array_end - __init_array_start); i++)
    __init_array_start[i](argc, argv, environ);
  _exit(main(argc, argv, environ));
}

/* No exit-time destructors: the init only ever leaves by _exit. */
void *__dso_handle __attribute__((visibility("hidden")));
int __cxa_atexit(void (*fn)(void *), void *arg, void *dso) {
  (void)fn;
  (void)arg;
  (void)dso;
  return 0;
}

void _exit(int status) {
  for (;;) SANDLET_RT_SYSCALL(SYS_exit_group, status, 0, 0, 0, 0, 0);
}

/* PID 1 ignores its own fatal signals, so abort() reports and exits. */
void abort(void) {
  static const char msg[] = "sandlet-init: aborted\n";
  SANDLET_RT_SYSCALL(SYS_write, 2, msg, sizeof msg - 1, 0, 0, 0);
  _exit(134);
}

/* ---- memory --------------------------------------------------------------------------------------- */

void *malloc(size_t size) {
  void *p = sandlet_rt_alloc(size);
  if (!p) errno_value = ENOMEM;
  return p;
}

void free(void *ptr) { sandlet_rt_release(ptr); }

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  return (void *)SC(SYS_mmap, (long)addr, (long)len, prot, flags, fd, off);
}

/* ---- formatting ----------------------------------------------------------------------------------- */

int vsnprintf(char *buf, size_t size, const char *fmt, va_list ap) { return sandlet_rt_vformat(buf, size, fmt, ap); }

int snprintf(char *buf, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = sandlet_rt_vformat(buf, size, fmt, ap);
  va_end(ap);
  return n;
}

/* ---- files and directories ------------------------------------------------------------------------ */

/* The mode argument is there only when the flags create a file. */
#define MODE_ARG(flags, mode)                                         \
  do {                                                                \
    va_list ap_;                                                      \
    va_start(ap_, flags);                                             \
    mode = (flags) & (O_CREAT | __O_TMPFILE) ? va_arg(ap_, mode_t) : 0; \
    va_end(ap_);                                                      \
  } while (0)

int openat(int dirfd, const char *path, int flags, ...) {
  mode_t mode;
  MODE_ARG(flags, mode);
  return (int)SC(SYS_openat, dirfd, (long)path, flags, mode, 0, 0);
}

int open(const char *path, int flags, ...) {
  mode_t mode;
  MODE_ARG(flags, mode);
  return (int)SC(SYS_openat, AT_FDCWD, (long)path, flags, mode, 0, 0);
}

int close(int fd) { return (int)SC(SYS_close, fd, 0, 0, 0, 0, 0); }
ssize_t read(int fd, void *buf, size_t n) { return SC(SYS_read, fd, (long)buf, (long)n, 0, 0, 0); }
ssize_t write(int fd, const void *buf, size_t n) { return SC(SYS_write, fd, (long)buf, (long)n, 0, 0, 0); }
ssize_t pread(int fd, void *buf, size_t n, off_t off) { return SC(SYS_pread64, fd, (long)buf, (long)n, off, 0, 0); }
int dup2(int from, int to) { return (int)SC(SYS_dup2, from, to, 0, 0, 0, 0); }
int dup3(int from, int to, int flags) { return (int)SC(SYS_dup3, from, to, flags, 0, 0, 0); }
int pipe2(int fds[2], int flags) { return (int)SC(SYS_pipe2, (long)fds, flags, 0, 0, 0, 0); }

int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  long arg = va_arg(ap, long);
  va_end(ap);
  return (int)SC(SYS_fcntl, fd, cmd, arg, 0, 0, 0);
}

int ioctl(int fd, unsigned long request, ...) {
  va_list ap;
  va_start(ap, request);
  long arg = va_arg(ap, long);
  va_end(ap);
  return (int)SC(SYS_ioctl, fd, (long)request, arg, 0, 0, 0);
}

int stat(const char *path, struct stat *st) { return (int)SC(SYS_newfstatat, AT_FDCWD, (long)path, (long)st, 0, 0, 0); }
int fstat(int fd, struct stat *st) { return (int)SC(SYS_fstat, fd, (long)st, 0, 0, 0, 0); }
int lstat(const char *path, struct stat *st) {
  return (int)SC(SYS_newfstatat, AT_FDCWD, (long)path, (long)st, AT_SYMLINK_NOFOLLOW, 0, 0);
}
int unlink(const char *path) { return (int)SC(SYS_unlinkat, AT_FDCWD, (long)path, 0, 0, 0, 0); }
int access(const char *path, int mode) { return (int)SC(SYS_faccessat, AT_FDCWD, (long)path, mode, 0, 0, 0); }
int chdir(const char *path) { return (int)SC(SYS_chdir, (long)path, 0, 0, 0, 0, 0); }
int chmod(const char *path, mode_t mode) { return (int)SC(SYS_fchmodat, AT_FDCWD, (long)path, mode, 0, 0, 0); }
int fchmod(int fd, mode_t mode) { return (int)SC(SYS_fchmod, fd, mode, 0, 0, 0, 0); }
int fchown(int fd, uid_t uid, gid_t gid) { return (int)SC(SYS_fchown, fd, uid, gid, 0, 0, 0); }
int fchownat(int dirfd, const char *path, uid_t uid, gid_t gid, int flags) {
  return (int)SC(SYS_fchownat, dirfd, (long)path, uid, gid, flags, 0);
}
int mkdir(const char *path, mode_t mode) { return (int)SC(SYS_mkdirat, AT_FDCWD, (long)path, mode, 0, 0, 0); }
int mkdirat(int dirfd, const char *path, mode_t mode) { return (int)SC(SYS_mkdirat, dirfd, (long)path, mode, 0, 0, 0); }
int mknod(const char *path, mode_t mode, dev_t dev) {
  return (int)SC(SYS_mknodat, AT_FDCWD, (long)path, mode, (long)dev, 0, 0);
}
int symlink(const char *target, const char *path) {
  return (int)SC(SYS_symlinkat, (long)target, AT_FDCWD, (long)path, 0, 0, 0);
}
int unlinkat(int dirfd, const char *path, int flags) { return (int)SC(SYS_unlinkat, dirfd, (long)path, flags, 0, 0, 0); }
int renameat(int olddir, const char *oldpath, int newdir, const char *newpath) {
  return (int)SC(SYS_renameat, olddir, (long)oldpath, newdir, (long)newpath, 0, 0);
}
mode_t umask(mode_t mask) { return (mode_t)SANDLET_RT_SYSCALL(SYS_umask, mask, 0, 0, 0, 0, 0); }

/* ---- mounts --------------------------------------------------------------------------------------- */

int mount(const char *source, const char *target, const char *type, unsigned long flags, const void *data) {
  return (int)SC(SYS_mount, (long)source, (long)target, (long)type, (long)flags, (long)data, 0);
}
int umount2(const char *target, int flags) { return (int)SC(SYS_umount2, (long)target, flags, 0, 0, 0, 0); }
int move_mount(int from_dirfd, const char *from_path, int to_dirfd, const char *to_path, unsigned int flags) {
  return (int)SC(SYS_move_mount, from_dirfd, (long)from_path, to_dirfd, (long)to_path, flags, 0);
}

/* ---- processes ------------------------------------------------------------------------------------ */

long sandlet_rt_clone(int (*fn)(void *), void *stack, unsigned long flags, void *arg);

/* Only what the init needs: no parent/child TID or TLS arguments. */
int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...) {
  if (!fn || !stack) {
    errno_value = EINVAL;
    return -1;
  }
  return (int)finish(sandlet_rt_clone(fn, stack, (unsigned long)(unsigned)flags, arg));
}

int execve(const char *path, char *const argv[], char *const envp[]) {
  return (int)SC(SYS_execve, (long)path, (long)argv, (long)envp, 0, 0, 0);
}
pid_t waitpid(pid_t pid, int *status, int options) { return (pid_t)SC(SYS_wait4, pid, (long)status, options, 0, 0, 0); }
int kill(pid_t pid, int sig) { return (int)SC(SYS_kill, pid, sig, 0, 0, 0, 0); }
pid_t setsid(void) { return (pid_t)SC(SYS_setsid, 0, 0, 0, 0, 0, 0); }
pid_t getpid(void) { return (pid_t)SC(SYS_getpid, 0, 0, 0, 0, 0, 0); }
int pause(void) { return (int)SC(SYS_pause, 0, 0, 0, 0, 0, 0); }
int sethostname(const char *name, size_t len) { return (int)SC(SYS_sethostname, (long)name, (long)len, 0, 0, 0, 0); }

int prctl(int option, ...) {
  va_list ap;
  va_start(ap, option);
  long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long), d = va_arg(ap, long);
  va_end(ap);
  return (int)SC(SYS_prctl, option, a, b, c, d, 0);
}

int getrlimit(__rlimit_resource_t resource, struct rlimit *rl) {
  return (int)SC(SYS_prlimit64, 0, resource, 0, (long)rl, 0, 0);
}
int setrlimit(__rlimit_resource_t resource, const struct rlimit *rl) {
  return (int)SC(SYS_prlimit64, 0, resource, (long)rl, 0, 0, 0);
}

long syscall(long nr, ...) {
  va_list ap;
  va_start(ap, nr);
  long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
  long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
  va_end(ap);
  return SC(nr, a, b, c, d, e, f);
}

int clock_gettime(clockid_t clock, struct timespec *ts) { return (int)SC(SYS_clock_gettime, clock, (long)ts, 0, 0, 0, 0); }

/* ---- signals: glibc's sigset_t is 1024 bits, the kernel's 64 ------------------------------------- */

enum { kKernelSigsetSize = 8 };
#define KERNEL_SA_RESTORER 0x04000000 /* asm/signal.h: the handler returns through sa_restorer */

int sigemptyset(sigset_t *set) {
  memset(set, 0, sizeof *set);
  return 0;
}

int sigaddset(sigset_t *set, int sig) {
  if (sig <= 0 || sig > 64) {
    errno_value = EINVAL;
    return -1;
  }
  ((unsigned long *)set)[0] |= 1UL << (sig - 1);
  return 0;
}

int sigprocmask(int how, const sigset_t *set, sigset_t *old) {
  return (int)SC(SYS_rt_sigprocmask, how, (long)set, (long)old, kKernelSigsetSize, 0, 0);
}

void sandlet_rt_sigreturn(void);

/* The kernel's layout of struct sigaction on x86-64. */
struct kernel_sigaction {
  void *handler;
  unsigned long flags;
  void (*restorer)(void);
  unsigned long mask;
};

int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  struct kernel_sigaction k, kold;
  if (act) {
    k.handler = (void *)act->sa_handler;
    k.flags = (unsigned long)act->sa_flags | KERNEL_SA_RESTORER;
    k.restorer = sandlet_rt_sigreturn;
    memcpy(&k.mask, &act->sa_mask, sizeof k.mask);
  }
  long r = SC(SYS_rt_sigaction, sig, act ? (long)&k : 0, old ? (long)&kold : 0, kKernelSigsetSize, 0, 0);
  if (r == 0 && old) {
    memset(old, 0, sizeof *old);
    old->sa_handler = (__sighandler_t)kold.handler;
    old->sa_flags = (int)kold.flags;
    memcpy(&old->sa_mask, &kold.mask, sizeof kold.mask);
  }
  return (int)r;
}

__sighandler_t signal(int sig, __sighandler_t handler) {
  struct sigaction act, old;
  memset(&act, 0, sizeof act);
  memset(&old, 0, sizeof old);
  act.sa_handler = handler;
  act.sa_flags = SA_RESTART;
  return sigaction(sig, &act, &old) == 0 ? old.sa_handler : SIG_ERR;
}

int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *timeout) {
  return (int)SC(SYS_rt_sigtimedwait, (long)set, (long)info, (long)timeout, kKernelSigsetSize, 0, 0);
}

int signalfd(int fd, const sigset_t *mask, int flags) {
  return (int)SC(SYS_signalfd4, fd, (long)mask, kKernelSigsetSize, flags, 0, 0);
}

/* ---- events and sockets --------------------------------------------------------------------------- */

int poll(struct pollfd *fds, nfds_t n, int timeout) { return (int)SC(SYS_poll, (long)fds, (long)n, timeout, 0, 0, 0); }
int epoll_create1(int flags) { return (int)SC(SYS_epoll_create1, flags, 0, 0, 0, 0, 0); }
int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev) { return (int)SC(SYS_epoll_ctl, epfd, op, fd, (long)ev, 0, 0); }
int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout) {
  return (int)SC(SYS_epoll_wait, epfd, (long)evs, max, timeout, 0, 0);
}
int timerfd_create(__clockid_t clock, int flags) { return (int)SC(SYS_timerfd_create, clock, flags, 0, 0, 0, 0); }
int timerfd_settime(int fd, int flags, const struct itimerspec *value, struct itimerspec *old) {
  return (int)SC(SYS_timerfd_settime, fd, flags, (long)value, (long)old, 0, 0);
}
int socket(int domain, int type, int protocol) { return (int)SC(SYS_socket, domain, type, protocol, 0, 0, 0); }
int shutdown(int fd, int how) { return (int)SC(SYS_shutdown, fd, how, 0, 0, 0, 0); }
int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags) {
  return (int)SC(SYS_accept4, fd, (long)addr.__sockaddr__, (long)len, flags, 0, 0);
}
ssize_t send(int fd, const void *buf, size_t n, int flags) { return SC(SYS_sendto, fd, (long)buf, (long)n, flags, 0, 0); }
ssize_t recvmsg(int fd, struct msghdr *msg, int flags) { return SC(SYS_recvmsg, fd, (long)msg, flags, 0, 0, 0); }
