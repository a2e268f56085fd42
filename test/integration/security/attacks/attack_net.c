/* Network attacks with the default network `none`: the host's loopback services (IPv4, IPv6, abstract
 * unix sockets), another sandbox's, the host's own addresses, a port scan, DNS to outside resolvers,
 * raw/ICMP and packet sockets, reconfiguring the sandbox's interfaces. Traffic goes only to loopback or
 * to addresses with no route from the sandbox (documentation ranges). See docs/SECURITY-TESTS.md. */
#include "attack.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>

#define COUNT(a) (sizeof(a) / sizeof *(a))

/* "ADDR:PORT" or "[ADDR6]:PORT" into a sockaddr. */
static socklen_t parse_addr(const char *text, struct sockaddr_storage *ss) {
  char host[128];
  int port;
  memset(ss, 0, sizeof *ss);
  if (text[0] == '[') {
    if (sscanf(text, "[%127[^]]]:%d", host, &port) != 2) return 0;
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)port);
    if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) return 0;
    return sizeof *a;
  }
  if (sscanf(text, "%127[^:]:%d", host, &port) != 2) return 0;
  struct sockaddr_in *a = (struct sockaddr_in *)ss;
  a->sin_family = AF_INET;
  a->sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, host, &a->sin_addr) != 1) return 0;
  return sizeof *a;
}

/* A TCP connect bounded by `ms`: 1 connected, 0 not. */
static int tcp_connects(const struct sockaddr_storage *ss, socklen_t len, int ms) {
  int s = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) return 0;
  int ok = 0;
  if (connect(s, (const struct sockaddr *)ss, len) == 0) {
    ok = 1;
  } else if (errno == EINPROGRESS) {
    struct pollfd p = {s, POLLOUT, 0};
    int err = 0;
    socklen_t el = sizeof err;
    if (poll(&p, 1, ms) == 1 && getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0) ok = 1;
  }
  close(s);
  return ok;
}

/* argv[1..]: "ADDR:PORT" of listeners on the host or in another sandbox. */
static int tcp_targets(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    struct sockaddr_storage ss;
    socklen_t len = parse_addr(argv[i], &ss);
    if (!len) return verdict(kError, "bad address %s", argv[i]);
    if (tcp_connects(&ss, len, 1000)) return verdict(kEscaped, "connected to %s", argv[i]);
  }
  return verdict(kBlocked, "none of %d listeners outside the sandbox reachable", argc - 1);
}

/* Every port 1..1024 and the given ones on 127.0.0.1, ::1 and the given host addresses. Nothing listens
 * in the sandbox's own namespace, so any open port is someone else's. */
static int port_scan(int argc, char **argv) {
  int open_ports = 0, tried = 0;
  char first[160] = "";
  const char *hosts[64];
  int nh = 0;
  hosts[nh++] = "127.0.0.1";
  hosts[nh++] = "::1";
  int extra_ports[64], np = 0;
  for (int i = 1; i < argc && nh < 64 && np < 64; ++i) {
    if (argv[i][0] == ':') extra_ports[np++] = atoi(argv[i] + 1);
    else hosts[nh++] = argv[i];
  }
  for (int h = 0; h < nh; ++h) {
    int v6 = strchr(hosts[h], ':') != NULL;
    int last = h < 2 ? 1024 : 64; /* the host's other addresses: unreachable anyway, bounded */
    for (int pi = 1; pi <= last + np; ++pi) {
      int port = pi <= last ? pi : extra_ports[pi - last - 1];
      char text[160];
      snprintf(text, sizeof text, v6 ? "[%s]:%d" : "%s:%d", hosts[h], port);
      struct sockaddr_storage ss;
      socklen_t len = parse_addr(text, &ss);
      if (!len) continue;
      ++tried;
      if (tcp_connects(&ss, len, 200)) {
        if (!open_ports++) snprintf(first, sizeof first, "%s", text);
      }
    }
  }
  if (open_ports) return verdict(kEscaped, "%d open ports, first %s", open_ports, first);
  return verdict(kBlocked, "%d host:port pairs scanned, none open", tried);
}

/* A DNS query to each resolver ("ADDR:PORT"), a reply awaited 500 ms: none answers. */
static int dns_out(int argc, char **argv) {
  static const unsigned char query[] = {0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 6, 'l', 'e', 'a', 'k', 'e', 'd',
                                        7,    'e',  'x', 'a', 'm', 'p', 'l', 'e', 0, 0, 1, 0, 1};
  int sent = 0;
  for (int i = 1; i < argc; ++i) {
    struct sockaddr_storage ss;
    socklen_t len = parse_addr(argv[i], &ss);
    if (!len) return verdict(kError, "bad address %s", argv[i]);
    int s = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) continue;
    if (sendto(s, query, sizeof query, 0, (struct sockaddr *)&ss, len) == (ssize_t)sizeof query) {
      ++sent;
      struct pollfd p = {s, POLLIN, 0};
      char reply[512];
      if (poll(&p, 1, 500) == 1 && recv(s, reply, sizeof reply, 0) > 0) {
        close(s);
        return verdict(kEscaped, "a DNS reply from %s", argv[i]);
      }
    }
    close(s);
  }
  return verdict(kBlocked, "no resolver answered (%d of %d queries left the socket)", sent, argc - 1);
}

