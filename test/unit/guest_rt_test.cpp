// Unit tests for sandlet-init's own C runtime (src/guest/rt): the formatter against the host's
// snprintf, and the allocator's alignment, reuse and isolation of blocks.
#include <catch2/catch.hpp>

#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "guest/rt/alloc.h"
#include "guest/rt/format.h"

namespace {

struct Formatted {
  std::string text;
  int length;
};

Formatted ours(size_t size, const char* fmt, ...) {
  std::vector<char> buf(size + 1, '#');
  va_list ap;
  va_start(ap, fmt);
  int n = sandlet_rt_vformat(buf.data(), size, fmt, ap);
  va_end(ap);
  return {size ? std::string(buf.data()) : std::string(), n};
}

int format_into(char* buf, size_t size, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = sandlet_rt_vformat(buf, size, fmt, ap);
  va_end(ap);
  return n;
}

Formatted host(size_t size, const char* fmt, ...) {
  std::vector<char> buf(size + 1, '#');
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf.data(), size, fmt, ap);
  va_end(ap);
  return {size ? std::string(buf.data()) : std::string(), n};
}

// The same call through both, compared.
#define SAME(...)                                      \
  do {                                                 \
    Formatted a = ours(256, __VA_ARGS__);              \
    Formatted b = host(256, __VA_ARGS__);              \
    INFO(#__VA_ARGS__);                                \
    CHECK(a.text == b.text);                           \
    CHECK(a.length == b.length);                       \
  } while (0)

bool intact(const unsigned char* p, size_t size, unsigned char fill) {
  for (size_t j = 0; j < size; j++)
    if (p[j] != fill) return false;
  return true;
}

}  // namespace

TEST_CASE("init formatter: conversions, flags, width and precision as printf") {
  SAME("plain text");
  SAME("%d %i %d", 0, -1, INT_MIN);
  SAME("%u %x %X %o", 4000000000u, 0xbeefu, 0xbeefu, 0755u);
  SAME("%ld %lu %lx", LONG_MIN, ULONG_MAX, ULONG_MAX);
  SAME("%lld %llu", LLONG_MIN, ULLONG_MAX);
  SAME("%zu %zd %jd", static_cast<size_t>(123456789012), static_cast<ssize_t>(-5), static_cast<intmax_t>(-7));
  SAME("%hhd %hhu %hd %hu", 300, 300, 70000, 70000);
  SAME("[%5d] [%-5d] [%05d] [%+d] [% d] [%+d]", 42, 42, -42, 42, 42, -3);
  SAME("[%#x] [%#X] [%#o] [%#o] [%#x]", 255u, 255u, 8u, 0u, 0u);
  SAME("[%.3d] [%.0d] [%8.3d] [%-8.3d] [%08.3d]", 7, 0, -7, 7, 7);
  SAME("[%s] [%10s] [%-10s] [%.2s] [%*s] [%-*s] [%.*s]", "abc", "abc", "abc", "abc", 6, "x", 6, "x", 1, "xyz");
  SAME("[%c] [%3c] [%-3c]", 'a', 'b', 'c');
  SAME("100%% sure, %s", "really");
  SAME("[%*d] [%-*d]", -4, 1, 4, 2);
  int local = 0;
  SAME("%p", static_cast<void*>(&local));
}

TEST_CASE("init formatter: truncation keeps the terminator and returns the full length") {
  Formatted a = ours(5, "%s-%d", "abcdef", 12);
  CHECK(a.text == "abcd");
  CHECK(a.length == 9);
  Formatted zero = ours(0, "%d", 12345);
  CHECK(zero.length == 5);
  // Nothing is written when the size is 0.
  char guard = '#';
  CHECK(format_into(&guard, 0, "%d", 12345) == 5);
  CHECK(guard == '#');
  // Floating point is not supported: it says so instead of printing garbage, and later arguments stay right.
  Formatted f = ours(64, "%s %f %d", "x", 1.5, 7);
  CHECK(f.text == "x ? 7");
}

TEST_CASE("init allocator: alignment, sizes, reuse, large blocks") {
  std::vector<void*> blocks;
  for (size_t size : {0ul, 1ul, 15ul, 16ul, 17ul, 100ul, 4096ul, 65536ul, 262128ul, 262129ul, 1ul << 20}) {
    void* p = sandlet_rt_alloc(size);
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % 16 == 0);
    CHECK(sandlet_rt_usable_size(p) >= size);
    std::memset(p, 0xab, size);
    blocks.push_back(p);
  }
  for (void* p : blocks) sandlet_rt_release(p);
  sandlet_rt_release(nullptr);

  // A freed small block is handed out again for the same size class.
  void* a = sandlet_rt_alloc(40);
  sandlet_rt_release(a);
  void* b = sandlet_rt_alloc(48);
  CHECK(a == b);
  sandlet_rt_release(b);

  // A large block is its own mapping: page-aligned header, gone after release.
  void* big = sandlet_rt_alloc(3 << 20);
  REQUIRE(big != nullptr);
  CHECK((reinterpret_cast<uintptr_t>(big) - 16) % 4096 == 0);
  sandlet_rt_release(big);

  CHECK(sandlet_rt_alloc(SIZE_MAX / 2) == nullptr);
}

TEST_CASE("init allocator: live blocks never overlap under random use") {
  std::mt19937 rng(12345);
  struct Live {
    unsigned char* p;
    size_t size;
    unsigned char fill;
  };
  std::vector<Live> live;
  for (int i = 0; i < 20000; i++) {
    if (!live.empty() && rng() % 3 == 0) {
      size_t k = rng() % live.size();
      REQUIRE(intact(live[k].p, live[k].size, live[k].fill));
      sandlet_rt_release(live[k].p);
      live[k] = live.back();
      live.pop_back();
      continue;
    }
    size_t size = rng() % 8 == 0 ? rng() % 300000 : rng() % 2000;
    auto* p = static_cast<unsigned char*>(sandlet_rt_alloc(size));
    REQUIRE(p != nullptr);
    auto fill = static_cast<unsigned char>(i);
    std::memset(p, fill, size);
    live.push_back({p, size, fill});
  }
  for (const Live& l : live) {
    REQUIRE(intact(l.p, l.size, l.fill));
    sandlet_rt_release(l.p);
  }
}
