/* Run inside a sandbox by the network integration tests (static: the test root filesystem has no libc).
 * Refuses to run outside a user namespace (on a host). Each command prints one line:
 *   tcp ADDR PORT             connect (2 s), send "ping", read the echo: "OK <reply>", "ERR <errno name>"
 *                             or "TIMEOUT"
 *   tcp-hold ADDR PORT FILE   as tcp, then waits (<= 10 s) until FILE exists and exchanges once more on
 *                             the same connection: "OK <reply> then <second result>"
 *   udp ADDR PORT             sendto "ping" on an unconnected socket, wait 1 s for the echo
 *   udp-connected ADDR PORT   connect, then send and wait as udp
 *   icmp ADDR                 an ICMP echo request from an unprivileged ping socket, wait 1 s
 *   tcp-send ADDR PORT BYTES  connect, send BYTES bytes, close the sending side, read the reply to its
 *                             end: "OK <reply>" (<= 30 s)
 *   tcp-serve PORT [ADDR]     listen on ADDR:PORT (127.0.0.1), answer one connection with "inside-echo" (<= 20 s)
 *   dns SERVER NAME [tcp]     an A query for NAME to SERVER:53 ("conf": the first nameserver of
 *                             /etc/resolv.conf), over UDP or TCP, 3 s: "OK <first address>", "NOADDR",
 *                             "RCODE <n>", "TIMEOUT" or "ERR <errno name>"
 *   dns-time SERVER NAME      as dns, then a second line "MS <milliseconds to the answer>"
 *   dns-wire SERVER HEX       sends the query HEX (its bytes in hex) over UDP to SERVER:53, waits 3 s:
 *                             "RCODE <n> QNAME <the reply's question name as sent back>" or "TIMEOUT"
 *   dns-flood SERVER NAME N [MS]  N (<= 64) A queries for NAME at once, each from its own socket, waits up
 *                             to MS (10000) for all: "SERVFAIL <n> OTHER <n> NONE <n> MIN_MS <ms> MAX_MS <ms>"
 *                             (the times of the SERVFAIL answers; 0 without any)
 *   until-eperm ADDR PORT MS  connects until connect() fails with EPERM (<= MS): "BOOT_NS <when>" (sandlet-bench net)
 *   tcp-flood ADDR PORT N HOLD  N (<= 4000) connects at once, held HOLD s: "OPEN n RESET n OTHER n" after 5 s
 *   tcp-rtt ADDR PORT N       timing for sandlet-bench net: N times connect (blocking), send "ping",
 *                             read the echo, close: "c CONNECT_NS ECHO_NS" per round (both from before
 *                             socket()); then N echoes on one connection: "e NS" each; last line "OK"
 *                             (<= 60 s in all)
 * ADDR is an IPv4 or IPv6 literal. */
#define _GNU_SOURCE
#include "microvm_guest.h"
#include "net_probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *err_name(int e) {
  switch (e) {
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ENETUNREACH: return "ENETUNREACH";
    case EHOSTUNREACH: return "EHOSTUNREACH";
    case ETIMEDOUT: return "ETIMEDOUT";
    case ECONNRESET: return "ECONNRESET";
    default: return strerror(e);
  }
}

static int in_user_namespace(void) {
  FILE *f = fopen("/proc/self/uid_map", "r");
  unsigned a = 0, b = 0, n = 0;
  if (!f) return 0;
  int ok = fscanf(f, "%u %u %u", &a, &b, &n) == 3 && !(a == 0 && b == 0 && n == 4294967295u);
  fclose(f);
  return ok;
}

socklen_t address(const char *text, int port, struct sockaddr_storage *out) {
  memset(out, 0, sizeof *out);
  struct sockaddr_in *v4 = (struct sockaddr_in *)out;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)out;
  if (inet_pton(AF_INET, text, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((unsigned short)port);
    return sizeof *v4;
  }
  if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((unsigned short)port);
    return sizeof *v6;
  }
  fprintf(stderr, "bad address %s\n", text);
  exit(2);
}

