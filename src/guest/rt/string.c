/* The memory and string functions of sandlet-init's own C runtime. Built with
   -fno-tree-loop-distribute-patterns so that the compiler does not turn these loops back into calls to
   themselves; copies and fills use the string instructions, fast on every x86-64 since ERMS. */
#include <string.h>

void *memcpy(void *restrict dst, const void *restrict src, size_t n) {
  void *ret = dst;
  __asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
  return ret;
}

void *memmove(void *dst, const void *src, size_t n) {
  unsigned char *d = dst;
  const unsigned char *s = src;
  if (d <= s || d >= s + n) return memcpy(dst, src, n);
  /* Overlapping with the destination above the source: copy backwards. */
  while (n--) d[n] = s[n];
  return dst;
}

void *memset(void *dst, int c, size_t n) {
  void *ret = dst;
  __asm__ volatile("rep stosb" : "+D"(dst), "+c"(n) : "a"(c) : "memory");
  return ret;
}

int memcmp(const void *a, const void *b, size_t n) {
  const unsigned char *x = a, *y = b;
  for (size_t i = 0; i < n; i++)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return 0;
}

void *memchr(const void *s, int c, size_t n) {
  const unsigned char *p = s;
  for (size_t i = 0; i < n; i++)
    if (p[i] == (unsigned char)c) return (void *)(p + i);
  return NULL;
}

size_t strlen(const char *s) {
  const char *p = s;
  while (*p) p++;
  return (size_t)(p - s);
}

int strcmp(const char *a, const char *b) {
  while (*a && *a == *b) a++, b++;
  return (unsigned char)*a - (unsigned char)*b;
}

int strncmp(const char *a, const char *b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (a[i] != b[i] || !a[i]) return (unsigned char)a[i] - (unsigned char)b[i];
  }
  return 0;
}

char *strchr(const char *s, int c) {
  for (;; s++) {
    if (*s == (char)c) return (char *)s;
    if (!*s) return NULL;
  }
}

char *strstr(const char *haystack, const char *needle) {
  size_t n = strlen(needle);
  if (n == 0) return (char *)haystack;
  for (; *haystack; haystack++)
    if (*haystack == *needle && memcmp(haystack, needle, n) == 0) return (char *)haystack;
  return NULL;
}

/* The compiler turns snprintf(buf, n, "literal") into this when the literal fits. */
char *strcpy(char *restrict dst, const char *restrict src) {
  char *d = dst;
  while ((*d++ = *src++) != '\0') {
  }
  return dst;
}
