// Unit tests for the seccomp profiles: the embedded default program is what its rules compile to, at build
// time and at run time; and the program, run by a small classic-BPF evaluator on seccomp_data, answers what
// docs/POLICY.md says for every rule, every relaxation, other ABIs and ordinary calls.
#include <catch2/catch.hpp>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>

#include <csignal>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "common/error.hpp"
#include "policy/seccomp/profile_rules.hpp"
#include "policy/seccomp/profile_table.hpp"
#include "policy/seccomp_profile.hpp"
#include "seccomp_test_support.hpp"

namespace {

using seccomp_test::call;
using seccomp_test::call_args;
using seccomp_test::run_filter;
using seccomp_test::Trace;

constexpr uint32_t kEperm = SECCOMP_RET_ERRNO | EPERM;

int nr_of(std::string_view name) {
  // The numbers of the x86_64 calls the tests name (libseccomp resolves the profile's own names).
  if (name == "ptrace") return SYS_ptrace;
  if (name == "process_vm_readv") return SYS_process_vm_readv;
  if (name == "process_vm_writev") return SYS_process_vm_writev;
  if (name == "pidfd_getfd") return SYS_pidfd_getfd;
  if (name == "io_uring_setup") return SYS_io_uring_setup;
  if (name == "io_uring_enter") return SYS_io_uring_enter;
  if (name == "io_uring_register") return SYS_io_uring_register;
  if (name == "perf_event_open") return SYS_perf_event_open;
  return -1;
}

}  // namespace

using namespace sandlet;

TEST_CASE("the embedded default seccomp program is what its rules compile to", "[seccomp]") {
  const std::string& embedded = policy::baseline_seccomp_bpf();
  REQUIRE(!embedded.empty());
  CHECK(embedded.size() % sizeof(sock_filter) == 0);
  // A stale build (rules edited, program not regenerated) or a different libseccomp shows up here.
  CHECK(embedded == seccomp::build_default_seccomp_bpf());
  // The run-time path gives the same program for the default policy, however it is named.
  CHECK(embedded == seccomp::compile_seccomp_bpf(seccomp::kNewestProfile, {}, {}));
  CHECK(seccomp::kNewestProfile == "default-v2");
  SeccompPolicy named;
  named.profile = "default-v2";
  CHECK(&policy::seccomp_bpf_for(SeccompPolicy{}) == &embedded);
  CHECK(&policy::seccomp_bpf_for(named) == &embedded);
  // An older version stays selectable, compiled at create time.
  SeccompPolicy v1;
  v1.profile = "default-v1";
  CHECK(&policy::seccomp_bpf_for(v1) != &embedded);
  CHECK(policy::seccomp_bpf_for(v1) == seccomp::compile_seccomp_bpf("default-v1", {}, {}));
}

TEST_CASE("profile names resolve; a released version keeps its rules", "[seccomp]") {
  CHECK(seccomp::resolve_profile("default") == seccomp::kNewestProfile);
  CHECK(seccomp::resolve_profile("default-v1") == "default-v1");
  CHECK(seccomp::resolve_profile("default-v2") == "default-v2");
  CHECK(seccomp::resolve_profile("default-v3").empty());
  CHECK(seccomp::resolve_profile("").empty());
  const auto names = seccomp::profile_names();
  CHECK(std::vector<std::string_view>(names.begin(), names.end()) ==
        std::vector<std::string_view>{"default", "default-v1", "default-v2"});
  // default-v1 as released: 114 rules, every one EPERM, none on sockets. default-v2 is it plus the socket
  // family rules, in the same order.
  const auto v1 = seccomp::profile_rules("default-v1");
  const auto v2 = seccomp::profile_rules("default-v2");
  CHECK(v1.size() == 114);
  REQUIRE(v2.size() > v1.size());
  for (size_t i = 0; i < v1.size(); ++i) {
    INFO(v1[i].name);
    CHECK(v1[i].error == EPERM);
    CHECK(v1[i].and_arg == nullptr);
    CHECK(v1[i].name != "socket");
    CHECK(v1[i].name != "socketpair");
    CHECK(v2[i].name == v1[i].name);
    CHECK(v2[i].arg == v1[i].arg);
  }
  for (size_t i = v1.size(); i < v2.size(); ++i) {
    INFO(i);
    CHECK((v2[i].name == "socket" || v2[i].name == "socketpair"));
    CHECK((v2[i].error == EAFNOSUPPORT || v2[i].error == EPROTONOSUPPORT));
    REQUIRE(v2[i].arg != nullptr);
  }
}

