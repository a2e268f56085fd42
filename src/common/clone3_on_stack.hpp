// See clone3_on_stack.S. `args` is a struct clone_args (kernel layout) with CLONE_VM, stack and stack_size
// set; the child runs fn(arg) on that stack and must not touch the caller's stack or libc state.
#pragma once
#include <cstddef>

#if defined(__x86_64__)
extern "C" long sandlet_clone3_on_stack(void* args, size_t size, int (*fn)(void*), void* arg);
#define SANDLET_HAVE_CLONE3_ON_STACK 1
#endif
