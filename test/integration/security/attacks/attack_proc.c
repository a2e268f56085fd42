/* Namespaces, mounts, processes and signals: new namespaces by every call, joining the init's, mount
 * calls, pivot_root, the cgroup tree, ptrace and memory access to the init (the agent), stealing its
 * descriptors, signals to host processes, terminal injection, inherited descriptors, the agent's socket.
 * See docs/SECURITY-TESTS.md. */
#include "attack.h"

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <termios.h>

#define COUNT(a) (sizeof(a) / sizeof *(a))

struct clone3_args {
  unsigned long long flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

static const struct {
  const char *name;
  unsigned long flag;
} kNsFlags[] = {{"user", CLONE_NEWUSER}, {"mnt", CLONE_NEWNS},       {"pid", CLONE_NEWPID},
                {"net", CLONE_NEWNET},   {"ipc", CLONE_NEWIPC},      {"uts", CLONE_NEWUTS},
                {"cgroup", CLONE_NEWCGROUP}, {"time", 0x00000080 /* CLONE_NEWTIME */}};

static int unshare_all(int argc, char **argv) {
  (void)argc, (void)argv;
  for (size_t i = 0; i < COUNT(kNsFlags); ++i)
    if (unshare(kNsFlags[i].flag) == 0) return verdict(kEscaped, "unshare(CLONE_NEW%s) succeeded", kNsFlags[i].name);
  return verdict(kBlocked, "unshare refused for all %zu namespace types", COUNT(kNsFlags));
}

/* A child in a new namespace exits at once: its existence is the finding. */
static int clone_ns(int argc, char **argv) {
  (void)argc, (void)argv;
  for (size_t i = 0; i < COUNT(kNsFlags); ++i) {
    long pid = syscall(SYS_clone, kNsFlags[i].flag | SIGCHLD, NULL, NULL, NULL, 0);
    if (pid == 0) _exit(0);
    if (pid > 0) {
      waitpid((pid_t)pid, NULL, 0);
      return verdict(kEscaped, "clone(CLONE_NEW%s) made a child", kNsFlags[i].name);
    }
  }
  return verdict(kBlocked, "clone refused for all namespace flags");
}

static int clone3_ns(int argc, char **argv) {
  (void)argc, (void)argv;
  for (size_t i = 0; i < COUNT(kNsFlags); ++i) {
    struct clone3_args a;
    memset(&a, 0, sizeof a);
    a.flags = kNsFlags[i].flag;
    a.exit_signal = SIGCHLD;
    long pid = syscall(SYS_clone3, &a, sizeof a);
    if (pid == 0) _exit(0);
    if (pid > 0) {
      waitpid((pid_t)pid, NULL, 0);
      return verdict(kEscaped, "clone3(CLONE_NEW%s) made a child", kNsFlags[i].name);
    }
  }
  return verdict(kBlocked, "clone3 refused for all namespace flags (the namespace counters are 0)");
}

static int setns_all(int argc, char **argv) {
  (void)argc, (void)argv;
  const char *ns[] = {"mnt", "net", "pid", "user", "ipc", "uts", "cgroup", "time"};
  for (size_t i = 0; i < COUNT(ns); ++i) {
    char path[64];
    snprintf(path, sizeof path, "/proc/1/ns/%s", ns[i]);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    int rc = setns(fd, 0);
    int err = errno;
    close(fd);
    if (rc == 0) return verdict(kEscaped, "setns(%s) succeeded", path);
    if (err != EPERM) return verdict(kEscaped, "setns(%s) not refused by policy: %s", path, strerror(err));
  }
  return verdict(kBlocked, "setns refused (EPERM)");
}

static int mount_family(int argc, char **argv) {
  (void)argc, (void)argv;
  mkdir("/tmp/m", 0755);
  struct {
    const char *what, *src, *type;
    unsigned long flags;
  } m[] = {{"tmpfs", "none", "tmpfs", 0},       {"proc", "proc", "proc", 0},
           {"bind /", "/", NULL, MS_BIND | MS_REC}, {"cgroup2", "none", "cgroup2", 0},
           {"remount / rw", "/", NULL, MS_REMOUNT | MS_BIND}, {"devpts", "devpts", "devpts", 0}};
  for (size_t i = 0; i < COUNT(m); ++i)
    if (mount(m[i].src, "/tmp/m", m[i].type, m[i].flags, NULL) == 0) return verdict(kEscaped, "mount %s", m[i].what);
  if (umount2("/proc", MNT_DETACH) == 0) return verdict(kEscaped, "unmounted /proc");
  long fd = syscall(SYS_fsopen, "tmpfs", 0);
  if (fd >= 0) return verdict(kEscaped, "fsopen(tmpfs)");
  fd = syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* OPEN_TREE_CLONE */);
  if (fd >= 0) return verdict(kEscaped, "open_tree(/, CLONE)");
  return verdict(kBlocked, "mount, umount, fsopen and open_tree refused");
}

