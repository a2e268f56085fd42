/* The memory allocator of sandlet-init's own C runtime. Small blocks come from power-of-two size classes
   (32 B .. 256 KiB including a 16-byte header) carved in turn from 1 MiB mappings and recycled through per-class
   free lists; larger blocks are mappings of their own, unmapped when freed, so the megabytes an exec's
   output queue may reach go back to the system when it ends. Payloads are 16-byte aligned. Single
   threaded (the init is). Host-testable: it only uses raw system calls. */
#ifndef SANDLET_GUEST_RT_ALLOC_H
#define SANDLET_GUEST_RT_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *sandlet_rt_alloc(size_t size);  /* NULL when the system has no memory left (or size is absurd) */
void sandlet_rt_release(void *ptr);   /* NULL is fine */
size_t sandlet_rt_usable_size(const void *ptr);

#ifdef __cplusplus
}
#endif

#endif
