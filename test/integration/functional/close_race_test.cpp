// close() while creates are still in flight on the runtime's workers: every callback runs once before
// close returns; owned sandboxes do not outlive the runtime that created them (nothing is left for gc) and
// detached ones do (they are listed and answer afterwards).
#include <atomic>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "integration/harness.hpp"

TEST_CASE("creates in flight when the runtime closes: each callback runs once, owned ones end, detached ones live", "[lifecycle][close]") {
  Harness h;
  h.rt().close();
  std::mt19937 rng(4242);
  for (int round = 0; round < 16; ++round) {
    INFO("round " << round);
    std::atomic<int> called{0};
    std::mutex m;
    std::set<std::string> detached;  // created successfully
    int ended_detached = 0;
    {
      auto rt = sandlet::Runtime::open(h.root());
      auto first = rt.create(Harness::spec());  // from the second create on the warm pool prepares too
      for (const char* lifetime : {"owned", "detached"})
        rt.create_async(Harness::spec().lifetime(lifetime), [&, lifetime](const sandlet::Error* err, sandlet::Sandbox sb) {
          std::lock_guard lock(m);
          if (std::string(lifetime) == "detached") {
            if (!err) detached.insert(sb.id());
            // Refused if it had not started when close() began; never made and then ended.
            else if (std::string(err->what()).find("was being created") != std::string::npos) ++ended_detached;
          }
          ++called;
        });
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
      rt.close();
      CHECK(called == 2);
      CHECK(ended_detached == 0);
    }
    auto sweeper = sandlet::Runtime::open(h.root());
    CHECK(sweeper.gc() == 0);  // close ended and reclaimed every owned one
    std::set<std::string> listed;
    for (const auto& info : sweeper.list()) listed.insert(info.id);
    CHECK(listed == detached);
    for (const auto& id : detached) {
      auto sb = sweeper.attach(id);
      CHECK(sb.exec({"true"}).exit_code == 0);
      sb.destroy();
    }
  }
}