static int pivot(int argc, char **argv) {
  (void)argc, (void)argv;
  if (chdir("/tmp") != 0) return verdict(kError, "chdir: %s", E());
  if (syscall(SYS_pivot_root, ".", ".") == 0) return verdict(kEscaped, "pivot_root succeeded");
  return verdict(kBlocked, "pivot_root: %s", E());
}

/* A cgroup filesystem inside would let a process move itself to a parent's group, out of its limits. */
static int cgroup_escape(int argc, char **argv) {
  (void)argc, (void)argv;
  char before[512] = "", after[512] = "";
  read_small("/proc/self/cgroup", before, sizeof before);
  FILE *f = fopen("/proc/self/mountinfo", "r");
  char line[4096];
  int writable = 0;
  char found[512] = "";
  while (f && fgets(line, sizeof line, f)) {
    if (!strstr(line, " - cgroup")) continue;
    char mnt[512];
    if (sscanf(line, "%*d %*d %*s %*s %511s", mnt) != 1) continue;
    const char *rel[] = {"/../cgroup.procs", "/cgroup.procs", "/../../cgroup.procs"};
    for (size_t i = 0; i < COUNT(rel); ++i) {
      char p[1100];
      snprintf(p, sizeof p, "%s%s", mnt, rel[i]);
      int fd = open(p, O_WRONLY | O_CLOEXEC);
      if (fd < 0) continue;
      char pid[32];
      int n = snprintf(pid, sizeof pid, "%d\n", getpid());
      if (write(fd, pid, n) == n) {
        ++writable;
        snprintf(found, sizeof found, "%.500s", p);
      }
      close(fd);
    }
  }
  if (f) fclose(f);
  read_small("/proc/self/cgroup", after, sizeof after);
  if (strcmp(before, after) != 0) return verdict(kEscaped, "moved to another cgroup via %s: %s", found, after);
  if (strstr(after, "..")) return verdict(kEscaped, "the cgroup path leaves the sandbox's namespace: %s", after);
  (void)writable;
  return verdict(kBlocked, "no cgroup.procs above the sandbox's group is reachable; still in its own groups");
}

/* ptrace of the init (the agent): attach, seize. */
static int ptrace_init(int argc, char **argv) {
  (void)argc, (void)argv;
  if (ptrace(PTRACE_ATTACH, 1, NULL, NULL) == 0) {
    ptrace(PTRACE_DETACH, 1, NULL, NULL);
    return verdict(kEscaped, "PTRACE_ATTACH to the init succeeded");
  }
  int first = errno;
  if (ptrace(PTRACE_SEIZE, 1, NULL, NULL) == 0) {
    ptrace(PTRACE_DETACH, 1, NULL, NULL);
    return verdict(kEscaped, "PTRACE_SEIZE of the init succeeded");
  }
  return verdict(kBlocked, "ptrace of the init refused (%s, %s)", strerror(first), E());
}

