/* long sandlet_clone3_on_stack(struct clone_args *args, size_t size, int (*fn)(void *), void *arg)
   clone3 for a child that shares our memory (CLONE_VM): the child starts on the stack given in args,
   calls fn(arg) and exits with its return value; it never returns into C code that expects the parent's
   stack. fn and arg ride in r8/r9, which the child inherits. Returns the child's pid or -errno.
   Used by the host (to start a sandbox's init) and by the init (to start commands). x86-64 only. */
#if defined(__x86_64__)
  .text
  .p2align 4
  .globl sandlet_clone3_on_stack
  .hidden sandlet_clone3_on_stack
  .type sandlet_clone3_on_stack,@function
sandlet_clone3_on_stack:
  mov %rdx, %r8
  mov %rcx, %r9
  mov $435, %eax          /* SYS_clone3 */
  syscall
  test %rax, %rax
  jnz 1f
  xor %ebp, %ebp          /* child: outermost frame */
  mov %r9, %rdi
  call *%r8
  mov %eax, %edi
  mov $60, %eax           /* SYS_exit: this child is its own thread group */
  syscall
  hlt
1:
  ret
  .size sandlet_clone3_on_stack, .-sandlet_clone3_on_stack
#endif
  .section .note.GNU-stack,"",@progbits
