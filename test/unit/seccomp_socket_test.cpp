// Socket families by list (profile default-v2, docs/POLICY.md): the compiled program, run by the tests'
// evaluator and installed in a forked child on this kernel, allows AF_UNIX, AF_INET, AF_INET6 and
// AF_NETLINK with NETLINK_ROUTE or NETLINK_SOCK_DIAG; every other family fails with EAFNOSUPPORT and every
// other netlink protocol with EPROTONOSUPPORT, also with the upper half of the register set; the `vsock`
// and `netlink` relaxations lift exactly theirs. And the init's own evaluator (guest/seccomp_eval.hpp),
// which finds the errno of each counted denial, answers what the tests' evaluator answers.
#include <catch2/catch.hpp>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "guest/seccomp_eval.hpp"
#include "policy/seccomp/profile_rules.hpp"
#include "policy/seccomp/profile_table.hpp"
#include "policy/seccomp_profile.hpp"
#include "seccomp_test_support.hpp"

using namespace sandlet;
using seccomp_test::call;
using seccomp_test::call_args;
using seccomp_test::run_filter;

namespace {

constexpr uint64_t kAfUnix = 1, kAfInet = 2, kAfInet6 = 10, kAfNetlink = 16, kAfVsock = 40;
constexpr uint64_t kHigh = 1ull << 32;
constexpr uint32_t kAfNoSupport = SECCOMP_RET_ERRNO | EAFNOSUPPORT;
constexpr uint32_t kProtoNoSupport = SECCOMP_RET_ERRNO | EPROTONOSUPPORT;

bool listed(uint64_t family) {
  return family == kAfUnix || family == kAfInet || family == kAfInet6 || family == kAfNetlink;
}

const std::string& program(std::vector<std::string> allow, const std::string& profile = "default") {
  SeccompPolicy p;
  p.profile = profile;
  p.allow = std::move(allow);
  return policy::seccomp_bpf_for(p);
}

uint32_t socket_result(const std::string& bpf, int nr, uint64_t family, uint64_t protocol = 0,
                       uint64_t type = SOCK_STREAM) {
  return run_filter(bpf, call_args(nr, {family, type, protocol}));
}

// One socket(2) or socketpair(2) a forked child makes under a filter.
struct Try {
  long nr;
  uint64_t family, type, protocol;
};

// Installs `bpf` (empty: none) in a forked child, makes each call, and returns each one's errno (0: it
// worked; the socket is closed at once, never connected or bound). The child allocates nothing: the
// parent may have threads.
std::vector<int> try_in_child(const std::string& bpf, const std::vector<Try>& tries) {
  std::vector<int> results(tries.size(), -1);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    if (!bpf.empty()) {
      sock_fprog prog{static_cast<unsigned short>(bpf.size() / sizeof(sock_filter)),
                      reinterpret_cast<sock_filter*>(const_cast<char*>(bpf.data()))};
      if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog))
        ::_exit(1);
    }
    for (size_t i = 0; i < tries.size(); ++i) {
      const Try& t = tries[i];
      int pair[2] = {-1, -1};
      errno = 0;
      const long rc = t.nr == SYS_socketpair ? ::syscall(t.nr, t.family, t.type, t.protocol, pair)
                                             : ::syscall(t.nr, t.family, t.type, t.protocol);
      results[i] = rc < 0 ? errno : 0;
      if (t.nr == SYS_socket && rc >= 0) ::close(static_cast<int>(rc));
      if (t.nr == SYS_socketpair && rc == 0) {
        ::close(pair[0]);
        ::close(pair[1]);
      }
    }
    const size_t bytes = results.size() * sizeof(int);
    const bool ok = ::write(fds[1], results.data(), bytes) == static_cast<ssize_t>(bytes);
    ::_exit(ok ? 0 : 2);
  }
  ::close(fds[1]);
  size_t got = 0;
  char* out = reinterpret_cast<char*>(results.data());
  for (ssize_t n; got < results.size() * sizeof(int) && (n = ::read(fds[0], out + got, results.size() * sizeof(int) - got)) > 0;)
    got += static_cast<size_t>(n);
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(got == results.size() * sizeof(int));
  return results;
}

}  // namespace

