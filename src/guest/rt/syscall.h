/* Raw Linux system calls for sandlet-init's own C runtime: they return the kernel's result (-errno on
   failure) and never touch errno. x86-64 only. Usable from C and C++, and on the host (unit tests). */
#ifndef SANDLET_GUEST_RT_SYSCALL_H
#define SANDLET_GUEST_RT_SYSCALL_H

static inline long sandlet_rt_syscall6(long nr, long a, long b, long c, long d, long e, long f) {
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}

#define SANDLET_RT_SYSCALL(nr, a, b, c, d, e, f)                                                           \
  sandlet_rt_syscall6((long)(nr), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))

#endif
