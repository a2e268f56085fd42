/* Entry points of sandlet-init's own C runtime (see rt/README.md): the process entry, the signal-return
   trampoline the kernel requires with SA_RESTORER, and clone(2) in glibc's calling convention. x86-64. */
#if defined(__x86_64__)
  .text

/* The kernel enters with argc at (%rsp), then argv[], NULL, envp[], NULL, auxv. */
  .p2align 4
  .globl _start
  .type _start,@function
_start:
  xor %ebp, %ebp           /* outermost frame */
  mov %rsp, %rdi
  and $-16, %rsp           /* the ABI wants a 16-byte aligned stack at the call */
  call sandlet_rt_start    /* never returns */
  hlt
  .size _start, .-_start

  .p2align 4
  .globl sandlet_rt_sigreturn
  .hidden sandlet_rt_sigreturn
  .type sandlet_rt_sigreturn,@function
sandlet_rt_sigreturn:
  mov $15, %eax            /* SYS_rt_sigreturn */
  syscall
  hlt
  .size sandlet_rt_sigreturn, .-sandlet_rt_sigreturn

/* long sandlet_rt_clone(int (*fn)(void *), void *stack, unsigned long flags, void *arg)
   The child starts on `stack`, calls fn(arg) and exits with its return value. Returns the pid or -errno. */
  .p2align 4
  .globl sandlet_rt_clone
  .hidden sandlet_rt_clone
  .type sandlet_rt_clone,@function
sandlet_rt_clone:
  and $-16, %rsi
  sub $16, %rsi
  mov %rdi, (%rsi)         /* fn and arg ride on the child's stack */
  mov %rcx, 8(%rsi)
  mov %rdx, %rdi           /* flags */
  xor %edx, %edx           /* parent_tid */
  xor %r10d, %r10d         /* child_tid */
  xor %r8d, %r8d           /* tls */
  mov $56, %eax            /* SYS_clone */
  syscall
  test %rax, %rax
  jnz 1f
  xor %ebp, %ebp           /* child */
  pop %rax
  pop %rdi
  call *%rax
  mov %eax, %edi
  mov $60, %eax            /* SYS_exit */
  syscall
  hlt
1:
  ret
  .size sandlet_rt_clone, .-sandlet_rt_clone
#endif
  .section .note.GNU-stack,"",@progbits
