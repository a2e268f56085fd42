/* Resource bombs, each to be contained in the sandbox that runs it: descriptors, inodes, disk, /dev/shm,
 * output, memory, processes, a tree that ignores SIGTERM. Each prints "RESULT NAME key=value..." lines
 * (what it got before the bound stopped it); the runner checks the bound and the neighbours.
 * See docs/SECURITY-TESTS.md. */
#include "attack.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* Open /dev/null until refused, after raising the soft limit to the hard one. */
static int fds(int argc, char **argv) {
  (void)argc, (void)argv;
  struct rlimit r;
  getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  setrlimit(RLIMIT_NOFILE, &r);
  getrlimit(RLIMIT_NOFILE, &r);
  unsigned long opened = 0;
  while (open("/dev/null", O_RDONLY) >= 0) ++opened;
  printf("RESULT fds opened=%lu errno=%s hard=%llu\n", opened, E(), (unsigned long long)r.rlim_max);
  return 0;
}

/* argv[1]: a directory; argv[2]: most files to make. Empty files until refused. */
static int inodes(int argc, char **argv) {
  if (argc < 3) return verdict(kError, "usage: inodes DIR MAX");
  unsigned long max = strtoul(argv[2], NULL, 10), made = 0;
  mkdir(argv[1], 0755);
  if (chdir(argv[1]) != 0) return verdict(kError, "chdir %s: %s", argv[1], E());
  const char *why = "max";
  char name[32];
  for (; made < max; ++made) {
    snprintf(name, sizeof name, "%lx", made);
    int fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) {
      why = E();
      break;
    }
    close(fd);
  }
  printf("RESULT inodes made=%lu stop=%s\n", made, why);
  return 0;
}

/* argv[1]: a file; 1 MiB writes until refused. */
static int fill(int argc, char **argv) {
  if (argc < 2) return verdict(kError, "usage: fill FILE");
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return verdict(kError, "open %s: %s", argv[1], E());
  static char buf[1 << 20];
  memset(buf, 'x', sizeof buf);
  unsigned long long total = 0;
  for (;;) {
    ssize_t n = write(fd, buf, sizeof buf);
    if (n <= 0) break;
    total += (unsigned long long)n;
  }
  printf("RESULT fill bytes=%llu stop=%s\n", total, E());
  close(fd);
  return 0;
}

/* argv[1]: bytes to write to stdout, as fast as the pipe takes them. */
static int output(int argc, char **argv) {
  if (argc < 2) return verdict(kError, "usage: output BYTES");
  unsigned long long left = strtoull(argv[1], NULL, 10);
  static char buf[1 << 16];
  memset(buf, 'o', sizeof buf);
  while (left > 0) {
    size_t n = left < sizeof buf ? (size_t)left : sizeof buf;
    ssize_t w = write(1, buf, n);
    if (w <= 0) return 1;
    left -= (unsigned long long)w;
  }
  return 0;
}

/* Touches 1 MiB chunks until killed. */
static int memory(int argc, char **argv) {
  (void)argc, (void)argv;
  unsigned long mib = 0;
  for (;;) {
    char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      printf("RESULT memory mib=%lu stop=%s\n", mib, E());
      return 0;
    }
    memset(p, 1, 1 << 20);
    ++mib;
  }
}

/* Forks until refused; the children wait to be killed. */
static int forks(int argc, char **argv) {
  (void)argc, (void)argv;
  unsigned long made = 0;
  for (;;) {
    pid_t p = fork();
    if (p == 0) {
      pause();
      _exit(0);
    }
    if (p < 0) break;
    ++made;
  }
  printf("RESULT forks made=%lu stop=%s\n", made, E());
  return 0;
}

/* argv[1]: children. Every process ignores SIGTERM, and each child leaves the exec's process group and
 * session: only killing the whole tree (the sandbox's cgroup or pid namespace) ends them. */
static int ignore_term(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 3;
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  for (int i = 0; i < n; ++i) {
    pid_t p = fork();
    if (p == 0) {
      setsid();
      if (fork() == 0) { /* a grandchild, re-parented to the init */
        for (;;) pause();
      }
      for (;;) pause();
    }
  }
  printf("RESULT ignore-term started=%d\n", n);
  fflush(stdout);
  for (;;) pause();
  return 0;
}

static const struct attack kAttacks[] = {
    {"fds", fds},       {"inodes", inodes}, {"fill", fill},   {"output", output},
    {"memory", memory}, {"forks", forks},   {"ignore-term", ignore_term},
};
ATTACK_MAIN(kAttacks)
