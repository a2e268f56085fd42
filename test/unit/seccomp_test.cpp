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

#include "common/error.hpp"
#include "policy/seccomp/profile_rules.hpp"
#include "policy/seccomp/profile_table.hpp"
#include "policy/seccomp_profile.hpp"

namespace {

// What one run of a program did: instructions executed, and whether it read more than the call's number
// and architecture (then the kernel's per-filter allow cache cannot answer that call without running it).
struct Trace {
  int steps = 0;
  bool read_beyond_nr_arch = false;
};

// Runs a seccomp program the way the kernel does (only the instructions seccomp programs use).
uint32_t run_filter(const std::string& prog, const seccomp_data& d, Trace* trace = nullptr) {
  std::vector<sock_filter> insns(prog.size() / sizeof(sock_filter));
  std::memcpy(insns.data(), prog.data(), insns.size() * sizeof(sock_filter));
  uint32_t a = 0;
  for (size_t pc = 0; pc < insns.size(); ++pc) {
    const sock_filter& i = insns[pc];
    if (trace) ++trace->steps;
    switch (i.code) {
      case BPF_LD | BPF_W | BPF_ABS: {
        REQUIRE(i.k + 4 <= sizeof d);
        std::memcpy(&a, reinterpret_cast<const char*>(&d) + i.k, 4);
        if (trace && i.k != offsetof(seccomp_data, nr) && i.k != offsetof(seccomp_data, arch))
          trace->read_beyond_nr_arch = true;
        break;
      }
      case BPF_ALU | BPF_AND | BPF_K: a &= i.k; break;
      case BPF_JMP | BPF_JA: pc += i.k; break;
      case BPF_JMP | BPF_JEQ | BPF_K: pc += a == i.k ? i.jt : i.jf; break;
      case BPF_JMP | BPF_JGE | BPF_K: pc += a >= i.k ? i.jt : i.jf; break;
      case BPF_JMP | BPF_JGT | BPF_K: pc += a > i.k ? i.jt : i.jf; break;
      case BPF_JMP | BPF_JSET | BPF_K: pc += (a & i.k) ? i.jt : i.jf; break;
      case BPF_RET | BPF_K: return i.k;
      default: FAIL("instruction " << i.code << " not handled by the test's evaluator");
    }
  }
  FAIL("program fell off its end");
  return 0;
}

seccomp_data call(int nr, uint64_t a0 = 0, uint64_t a1 = 0, uint32_t arch = AUDIT_ARCH_X86_64) {
  seccomp_data d{};
  d.nr = nr;
  d.arch = arch;
  d.args[0] = a0;
  d.args[1] = a1;
  return d;
}

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
  CHECK(embedded == seccomp::compile_seccomp_bpf("default-v1", {}, {}));
  SeccompPolicy named;
  named.profile = "default-v1";
  CHECK(&policy::seccomp_bpf_for(SeccompPolicy{}) == &embedded);
  CHECK(&policy::seccomp_bpf_for(named) == &embedded);
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
  for (const seccomp::DenyRule& rule : seccomp::profile_rules("default-v1")) {
    const int nr = seccomp::syscall_number(rule.name);
    if (nr < 0) continue;  // not an x86_64 call
    INFO(rule.name);
    if (!rule.arg) {
      CHECK(run_filter(bpf, call(nr)) == kEperm);
    } else {
      uint64_t args[2] = {0, 0};
      args[rule.arg->index] = rule.arg->value;
      CHECK(run_filter(bpf, call(nr, args[0], args[1])) == kEperm);
      // The same with the size and direction bits of an ioctl set, and with high bits set
      // (the kernel reads the request as 32 bits).
      args[rule.arg->index] = rule.arg->value | 0xffffffff00000000ull | (rule.arg->mask == 0xffff ? 0x7fff0000 : 0);
      CHECK(run_filter(bpf, call(nr, args[0], args[1])) == kEperm);
    }
    ++checked;
  }
  CHECK(checked > 80);
}

TEST_CASE("the kernel's allow cache answers every call the default profile allows whatever its arguments",
          "[seccomp]") {
  // The kernel decides per filter, at install, which call numbers it may allow without running the program:
  // those whose path reads only the number and the architecture (x86_64) and ends in ALLOW. A prologue or a
  // rule that read anything else on every path (the instruction pointer, an argument) would make every
  // call run the whole program: the cost per system call bench/RESULTS.md measures would grow.
  const std::string& bpf = policy::baseline_seccomp_bpf();
  std::set<int> with_rules;
  for (const seccomp::DenyRule& rule : seccomp::profile_rules("default-v1"))
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
  Trace ioctl, clone;
  CHECK(run_filter(bpf, call(SYS_ioctl, 0, 0x541b /* FIONREAD */), &ioctl) == SECCOMP_RET_ALLOW);
  CHECK(run_filter(bpf, call(SYS_clone, SIGCHLD), &clone) == SECCOMP_RET_ALLOW);
  CHECK(ioctl.read_beyond_nr_arch);
  CHECK(ioctl.steps <= 40);
  CHECK(clone.steps <= 50);
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
    for (std::string_view name : r.syscalls) {
      INFO(name);
      REQUIRE(nr_of(name) >= 0);
      CHECK(run_filter(bpf, call(nr_of(name))) == SECCOMP_RET_ALLOW);
      CHECK(run_filter(policy::baseline_seccomp_bpf(), call(nr_of(name))) == kEperm);
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
  CHECK(d.at("profile").as_string() == "default-v1");
  CHECK(d.at("requested").as_string() == "default");
  CHECK(d.at("precompiled").as_bool() == false);
  REQUIRE(d.at("relaxations").as_array().size() == 1);
  CHECK(d.at("relaxations").as_array()[0].at("name").as_string() == "ptrace");
  CHECK(d.at("relaxations").as_array()[0].at("syscalls").as_array().size() == 4);
  CHECK(d.at("extra_denied").as_array().size() == 1);
  CHECK(policy::describe(SeccompPolicy{}).at("precompiled").as_bool());
}