TEST_CASE("default-v2 allows socket families by list, for socket and socketpair", "[seccomp]") {
  const std::string& bpf = policy::baseline_seccomp_bpf();
  for (int nr : {SYS_socket, SYS_socketpair}) {
    for (uint64_t family = 0; family < seccomp::kSocketFamilies + 3; ++family) {
      INFO("syscall " << nr << ", family " << family << " " << seccomp::socket_family_name(family));
      CHECK(socket_result(bpf, nr, family) == (listed(family) ? SECCOMP_RET_ALLOW : kAfNoSupport));
      // The type and its flags do not matter.
      CHECK(socket_result(bpf, nr, family, 0, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC) ==
            (listed(family) ? SECCOMP_RET_ALLOW : kAfNoSupport));
      // The kernel reads the family as 32 bits: a value with any upper bit set is refused, whatever its
      // lower half (an allowed family's included).
      CHECK(socket_result(bpf, nr, family | kHigh) == kAfNoSupport);
      CHECK(socket_result(bpf, nr, family | 0xffffffff00000000ull) == kAfNoSupport);
    }
    CHECK(socket_result(bpf, nr, 63) == kAfNoSupport);
    CHECK(socket_result(bpf, nr, 0xffffffffull) == kAfNoSupport);           // -1 as 32 bits
    CHECK(socket_result(bpf, nr, ~0ull) == kAfNoSupport);                   // -1 sign-extended
    CHECK(socket_result(bpf, nr, kAfVsock | (1ull << 63)) == kAfNoSupport);
  }
  // AF_NETLINK: NETLINK_ROUTE and NETLINK_SOCK_DIAG only.
  for (uint64_t protocol = 0; protocol < 40; ++protocol) {
    INFO("netlink protocol " << protocol);
    const bool allowed = protocol == 0 || protocol == 4;
    CHECK(socket_result(bpf, SYS_socket, kAfNetlink, protocol, SOCK_RAW) ==
          (allowed ? SECCOMP_RET_ALLOW : kProtoNoSupport));
    CHECK(socket_result(bpf, SYS_socket, kAfNetlink, protocol | kHigh, SOCK_RAW) == kProtoNoSupport);
    // Protocols of other families are theirs (IPPROTO_*): not this rule's business.
    CHECK(socket_result(bpf, SYS_socket, kAfInet, protocol, SOCK_RAW) == SECCOMP_RET_ALLOW);
  }
  CHECK(socket_result(bpf, SYS_socket, kAfNetlink, ~0ull, SOCK_RAW) == kProtoNoSupport);
  // Everything else of the profile stays as it was.
  CHECK(run_filter(bpf, call(SYS_getpid)) == SECCOMP_RET_ALLOW);
  CHECK(run_filter(bpf, call(SYS_bpf)) == (SECCOMP_RET_ERRNO | EPERM));
}

TEST_CASE("default-v1 has no socket family rules", "[seccomp]") {
  const std::string& v1 = program({}, "default-v1");
  for (uint64_t family = 0; family < 64; ++family)
    CHECK(socket_result(v1, SYS_socket, family) == SECCOMP_RET_ALLOW);
  CHECK(socket_result(v1, SYS_socket, kAfNetlink, 9, SOCK_RAW) == SECCOMP_RET_ALLOW);
  // The socket relaxations lift nothing there.
  CHECK(program({"vsock", "netlink"}, "default-v1") == v1);
}

