/* Run inside a sandbox by the seccomp integration test (static: the test root filesystem has no libc).
 * Prints the seccomp lines of /proc/self/status, then one line per system call the default profile
 * denies: "NAME ERRNO" (0 when the call succeeded; "allowed_NAME" lines are calls the profile allows). Other
 * modes (argv[1]): x32, int80 (calls of other ABIs), ptrace (of a child and of the init), getcwd, io_uring,
 * sockets (socket(2) of every family, netlink protocol and high-bits variant; what libc does with
 * NETLINK_ROUTE: getifaddrs, if_nameindex, getaddrinfo with AI_ADDRCONFIG). Sockets are closed at once:
 * never bound or connected (an AF_VSOCK one would reach this machine's hypervisor).
 * Each call is made, where possible, with arguments for which the kernel itself, without the filter, would
 * answer something other than EPERM (succeed, EBADF, EINVAL, ENOENT, ENOSPC, ENOSYS...): so those EPERMs are
 * the filter's, and a sandbox without the filter fails the test. (A few calls, marked, get EPERM from the
 * kernel too: the sandbox's root has no capability in the host's user namespace.) */
#define _GNU_SOURCE
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

static void report(const char *name, long rc) { printf("%s %d\n", name, rc < 0 ? errno : 0); }

static const long child_marker = 0x5ecc0de;

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

/* The calls of other ABIs: each kills the process under the filter; without it, prints what came back. */
static int other_abi(const char *which) {
  long rc;
  if (strcmp(which, "x32") == 0) {
    rc = syscall(0x40000000L | SYS_getpid); /* x32's getpid: x86_64's number with bit 30 set */
  } else {
    long nr = 20; /* i386 getpid through int 0x80 */
    __asm__ volatile("int $0x80" : "+a"(nr) : : "memory");
    rc = nr;
  }
  printf("%s returned %ld\n", which, rc);
  return 0;
}

/* ptrace of a forked child (stopped, then attached, peeked, detached) and of the init: "NAME ERRNO" lines. */
static int ptrace_probe(void) {
  pid_t child = fork();
  if (child == 0) {
    for (;;) pause();
  }
  errno = 0;
  long rc = syscall(SYS_ptrace, PTRACE_ATTACH, child, 0, 0);
  report("ptrace_attach_child", rc);
  if (rc == 0) {
    int st;
    waitpid(child, &st, 0);
    errno = 0;
    long word = syscall(SYS_ptrace, PTRACE_PEEKDATA, child, (void *)&child_marker, &rc);
    report("ptrace_peek_child", word);
    printf("peeked_marker %d\n", rc == child_marker ? 1 : 0);
    syscall(SYS_ptrace, PTRACE_DETACH, child, 0, 0);
  }
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  errno = 0;
  rc = syscall(SYS_ptrace, PTRACE_ATTACH, 1, 0, 0);
  report("ptrace_attach_init", rc);
  if (rc == 0) syscall(SYS_ptrace, PTRACE_DETACH, 1, 0, 0);
  char path[64];
  snprintf(path, sizeof path, "/proc/1/mem");
  errno = 0;
  int fd = open(path, O_RDONLY);
  report("open_init_mem", fd);
  if (fd >= 0) close(fd);
  return 0;
}

/* "socket_F ERRNO" for families 0..47 (netlink: NETLINK_ROUTE, raw; vsock: stream; others dgram),
 * "socketpair_F ERRNO" for AF_UNIX and AF_VSOCK, "netlink_P ERRNO" for protocols 0..33, "high_F ERRNO" for
 * a few families with bit 32 set, and "getifaddrs", "if_nameindex", "getaddrinfo_v4", "getaddrinfo_v6". */
static void try_socket(const char *name, long family, long type, long protocol) {
  errno = 0;
  long fd = syscall(SYS_socket, family, type, protocol);
  report(name, fd);
  if (fd >= 0) close((int)fd);
}