/* ptrace at all (denied by the default profile unless the spec relaxes `ptrace`): a traced child. */
static int ptrace_any(int argc, char **argv) {
  (void)argc, (void)argv;
  pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  long rc = ptrace(PTRACE_SEIZE, child, NULL, NULL);
  int err = errno;
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  if (rc == 0) return verdict(kEscaped, "ptrace(PTRACE_SEIZE) of a child allowed");
  if (err != EPERM) return verdict(kEscaped, "ptrace not refused by policy: %s", strerror(err));
  return verdict(kBlocked, "ptrace: EPERM");
}

static int init_memory(int argc, char **argv) {
  (void)argc, (void)argv;
  int fd = open("/proc/1/mem", O_RDWR | O_CLOEXEC);
  if (fd >= 0) {
    close(fd);
    return verdict(kEscaped, "/proc/1/mem opens for writing");
  }
  char buf[16];
  struct iovec local = {buf, sizeof buf}, remote = {(void *)0x400000, sizeof buf};
  long rc = process_vm_readv(1, &local, 1, &remote, 1, 0);
  if (rc >= 0 || errno == EFAULT) return verdict(kEscaped, "process_vm_readv of the init allowed");
  char maps[64];
  if (read_small("/proc/1/maps", maps, sizeof maps) > 0) return verdict(kEscaped, "/proc/1/maps readable");
  char environ[64];
  if (read_small("/proc/1/environ", environ, sizeof environ) > 0) return verdict(kEscaped, "/proc/1/environ readable");
  return verdict(kBlocked, "the init's memory, maps and environment are out of reach");
}

/* pidfd_getfd: copy the init's descriptors (its agent sockets, its layer handles). */
static int steal_fds(int argc, char **argv) {
  (void)argc, (void)argv;
  long pidfd = syscall(SYS_pidfd_open, 1, 0);
  if (pidfd < 0) return verdict(kBlocked, "pidfd_open(1): %s", E());
  for (int n = 0; n < 256; ++n) {
    long fd = syscall(SYS_pidfd_getfd, pidfd, n, 0);
    if (fd >= 0) {
      char link[64], target[256] = "";
      snprintf(link, sizeof link, "/proc/self/fd/%ld", fd);
      ssize_t len = readlink(link, target, sizeof target - 1);
      if (len > 0) target[len] = 0;
      return verdict(kEscaped, "took the init's descriptor %d (%s)", n, target);
    }
    if (errno != EPERM && errno != EBADF) return verdict(kBlocked, "pidfd_getfd: %s", E());
  }
  return verdict(kBlocked, "pidfd_getfd refused for every descriptor of the init");
}

/* argv[1]: a host pid. It is not in the sandbox's pid namespace: the signal reaches nothing. */
static int kill_host(int argc, char **argv) {
  if (argc < 2) return verdict(kError, "usage: kill-host PID");
  pid_t pid = atoi(argv[1]);
  char path[64];
  snprintf(path, sizeof path, "/proc/%d", pid);
  int visible = access(path, F_OK) == 0;
  if (kill(pid, SIGTERM) == 0 && !visible) return verdict(kEscaped, "signalled host pid %d", pid);
  return verdict(kBlocked, "kill(%d): %s", pid, visible ? "a pid of the sandbox's own" : E());
}

/* Every pid up to pid_max: those that answer kill(p, 0) are all visible in this /proc (the sandbox's). */
static int pid_scan(int argc, char **argv) {
  (void)argc, (void)argv;
  char buf[32];
  int max = read_small("/proc/sys/kernel/pid_max", buf, sizeof buf) > 0 ? atoi(buf) : 32768;
  if (max > 4194304 || max <= 0) max = 4194304;
  int found = 0;
  for (int p = 2; p < max; ++p) {
    if (kill(p, 0) != 0 && errno == ESRCH) continue;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d", p);
    if (access(path, F_OK) != 0) return verdict(kEscaped, "pid %d answers but is not in the sandbox", p);
    ++found;
  }
  return verdict(kBlocked, "%d of %d pids answer, all the sandbox's own", found, max);
}

