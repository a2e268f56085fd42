#include "policy/seccomp/profile_table.hpp"

#include <algorithm>
#include <array>
#include <iterator>

namespace sandlet::seccomp {
namespace {

constexpr std::string_view kProfileNames[] = {"default", "default-v1", "default-v2"};

// ioctl request numbers are compared on their type and number bytes only (mask 0xffff): the size and
// direction bits differ between kernel versions and ABIs for the same operation.
constexpr ArgMatch kIoctlSwapext{1, 0xffff, 0x586d};         // XFS_IOC_SWAPEXT ('X', 109)
constexpr ArgMatch kIoctlExchangeRange{1, 0xffff, 0x5881};   // XFS_IOC_EXCHANGE_RANGE ('X', 129)
constexpr ArgMatch kIoctlStartCommit{1, 0xffff, 0x5882};     // XFS_IOC_START_COMMIT ('X', 130)
constexpr ArgMatch kIoctlCommitRange{1, 0xffff, 0x5883};     // XFS_IOC_COMMIT_RANGE ('X', 131)
constexpr ArgMatch kIoctlMoveExt{1, 0xffff, 0x660f};         // EXT4_IOC_MOVE_EXT ('f', 15)
constexpr ArgMatch kIoctlF2fsMoveRange{1, 0xffff, 0xf509};   // F2FS_IOC_MOVE_RANGE (0xf5, 9)
constexpr ArgMatch kIoctlClone{1, 0xffff, 0x9409};           // FICLONE = BTRFS_IOC_CLONE (0x94, 9)
constexpr ArgMatch kIoctlCloneRange{1, 0xffff, 0x940d};      // FICLONERANGE (0x94, 13)
constexpr ArgMatch kIoctlDedupeRange{1, 0xffff, 0x9436};     // FIDEDUPERANGE (0x94, 54)
constexpr ArgMatch kIoctlTiocsti{1, 0xffffffff, 0x5412};     // TIOCSTI: typing into another session's input

// clone(2) flags that create namespaces, one rule each (BPF compares, it does not test "any of").
constexpr ArgMatch kCloneNewUser{0, 0x10000000, 0x10000000};
constexpr ArgMatch kCloneNewNs{0, 0x00020000, 0x00020000};
constexpr ArgMatch kCloneNewPid{0, 0x20000000, 0x20000000};
constexpr ArgMatch kCloneNewNet{0, 0x40000000, 0x40000000};
constexpr ArgMatch kCloneNewIpc{0, 0x08000000, 0x08000000};
constexpr ArgMatch kCloneNewUts{0, 0x04000000, 0x04000000};
constexpr ArgMatch kCloneNewCgroup{0, 0x02000000, 0x02000000};
constexpr ArgMatch kCloneNewTime{0, 0x00000080, 0x00000080};

// personality(2) flags that change how the kernel treats the process: denied when set, unless the value
// is the query 0xffffffff. BPF compares rather than tests bits, so a flag's rule also requires bit 31
// clear, and values with bit 31 set are denied by one rule per other bit that is clear (only the query has
// them all set). PER_LINUX, PER_LINUX32 and ADDR_NO_RANDOMIZE (debuggers, setarch -R) pass.
constexpr unsigned long long kPersBit31 = 0x80000000;
constexpr ArgMatch persona_flag(unsigned long long flag) { return {0, flag | kPersBit31, flag}; }
constexpr ArgMatch kPersUname26 = persona_flag(0x0020000);
constexpr ArgMatch kPersFdpic = persona_flag(0x0080000);
constexpr ArgMatch kPersMmapPageZero = persona_flag(0x0100000);
constexpr ArgMatch kPersCompatLayout = persona_flag(0x0200000);
constexpr ArgMatch kPersReadImpliesExec = persona_flag(0x0400000);
constexpr ArgMatch kPersLimit32 = persona_flag(0x0800000);
constexpr ArgMatch kPersShortInode = persona_flag(0x1000000);
constexpr ArgMatch kPersWholeSeconds = persona_flag(0x2000000);
constexpr ArgMatch kPersStickyTimeouts = persona_flag(0x4000000);
constexpr ArgMatch kPersLimit3gb = persona_flag(0x8000000);
constexpr auto kPersHighNotQuery = [] {
  std::array<ArgMatch, 31> a{};
  for (unsigned k = 0; k < 31; ++k) a[k] = ArgMatch{0, kPersBit31 | (1ull << k), kPersBit31};
  return a;
}();

// default-v1. Grouped by why a sandbox never needs them; docs/POLICY.md has the same table.
constexpr DenyRule kDefaultV1Listed[] = {
    // kernel modules, kexec, power
    {"init_module", nullptr}, {"finit_module", nullptr}, {"delete_module", nullptr}, {"create_module", nullptr},
    {"query_module", nullptr}, {"get_kernel_syms", nullptr}, {"kexec_load", nullptr}, {"kexec_file_load", nullptr},
    {"reboot", nullptr},
    // swap, accounting, quotas, host clock, kernel log
    {"swapon", nullptr}, {"swapoff", nullptr}, {"acct", nullptr}, {"quotactl", nullptr}, {"quotactl_fd", nullptr},
    {"settimeofday", nullptr}, {"clock_settime", nullptr}, {"clock_adjtime", nullptr}, {"adjtimex", nullptr},
    {"syslog", nullptr},
    // tracing, BPF, perf: large kernel attack surface
    {"bpf", nullptr}, {"perf_event_open", nullptr}, {"lookup_dcookie", nullptr}, {"fanotify_init", nullptr},
    // other processes' memory and descriptors (the `ptrace` relaxation)
    {"ptrace", nullptr}, {"process_vm_readv", nullptr}, {"process_vm_writev", nullptr}, {"pidfd_getfd", nullptr},
    // keyrings are not namespaced
    {"keyctl", nullptr}, {"add_key", nullptr}, {"request_key", nullptr},
    // raw I/O ports and legacy oddities
    {"iopl", nullptr}, {"ioperm", nullptr}, {"uselib", nullptr}, {"nfsservctl", nullptr}, {"vhangup", nullptr},
    {"_sysctl", nullptr}, {"sysfs", nullptr},
    // mounts and namespaces: the sandbox's view of the world is fixed by the host
    {"mount", nullptr}, {"umount2", nullptr}, {"pivot_root", nullptr}, {"move_mount", nullptr},
    {"open_tree", nullptr}, {"fsopen", nullptr}, {"fsconfig", nullptr}, {"fsmount", nullptr}, {"fspick", nullptr},
    {"mount_setattr", nullptr}, {"setns", nullptr}, {"unshare", nullptr},
    // clone3 stays allowed although BPF cannot read its flags (they are in memory): the init sets every
    // user.max_*_namespaces counter of the sandbox's user namespace to 0, so the kernel refuses new
    // namespaces however they are asked for. The clone rules are defence in depth.
    {"clone", &kCloneNewUser}, {"clone", &kCloneNewNs}, {"clone", &kCloneNewPid}, {"clone", &kCloneNewNet},
    {"clone", &kCloneNewIpc}, {"clone", &kCloneNewUts}, {"clone", &kCloneNewCgroup}, {"clone", &kCloneNewTime},
    // file handles bypass path-based checks
    {"open_by_handle_at", nullptr}, {"name_to_handle_at", nullptr},
    // io_uring and userfaultfd: frequent sources of kernel exploits (io_uring: the `io_uring` relaxation)
    {"io_uring_setup", nullptr}, {"io_uring_enter", nullptr}, {"io_uring_register", nullptr},
    {"userfaultfd", nullptr},
    // extent swapping, cloning and dedupe: reach into blocks of files the sandbox does not own
    {"ioctl", &kIoctlSwapext}, {"ioctl", &kIoctlExchangeRange}, {"ioctl", &kIoctlStartCommit},
    {"ioctl", &kIoctlCommitRange}, {"ioctl", &kIoctlMoveExt}, {"ioctl", &kIoctlF2fsMoveRange},
    {"ioctl", &kIoctlClone}, {"ioctl", &kIoctlCloneRange}, {"ioctl", &kIoctlDedupeRange},
    {"ioctl", &kIoctlTiocsti},
    // personality flags that change the kernel's treatment of the process
    {"personality", &kPersUname26}, {"personality", &kPersFdpic}, {"personality", &kPersMmapPageZero},
    {"personality", &kPersCompatLayout}, {"personality", &kPersReadImpliesExec}, {"personality", &kPersLimit32},
    {"personality", &kPersShortInode}, {"personality", &kPersWholeSeconds},
    {"personality", &kPersStickyTimeouts}, {"personality", &kPersLimit3gb},
};

// The listed rules, then the personality guards generated above.
constexpr auto kDefaultV1 = [] {
  constexpr size_t listed = std::size(kDefaultV1Listed);
  std::array<DenyRule, listed + kPersHighNotQuery.size()> all{};
  for (size_t i = 0; i < listed; ++i) all[i] = kDefaultV1Listed[i];
  for (size_t k = 0; k < kPersHighNotQuery.size(); ++k) all[listed + k] = DenyRule{"personality", &kPersHighNotQuery[k]};
  return all;
}();

// ---- default-v2: default-v1 and socket families by list ----------------------------------------------
// A family outside the list never reaches the kernel: vsock is not network-namespaced (on a host that is a
// VM it reaches the hypervisor), others are rarely used code or autoload a kernel module on first use.
// Refused families fail with EAFNOSUPPORT, what the kernel answers for a family it lacks, so libraries
// fall back as they do there. socketpair(2) gets the same family rules.
constexpr std::string_view kFamilyNames[kSocketFamilies] = {
    "AF_UNSPEC", "AF_UNIX", "AF_INET", "AF_AX25", "AF_IPX", "AF_APPLETALK", "AF_NETROM", "AF_BRIDGE",
    "AF_ATMPVC", "AF_X25", "AF_INET6", "AF_ROSE", "AF_DECnet", "AF_NETBEUI", "AF_SECURITY", "AF_KEY",
    "AF_NETLINK", "AF_PACKET", "AF_ASH", "AF_ECONET", "AF_ATMSVC", "AF_RDS", "AF_SNA", "AF_IRDA", "AF_PPPOX",
    "AF_WANPIPE", "AF_LLC", "AF_IB", "AF_MPLS", "AF_CAN", "AF_TIPC", "AF_BLUETOOTH", "AF_IUCV", "AF_RXRPC",
    "AF_ISDN", "AF_PHONET", "AF_IEEE802154", "AF_CAIF", "AF_ALG", "AF_NFC", "AF_VSOCK", "AF_KCM",
    "AF_QIPCRTR", "AF_SMC", "AF_XDP", "AF_MCTP",
};
constexpr unsigned kAfUnix = 1, kAfInet = 2, kAfInet6 = 10, kAfNetlink = 16, kAfVsock = 40;
constexpr bool family_allowed(unsigned f) { return f == kAfUnix || f == kAfInet || f == kAfInet6 || f == kAfNetlink; }

// The family is read as 32 bits (mask): 0x1_0000_0028 is AF_VSOCK to the kernel and to this rule.
constexpr auto kFamily = [] {
  std::array<ArgMatch, kSocketFamilies> a{};
  for (unsigned f = 0; f < kSocketFamilies; ++f) a[f] = ArgMatch{0, 0xffffffff, f, Cmp::kMaskedEq, kFamilyNames[f]};
  return a;
}();
// Future families, negative ones and any value with an upper bit set (an allowed family with high bits
// would otherwise pass every 32-bit rule above): compared on all 64 bits.
constexpr ArgMatch kFamilyBeyond{0, 0, kSocketFamilies, Cmp::kGe, "families from AF_MAX on"};

// AF_NETLINK only with NETLINK_ROUTE (interfaces, addresses, routes: `ip`, getifaddrs) and NETLINK_SOCK_DIAG
// (`ss`); both per network namespace. Others (audit, uevents, netfilter, generic, xfrm...) fail with
// EPROTONOSUPPORT, the kernel's answer for a protocol it lacks (libaudit reads it as "no audit here").
constexpr unsigned kNetlinkRoute = 0, kNetlinkSockDiag = 4, kNetlinkMaxLinks = 32;
constexpr std::string_view kNetlinkLabel = "AF_NETLINK protocols but NETLINK_ROUTE and NETLINK_SOCK_DIAG";
constexpr auto kNetlinkProtocol = [] {
  std::array<ArgMatch, kNetlinkMaxLinks> a{};
  for (unsigned p = 0; p < kNetlinkMaxLinks; ++p) a[p] = ArgMatch{2, 0xffffffff, p, Cmp::kMaskedEq, kNetlinkLabel};
  return a;
}();
constexpr ArgMatch kNetlinkProtocolBeyond{2, 0, kNetlinkMaxLinks, Cmp::kGe, kNetlinkLabel};

constexpr size_t kRefusedFamilies = [] {
  size_t n = 0;
  for (unsigned f = 0; f < kSocketFamilies; ++f) n += !family_allowed(f);
  return n;
}();
constexpr size_t kSocketRuleCount = 2 * (kRefusedFamilies + 1) + (kNetlinkMaxLinks - 2) + 1;

constexpr auto kSocketRules = [] {
  std::array<DenyRule, kSocketRuleCount> a{};
  size_t i = 0;
  for (std::string_view call : {std::string_view("socket"), std::string_view("socketpair")}) {
    for (unsigned f = 0; f < kSocketFamilies; ++f)
      if (!family_allowed(f)) a[i++] = DenyRule{call, &kFamily[f], nullptr, EAFNOSUPPORT};
    a[i++] = DenyRule{call, &kFamilyBeyond, nullptr, EAFNOSUPPORT};
  }
  // socket(2) only: socketpair(2) of AF_NETLINK is refused by the kernel (EOPNOTSUPP) whatever the protocol.
  for (unsigned p = 0; p < kNetlinkMaxLinks; ++p)
    if (p != kNetlinkRoute && p != kNetlinkSockDiag)
      a[i++] = DenyRule{"socket", &kFamily[kAfNetlink], &kNetlinkProtocol[p], EPROTONOSUPPORT};
  a[i++] = DenyRule{"socket", &kFamily[kAfNetlink], &kNetlinkProtocolBeyond, EPROTONOSUPPORT};
  return a;
}();

constexpr auto kDefaultV2 = [] {
  std::array<DenyRule, kDefaultV1.size() + kSocketRules.size()> all{};
  size_t i = 0;
  for (const DenyRule& r : kDefaultV1) all[i++] = r;
  for (const DenyRule& r : kSocketRules) all[i++] = r;
  return all;
}();

// ---- relaxations -------------------------------------------------------------------------------------------
constexpr std::string_view kPtraceCalls[] = {"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd"};
constexpr std::string_view kIoUringCalls[] = {"io_uring_setup", "io_uring_enter", "io_uring_register"};
constexpr std::string_view kPerfCalls[] = {"perf_event_open"};

constexpr const ArgMatch* kVsockArgs[] = {&kFamily[kAfVsock]};
// The comparisons of the refused protocols (those the netlink rules use).
constexpr auto kNetlinkArgs = [] {
  std::array<const ArgMatch*, kNetlinkMaxLinks - 2 + 1> a{};
  size_t i = 0;
  for (unsigned p = 0; p < kNetlinkMaxLinks; ++p)
    if (p != kNetlinkRoute && p != kNetlinkSockDiag) a[i++] = &kNetlinkProtocol[p];
  a[i++] = &kNetlinkProtocolBeyond;
  return a;
}();

constexpr Relaxation kRelaxations[] = {
    {"ptrace", kPtraceCalls, {}, "debuggers and tracers (gdb, strace) on the sandbox's own processes"},
    {"io_uring", kIoUringCalls, {},
     "programs built on io_uring (IORING_OP_SOCKET then creates sockets of any family: the family list "
     "does not apply)"},
    {"perf_event_open", kPerfCalls, {}, "profilers (perf); the host's kernel.perf_event_paranoid still applies"},
    {"vsock", {}, kVsockArgs, "AF_VSOCK sockets (a VM run inside the sandbox); not namespaced: on a host "
                              "that is a VM they reach its hypervisor"},
    {"netlink", {}, kNetlinkArgs, "every AF_NETLINK protocol (audit, netfilter, generic netlink...)"},
};

// What src/guest calls once the filter is on (its serve loop, spawn, signals, timers, files).
constexpr std::string_view kInitNeeds[] = {
    "accept4", "chdir", "clock_gettime", "clone", "clone3", "close", "close_range", "dup2", "dup3",
    "epoll_create1", "epoll_ctl", "epoll_wait", "execve", "exit", "exit_group", "faccessat", "fchmod",
    "fchmodat", "fchown", "fchownat", "fcntl", "fstat", "fstatfs", "kill", "mkdirat", "mknodat", "mmap",
    "munmap", "newfstatat", "openat", "openat2", "pipe2", "poll", "prctl", "pread64", "prlimit64", "read",
    "recvmsg", "renameat", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigtimedwait", "sendmsg",
    "sendto", "setfsgid", "setfsuid", "setgroups", "setresgid", "setresuid", "setsid", "signalfd4", "socket",
    "symlinkat", "timerfd_create", "timerfd_settime", "umask", "unlinkat", "wait4", "write",
};

}  // namespace

std::string_view resolve_profile(std::string_view name) {
  if (name == "default") return kNewestProfile;
  if (name == "default-v1" || name == "default-v2") return name;
  return {};
}

std::span<const std::string_view> profile_names() { return kProfileNames; }

std::span<const DenyRule> profile_rules(std::string_view version) {
  if (version == "default-v1") return kDefaultV1;
  if (version == "default-v2") return kDefaultV2;
  return {};
}

std::string_view socket_family_name(unsigned long long family) {
  return family < kSocketFamilies ? kFamilyNames[family] : std::string_view();
}

std::span<const Relaxation> relaxations() { return kRelaxations; }

const Relaxation* find_relaxation(std::string_view name) {
  for (const Relaxation& r : kRelaxations)
    if (r.name == name) return &r;
  return nullptr;
}

bool init_needs(std::string_view syscall) {
  return std::find(std::begin(kInitNeeds), std::end(kInitNeeds), syscall) != std::end(kInitNeeds);
}

}  // namespace sandlet::seccomp
