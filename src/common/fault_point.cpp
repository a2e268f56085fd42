#include "common/fault_point.hpp"

#include <atomic>

namespace sandlet {
namespace {
std::atomic<FaultHook> g_hook{nullptr};
}  // namespace

void fault_point(const char* point) noexcept {
  if (FaultHook hook = g_hook.load(std::memory_order_relaxed)) hook(point);
}

void testing::set_fault_hook(FaultHook hook) noexcept { g_hook.store(hook, std::memory_order_relaxed); }

}  // namespace sandlet