TEST_CASE("the vsock and netlink relaxations lift exactly their rules", "[seccomp]") {
  const std::string& vsock = program({"vsock"});
  const std::string& netlink = program({"netlink"});
  const std::string& both = program({"vsock", "netlink", "ptrace"});
  for (int nr : {SYS_socket, SYS_socketpair}) {
    for (uint64_t family = 0; family < seccomp::kSocketFamilies + 3; ++family) {
      INFO("syscall " << nr << ", family " << family);
      const bool with_vsock = listed(family) || family == kAfVsock;
      CHECK(socket_result(vsock, nr, family) == (with_vsock ? SECCOMP_RET_ALLOW : kAfNoSupport));
      CHECK(socket_result(netlink, nr, family) == (listed(family) ? SECCOMP_RET_ALLOW : kAfNoSupport));
      CHECK(socket_result(both, nr, family) == (with_vsock ? SECCOMP_RET_ALLOW : kAfNoSupport));
    }
    // The range rule still refuses a family with upper bits set: AF_VSOCK in disguise is not the relaxation's.
    CHECK(socket_result(vsock, nr, kAfVsock | kHigh) == kAfNoSupport);
  }
  for (uint64_t protocol = 0; protocol < 40; ++protocol) {
    INFO("netlink protocol " << protocol);
    const bool route_or_diag = protocol == 0 || protocol == 4;
    CHECK(socket_result(vsock, SYS_socket, kAfNetlink, protocol, SOCK_RAW) ==
          (route_or_diag ? SECCOMP_RET_ALLOW : kProtoNoSupport));
    // Every protocol: those the kernel lacks it refuses itself (EPROTONOSUPPORT).
    CHECK(socket_result(netlink, SYS_socket, kAfNetlink, protocol, SOCK_RAW) == SECCOMP_RET_ALLOW);
    CHECK(socket_result(both, SYS_socket, kAfNetlink, protocol, SOCK_RAW) == SECCOMP_RET_ALLOW);
  }
  // The rest of the profile stays.
  CHECK(run_filter(vsock, call(SYS_ptrace)) == (SECCOMP_RET_ERRNO | EPERM));
  CHECK(run_filter(both, call(SYS_ptrace)) == SECCOMP_RET_ALLOW);
  CHECK(run_filter(netlink, call(SYS_io_uring_setup)) == (SECCOMP_RET_ERRNO | EPERM));
  // deny still makes it stricter: a whole call denied is EPERM, its family rules gone with it.
  SeccompPolicy p;
  p.allow = {"vsock"};
  p.deny = {"socketpair"};
  const std::string& strict = policy::seccomp_bpf_for(p);
  CHECK(socket_result(strict, SYS_socketpair, kAfUnix) == (SECCOMP_RET_ERRNO | EPERM));
  CHECK(socket_result(strict, SYS_socket, kAfVsock) == SECCOMP_RET_ALLOW);
}