/* kill(-1, SIGKILL): every process the caller may signal. Only the sandbox's (never its init). */
static int kill_all(int argc, char **argv) {
  (void)argc, (void)argv;
  if (kill(-1, SIGKILL) != 0 && errno != ESRCH) return verdict(kError, "kill(-1): %s", E());
  if (kill(1, SIGKILL) == 0 && access("/proc/1", F_OK) != 0) return verdict(kEscaped, "the init died");
  return verdict(kBlocked, "kill(-1, SIGKILL) reached only the sandbox's processes (the host checks its own)");
}

/* TIOCSTI on every terminal reachable: the exec's descriptors, /dev/tty, a fresh pty. */
static int tiocsti(int argc, char **argv) {
  (void)argc, (void)argv;
  char c = '#';
  for (int fd = 0; fd < 3; ++fd)
    if (ioctl(fd, TIOCSTI, &c) == 0) return verdict(kEscaped, "TIOCSTI into descriptor %d", fd);
  int tty = open("/dev/tty", O_RDWR | O_CLOEXEC);
  if (tty >= 0 && ioctl(tty, TIOCSTI, &c) == 0) return verdict(kEscaped, "TIOCSTI into /dev/tty");
  int ptm = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (ptm >= 0) {
    int unlock = 0;
    ioctl(ptm, TIOCSPTLCK, &unlock);
    int pts = ioctl(ptm, TIOCGPTPEER, O_RDWR | O_NOCTTY);
    if (pts >= 0 && ioctl(pts, TIOCSTI, &c) == 0) return verdict(kEscaped, "TIOCSTI allowed (own pty)");
    if (pts >= 0 && errno != EPERM) return verdict(kEscaped, "TIOCSTI not refused by policy: %s", E());
  }
  return verdict(kBlocked, "TIOCSTI refused on every terminal");
}

/* Descriptors this exec inherited beyond its three standard streams. */
static int inherited_fds(int argc, char **argv) {
  (void)argc, (void)argv;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return verdict(kError, "opendir: %s", E());
  int self = dirfd(d);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    int fd = atoi(e->d_name);
    if (fd <= 2 || fd == self) continue;
    char link[64], target[256] = "";
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n > 0) target[n] = 0;
    closedir(d);
    return verdict(kEscaped, "inherited descriptor %d -> %s", fd, target);
  }
  closedir(d);
  return verdict(kBlocked, "only the standard streams were inherited");
}

/* Unix sockets this network namespace lists: none reaches the agent or anything of the host. argv[1..]:
 * host socket paths (the agent's) tried by name. */
static int agent_socket(int argc, char **argv) {
  int tried = 0;
  for (int i = 1; i < argc; ++i) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%.107s", argv[i]);
    ++tried;
    if (connect(s, (struct sockaddr *)&a, sizeof a) == 0) {
      /* A forged frame: 8-byte header (len, type, version), an exec request's type. */
      unsigned char frame[16] = {8, 0, 0, 0, 1, 1, 0, 0, 'f', 'o', 'r', 'g', 'e', 'd', '!', '!'};
      if (write(s, frame, sizeof frame) < 0) {}
      close(s);
      return verdict(kEscaped, "connected to the host socket %s and sent a forged frame", argv[i]);
    }
    close(s);
  }
  FILE *f = fopen("/proc/net/unix", "r");
  char line[1024];
  while (f && fgets(line, sizeof line, f)) {
    char path[512];
    if (sscanf(line, "%*s %*s %*s %*s %*s %*s %*s %511s", path) != 1) continue;
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    socklen_t len;
    if (path[0] == '@') {
      size_t n = strlen(path);
      if (n > sizeof a.sun_path) n = sizeof a.sun_path;
      memcpy(a.sun_path + 1, path + 1, n - 1);
      len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    } else {
      snprintf(a.sun_path, sizeof a.sun_path, "%.107s", path);
      len = sizeof a;
    }
    ++tried;
    if (connect(s, (struct sockaddr *)&a, len) == 0) {
      close(s);
      fclose(f);
      return verdict(kEscaped, "connected to the listed unix socket %s", path);
    }
    close(s);
  }
  if (f) fclose(f);
  return verdict(kBlocked, "%d unix sockets tried, none connects", tried);
}

