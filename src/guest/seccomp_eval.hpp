// Runs a classic-BPF seccomp program on one call's seccomp_data, as the kernel does. The init's denial
// supervisor (guest/seccomp_notify.cpp) needs it: the kernel tells it only that a call was refused, not
// with which errno (a notification carries the call, not the filter's result), so it runs the program as
// compiled on the same data and answers what the filter would have. Header-only and free of any C
// library: it runs on the supervisor thread, which makes raw system calls only.
#pragma once
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>

namespace sandlet::guest {

// A result no filter returns (SECCOMP_RET_KILL_PROCESS's action with data): the program did something
// this evaluator does not know, or left its bounds (the kernel validated it at install, so neither happens
// to a program it accepted).
constexpr uint32_t kSeccompEvalFailed = 0x8000ffffu;

// The program's result (SECCOMP_RET_*) for `d`; the instructions are those the kernel's seccomp checker
// accepts (loads of seccomp_data, scratch memory, ALU, jumps, return).
inline uint32_t seccomp_eval(const struct sock_filter* insns, size_t n, const struct seccomp_data& d) {
  uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {};
  for (size_t pc = 0; pc < n; ++pc) {
    const struct sock_filter& i = insns[pc];
    const uint32_t src = BPF_SRC(i.code) == BPF_X ? x : i.k;
    switch (BPF_CLASS(i.code)) {
      case BPF_LD:
        if (i.code == (BPF_LD | BPF_W | BPF_ABS)) {
          if (i.k % 4 != 0 || i.k > sizeof d - 4) return kSeccompEvalFailed;  // (no wrap of i.k + 4)
          __builtin_memcpy(&a, reinterpret_cast<const char*>(&d) + i.k, 4);
        } else if (i.code == (BPF_LD | BPF_W | BPF_LEN)) {
          a = sizeof d;
        } else if (i.code == (BPF_LD | BPF_IMM)) {
          a = i.k;
        } else if (i.code == (BPF_LD | BPF_MEM) && i.k < BPF_MEMWORDS) {
          a = mem[i.k];
        } else {
          return kSeccompEvalFailed;
        }
        break;
      case BPF_LDX:
        if (i.code == (BPF_LDX | BPF_W | BPF_LEN)) x = sizeof d;
        else if (i.code == (BPF_LDX | BPF_IMM)) x = i.k;
        else if (i.code == (BPF_LDX | BPF_MEM) && i.k < BPF_MEMWORDS) x = mem[i.k];
        else return kSeccompEvalFailed;
        break;
      case BPF_ST:
        if (i.k >= BPF_MEMWORDS) return kSeccompEvalFailed;
        mem[i.k] = a;
        break;
      case BPF_STX:
        if (i.k >= BPF_MEMWORDS) return kSeccompEvalFailed;
        mem[i.k] = x;
        break;
      case BPF_ALU:
        switch (BPF_OP(i.code)) {
          case BPF_ADD: a += src; break;
          case BPF_SUB: a -= src; break;
          case BPF_MUL: a *= src; break;
          case BPF_DIV: if (src == 0) return 0; a /= src; break;  // the kernel ends the program with 0
          case BPF_MOD: if (src == 0) return 0; a %= src; break;
          case BPF_OR: a |= src; break;
          case BPF_AND: a &= src; break;
          case BPF_XOR: a ^= src; break;
          case BPF_LSH: a = src < 32 ? a << src : 0; break;
          case BPF_RSH: a = src < 32 ? a >> src : 0; break;
          case BPF_NEG: a = 0u - a; break;
          default: return kSeccompEvalFailed;
        }
        break;
      case BPF_JMP: {
        size_t off;
        switch (BPF_OP(i.code)) {
          case BPF_JA: off = i.k; break;
          case BPF_JEQ: off = a == src ? i.jt : i.jf; break;
          case BPF_JGT: off = a > src ? i.jt : i.jf; break;
          case BPF_JGE: off = a >= src ? i.jt : i.jf; break;
          case BPF_JSET: off = (a & src) ? i.jt : i.jf; break;
          default: return kSeccompEvalFailed;
        }
        if (off >= n - pc - 1) return kSeccompEvalFailed;  // forward only, within the program
        pc += off;
        break;
      }
      case BPF_RET:
        if (BPF_RVAL(i.code) == BPF_A) return a;
        if (BPF_RVAL(i.code) == BPF_K) return i.k;
        return kSeccompEvalFailed;
      case BPF_MISC:
        if (BPF_MISCOP(i.code) == BPF_TAX) x = a;
        else a = x;
        break;
      default:
        return kSeccompEvalFailed;
    }
  }
  return kSeccompEvalFailed;  // fell off the end
}

}  // namespace sandlet::guest
