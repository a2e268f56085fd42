#include "alloc.h"

#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "syscall.h"

enum {
  kHeader = 16,
  kMinShift = 5,              /* 32-byte blocks */
  kMaxShift = 18,             /* 256 KiB blocks: an exec's 64 KiB pipe reads grow a queue to 128 KiB */
  kClasses = kMaxShift - kMinShift + 1,
  kChunk = 1 << 20,           /* small blocks are carved from mappings of this size */
  kPage = 4096,
};

/* The header: for a small block its class, for a large one its mapping length (a multiple of the page
   size, so it can never be mistaken for a class index). */
typedef struct {
  size_t tag;
  size_t pad;
} Header;

typedef struct FreeBlock {
  struct FreeBlock *next;
} FreeBlock;

static FreeBlock *free_lists[kClasses];
static char *carve_next;
static char *carve_end;

static void *map(size_t len) {
  long r = SANDLET_RT_SYSCALL(SYS_mmap, 0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return r < 0 && r > -4096 ? NULL : (void *)r;
}

static int class_of(size_t total) {
  int c = 0;
  while (((size_t)1 << (c + kMinShift)) < total) c++;
  return c;
}

void *sandlet_rt_alloc(size_t size) {
  if (size > ((size_t)1 << 46)) return NULL;
  size_t total = size + kHeader;
  Header *h;
  if (total > ((size_t)1 << kMaxShift)) {
    size_t len = (total + kPage - 1) & ~(size_t)(kPage - 1);
    h = (Header *)map(len);
    if (!h) return NULL;
    h->tag = len;
    return (char *)h + kHeader;
  }
  int c = class_of(total);
  if (free_lists[c]) {
    h = (Header *)free_lists[c];
    free_lists[c] = free_lists[c]->next;
  } else {
    size_t block = (size_t)1 << (c + kMinShift);
    if ((size_t)(carve_end - carve_next) < block) {
      /* What is left of the old chunk (a multiple of 32 bytes) goes to the free lists, largest first. */
      while (carve_next < carve_end) {
        int k = kClasses - 1;
        while (((size_t)1 << (k + kMinShift)) > (size_t)(carve_end - carve_next)) k--;
        FreeBlock *f = (FreeBlock *)carve_next;
        f->next = free_lists[k];
        free_lists[k] = f;
        carve_next += (size_t)1 << (k + kMinShift);
      }
      char *chunk = (char *)map(kChunk);
      if (!chunk) return NULL;
      carve_next = chunk;
      carve_end = chunk + kChunk;
    }
    h = (Header *)carve_next;
    carve_next += block;
  }
  h->tag = (size_t)c;
  return (char *)h + kHeader;
}

void sandlet_rt_release(void *ptr) {
  if (!ptr) return;
  Header *h = (Header *)((char *)ptr - kHeader);
  if (h->tag >= kClasses) {
    SANDLET_RT_SYSCALL(SYS_munmap, h, h->tag, 0, 0, 0, 0);
    return;
  }
  size_t c = h->tag;  /* read before the link overwrites it */
  FreeBlock *f = (FreeBlock *)h;
  f->next = free_lists[c];
  free_lists[c] = f;
}

size_t sandlet_rt_usable_size(const void *ptr) {
  const Header *h = (const Header *)((const char *)ptr - kHeader);
  return (h->tag >= kClasses ? h->tag : (size_t)1 << (h->tag + kMinShift)) - kHeader;
}