/* runc's CVE-2019-5736 shape: overwrite the runtime's binary through /proc/<init>/exe. */
static int init_exe(int argc, char **argv) {
  (void)argc, (void)argv;
  const char *p[] = {"/proc/1/exe", "/proc/1/map_files"};
  int fd = open(p[0], O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    close(fd);
    return verdict(kEscaped, "/proc/1/exe opens for writing");
  }
  fd = open(p[0], O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    close(fd);
    return verdict(kEscaped, "/proc/1/exe opens (the init's binary, for a later write)");
  }
  DIR *d = opendir(p[1]);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)))
      if (e->d_name[0] != '.') {
        closedir(d);
        return verdict(kEscaped, "/proc/1/map_files lists the init's mappings");
      }
    closedir(d);
  }
  return verdict(kBlocked, "the init's binary is out of reach");
}

/* Making itself the last the host's OOM killer picks, or starving the host's CPUs with real-time
 * scheduling or the real-time I/O class: each needs a capability of the host's user namespace. */
static int oom_score(int argc, char **argv) {
  (void)argc, (void)argv;
  int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return verdict(kBlocked, "oom_score_adj: %s", E());
  int rc = (int)write(fd, "-1000", 5);
  close(fd);
  char now[32] = "";
  read_small("/proc/self/oom_score_adj", now, sizeof now);
  if (rc == 5 && atoi(now) < 0) return verdict(kEscaped, "oom_score_adj lowered to %d", atoi(now));
  return verdict(kBlocked, "oom_score_adj stays %d", atoi(now));
}

static int realtime(int argc, char **argv) {
  (void)argc, (void)argv;
  struct sched_param sp = {.sched_priority = 99};
  if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0) return verdict(kEscaped, "SCHED_FIFO 99 granted");
  if (sched_setscheduler(0, SCHED_RR, &sp) == 0) return verdict(kEscaped, "SCHED_RR 99 granted");
  if (setpriority(0 /* PRIO_PROCESS */, 0, -20) == 0 && getpriority(0, 0) < 0)
    return verdict(kEscaped, "nice -20 granted");
  /* ioprio_set(IOPRIO_WHO_PROCESS, self, IOPRIO_CLASS_RT << 13 | 0) */
  if (syscall(SYS_ioprio_set, 1, 0, (1 << 13) | 0) == 0) return verdict(kEscaped, "real-time I/O class granted");
  return verdict(kBlocked, "real-time scheduling, negative nice and real-time I/O refused");
}

static const struct attack kAttacks[] = {
    {"unshare", unshare_all},      {"clone-ns", clone_ns},     {"clone3-ns", clone3_ns},
    {"setns", setns_all},          {"mount", mount_family},    {"pivot-root", pivot},
    {"cgroup-escape", cgroup_escape}, {"ptrace-init", ptrace_init}, {"ptrace", ptrace_any},
    {"init-memory", init_memory},  {"steal-fds", steal_fds},   {"kill-host", kill_host},
    {"pid-scan", pid_scan},        {"kill-all", kill_all},     {"tiocsti", tiocsti},
    {"inherited-fds", inherited_fds}, {"agent-socket", agent_socket},  {"init-exe", init_exe},
    {"oom-score", oom_score},      {"realtime", realtime},
};
ATTACK_MAIN(kAttacks)
