// Asynchronous runs on a backend without one-shot (microvm): a create, one exec and a destroy on a thread
// of the library's. A run whose caller never takes its output (its pipe is full) still ends when the
// runtime closes: the output is dropped instead of waited for, and close() returns. Skipped where the
// microvm backend is unavailable.
#include <fcntl.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include "integration/harness.hpp"

TEST_CASE("microvm run_async: close() ends a run whose output nobody takes", "[microvm][run]") {
  Harness h;
  bool available = false;
  for (auto& b : h.rt().backends())
    if (b.name == "microvm") {
      available = b.available;
      if (!available) std::cout << "SANDLET-SKIP: the microvm backend is unavailable: " << b.reason << std::endl;
    }
  if (!available) return;
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  std::atomic<int> code{-1};
  sandlet::RunOptions o({"sh", "-c", "yes | head -c 8000000; sleep 600"});
  o.stdout_fd = p[1];
  h.rt().run_async(Harness::spec().backend("microvm"), o, [&](const sandlet::Error* err, sandlet::ExecResult) {
    code = err != nullptr ? static_cast<int>(err->code()) : 0;
  });
  // The VM boots and fills the pipe; nobody reads past its first byte.
  pollfd pf = {p[0], POLLIN, 0};
  REQUIRE(::poll(&pf, 1, 120000) == 1);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const auto t0 = std::chrono::steady_clock::now();
  h.check_no_leaks();  // closes the runtime: the run ends, its callback has run, nothing is left
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60));
  CHECK(code.load() == SANDLET_UNAVAILABLE);
  ::close(p[0]);
  ::close(p[1]);
}