TEST_CASE("the init's seccomp evaluator answers what the program answers", "[seccomp]") {
  std::vector<seccomp_data> inputs;
  for (int nr = 0; nr < 512; ++nr) inputs.push_back(call(nr));
  inputs.push_back(call(20, 0, 0, AUDIT_ARCH_I386));
  inputs.push_back(call(0x40000000 | SYS_getpid));
  for (int nr : {SYS_socket, SYS_socketpair})
    for (uint64_t family = 0; family < 64; ++family)
      for (uint64_t high : {uint64_t(0), kHigh, uint64_t(0xffffffff00000000ull)})
        inputs.push_back(call_args(nr, {family | high, SOCK_STREAM, 0}));
  for (uint64_t protocol = 0; protocol < 40; ++protocol)
    for (uint64_t high : {uint64_t(0), kHigh}) inputs.push_back(call_args(SYS_socket, {kAfNetlink, SOCK_RAW, protocol | high}));
  for (const seccomp::DenyRule& rule : seccomp::profile_rules(seccomp::kNewestProfile)) {
    const int nr = seccomp::syscall_number(rule.name);
    if (nr < 0 || !rule.arg) continue;
    seccomp_data d = call(nr);
    for (const seccomp::ArgMatch* m : {rule.arg, rule.and_arg})
      if (m) d.args[m->index] = m->value;
    inputs.push_back(d);
  }
  std::vector<const std::string*> programs = {&policy::baseline_seccomp_bpf(), &program({}, "default-v1")};
  for (const seccomp::Relaxation& r : seccomp::relaxations()) programs.push_back(&program({std::string(r.name)}));
  size_t denials = 0;
  for (const std::string* bpf : programs) {
    const auto* insns = reinterpret_cast<const sock_filter*>(bpf->data());
    const size_t n = bpf->size() / sizeof(sock_filter);
    for (const seccomp_data& d : inputs) {
      INFO("nr " << d.nr << " args " << d.args[0] << " " << d.args[1] << " " << d.args[2]);
      const uint32_t expected = run_filter(*bpf, d);
      CHECK(guest::seccomp_eval(insns, n, d) == expected);
      denials += (expected & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ERRNO;
    }
  }
  CHECK(denials > 1000);
  // A program it cannot run (a jump past its end, an unknown instruction) gives the failure value, which
  // the supervisor answers with EPERM.
  const sock_filter past_end[] = {BPF_JUMP(BPF_JMP | BPF_JA, 5, 0, 0), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  CHECK(guest::seccomp_eval(past_end, 2, call(0)) == guest::kSeccompEvalFailed);
  const sock_filter unknown[] = {BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 0), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  CHECK(guest::seccomp_eval(unknown, 2, call(0)) == guest::kSeccompEvalFailed);
  const sock_filter no_return[] = {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0)};
  CHECK(guest::seccomp_eval(no_return, 1, call(0)) == guest::kSeccompEvalFailed);
}

TEST_CASE("this kernel refuses the families default-v2 refuses, with their errno", "[seccomp]") {
  std::vector<Try> tries;
  for (uint64_t family = 0; family < seccomp::kSocketFamilies + 3; ++family)
    tries.push_back({SYS_socket, family, family == kAfNetlink ? uint64_t(SOCK_RAW) : uint64_t(SOCK_DGRAM), 0});
  const size_t netlink_at = tries.size();
  for (uint64_t protocol = 0; protocol < 34; ++protocol) tries.push_back({SYS_socket, kAfNetlink, SOCK_RAW, protocol});
  const size_t high_at = tries.size();
  for (uint64_t family : {kAfUnix, kAfInet, kAfInet6, kAfNetlink, kAfVsock})
    tries.push_back({SYS_socket, family | kHigh, SOCK_DGRAM, 0});
  tries.push_back({SYS_socket, kAfNetlink, SOCK_RAW, kHigh});  // NETLINK_ROUTE in disguise
  const size_t pair_at = tries.size();
  tries.push_back({SYS_socketpair, kAfUnix, SOCK_STREAM, 0});
  tries.push_back({SYS_socketpair, kAfVsock, SOCK_STREAM, 0});
  tries.push_back({SYS_socketpair, kAfUnix | kHigh, SOCK_STREAM, 0});
  const size_t vsock_at = tries.size();
  tries.push_back({SYS_socket, kAfVsock, SOCK_STREAM, 0});

  const std::vector<int> got = try_in_child(policy::baseline_seccomp_bpf(), tries);
  for (size_t i = 0; i < netlink_at; ++i) {
    INFO("family " << tries[i].family << " " << seccomp::socket_family_name(tries[i].family) << ": "
                   << std::strerror(got[i]));
    CHECK(got[i] == (listed(tries[i].family) ? 0 : EAFNOSUPPORT));
  }
  for (size_t i = netlink_at; i < high_at; ++i) {
    INFO("netlink protocol " << tries[i].protocol << ": " << std::strerror(got[i]));
    CHECK(got[i] == (tries[i].protocol == 0 || tries[i].protocol == 4 ? 0 : EPROTONOSUPPORT));
  }
  for (size_t i = high_at; i < pair_at; ++i) {
    INFO("family " << std::hex << tries[i].family << " protocol " << tries[i].protocol);
    CHECK(got[i] == (tries[i].family == kAfNetlink ? EPROTONOSUPPORT : EAFNOSUPPORT));
  }
  CHECK(got[pair_at] == 0);
  CHECK(got[pair_at + 1] == EAFNOSUPPORT);
  CHECK(got[pair_at + 2] == EAFNOSUPPORT);
  CHECK(got[vsock_at] == EAFNOSUPPORT);

  // With the relaxation, AF_VSOCK gets what this kernel says without any filter (a socket where vsock is
  // available; created and closed, never connected: it would reach this machine's hypervisor).
  const std::vector<Try> vsock = {{SYS_socket, kAfVsock, SOCK_STREAM, 0}, {SYS_socket, kAfVsock | kHigh, SOCK_STREAM, 0}};
  const int unfiltered = try_in_child("", {vsock[0]})[0];
  const std::vector<int> relaxed = try_in_child(program({"vsock"}), vsock);
  INFO("AF_VSOCK without a filter: " << std::strerror(unfiltered));
  CHECK(relaxed[0] == unfiltered);
  CHECK(relaxed[1] == EAFNOSUPPORT);
  // And a listed family works under every relaxation's program.
  for (const seccomp::Relaxation& r : seccomp::relaxations()) {
    INFO(r.name);
    CHECK(try_in_child(program({std::string(r.name)}), {{SYS_socket, kAfInet6, SOCK_DGRAM, 0}})[0] == 0);
  }
}