/* Raw and ping ICMP sockets: an echo request to each address (no route), and to the host's. */
static int icmp(int argc, char **argv) {
  int types[][2] = {{SOCK_RAW, IPPROTO_ICMP}, {SOCK_DGRAM, IPPROTO_ICMP}};
  int sent = 0;
  for (size_t t = 0; t < COUNT(types); ++t) {
    int s = socket(AF_INET, types[t][0] | SOCK_CLOEXEC, types[t][1]);
    if (s < 0) continue;
    for (int i = 1; i < argc; ++i) {
      struct sockaddr_in a = {.sin_family = AF_INET};
      if (inet_pton(AF_INET, argv[i], &a.sin_addr) != 1) continue;
      struct icmphdr h = {.type = ICMP_ECHO};
      h.un.echo.id = htons(77);
      h.checksum = htons(~((ICMP_ECHO << 8) + 77));
      if (sendto(s, &h, sizeof h, 0, (struct sockaddr *)&a, sizeof a) > 0) ++sent;
      /* An echo reply from the address counts; a raw socket (root in a microVM has them) also sees every
       * other ICMP packet, e.g. the unreachable error a refused echo comes back as. */
      struct pollfd p = {s, POLLIN, 0};
      unsigned char reply[256];
      while (poll(&p, 1, 300) == 1) {
        struct sockaddr_in from = {0};
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(s, reply, sizeof reply, 0, (struct sockaddr *)&from, &fl);
        if (n <= 0) break;
        size_t off = types[t][0] == SOCK_RAW ? (size_t)(reply[0] & 0x0f) * 4 : 0;
        if ((size_t)n > off && reply[off] == ICMP_ECHOREPLY && from.sin_addr.s_addr == a.sin_addr.s_addr) {
          close(s);
          return verdict(kEscaped, "an ICMP echo reply from %s", argv[i]);
        }
      }
    }
    close(s);
  }
  return verdict(kBlocked, "no ICMP echo reached an address outside (%d left a socket)", sent);
}

/* IPv6 around an IPv4 rule set: link-local all-nodes, the host's addresses, documentation prefix. */
static int ipv6(int argc, char **argv) {
  int s = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return verdict(kBlocked, "no IPv6 sockets: %s", E());
  int sent = 0;
  for (int i = 1; i < argc; ++i) {
    struct sockaddr_storage ss;
    socklen_t len = parse_addr(argv[i], &ss);
    if (!len || ss.ss_family != AF_INET6) continue;
    if (sendto(s, "x", 1, 0, (struct sockaddr *)&ss, len) == 1) ++sent;
    if (tcp_connects(&ss, len, 500)) {
      close(s);
      return verdict(kEscaped, "TCP over IPv6 to %s", argv[i]);
    }
  }
  close(s);
  /* ff02::1 on every interface index but loopback's. */
  for (unsigned idx = 2; idx < 16; ++idx) {
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(9), .sin6_scope_id = idx};
    inet_pton(AF_INET6, "ff02::1", &a.sin6_addr);
    int u = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int rc = (int)sendto(u, "x", 1, 0, (struct sockaddr *)&a, sizeof a);
    close(u);
    if (rc == 1) return verdict(kEscaped, "multicast out of interface %u", idx);
  }
  return verdict(kBlocked, "no IPv6 path out (%d datagrams left a socket, to loopback only)", sent);
}

/* Interfaces: a packet socket sees only loopback; the sandbox cannot reconfigure or add addresses. */
static int interfaces(int argc, char **argv) {
  (void)argc, (void)argv;
  struct if_nameindex *names = if_nameindex();
  for (struct if_nameindex *n = names; n && n->if_index; ++n)
    if (strcmp(n->if_name, "lo") != 0) return verdict(kEscaped, "interface %s is visible", n->if_name);
  if (names) if_freenameindex(names);
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq r;
  memset(&r, 0, sizeof r);
  snprintf(r.ifr_name, sizeof r.ifr_name, "lo");
  struct sockaddr_in *a = (struct sockaddr_in *)&r.ifr_addr;
  a->sin_family = AF_INET;
  inet_pton(AF_INET, "10.99.0.1", &a->sin_addr);
  if (ioctl(s, SIOCSIFADDR, &r) == 0) return verdict(kEscaped, "set an address on lo");
  memset(&r, 0, sizeof r);
  snprintf(r.ifr_name, sizeof r.ifr_name, "lo");
  if (ioctl(s, SIOCGIFFLAGS, &r) == 0) {
    r.ifr_flags &= ~IFF_UP;
    if (ioctl(s, SIOCSIFFLAGS, &r) == 0) {
      r.ifr_flags |= IFF_UP;
      ioctl(s, SIOCSIFFLAGS, &r);
      return verdict(kEscaped, "took lo down");
    }
  }
  close(s);
  return verdict(kBlocked, "only lo, which the sandbox cannot reconfigure");
}

/* argv[1..]: abstract unix socket names the host listens on. The abstract namespace is per network
 * namespace: unreachable. */
static int abstract_unix(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t n = strlen(argv[i]);
    if (n > sizeof a.sun_path - 1) n = sizeof a.sun_path - 1;
    memcpy(a.sun_path + 1, argv[i], n);
    int rc = connect(s, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n));
    close(s);
    if (rc == 0) return verdict(kEscaped, "connected to the host's abstract socket @%s", argv[i]);
  }
  return verdict(kBlocked, "the host's abstract unix sockets are unreachable");
}

static const struct attack kAttacks[] = {
    {"tcp", tcp_targets}, {"port-scan", port_scan},   {"dns", dns_out},
    {"icmp", icmp},       {"ipv6", ipv6},             {"interfaces", interfaces},
    {"abstract-unix", abstract_unix},
};
ATTACK_MAIN(kAttacks)