TEST_CASE("the default profile denies each of its rules with EPERM and allows the rest", "[seccomp]") {
  const std::string& bpf = policy::baseline_seccomp_bpf();
  CHECK(run_filter(bpf, call(SYS_getpid)) == SECCOMP_RET_ALLOW);
  CHECK(run_filter(bpf, call(SYS_read)) == SECCOMP_RET_ALLOW);
  CHECK(run_filter(bpf, call(SYS_clone3)) == SECCOMP_RET_ALLOW);  // the namespace counters guard it
  CHECK(run_filter(bpf, call(SYS_clone, SIGCHLD)) == SECCOMP_RET_ALLOW);
  CHECK(run_filter(bpf, call(SYS_ioctl, 0, 0x5401 /* TCGETS */)) == SECCOMP_RET_ALLOW);
  CHECK(run_filter(bpf, call(SYS_personality, 0)) == SECCOMP_RET_ALLOW);
  CHECK(run_filter(bpf, call(SYS_personality, 0x0040000 /* ADDR_NO_RANDOMIZE */)) == SECCOMP_RET_ALLOW);
  CHECK(run_filter(bpf, call(SYS_personality, 0xffffffff)) == SECCOMP_RET_ALLOW);  // the query
  CHECK(run_filter(bpf, call(SYS_personality, 0x0400000 /* READ_IMPLIES_EXEC */)) == kEperm);
  CHECK(run_filter(bpf, call(SYS_personality, 0x80400000)) == kEperm);
  CHECK(run_filter(bpf, call(SYS_personality, 0xfffffffe)) == kEperm);
  int checked = 0;
  for (const seccomp::DenyRule& rule : seccomp::profile_rules(seccomp::kNewestProfile)) {
    const int nr = seccomp::syscall_number(rule.name);
    if (nr < 0) continue;  // not an x86_64 call
    INFO(rule.name << " (rule " << checked << ")");
    const uint32_t denied = SECCOMP_RET_ERRNO | static_cast<uint32_t>(rule.error);
    if (!rule.arg) {
      CHECK(run_filter(bpf, call(nr)) == denied);
    } else {
      seccomp_data d = call(nr);
      for (const seccomp::ArgMatch* m : {rule.arg, rule.and_arg})
        if (m) d.args[m->index] = m->value;
      CHECK(run_filter(bpf, d) == denied);
      // The same with the size and direction bits of an ioctl set, and with high bits set
      // (the kernel reads the request, a family, a protocol as 32 bits).
      for (const seccomp::ArgMatch* m : {rule.arg, rule.and_arg})
        if (m) d.args[m->index] = m->value | 0xffffffff00000000ull | (m->mask == 0xffff ? 0x7fff0000 : 0);
      CHECK(run_filter(bpf, d) == denied);
    }
    ++checked;
  }
  CHECK(checked > 200);
}

TEST_CASE("the kernel's allow cache answers every call the default profile allows whatever its arguments",
          "[seccomp]") {
  // The kernel decides per filter, at install, which call numbers it may allow without running the program:
  // those whose path reads only the number and the architecture (x86_64) and ends in ALLOW. A prologue or a
  // rule that read anything else on every path (the instruction pointer, an argument) would make every
  // call run the whole program: the cost per system call bench/RESULTS.md measures would grow.
  const std::string& bpf = policy::baseline_seccomp_bpf();
  std::set<int> with_rules;
  for (const seccomp::DenyRule& rule : seccomp::profile_rules(seccomp::kNewestProfile))
    if (int nr = seccomp::syscall_number(rule.name); nr >= 0) with_rules.insert(nr);
  int cached = 0;
  for (int nr = 0; nr < 512; ++nr) {
    if (with_rules.count(nr)) continue;
    INFO("syscall " << nr);
    Trace t;
    CHECK(run_filter(bpf, call(nr), &t) == SECCOMP_RET_ALLOW);
    CHECK(!t.read_beyond_nr_arch);
    ++cached;
  }
  CHECK(cached > 400);
  // The calls with argument rules run the program each time: a binary tree over the numbers keeps their
  // path short (the linear layout took 78 instructions for ioctl and 88 for clone).
  Trace ioctl, clone, inet, netlink;
  CHECK(run_filter(bpf, call(SYS_ioctl, 0, 0x541b /* FIONREAD */), &ioctl) == SECCOMP_RET_ALLOW);
  CHECK(run_filter(bpf, call(SYS_clone, SIGCHLD), &clone) == SECCOMP_RET_ALLOW);
  CHECK(ioctl.read_beyond_nr_arch);
  CHECK(ioctl.steps <= 40);
  CHECK(clone.steps <= 50);
  // socket(2) walks the family rules: bounded too (the allowed families, the hot ones, included).
  CHECK(run_filter(bpf, call_args(SYS_socket, {2 /* AF_INET */, 1, 0}), &inet) == SECCOMP_RET_ALLOW);
  CHECK(run_filter(bpf, call_args(SYS_socket, {16 /* AF_NETLINK */, 3, 0}), &netlink) == SECCOMP_RET_ALLOW);
  INFO("socket(AF_INET): " << inet.steps << " instructions, AF_NETLINK: " << netlink.steps);
  CHECK(inet.steps <= 120);
  CHECK(netlink.steps <= 160);
}

