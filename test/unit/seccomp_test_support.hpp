// The unit tests' own classic-BPF evaluator for seccomp programs (independent of the init's
// guest/seccomp_eval.hpp, which seccomp_socket_test.cpp checks against it).
#pragma once
#include <catch2/catch.hpp>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace seccomp_test {

// What one run of a program did: instructions executed, and whether it read more than the call's number
// and architecture (then the kernel's per-filter allow cache cannot answer that call without running it).
struct Trace {
  int steps = 0;
  bool read_beyond_nr_arch = false;
};

// Runs a seccomp program the way the kernel does (only the instructions seccomp programs use).
inline uint32_t run_filter(const std::string& prog, const seccomp_data& d, Trace* trace = nullptr) {
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

inline seccomp_data call(int nr, uint64_t a0 = 0, uint64_t a1 = 0, uint32_t arch = AUDIT_ARCH_X86_64) {
  seccomp_data d{};
  d.nr = nr;
  d.arch = arch;
  d.args[0] = a0;
  d.args[1] = a1;
  return d;
}

// A call with arguments 0..5 as given (the rest 0).
inline seccomp_data call_args(int nr, std::initializer_list<uint64_t> args) {
  seccomp_data d = call(nr);
  int k = 0;
  for (uint64_t a : args) d.args[k++] = a;
  return d;
}

}  // namespace seccomp_test
