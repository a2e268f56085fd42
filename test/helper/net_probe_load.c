/* The net probe's load modes (net_probe.c has the others and the usage): many connections at once, and
 * connects repeated until the allowlist refuses one. Static, run inside sandboxes only (main checks). */
#include "net_probe.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long boot_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_BOOTTIME, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* tcp-flood: N non-blocking connects at once, held open for HOLD seconds: "OPEN n RESET n OTHER n" counts
 * what stood after the first 5 s (connected and not reset by then), what was reset, and the rest. */
int tcp_flood(const char *addr, int port, int n, int hold) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) == 0) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
  if (n > 4000) n = 4000;
  static struct pollfd p[4000];
  struct sockaddr_storage sa;
  socklen_t len = address(addr, port, &sa);
  int made = 0;
  for (int i = 0; i < n; ++i) {
    int s = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (s < 0) break;
    if (connect(s, (struct sockaddr *)&sa, len) < 0 && errno != EINPROGRESS) {
      close(s);
      continue;
    }
    p[made].fd = s;
    p[made].events = POLLOUT;
    ++made;
  }
  int reset = 0;
  const time_t end = time(NULL) + 5;
  while (time(NULL) < end) {
    poll(p, (nfds_t)made, 200);
    for (int i = 0; i < made; ++i) {
      if (p[i].fd < 0) continue;
      if (p[i].revents & (POLLERR | POLLHUP)) {
        close(p[i].fd);
        p[i].fd = -1;  /* refused or reset: the gateway did not take it */
        ++reset;
      } else if (p[i].revents & POLLOUT) {
        p[i].events = 0;  /* connected: from now on only an error or a hang-up wakes it */
      }
    }
  }
  int open = 0;
  for (int i = 0; i < made; ++i) open += p[i].fd >= 0;
  printf("OPEN %d RESET %d OTHER %d\n", open, reset, n - open - reset);
  sleep((unsigned)hold);
  return 0;
}

/* until-eperm: connects to ADDR:PORT over and over (each socket closed at once) until connect() fails with
 * EPERM, for at most MS: "BOOT_NS <CLOCK_BOOTTIME of that connect>" or "TIMEOUT". */
int until_eperm(const char *addr, int port, int ms) {
  struct sockaddr_storage sa;
  socklen_t len = address(addr, port, &sa);
  const long long end = boot_ns() + (long long)ms * 1000000LL;
  for (;;) {
    int s = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int rc = connect(s, (struct sockaddr *)&sa, len), e = errno;
    const long long now = boot_ns();
    close(s);
    if (rc < 0 && e == EPERM) {
      printf("BOOT_NS %lld\n", now);
      return 0;
    }
    if (now > end) {
      printf("TIMEOUT\n");
      return 0;
    }
    usleep(20);
  }
}
