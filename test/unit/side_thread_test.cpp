// Unit tests for src/sys/side_thread: the thread runs its work, and starts off the caller's CPU.
#include <catch2/catch.hpp>

#include <sched.h>

#include <atomic>
#include <iostream>

#include "sys/side_thread.hpp"

using namespace sandlet;

namespace {

// Restores the calling thread's CPU set when the test ends.
struct KeepAffinity {
  cpu_set_t saved;
  KeepAffinity() { REQUIRE(::sched_getaffinity(0, sizeof saved, &saved) == 0); }
  ~KeepAffinity() { ::sched_setaffinity(0, sizeof saved, &saved); }
};

cpu_set_t affinity_seen_by_side_thread() {
  cpu_set_t seen;
  CPU_ZERO(&seen);
  sys::SideThread t([&] { ::sched_getaffinity(0, sizeof seen, &seen); });
  t.join();
  return seen;
}

// The calling thread's CPUs; false when it may use only one: the test then says so on stdout, which its
// own ctest entry (unit-two-cpus, run with "[needs-2-cpus]") reports as skipped.
bool two_cpus_or_skip(cpu_set_t* all) {
  REQUIRE(::sched_getaffinity(0, sizeof *all, all) == 0);
  if (CPU_COUNT(all) >= 2) return true;
  std::cout << "SANDLET-SKIP: this process may use a single CPU" << std::endl;
  return false;
}

}  // namespace

TEST_CASE("a side thread runs its work; join and destruction wait for it; it can be moved", "[thread]") {
  std::atomic<int> runs{0};
  {
    sys::SideThread a([&] { runs++; });
    sys::SideThread b(std::move(a));
    CHECK_FALSE(a.joinable());
    CHECK(b.joinable());
    b.join();
    CHECK_FALSE(b.joinable());
    CHECK(runs == 1);
    sys::SideThread c([&] { runs++; });
  }  // c joined here
  CHECK(runs == 2);
}

TEST_CASE("a side thread starts on the caller's CPUs except the one the caller runs on", "[thread][needs-2-cpus]") {
  KeepAffinity keep;
  cpu_set_t all;
  if (!two_cpus_or_skip(&all)) return;
  cpu_set_t seen = affinity_seen_by_side_thread();
  CHECK(CPU_COUNT(&seen) == CPU_COUNT(&all) - 1);
  cpu_set_t outside;
  CPU_AND(&outside, &seen, &all);
  CHECK(CPU_EQUAL(&outside, &seen));  // nothing the caller may not use
}

TEST_CASE("a caller allowed one CPU still gets its side thread, on that CPU", "[thread]") {
  KeepAffinity keep;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(::sched_getcpu(), &one);
  REQUIRE(::sched_setaffinity(0, sizeof one, &one) == 0);
  cpu_set_t seen = affinity_seen_by_side_thread();
  CHECK(CPU_EQUAL(&seen, &one));
}

TEST_CASE("allow_all_cpus lets a running side thread use the creator's CPU too", "[thread][needs-2-cpus]") {
  KeepAffinity keep;
  cpu_set_t all;
  if (!two_cpus_or_skip(&all)) return;
  std::atomic<bool> started{false}, go{false};
  cpu_set_t before, after;
  sys::SideThread t([&] {
    ::sched_getaffinity(0, sizeof before, &before);
    started = true;
    while (!go) ::sched_yield();
    ::sched_getaffinity(0, sizeof after, &after);
  });
  while (!started) ::sched_yield();
  t.allow_all_cpus();
  go = true;
  t.join();
  CHECK(CPU_COUNT(&before) == CPU_COUNT(&all) - 1);
  CHECK(CPU_EQUAL(&after, &all));
  t.allow_all_cpus();  // joined: nothing to do, nothing happens
}
