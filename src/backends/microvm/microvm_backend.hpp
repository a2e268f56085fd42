// The microvm backend's registry row (src/backends/registry.cpp).
#pragma once
#include <memory>
#include <string>

#include "backends/backend.hpp"

namespace sandlet::microvm {

std::unique_ptr<Backend> make_backend(const std::string& root);
BackendProbe probe();  // QEMU, the kernel kit, the accelerator

}  // namespace sandlet::microvm