/* Waits up to `ms` for a reply; prints the result. */
static void await_reply(int s, int ms, const char *prefix) {
  struct pollfd p = {s, POLLIN, 0};
  char buf[128];
  if (poll(&p, 1, ms) <= 0) {
    printf("%sTIMEOUT\n", prefix);
    return;
  }
  ssize_t n = recv(s, buf, sizeof buf - 1, 0);
  if (n < 0) {
    printf("%sERR %s\n", prefix, err_name(errno));
    return;
  }
  buf[n] = 0;
  buf[strcspn(buf, "\n")] = 0;
  printf("%sOK %s\n", prefix, n > 0 ? buf : "(eof)");
}

static int tcp_connect(const char *addr, int port) {
  struct sockaddr_storage sa;
  socklen_t len = address(addr, port, &sa);
  int s = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (connect(s, (struct sockaddr *)&sa, len) < 0 && errno != EINPROGRESS) {
    printf("ERR %s\n", err_name(errno));
    return -1;
  }
  struct pollfd p = {s, POLLOUT, 0};
  if (poll(&p, 1, 2000) <= 0) {
    printf("TIMEOUT\n");
    return -1;
  }
  int err = 0;
  socklen_t el = sizeof err;
  getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el);
  if (err) {
    printf("ERR %s\n", err_name(err));
    return -1;
  }
  return s;
}

/* The first "nameserver" of /etc/resolv.conf, or NULL. */
static const char *conf_nameserver(void) {
  static char server[64];
  FILE *f = fopen("/etc/resolv.conf", "r");
  char line[256];
  if (!f) return NULL;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "nameserver %63s", server) == 1) {
      fclose(f);
      return server;
    }
  }
  fclose(f);
  return NULL;
}

/* Skips a (possibly compressed) name at `at`; returns the offset after it, or 0 when it runs out. */
static size_t skip_name(const unsigned char *m, size_t n, size_t at) {
  while (at < n) {
    if (m[at] == 0) return at + 1;
    if ((m[at] & 0xc0) == 0xc0) return at + 2 <= n ? at + 2 : 0;
    at += 1 + m[at];
  }
  return 0;
}

