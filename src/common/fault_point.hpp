// Named points in multi-step operations (a create's steps) where a test can make the process die, to
// check that whatever a crash there leaves is cleaned up by the next runtime or `sandlet gc`. Only a
// program linked with the core archive can set the hook (it is not part of the C ABI); unset, a point
// costs one relaxed atomic load.
#pragma once

namespace sandlet {

using FaultHook = void (*)(const char* point);

// Calls the hook, if one is set, with the point's name ("runtime.record", "container.cgroup", ...).
void fault_point(const char* point) noexcept;

namespace testing {
void set_fault_hook(FaultHook hook) noexcept;  // nullptr removes it
}  // namespace testing

}  // namespace sandlet