static int sockets_probe(void) {
  char name[64];
  for (long f = 0; f < 48; ++f) {
    snprintf(name, sizeof name, "socket_%ld", f);
    try_socket(name, f, f == 16 ? SOCK_RAW : f == 40 ? SOCK_STREAM : SOCK_DGRAM, 0);
  }
  for (long p = 0; p < 34; ++p) {
    snprintf(name, sizeof name, "netlink_%ld", p);
    try_socket(name, 16, SOCK_RAW, p);
  }
  static const long high[] = {1, 2, 10, 16, 17, 40};
  for (size_t i = 0; i < sizeof high / sizeof *high; ++i) {
    snprintf(name, sizeof name, "high_%ld", high[i]);
    try_socket(name, high[i] | (1L << 32), high[i] == 40 ? SOCK_STREAM : SOCK_DGRAM, 0);
  }
  static const long pairs[] = {1, 40};
  for (size_t i = 0; i < 2; ++i) {
    int sv[2];
    errno = 0;
    long rc = syscall(SYS_socketpair, pairs[i], SOCK_STREAM, 0, sv);
    snprintf(name, sizeof name, "socketpair_%ld", pairs[i]);
    report(name, rc);
    if (rc == 0) {
      close(sv[0]);
      close(sv[1]);
    }
  }
  /* What libc asks NETLINK_ROUTE: the interfaces (lo at least) and, for AI_ADDRCONFIG, which families
   * have addresses. */
  struct ifaddrs *ifa = NULL;
  errno = 0;
  long rc = getifaddrs(&ifa);
  report("getifaddrs", rc == 0 && ifa == NULL ? (errno = ENOENT, -1) : rc);
  if (ifa) freeifaddrs(ifa);
  errno = 0;
  struct if_nameindex *names = if_nameindex();
  report("if_nameindex", names && names[0].if_name ? 0 : -1);
  if (names) if_freenameindex(names);
  static const char *const hosts[] = {"127.0.0.1", "::1"};
  for (size_t i = 0; i < 2; ++i) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_flags = AI_ADDRCONFIG | AI_NUMERICHOST;
    hints.ai_socktype = SOCK_STREAM;
    errno = 0;
    int gai = getaddrinfo(hosts[i], "80", &hints, &res);
    /* EAI_NONAME / EAI_ADDRFAMILY: AI_ADDRCONFIG found no such family configured (only loopback here). */
    printf("getaddrinfo_%s %d\n", i ? "v6" : "v4", gai == EAI_SYSTEM ? errno : gai == 0 ? 0 : -gai);
    if (res) freeaddrinfo(res);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "sockets") == 0) return sockets_probe();
  if (argc == 2 && (strcmp(argv[1], "x32") == 0 || strcmp(argv[1], "int80") == 0)) return other_abi(argv[1]);
  if (argc == 2 && strcmp(argv[1], "ptrace") == 0) return ptrace_probe();
  if (argc == 2 && strcmp(argv[1], "getcwd") == 0) {
    char buf[256];
    errno = 0;
    report("getcwd", syscall(SYS_getcwd, buf, sizeof buf));
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "io_uring") == 0) {
    char params[120];
    memset(params, 0, sizeof params);
    PROBE_FD(io_uring_setup, 1, params); /* a descriptor when allowed */
    return 0;
  }
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
  PROBE(ptrace, PTRACE_ATTACH, 0x7ffffff0, 0, 0);            /* no such process: ESRCH */
  PROBE(process_vm_readv, 0x7ffffff0, NULL, 0, NULL, 0, 0);   /* ESRCH / 0 */
  PROBE(process_vm_writev, 0x7ffffff0, NULL, 0, NULL, 0, 0);  /* ESRCH / 0 */
  PROBE(pidfd_getfd, -1, 0, 0);                               /* EBADF */
  PROBE(open_by_handle_at, -1, NULL, 0);                      /* EPERM without the filter too (no
                                                                 CAP_DAC_READ_SEARCH in the host) */
  PROBE(kexec_load, 0, 0, NULL, 0);                           /* EPERM without the filter too */
  PROBE(init_module, NULL, 0, "");                            /* EPERM without the filter too */
  PROBE(swapon, "/no/such/file", 0);                          /* EPERM without the filter too */
  PROBE(acct, NULL);                                          /* EPERM without the filter too */
  PROBE(syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0); /* the size, or EPERM (dmesg_restrict) */
  PROBE(quotactl, 0, NULL, 0, NULL);                          /* EINVAL / ENOENT */
  PROBE(settimeofday, NULL, NULL);                            /* 0: nothing to set */
  PROBE(lookup_dcookie, 0, NULL, 0);                          /* ENOSYS on current kernels */
  PROBE(fanotify_init, 0, 0);                                 /* EPERM / a descriptor */
  /* extent swapping, cloning, dedupe: each ioctl on the pipe, where the kernel says ENOTTY / EBADF / EFAULT */
  errno = 0;
  report("ioctl_XFS_IOC_SWAPEXT", ioctl(pipefd[0], 0xc0c0586dUL, NULL));
  errno = 0;
  report("ioctl_XFS_IOC_EXCHANGE_RANGE", ioctl(pipefd[0], 0x40285881UL, NULL));
  errno = 0;
  report("ioctl_EXT4_IOC_MOVE_EXT", ioctl(pipefd[0], 0xc028660fUL, NULL));
  errno = 0;
  report("ioctl_F2FS_IOC_MOVE_RANGE", ioctl(pipefd[0], 0xc020f509UL, NULL));
  errno = 0;
  report("ioctl_FICLONE", ioctl(pipefd[0], 0x40049409UL, -1));
  errno = 0;
  report("ioctl_FICLONERANGE", ioctl(pipefd[0], 0x4020940dUL, NULL));
  errno = 0;
  report("ioctl_FIDEDUPERANGE", ioctl(pipefd[0], 0xc0189436UL, NULL));
  /* personality flags that change the kernel's treatment of the process: the old persona without the filter */
  errno = 0;
  report("personality_READ_IMPLIES_EXEC", syscall(SYS_personality, 0x0400000));
  errno = 0;
  report("personality_UNAME26", syscall(SYS_personality, 0x0020000));
  errno = 0;
  report("personality_MMAP_PAGE_ZERO", syscall(SYS_personality, 0x0100000));
  /* Allowed: PER_LINUX and ADDR_NO_RANDOMIZE (the test expects 0 for "allowed_" lines). */
  errno = 0;
  report("allowed_personality_ADDR_NO_RANDOMIZE", syscall(SYS_personality, 0x0040000));
  errno = 0;
  report("allowed_personality_PER_LINUX", syscall(SYS_personality, 0));
  return 0;
}