/* An A query for `name` (class IN, recursion desired) with id `id` into `q`: its length, 0 if it does not fit. */
static size_t a_query(unsigned char *q, size_t cap, unsigned id, const char *name) {
  const unsigned char head[12] = {(unsigned char)(id >> 8), (unsigned char)id, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
  if (cap < sizeof head + 5) return 0;
  memcpy(q, head, sizeof head);
  size_t len = 12;
  for (const char *p = name; *p;) {
    const char *dot = strchr(p, '.');
    size_t l = dot ? (size_t)(dot - p) : strlen(p);
    if (l == 0 || l > 63 || len + l + 6 > cap) return 0;
    q[len++] = (unsigned char)l;
    memcpy(q + len, p, l);
    len += l;
    p += l + (dot ? 1 : 0);
  }
  q[len++] = 0;
  q[len++] = 0, q[len++] = 1, q[len++] = 0, q[len++] = 1; /* A, IN */
  return len;
}

/* Prints the outcome of one A query for `name` to `server` port 53. */
static int dns_query(const char *server, const char *name, int tcp) {
  unsigned char q[300];
  const size_t len = a_query(q, sizeof q, 0x1234, name);
  if (len == 0) return 2;
  struct sockaddr_storage sa;
  socklen_t sl = address(server, 53, &sa);
  int s = socket(sa.ss_family, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
  if (s < 0 || connect(s, (struct sockaddr *)&sa, sl) < 0) {
    printf("ERR %s\n", err_name(errno));
    return 0;
  }
  unsigned char out[310];
  size_t olen = 0;
  if (tcp) out[0] = (unsigned char)(len >> 8), out[1] = (unsigned char)len, olen = 2;
  memcpy(out + olen, q, len);
  if (send(s, out, olen + len, MSG_NOSIGNAL) < 0) {
    printf("ERR %s\n", err_name(errno));
    return 0;
  }
  unsigned char m[4096];
  size_t n = 0;
  for (;;) {
    struct pollfd p = {s, POLLIN, 0};
    if (poll(&p, 1, 3000) <= 0) {
      printf("TIMEOUT\n");
      return 0;
    }
    ssize_t r = recv(s, m + n, sizeof m - n, 0);
    if (r < 0) {
      printf("ERR %s\n", err_name(errno));
      return 0;
    }
    n += (size_t)r;
    if (!tcp) break;
    if (r == 0 || (n >= 2 && n >= 2 + ((size_t)m[0] << 8 | m[1]))) break;
  }
  const unsigned char *msg = tcp ? m + 2 : m;
  if (tcp) n = n >= 2 ? n - 2 : 0;
  if (n < 12 || msg[0] != 0x12 || msg[1] != 0x34) {
    printf("ERR malformed\n");
    return 0;
  }
  if (msg[3] & 0x0f) {
    printf("RCODE %d\n", msg[3] & 0x0f);
    return 0;
  }
  size_t at = skip_name(msg, n, 12);
  if (!at || at + 4 > n) {
    printf("ERR malformed\n");
    return 0;
  }
  at += 4;
  for (int i = 0, an = msg[6] << 8 | msg[7]; i < an; ++i) {
    at = skip_name(msg, n, at);
    if (!at || at + 10 > n) break;
    const int type = msg[at] << 8 | msg[at + 1], rdlen = msg[at + 8] << 8 | msg[at + 9];
    at += 10;
    if (at + (size_t)rdlen > n) break;
    if (type == 1 && rdlen == 4) {
      char text[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, msg + at, text, sizeof text);
      printf("OK %s\n", text);
      return 0;
    }
    at += (size_t)rdlen;
  }
  printf("NOADDR\n");
  return 0;
}

static unsigned long long now_ns(void);

/* dns-wire: one query given in hex, the reply's rcode and question name. */
static int dns_wire(const char *server, const char *hex) {
  unsigned char q[1024], m[4096];
  size_t len = 0;
  for (const char *p = hex; p[0] && p[1] && len < sizeof q; p += 2) {
    unsigned v = 0;
    if (sscanf(p, "%2x", &v) != 1) return 2;
    q[len++] = (unsigned char)v;
  }
  struct sockaddr_storage sa;
  socklen_t sl = address(server, 53, &sa);
  int s = socket(sa.ss_family, SOCK_DGRAM, 0);
  if (s < 0 || connect(s, (struct sockaddr *)&sa, sl) < 0 || send(s, q, len, 0) < 0) {
    printf("ERR %s\n", err_name(errno));
    return 0;
  }
  struct pollfd p = {s, POLLIN, 0};
  ssize_t n = poll(&p, 1, 3000) > 0 ? recv(s, m, sizeof m, 0) : -1;
  if (n < 12) {
    printf("TIMEOUT\n");
    return 0;
  }
  char name[256] = "";
  size_t at = 12, out = 0;
  while (at < (size_t)n && m[at] != 0 && m[at] < 64 && out + m[at] + 2 < sizeof name) {
    if (out) name[out++] = '.';
    for (size_t i = at + 1; i <= at + m[at] && i < (size_t)n; ++i) name[out++] = (char)m[i];
    at += 1 + m[at];
  }
  name[out] = 0;
  printf("RCODE %d QNAME %s\n", m[3] & 0x0f, name);
  return 0;
}

/* dns-flood: `count` queries at once, each from its own socket; how they ended. */
static int dns_flood(const char *server, const char *name, int count, long long wait_ms) {
  if (count < 1 || count > 64) return 2;
  unsigned char q[300];
  const size_t len = a_query(q, sizeof q, 0, name);
  if (len == 0) return 2;
  struct sockaddr_storage sa;
  socklen_t sl = address(server, 53, &sa);
  struct pollfd p[64];
  const unsigned long long t0 = now_ns();
  for (int i = 0; i < count; ++i) {
    p[i].fd = socket(sa.ss_family, SOCK_DGRAM, 0);
    p[i].events = POLLIN;
    q[0] = 0x40, q[1] = (unsigned char)i;
    if (p[i].fd < 0 || connect(p[i].fd, (struct sockaddr *)&sa, sl) < 0 || send(p[i].fd, q, len, 0) < 0) {
      printf("ERR %s\n", err_name(errno));
      return 0;
    }
  }
  int servfail = 0, other = 0, left = count;
  unsigned long long min_ms = 0, max_ms = 0;
  while (left > 0) {
    const long long wait = wait_ms - (long long)((now_ns() - t0) / 1000000);
    if (wait <= 0 || poll(p, (nfds_t)count, (int)wait) <= 0) break;
    for (int i = 0; i < count; ++i) {
      if (p[i].fd < 0 || !(p[i].revents & POLLIN)) continue;
      unsigned char m[512];
      const ssize_t n = recv(p[i].fd, m, sizeof m, 0);
      const unsigned long long ms = (now_ns() - t0) / 1000000;
      close(p[i].fd);
      p[i].fd = -1;
      --left;
      if (n >= 12 && (m[3] & 0x0f) == 2) {
        ++servfail;
        if (!min_ms || ms < min_ms) min_ms = ms;
        if (ms > max_ms) max_ms = ms;
      } else {
        ++other;
      }
    }
  }
  printf("SERVFAIL %d OTHER %d NONE %d MIN_MS %llu MAX_MS %llu\n", servfail, other, left, min_ms, max_ms);
  return 0;
}

static unsigned long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

/* One "ping" and its echo on a connected blocking socket: 0, or -1 after printing the error. */
static int ping_echo(int s) {
  char buf[64];
  if (send(s, "ping\n", 5, MSG_NOSIGNAL) != 5) {
    printf("ERR send %s\n", err_name(errno));
    return -1;
  }
  ssize_t n = recv(s, buf, sizeof buf, 0);
  if (n <= 0) {
    printf("ERR recv %s\n", n == 0 ? "eof" : err_name(errno));
    return -1;
  }
  return 0;
}

static int tcp_rtt(const char *addr, int port, int rounds) {
  struct sockaddr_storage sa;
  socklen_t len = address(addr, port, &sa);
  alarm(60);
  for (int i = 0; i < rounds; ++i) {
    const unsigned long long t0 = now_ns();
    int s = socket(sa.ss_family, SOCK_STREAM, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&sa, len) < 0) {
      printf("ERR connect %s\n", err_name(errno));
      return 0;
    }
    const unsigned long long t1 = now_ns();
    if (ping_echo(s) < 0) return 0;
    const unsigned long long t2 = now_ns();
    close(s);
    printf("c %llu %llu\n", t1 - t0, t2 - t0);
  }
  int s = socket(sa.ss_family, SOCK_STREAM, 0);
  if (s < 0 || connect(s, (struct sockaddr *)&sa, len) < 0) {
    printf("ERR connect %s\n", err_name(errno));
    return 0;
  }
  for (int i = 0; i < rounds; ++i) {
    const unsigned long long t0 = now_ns();
    if (ping_echo(s) < 0) return 0;
    printf("e %llu\n", now_ns() - t0);
  }
  close(s);
  printf("OK\n");
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (!in_user_namespace() && !sandlet_microvm_guest()) {
    fprintf(stderr, "net-probe: refusing to run outside a sandbox (no user namespace, not a microVM guest)\n");
    return 3;
  }
  if (argc < 3) return 2;
  const char *cmd = argv[1], *addr = argv[2];
  const int port = argc > 3 ? atoi(argv[3]) : 0;
  if (!strcmp(cmd, "tcp") || !strcmp(cmd, "tcp-hold")) {
    int s = tcp_connect(addr, port);
    if (s < 0) return 0;
    if (send(s, "ping\n", 5, MSG_NOSIGNAL) < 0) {
      printf("ERR %s\n", err_name(errno));
      return 0;
    }
    if (!strcmp(cmd, "tcp")) {
      await_reply(s, 2000, "");
      return 0;
    }
    await_reply(s, 2000, "FIRST ");
    struct stat st;
    for (int i = 0; i < 1000 && stat(argv[4], &st) != 0; ++i) usleep(10000);
    if (send(s, "ping\n", 5, MSG_NOSIGNAL) < 0) {
      printf("SECOND ERR %s\n", err_name(errno));
      return 0;
    }
    await_reply(s, 2000, "SECOND ");
    return 0;
  }
  if (!strcmp(cmd, "tcp-rtt") && argc > 4) return tcp_rtt(addr, port, atoi(argv[4]));
  if (!strcmp(cmd, "until-eperm") && argc > 4) return until_eperm(addr, port, atoi(argv[4]));
  if (!strcmp(cmd, "tcp-flood") && argc > 5) return tcp_flood(addr, port, atoi(argv[4]), atoi(argv[5]));
  if (!strcmp(cmd, "tcp-send") && argc > 4) {
    int s = tcp_connect(addr, port);
    if (s < 0) return 0;
    fcntl(s, F_SETFL, 0);
    long left = atol(argv[4]);
    static char chunk[16384];
    memset(chunk, 'x', sizeof chunk);
    alarm(30);
    while (left > 0) {
      ssize_t n = send(s, chunk, left < (long)sizeof chunk ? (size_t)left : sizeof chunk, MSG_NOSIGNAL);
      if (n <= 0) {
        printf("ERR %s\n", err_name(errno));
        return 0;
      }
      left -= n;
    }
    shutdown(s, SHUT_WR);
    char reply[128];
    size_t got = 0;
    for (;;) {
      ssize_t n = recv(s, reply + got, sizeof reply - 1 - got, 0);
      if (n <= 0) break;
      got += (size_t)n;
    }
    reply[got] = 0;
    reply[strcspn(reply, "\n")] = 0;
    printf("OK %s\n", reply);
    return 0;
  }
  if (!strcmp(cmd, "tcp-serve")) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_storage sa;
    socklen_t len = address(argc > 3 ? argv[3] : "127.0.0.1", atoi(addr), &sa);
    if (bind(l, (struct sockaddr *)&sa, len) < 0 || listen(l, 4) < 0) {
      printf("ERR %s\n", err_name(errno));
      return 0;
    }
    alarm(20);
    int c = accept(l, NULL, NULL);
    char buf[64];
    if (c >= 0 && recv(c, buf, sizeof buf, 0) >= 0) send(c, "inside-echo\n", 12, MSG_NOSIGNAL);
    printf("OK served\n");
    return 0;
  }
  if (!strcmp(cmd, "udp") || !strcmp(cmd, "udp-connected")) {
    struct sockaddr_storage sa;
    socklen_t len = address(addr, port, &sa);
    int s = socket(sa.ss_family, SOCK_DGRAM, 0);
    ssize_t r;
    if (!strcmp(cmd, "udp-connected")) {
      if (connect(s, (struct sockaddr *)&sa, len) < 0) {
        printf("ERR %s\n", err_name(errno));
        return 0;
      }
      r = send(s, "ping\n", 5, 0);
    } else {
      r = sendto(s, "ping\n", 5, 0, (struct sockaddr *)&sa, len);
    }
    if (r < 0) {
      printf("ERR %s\n", err_name(errno));
      return 0;
    }
    await_reply(s, 1000, "");
    return 0;
  }
  if (!strcmp(cmd, "dns") && argc > 3) {
    const char *server = strcmp(addr, "conf") ? addr : conf_nameserver();
    if (!server) {
      printf("ERR no nameserver in /etc/resolv.conf\n");
      return 0;
    }
    return dns_query(server, argv[3], argc > 4 && !strcmp(argv[4], "tcp"));
  }
  if (!strncmp(cmd, "dns-", 4) && argc > 3) {
    const char *server = strcmp(addr, "conf") ? addr : conf_nameserver();
    if (!server) {
      printf("ERR no nameserver in /etc/resolv.conf\n");
      return 0;
    }
    if (!strcmp(cmd, "dns-wire")) return dns_wire(server, argv[3]);
    if (!strcmp(cmd, "dns-flood") && argc > 4) return dns_flood(server, argv[3], atoi(argv[4]), argc > 5 ? atoll(argv[5]) : 10000);
    if (!strcmp(cmd, "dns-time")) {
      const unsigned long long t0 = now_ns();
      const int rc = dns_query(server, argv[3], 0);
      printf("MS %llu\n", (now_ns() - t0) / 1000000);
      return rc;
    }
  }
  if (!strcmp(cmd, "icmp")) {
    struct sockaddr_storage sa;
    socklen_t len = address(addr, 0, &sa);
    const int v6 = sa.ss_family == AF_INET6;
    int s = socket(sa.ss_family, SOCK_DGRAM, v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP);
    if (s < 0) {
      printf("ERR %s\n", err_name(errno));
      return 0;
    }
    unsigned char pkt[16] = {0};
    pkt[0] = v6 ? ICMP6_ECHO_REQUEST : ICMP_ECHO;
    if (sendto(s, pkt, sizeof pkt, 0, (struct sockaddr *)&sa, len) < 0) {
      printf("ERR %s\n", err_name(errno));
      return 0;
    }
    struct pollfd p = {s, POLLIN, 0};
    printf(poll(&p, 1, 1000) > 0 ? "OK reply\n" : "TIMEOUT\n");
    return 0;
  }
  return 2;
}