TEST_CASE("calls of other ABIs kill the process", "[seccomp]") {
  const std::string& bpf = policy::baseline_seccomp_bpf();
  // i386 through int 0x80: getpid is 20 there.
  CHECK(run_filter(bpf, call(20, 0, 0, AUDIT_ARCH_I386)) == SECCOMP_RET_KILL_PROCESS);
  // x32: x86_64's table with bit 30 set.
  CHECK(run_filter(bpf, call(0x40000000 | SYS_getpid)) == SECCOMP_RET_KILL_PROCESS);
  CHECK(run_filter(bpf, call(0x40000000 | 0x200)) == SECCOMP_RET_KILL_PROCESS);
}

TEST_CASE("relaxations lift exactly their calls; deny adds calls", "[seccomp]") {
  for (const seccomp::Relaxation& r : seccomp::relaxations()) {
    INFO(r.name);
    SeccompPolicy p;
    p.allow = {std::string(r.name)};
    const std::string& bpf = policy::seccomp_bpf_for(p);
    CHECK(bpf != policy::baseline_seccomp_bpf());
    CHECK(&policy::seccomp_bpf_for(p) == &bpf);  // cached
    CHECK((!r.syscalls.empty() || !r.arguments.empty()));
    for (std::string_view name : r.syscalls) {
      INFO(name);
      REQUIRE(nr_of(name) >= 0);
      CHECK(run_filter(bpf, call(nr_of(name))) == SECCOMP_RET_ALLOW);
      CHECK(run_filter(policy::baseline_seccomp_bpf(), call(nr_of(name))) == kEperm);
    }
    // Argument relaxations: every call a lifted comparison selects is allowed (socket families and netlink
    // protocols in seccomp_socket_test.cpp).
    for (const seccomp::ArgMatch* m : r.arguments) {
      INFO(m->label);
      CHECK_FALSE(m->label.empty());
      if (m->op != seccomp::Cmp::kMaskedEq) continue;
      const uint64_t family = m->index == 0 ? m->value : 16;  // a netlink protocol: on AF_NETLINK
      const uint64_t protocol = m->index == 2 ? m->value : 0;
      CHECK(run_filter(bpf, call_args(SYS_socket, {family, 1, protocol})) == SECCOMP_RET_ALLOW);
      CHECK(run_filter(policy::baseline_seccomp_bpf(), call_args(SYS_socket, {family, 1, protocol})) !=
            SECCOMP_RET_ALLOW);
    }
    CHECK(run_filter(bpf, call(SYS_bpf)) == kEperm);  // the rest of the profile stays
    CHECK(run_filter(bpf, call(20, 0, 0, AUDIT_ARCH_I386)) == SECCOMP_RET_KILL_PROCESS);
  }
  SeccompPolicy p;
  p.deny = {"getcwd", "uname"};
  p.allow = {"ptrace"};
  const std::string& bpf = policy::seccomp_bpf_for(p);
  CHECK(run_filter(bpf, call(SYS_getcwd)) == kEperm);
  CHECK(run_filter(bpf, call(SYS_uname)) == kEperm);
  CHECK(run_filter(bpf, call(SYS_ptrace)) == SECCOMP_RET_ALLOW);
  CHECK(run_filter(bpf, call(SYS_getpid)) == SECCOMP_RET_ALLOW);
  // Order and repeats do not make another program.
  SeccompPolicy q;
  q.deny = {"uname", "getcwd"};
  q.allow = {"ptrace"};
  CHECK(&policy::seccomp_bpf_for(q) == &bpf);
  // deny wins over a relaxation of the same call.
  SeccompPolicy both;
  both.allow = {"ptrace"};
  both.deny = {"ptrace"};
  CHECK(run_filter(policy::seccomp_bpf_for(both), call(SYS_ptrace)) == kEperm);
}

TEST_CASE("describe names the effective seccomp policy", "[seccomp]") {
  SeccompPolicy p;
  p.allow = {"ptrace"};
  p.deny = {"getcwd"};
  const auto d = policy::describe(p);
  CHECK(d.at("profile").as_string() == "default-v2");
  CHECK(d.at("requested").as_string() == "default");
  CHECK(d.at("precompiled").as_bool() == false);
  REQUIRE(d.at("relaxations").as_array().size() == 1);
  CHECK(d.at("relaxations").as_array()[0].at("name").as_string() == "ptrace");
  CHECK(d.at("relaxations").as_array()[0].at("syscalls").as_array().size() == 4);
  CHECK(d.at("relaxations").as_array()[0].at("arguments").as_array().empty());
  CHECK(d.at("extra_denied").as_array().size() == 1);
  CHECK(policy::describe(SeccompPolicy{}).at("precompiled").as_bool());
  // An argument relaxation names what it lifts, each once.
  SeccompPolicy sockets;
  sockets.allow = {"vsock", "netlink"};
  const auto r = policy::describe(sockets).at("relaxations").as_array();
  REQUIRE(r.size() == 2);
  CHECK(r[0].at("name").as_string() == "netlink");  // sorted
  CHECK(r[0].at("syscalls").as_array().empty());
  CHECK(r[0].at("arguments").as_array().size() == 1);
  CHECK(r[1].at("name").as_string() == "vsock");
  CHECK(r[1].at("arguments").as_array() == boost::json::array{"AF_VSOCK"});
}
