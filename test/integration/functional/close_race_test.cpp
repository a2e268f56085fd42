// close() while creates are still in flight on the runtime's workers: every callback runs once before
// close returns, and no sandbox outlives the runtime that created it (nothing is left for gc).
#include <atomic>
#include <random>
#include <thread>

#include "integration/harness.hpp"

TEST_CASE("creates in flight when the runtime closes: each callback runs once, nothing is left", "[lifecycle][close]") {
  Harness h;
  h.rt().close();
  std::mt19937 rng(4242);
  for (int round = 0; round < 16; ++round) {
    INFO("round " << round);
    auto rt = sandlet::Runtime::open(h.root());
    auto first = rt.create(Harness::spec());  // from the second create on the warm pool prepares too
    std::atomic<int> called{0};
    for (int i = 0; i < 2; ++i)
      rt.create_async(Harness::spec(), [&called](const sandlet::Error*, sandlet::Sandbox) { ++called; });
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
    rt.close();
    CHECK(called == 2);
    auto sweeper = sandlet::Runtime::open(h.root());
    CHECK(sweeper.gc() == 0);  // close ended and reclaimed them all
    CHECK(sweeper.list().empty());
  }
}
