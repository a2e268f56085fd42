// What test fixtures do with a runtime root: find the sandboxes under it, and last, sweep it (a test that
// failed half way may have left detached sandboxes: they are destroyed, never left running; gc runs; the
// root goes). Public API and the documented directory layout only (the conformance suite uses nothing
// else).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "sandlet/sandlet.hpp"

namespace test_support {

// The sandbox id an entry of <root>/sandboxes names: "<id>", ".reclaim-<id>" (retired) or
// ".new-<pid>-<id>" (being made).
inline std::string sandbox_id_of(const std::string& entry) {
  if (entry.rfind(".reclaim-", 0) == 0) return entry.substr(9);
  if (entry.rfind(".new-", 0) == 0) {
    const size_t dash = entry.find('-', 5);
    return dash == std::string::npos ? entry : entry.substr(dash + 1);
  }
  return entry;
}

// The ids of every sandbox directory under `root` (retired and half-made ones included).
inline std::vector<std::string> sandbox_ids_under(const std::string& root) {
  std::vector<std::string> ids;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root + "/sandboxes", ec))
    ids.push_back(sandbox_id_of(e.path().filename()));
  return ids;
}

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
