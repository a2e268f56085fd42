// sandlet_runtime_options_t -> RuntimeOptions: the one conversion (sandlet_runtime_open), in a file of its
// own so that a test can check every field's mapping, default and refusal without opening a runtime.
#pragma once
#include "runtime/runtime.hpp"
#include "sandlet/sandlet.h"

namespace sandlet::capi {

// NULL = every default. Throws INVALID_ARGUMENT naming the struct's size or the field that is out of range.
RuntimeOptions runtime_options(const sandlet_runtime_options_t* opts);

}  // namespace sandlet::capi
