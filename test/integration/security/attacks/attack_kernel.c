/* Kernel attack surface: kernel files (/proc/kcore, kpage*, sysrq-trigger, /proc/sys, /sys), the log, and
 * system calls a sandbox never needs (modules, bpf, perf, keyrings, userfaultfd, io_uring, file handles,
 * personality, the 32-bit and x32 entry points, extent swapping and clone/dedupe ioctls).
 * See docs/SECURITY-TESTS.md. */
#include "attack.h"

#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <signal.h>

/* Opens each path with `flags`; the first that opens (and, for reads, gives bytes) is reported. */
static const char *first_open(const char *const *paths, size_t n, int flags) {
  for (size_t i = 0; i < n; ++i) {
    int fd = open(paths[i], flags | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    char b[64];
    ssize_t got = (flags & O_ACCMODE) == O_RDONLY ? pread(fd, b, sizeof b, 0) : 1;
    close(fd);
    if (got > 0) return paths[i];
  }
  return NULL;
}
#define COUNT(a) (sizeof(a) / sizeof *(a))

static int kcore(int argc, char **argv) {
  (void)argc, (void)argv;
  const char *p[] = {"/proc/kcore", "/proc/kmem", "/proc/vmcore"};
  const char *hit = first_open(p, COUNT(p), O_RDONLY);
  return hit ? verdict(kEscaped, "read kernel memory from %s", hit) : verdict(kBlocked, "kcore unreadable");
}

/* The production crash of `grep -r /`: reading the kpage* files. */
static int kpage(int argc, char **argv) {
  (void)argc, (void)argv;
  const char *p[] = {"/proc/kpagecgroup", "/proc/kpageflags", "/proc/kpagecount", "/proc/self/pagemap"};
  for (size_t i = 0; i < 3; ++i) {
    int fd = open(p[i], O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    unsigned long long v;
    ssize_t n = pread(fd, &v, sizeof v, 4096 * 8);
    close(fd);
    if (n > 0) return verdict(kEscaped, "read %s", p[i]);
  }
  return verdict(kBlocked, "kpagecgroup, kpageflags and kpagecount unreadable");
}

static int sysrq(int argc, char **argv) {
  (void)argc, (void)argv;
  /* Only opened: a write would act on the host's kernel. */
  int fd = open("/proc/sysrq-trigger", O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    /* Where a detached mount cannot be cloned (6.1, 6.12) the mask is a read-only bind of /dev/null
     * (docs/POLICY.md): it opens, and what is written is discarded. */
    struct stat st;
    const int null_stand_in = fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 &&
                              minor(st.st_rdev) == 3;
    close(fd);
    if (null_stand_in) return verdict(kBlocked, "/proc/sysrq-trigger is the /dev/null stand-in");
    return verdict(kEscaped, "/proc/sysrq-trigger opens for writing");
  }
  return verdict(kBlocked, "/proc/sysrq-trigger: %s", E());
}

/* Global kernel settings under /proc/sys (not the sandbox's own namespaced ones). The value read is what
 * would be written back, so even a success changes nothing. */
static int proc_sys(int argc, char **argv) {
  (void)argc, (void)argv;
  const char *p[] = {"/proc/sys/kernel/panic",       "/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe",
                     "/proc/sys/vm/drop_caches",     "/proc/sys/vm/overcommit_memory", "/proc/sys/fs/file-max",
                     "/proc/sys/kernel/pid_max",     "/proc/sys/user/max_user_namespaces",
                     "/proc/sys/kernel/sysrq",       "/proc/sys/kernel/randomize_va_space"};
  for (size_t i = 0; i < COUNT(p); ++i) {
    int fd = open(p[i], O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      close(fd);
      return verdict(kEscaped, "%s opens for writing", p[i]);
    }
  }
  return verdict(kBlocked, "%zu global /proc/sys files refuse writes", COUNT(p));
}

static int sysfs(int argc, char **argv) {
  (void)argc, (void)argv;
  const char *p[] = {"/sys/kernel/mm/transparent_hugepage/enabled", "/sys/power/state", "/sys/kernel/uevent_helper",
                     "/sys/module/sysrq/parameters/reset_seq", "/sys/fs/cgroup/cgroup.procs",
                     "/sys/kernel/profiling"};
  for (size_t i = 0; i < COUNT(p); ++i) {
    int fd = open(p[i], O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      close(fd);
      return verdict(kEscaped, "%s opens for writing", p[i]);
    }
  }
  mkdir("/tmp/sys", 0755);
  if (mount("sysfs", "/tmp/sys", "sysfs", 0, NULL) == 0) return verdict(kEscaped, "mounted sysfs");
  return verdict(kBlocked, "no sysfs file writable, sysfs cannot be mounted");
}

static int kernel_log(int argc, char **argv) {
  (void)argc, (void)argv;
  char buf[256];
  if (syscall(SYS_syslog, 3 /* READ_ALL */, buf, sizeof buf) > 0) return verdict(kEscaped, "syslog(READ_ALL) read the kernel log");
  if (syscall(SYS_syslog, 5 /* CLEAR */, NULL, 0) == 0) return verdict(kEscaped, "syslog(CLEAR) cleared the kernel log");
  const char *p[] = {"/dev/kmsg", "/proc/kmsg"};
  const char *hit = first_open(p, COUNT(p), O_RDONLY);
  return hit ? verdict(kEscaped, "read %s", hit) : verdict(kBlocked, "kernel log unreadable");
}

/* Host-wide information in /proc that a sandbox has no use for (masked by policy.mask_kernel_files):
 * each one that gives bytes is named; /proc/iomem and /proc/kallsyms only when they show addresses. */
static int nonzero_hex_at_start(const char *path) {
  char buf[512];
  if (read_small(path, buf, sizeof buf) <= 0) return 0;
  return strtoull(buf, NULL, 16) != 0 || strtoull(strchr(buf, '-') ? strchr(buf, '-') + 1 : "0", NULL, 16) != 0;
}
static int kernel_info(int argc, char **argv) {
  (void)argc, (void)argv;
  const char *p[] = {"/proc/timer_list", "/proc/sched_debug", "/proc/slabinfo", "/proc/vmallocinfo",
                     "/proc/keys", "/proc/key-users", "/proc/latency_stats", "/proc/pagetypeinfo",
                     "/sys/kernel/debug/tracing/trace"};
  char hits[900] = "";
  for (size_t i = 0; i < COUNT(p); ++i)
    if (first_open(&p[i], 1, O_RDONLY)) snprintf(hits + strlen(hits), sizeof hits - strlen(hits), " %s", p[i]);
  for (const char *q = "/proc/kallsyms"; q; q = strcmp(q, "/proc/kallsyms") == 0 ? "/proc/iomem" : NULL)
    if (nonzero_hex_at_start(q)) snprintf(hits + strlen(hits), sizeof hits - strlen(hits), " %s(addresses)", q);
  if (hits[0]) return verdict(kEscaped, "readable host-wide:%s", hits);
  return verdict(kBlocked, "host-wide kernel files unreadable or empty");
}

/* One system call that must fail with EPERM (the policy's errno) and not by chance. */
static int expect_eperm(const char *what, long rc) {
  if (rc >= 0) return verdict(kEscaped, "%s succeeded (%ld)", what, rc);
  if (errno != EPERM) return verdict(kEscaped, "%s was not refused by policy: %s", what, E());
  return verdict(kBlocked, "%s: EPERM", what);
}

static int modules(int argc, char **argv) {
  (void)argc, (void)argv;
  long rc = syscall(SYS_finit_module, -1, "", 0);
  if (rc == 0 || errno != EPERM) return expect_eperm("finit_module", rc);
  return expect_eperm("init_module", syscall(SYS_init_module, NULL, 0, ""));
}

static int bpf(int argc, char **argv) {
  (void)argc, (void)argv;
  /* BPF_PROG_LOAD with no attributes: EINVAL/EFAULT if the call reached the kernel. */
  return expect_eperm("bpf(BPF_PROG_LOAD)", syscall(SYS_bpf, 5, NULL, 0));
}

static int perf(int argc, char **argv) {
  (void)argc, (void)argv;
  unsigned char attr[128] = {0};
  attr[4] = 128; /* size */
  return expect_eperm("perf_event_open(cpu-wide)", syscall(SYS_perf_event_open, attr, -1, 0, -1, 0));
}

static int keyring(int argc, char **argv) {
  (void)argc, (void)argv;
  long rc = syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */, -4 /* user keyring */, 0);
  if (rc >= 0 || errno != EPERM) return expect_eperm("keyctl(GET_KEYRING_ID)", rc);
  return expect_eperm("add_key", syscall(SYS_add_key, "user", "attack", "x", 1, -4));
}

static int userfaultfd(int argc, char **argv) {
  (void)argc, (void)argv;
  int fd = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
  if (fd >= 0) return verdict(kEscaped, "/dev/userfaultfd opened");
  return expect_eperm("userfaultfd", syscall(SYS_userfaultfd, O_CLOEXEC));
}

static int io_uring(int argc, char **argv) {
  (void)argc, (void)argv;
  unsigned char params[120] = {0};
  return expect_eperm("io_uring_setup", syscall(SYS_io_uring_setup, 4, params));
}

/* Personality flags that change how the kernel treats the process (READ_IMPLIES_EXEC, MMAP_PAGE_ZERO, the
 * legacy address-space layouts, UNAME26): refused. (PER_LINUX32 and ADDR_NO_RANDOMIZE are for debuggers
 * and setarch -R, and allowed.) Whether one took effect is read back by setting PER_LINUX, which returns
 * the persona before it. */
static int personality_tricks(int argc, char **argv) {
  (void)argc, (void)argv;
  unsigned long flags[] = {READ_IMPLIES_EXEC, MMAP_PAGE_ZERO, ADDR_COMPAT_LAYOUT, ADDR_LIMIT_32BIT, UNAME26,
                           ADDR_LIMIT_3GB};
  for (size_t i = 0; i < COUNT(flags); ++i) {
    if (personality(flags[i]) == -1) continue;
    int was = personality(PER_LINUX);
    if (was != -1 && (was & flags[i])) return verdict(kEscaped, "personality(0x%lx) took effect", flags[i]);
  }
  return verdict(kBlocked, "personality changes refused");
}

/* A denied call through the 32-bit entry (int 0x80) and the x32 ABI, in a child (a filter may kill it).
 * unshare(CLONE_NEWUSER) past the filter would fail with ENOSPC (the sandbox's namespace counters are 0):
 * only EPERM (filter), ENOSYS (no such ABI) or death by SIGSYS mean the filter saw the call. */
static int other_abi(int which) {
  pid_t child = fork();
  if (child == 0) {
    long rc;
    if (which == 0) {
      /* i386 unshare is 310 */
      __asm__ volatile("int $0x80" : "=a"(rc) : "a"(310L), "b"(0x10000000L) : "memory");
    } else {
      rc = syscall(0x40000000L | SYS_unshare, 0x10000000L);
      if (rc < 0) rc = -errno;
    }
    _exit(rc == -EPERM ? 0 : rc == -ENOSYS ? 1 : rc == -ENOSPC ? 20 : rc == 0 ? 21 : 22);
  }
  int status = 0;
  waitpid(child, &status, 0);
  const char *abi = which == 0 ? "int 0x80" : "x32";
  if (WIFSIGNALED(status))
    return verdict(kBlocked, "%s unshare: killed by signal %d", abi, WTERMSIG(status));
  int code = WEXITSTATUS(status);
  if (code == 0) return verdict(kBlocked, "%s unshare: EPERM", abi);
  if (code == 1) return verdict(kBlocked, "%s unshare: ENOSYS (no such ABI here)", abi);
  return verdict(kEscaped, "%s unshare got past the filter (child code %d)", abi, code);
}
static int int80(int argc, char **argv) { (void)argc, (void)argv; return other_abi(0); }
static int x32(int argc, char **argv) { (void)argc, (void)argv; return other_abi(1); }

/* Extent-sharing and swapping ioctls against a file of the lower layer: refused by policy (EPERM). */
static int extent_ioctl(const char *what, unsigned long req, int need_dst_arg) {
  int src = open("/bin/busybox", O_RDONLY | O_CLOEXEC);
  int dst = open("/tmp/extent-target", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (src < 0 || dst < 0) return verdict(kError, "open: %s", E());
  long rc;
  if (req == FICLONE) {
    rc = ioctl(dst, FICLONE, src);
  } else if (req == FICLONERANGE) {
    struct file_clone_range r = {.src_fd = src, .src_offset = 0, .src_length = 4096, .dest_offset = 0};
    rc = ioctl(dst, FICLONERANGE, &r);
  } else if (req == FIDEDUPERANGE) {
    static unsigned char buf[sizeof(struct file_dedupe_range) + sizeof(struct file_dedupe_range_info)];
    struct file_dedupe_range *r = (struct file_dedupe_range *)buf;
    r->src_offset = 0;
    r->src_length = 4096;
    r->dest_count = 1;
    r->info[0].dest_fd = dst;
    r->info[0].dest_offset = 0;
    rc = ioctl(src, FIDEDUPERANGE, r);
    if (rc == 0) {
      close(src);
      close(dst);
      return verdict(kEscaped, "FIDEDUPERANGE not refused by policy (status %d, %llu bytes deduped)", r->info[0].status,
                     (unsigned long long)r->info[0].bytes_deduped);
    }
  } else {
    unsigned char arg[256] = {0};
    if (need_dst_arg) memcpy(arg + 4, &dst, sizeof dst);
    rc = ioctl(src, req, arg);
  }
  int err = errno;
  close(src);
  close(dst);
  errno = err;
  return expect_eperm(what, rc);
}
static int ficlone(int argc, char **argv) { (void)argc, (void)argv; return extent_ioctl("FICLONE", FICLONE, 0); }
static int ficlonerange(int argc, char **argv) {
  (void)argc, (void)argv;
  return extent_ioctl("FICLONERANGE", FICLONERANGE, 0);
}
static int fideduperange(int argc, char **argv) {
  (void)argc, (void)argv;
  return extent_ioctl("FIDEDUPERANGE", FIDEDUPERANGE, 0);
}
static int move_ext(int argc, char **argv) {
  (void)argc, (void)argv;
  return extent_ioctl("EXT4_IOC_MOVE_EXT", 0xc028660fUL /* _IOWR('f', 15, struct move_extent) */, 1);
}
static int swapext(int argc, char **argv) {
  (void)argc, (void)argv;
  return extent_ioctl("XFS_IOC_SWAPEXT", 0xc0c0586dUL, 1);
}

static const struct attack kAttacks[] = {
    {"kcore", kcore},
    {"kpage", kpage},
    {"sysrq", sysrq},
    {"proc-sys", proc_sys},
    {"sysfs", sysfs},
    {"kernel-log", kernel_log},
    {"kernel-info", kernel_info},
    {"modules", modules},
    {"bpf", bpf},
    {"perf", perf},
    {"keyring", keyring},
    {"userfaultfd", userfaultfd},
    {"io-uring", io_uring},
    {"personality", personality_tricks},
    {"int80", int80},
    {"x32", x32},
    {"ficlone", ficlone},
    {"ficlonerange", ficlonerange},
    {"fideduperange", fideduperange},
    {"ext4-move-ext", move_ext},
    {"xfs-swapext", swapext},
};
ATTACK_MAIN(kAttacks)
