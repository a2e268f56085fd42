// The C ABI's out-of-memory error, on a real allocation failure: with the address-space limit lowered to
// what the process already uses, the allocation of an error object fails in malloc (mmap and brk refuse),
// and the shims must return the static RESOURCE_EXHAUSTED error — never NULL, which means success — that
// every accessor reads and sandlet_error_delete leaves alone. Built with the library's own error code
// (src/capi/capi_errors.cpp) and its shim helpers (src/capi/handles.hpp).
// Exit: 0 pass, 1 fail.
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

#include "capi/handles.hpp"

namespace {

int failures = 0;
#define EXPECT(cond)                                                       \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                          \
    }                                                                      \
  } while (0)

// Bytes of address space the process maps now.
size_t mapped_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  statm >> pages;
  return pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

// Runs `f` with the soft RLIMIT_AS a few MiB above what is mapped now (so that a large allocation fails),
// then restores the limit.
template <class F>
void with_address_space_full(F&& f) {
  rlimit old{};
  EXPECT(::getrlimit(RLIMIT_AS, &old) == 0);
  rlimit tight = old;
  tight.rlim_cur = mapped_bytes() + (8u << 20);
  EXPECT(::setrlimit(RLIMIT_AS, &tight) == 0);
  f();
  EXPECT(::setrlimit(RLIMIT_AS, &old) == 0);
}

void expect_static_oom(sandlet_error_t* err) {
  EXPECT(err != nullptr);
  EXPECT(sandlet::capi::is_static_error(err));
  EXPECT(sandlet_error_code(err) == SANDLET_RESOURCE_EXHAUSTED);
  EXPECT(std::strcmp(sandlet_error_message(err), "out of memory") == 0);
  EXPECT(sandlet_error_errno(err) == ENOMEM);
  sandlet_error_delete(err);  // ignored: the object stays readable
  sandlet_error_delete(err);
  EXPECT(sandlet_error_code(err) == SANDLET_RESOURCE_EXHAUSTED);
}

}  // namespace

int main() {
  // The ordinary path: each error its own object, freed by sandlet_error_delete.
  sandlet_error_t* a = sandlet::capi::make_error(SANDLET_NOT_FOUND, "no sandbox 'x'", ENOENT);
  sandlet_error_t* b = sandlet::capi::make_error(SANDLET_NOT_FOUND, "no sandbox 'y'", ENOENT);
  EXPECT(a && b && a != b && !sandlet::capi::is_static_error(a));
  EXPECT(std::strcmp(sandlet_error_message(a), "no sandbox 'x'") == 0 && sandlet_error_errno(a) == ENOENT);
  sandlet_error_delete(a);
  sandlet_error_delete(b);

  // A message as large as the space left: its error object cannot be allocated.
  const std::string large(64u << 20, 'm');
  const sandlet::Error failure(sandlet::Code::kInternal, large, EIO);  // made now: throwing a copy allocates nothing
  with_address_space_full([&] {
    void* probe = std::malloc(large.size());  // the limit really bites: the same size fails here too
    EXPECT(probe == nullptr);
    std::free(probe);
    expect_static_oom(sandlet::capi::make_error(SANDLET_INTERNAL, large, EIO));
    // Through a shim: the call fails with that message, and reporting it fails too.
    expect_static_oom(sandlet::capi::guard([&] { throw failure; }));
    // A std::bad_alloc from the call itself (here a real one) is the same static error.
    expect_static_oom(sandlet::capi::guard([&] {
      std::string copy = large;
      (void)copy;
    }));
  });

  // Afterwards allocation works again and errors are ordinary objects.
  sandlet_error_t* c = sandlet::capi::make_error(SANDLET_INTERNAL, large, EIO);
  EXPECT(c && !sandlet::capi::is_static_error(c) && std::strlen(sandlet_error_message(c)) == large.size());
  sandlet_error_delete(c);
  sandlet_error_delete(nullptr);
  EXPECT(sandlet_error_code(nullptr) == SANDLET_OK && std::strcmp(sandlet_error_message(nullptr), "") == 0);

  if (failures) return 1;
  std::printf("OK: allocation failures give the static out-of-memory error\n");
  return 0;
}
