/* Socket families: socket(2) and socketpair(2) of every address family 0..63 with every common type, every
 * netlink protocol, and the same with the upper half of the 64-bit register set (the kernel reads these
 * arguments as 32-bit ints; a filter that compared 64 bits alone would let AF_VSOCK | 1 << 32 through).
 * The seccomp profile (default-v2, docs/POLICY.md) allows AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK with
 * NETLINK_ROUTE or NETLINK_SOCK_DIAG; anything else must fail with EAFNOSUPPORT (a family) or
 * EPROTONOSUPPORT (a netlink protocol). AF_VSOCK first: it is not network-namespaced and on a host that is
 * a VM it reaches the hypervisor. Sockets that are made are closed at once: never bound, never connected.
 * See docs/SECURITY-TESTS.md. */
#include "attack.h"

#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#define COUNT(a) (sizeof(a) / sizeof *(a))

enum { kFamilies = 64, kNetlinkProtocols = 32, kAfNetlink = 16, kAfVsock = 40 };

/* The kernel's names (include/linux/socket.h) up to AF_MCTP = 45; numbers beyond are unassigned. */
static const char *const family_names[] = {
    "AF_UNSPEC", "AF_UNIX", "AF_INET", "AF_AX25", "AF_IPX", "AF_APPLETALK", "AF_NETROM", "AF_BRIDGE",
    "AF_ATMPVC", "AF_X25", "AF_INET6", "AF_ROSE", "AF_DECnet", "AF_NETBEUI", "AF_SECURITY", "AF_KEY",
    "AF_NETLINK", "AF_PACKET", "AF_ASH", "AF_ECONET", "AF_ATMSVC", "AF_RDS", "AF_SNA", "AF_IRDA", "AF_PPPOX",
    "AF_WANPIPE", "AF_LLC", "AF_IB", "AF_MPLS", "AF_CAN", "AF_TIPC", "AF_BLUETOOTH", "AF_IUCV", "AF_RXRPC",
    "AF_ISDN", "AF_PHONET", "AF_IEEE802154", "AF_CAIF", "AF_ALG", "AF_NFC", "AF_VSOCK", "AF_KCM",
    "AF_QIPCRTR", "AF_SMC", "AF_XDP", "AF_MCTP",
};

static const struct {
  int type;
  const char *name;
} types[] = {{SOCK_STREAM, "stream"}, {SOCK_DGRAM, "dgram"}, {SOCK_SEQPACKET, "seqpacket"}, {SOCK_RAW, "raw"}};

/* The relaxations the sandbox was given (argv), which widen what the policy allows. */
static int relaxed_vsock, relaxed_netlink;

/* 0 when the policy allows the call, else the errno it must fail with. */
static int policy_errno(uint64_t family, uint64_t protocol) {
  if (family >> 32) return EAFNOSUPPORT; /* the upper half set: refused whatever the lower half says */
  if (family == 1 || family == 2 || family == 10) return 0;
  if (family == kAfNetlink) {
    if (relaxed_netlink) return 0;
    return protocol == 0 || protocol == 4 ? 0 : EPROTONOSUPPORT;
  }
  if (family == kAfVsock && relaxed_vsock) return 0;
  return EAFNOSUPPORT;
}

static char found[700];
static int findings, tries, made;

static const char *family_name(uint64_t family) {
  static char buf[40];
  if ((family >> 32) == 0 && family < COUNT(family_names)) return family_names[family];
  snprintf(buf, sizeof buf, "family 0x%llx", (unsigned long long)family);
  return buf;
}

/* One call: a finding when it worked although the policy refuses it, or failed another way than the
 * policy's (then the policy did not answer it: the kernel did). */
static void try_one(int pair, uint64_t family, int type, const char *type_name, uint64_t protocol) {
  int sv[2] = {-1, -1};
  ++tries;
  errno = 0;
  long rc = pair ? syscall(SYS_socketpair, family, (long)type, protocol, sv)
                 : syscall(SYS_socket, family, (long)type, protocol);
  const int err = rc < 0 ? errno : 0;
  if (rc >= 0) {
    ++made;
    if (family == kAfVsock) printf("made: %s(AF_VSOCK, %s)\n", pair ? "socketpair" : "socket", type_name);
    if (pair) {
      close(sv[0]);
      close(sv[1]);
    } else {
      close((int)rc);
    }
  }
  const int expected = policy_errno(family, protocol);
  if (expected == 0 || err == expected) return;
  char what[160];
  if (err == 0)
    snprintf(what, sizeof what, "%s(%s, %s, %llu) made a socket", pair ? "socketpair" : "socket",
             family_name(family), type_name, (unsigned long long)protocol);
  else
    snprintf(what, sizeof what, "%s(%s, %s, %llu) failed with %s, not %s (not the policy's answer)",
             pair ? "socketpair" : "socket", family_name(family), type_name, (unsigned long long)protocol,
             strerror(err), strerror(expected));
  printf("finding: %s\n", what);
  if (findings++ < 6) {
    size_t used = strlen(found);
    snprintf(found + used, sizeof found - used, "%s%s", used ? "; " : "", what);
  }
}

static void every_type(uint64_t family, uint64_t protocol) {
  for (size_t t = 0; t < COUNT(types); ++t) {
    try_one(0, family, types[t].type, types[t].name, protocol);
    try_one(1, family, types[t].type, types[t].name, protocol);
  }
}

/* argv[1..]: the relaxations the sandbox has ("vsock", "netlink"). */
static int families(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "vsock") == 0) relaxed_vsock = 1;
    else if (strcmp(argv[i], "netlink") == 0) relaxed_netlink = 1;
    else return verdict(kError, "unknown relaxation %s", argv[i]);
  }
  /* AF_VSOCK first: the reason this attack exists. */
  every_type(kAfVsock, 0);
  const int vsock_findings = findings;
  for (uint64_t f = 0; f < kFamilies; ++f)
    if (f != kAfVsock) every_type(f, 0);
  for (uint64_t p = 0; p < kNetlinkProtocols; ++p) {
    try_one(0, kAfNetlink, SOCK_RAW, "raw", p);
    try_one(0, kAfNetlink, SOCK_DGRAM, "dgram", p);
  }
  /* The upper half of the register: every family, and the netlink protocols, in disguise. */
  for (uint64_t f = 0; f < kFamilies; ++f) {
    try_one(0, f | 1ull << 32, SOCK_STREAM, "stream", 0);
    try_one(0, f | 0xffffffff00000000ull, SOCK_DGRAM, "dgram", 0);
    try_one(1, f | 1ull << 32, SOCK_STREAM, "stream", 0);
  }
  for (uint64_t p = 0; p < kNetlinkProtocols; ++p) try_one(0, kAfNetlink, SOCK_RAW, "raw", p | 1ull << 32);
  if (findings)
    return verdict(kEscaped, "%d of %d calls beyond the policy%s: %s", findings, tries,
                   vsock_findings ? " (AF_VSOCK among them)" : "", found);
  return verdict(kBlocked, "%d calls; %d made a socket of an allowed family, every other one refused by the policy",
                 tries, made);
}

static const struct attack attacks[] = {
    {"families", families},
};

ATTACK_MAIN(attacks)
