// What every test fixture does last with its runtime root: a test that failed half way may have left
// detached sandboxes, so they are destroyed (never left running), gc runs, and the root goes. Public API
// only (the conformance suite uses nothing else).
#pragma once
#include <filesystem>
#include <string>

#include "sandlet/sandlet.hpp"

namespace test_support {

inline void sweep_and_remove_root(const std::string& root) {
  try {
    sandlet::RuntimeOptions o;
    o.disable_warm_pool = true;
    auto sweeper = sandlet::Runtime::open(root, o);
    for (const auto& info : sweeper.list()) {
      try {
        sweeper.attach(info.id).destroy();
      } catch (const sandlet::Error&) {
      }
    }
    sweeper.gc();
  } catch (const sandlet::Error&) {
  }
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
}

}  // namespace test_support
