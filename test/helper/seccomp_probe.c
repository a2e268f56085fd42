/* Run inside a sandbox by the seccomp integration test (static: the test root filesystem has no libc).
 * Prints the seccomp lines of /proc/self/status, then one line per system call the baseline profile
 * denies: "NAME ERRNO" (0 when the call succeeded). Each call is made with arguments for which the kernel
 * itself, without the filter, would answer something other than EPERM (succeed, EBADF, EINVAL, ENOENT,
 * ENOSPC, ENOSYS...): so every "EPERM" printed is the filter's, and a sandbox without the filter fails
 * the test. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

static void report(const char *name, long rc) { printf("%s %d\n", name, rc < 0 ? errno : 0); }

#define PROBE(name, ...)                             \
  do {                                               \
    errno = 0;                                       \
    report(#name, syscall(SYS_##name, __VA_ARGS__)); \
  } while (0)
/* The same for calls that return a descriptor when they succeed. */
#define PROBE_FD(name, ...)                            \
  do {                                                 \
    errno = 0;                                         \
    long fd_ = syscall(SYS_##name, __VA_ARGS__);       \
    report(#name, fd_);                                \
    if (fd_ >= 0) close((int)fd_);                     \
  } while (0)

int main(void) {
  FILE *status = fopen("/proc/self/status", "r");
  char line[256];
  while (status && fgets(line, sizeof line, status))
    if (strncmp(line, "Seccomp", 7) == 0 || strncmp(line, "NoNewPrivs", 10) == 0) fputs(line, stdout);
  if (status) fclose(status);

  int pipefd[2];
  if (pipe(pipefd) != 0) return 1;
  char c = 'x';
  struct timex tx;
  memset(&tx, 0, sizeof tx); /* modes 0: a read-only query, allowed to anyone */

  PROBE(unshare, 0);                                          /* a no-op: 0 */
  PROBE(setns, -1, 0);                                        /* EBADF */
  PROBE(mount, "none", "/tmp", "tmpfs", 0, NULL);             /* root of the sandbox's user ns: 0 */
  PROBE(umount2, "/no/such/dir", 0);                          /* ENOENT */
  PROBE(pivot_root, "/no/such/dir", "/no/such/dir");          /* ENOENT */
  PROBE_FD(open_tree, AT_FDCWD, "/", 0);                         /* a descriptor */
  PROBE_FD(fsopen, "tmpfs", 0);                                  /* a descriptor */
  PROBE_FD(fspick, AT_FDCWD, "/", 0);                            /* a descriptor */
  PROBE(fsconfig, -1, 0, NULL, NULL, 0);                      /* EBADF */
  PROBE(fsmount, -1, 0, 0);                                   /* EBADF */
  PROBE(move_mount, -1, "", -1, "", 0);                       /* EBADF */
  PROBE(mount_setattr, -1, "", 0, NULL, 0);                   /* EINVAL / EBADF */
  PROBE(keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -2 /* process keyring */, 0); /* an id, or ENOKEY */
  PROBE(add_key, "user", "probe", NULL, 0, -123);             /* EINVAL */
  PROBE(request_key, "user", "no-such-key", NULL, 0);         /* ENOKEY */
  PROBE_FD(io_uring_setup, 0, NULL);                             /* EINVAL / EFAULT */
  PROBE(io_uring_enter, -1, 0, 0, 0, NULL, 0);                /* EBADF */
  PROBE(io_uring_register, -1, 0, NULL, 0);                   /* EBADF */
  PROBE_FD(userfaultfd, ~0);                                     /* EINVAL */
  PROBE_FD(bpf, -1, NULL, 0);                                    /* EINVAL */
  PROBE_FD(perf_event_open, NULL, 0, -1, -1, 0);                 /* EFAULT */
  PROBE(name_to_handle_at, AT_FDCWD, "/no/such/file", NULL, NULL, 0); /* ENOENT / EFAULT */
  PROBE(sysfs, 3);                                            /* the number of filesystem types */
  PROBE(uselib, "/no/such/file");                             /* ENOENT / ENOSYS */
  PROBE(iopl, 0);                                             /* 0 */
  PROBE(ioperm, 0, 0, 0);                                     /* EINVAL / 0 */
  PROBE(reboot, 0, 0, 0, NULL);                               /* bad magic: EINVAL */
  PROBE(adjtimex, &tx);                                       /* the clock's state */
  PROBE(clock_adjtime, CLOCK_REALTIME, &tx);                  /* the clock's state */
  PROBE(quotactl_fd, -1, 0, 0, NULL);                         /* EBADF */
  errno = 0;
  long child = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0); /* counters are 0: ENOSPC */
  if (child == 0) _exit(0);
  report("clone_NEWUSER", child);
  errno = 0;
  report("ioctl_TIOCSTI", ioctl(pipefd[0], TIOCSTI, &c));     /* not a terminal: ENOTTY */
  return 0;
}
