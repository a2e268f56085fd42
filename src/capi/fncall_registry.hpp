// The FnCall pools of each open runtime handle (capi_fncall.cpp). Kept beside the handle, not in it, so
// that the pools stay one file's business; sandlet_runtime_close ends them before the runtime.
#pragma once

struct sandlet_runtime;

namespace sandlet::capi {

// Stops and drops the handle's pools (their containers are destroyed). Never throws.
void fncall_forget(sandlet_runtime* rt) noexcept;

}  // namespace sandlet::capi
