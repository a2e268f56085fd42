// The C++ run-time support sandlet-init needs without libstdc++: allocation (the init is built with
// -fno-exceptions, so a failed allocation aborts, as libstdc++ would then) and the checks the standard
// containers call on impossible requests.
#include <bits/functexcept.h>  // the declarations of the std::__throw_* functions defined below

#include <cstddef>
#include <cstdlib>
#include <new>

void* operator new(std::size_t size) {
  void* p = std::malloc(size ? size : 1);
  if (!p) std::abort();
  return p;
}
void* operator new[](std::size_t size) { return ::operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace std {
void __throw_bad_alloc() { abort(); }
void __throw_bad_array_new_length() { abort(); }
void __throw_length_error(const char*) { abort(); }
void __throw_logic_error(const char*) { abort(); }
void __throw_out_of_range_fmt(const char*, ...) { abort(); }
}  // namespace std
