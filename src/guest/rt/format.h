/* printf-style formatting for sandlet-init's own C runtime (vsnprintf semantics: always terminated when
   size > 0, returns the length the whole output would have). Conversions: d i u x X o c s p %, flags
   - 0 + space #, width and precision (numbers or *), length hh h l ll z j t. No floating point: an `f`
   `e` or `g` conversion prints "?" (the init never formats one). Host-testable: no libc needed. */
#ifndef SANDLET_GUEST_RT_FORMAT_H
#define SANDLET_GUEST_RT_FORMAT_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

int sandlet_rt_vformat(char *buf, size_t size, const char *fmt, va_list ap);

#ifdef __cplusplus
}
#endif

#endif
