// The container backend's registry row (src/backends/registry.cpp).
#pragma once
#include <memory>
#include <string>

#include "backends/backend.hpp"

namespace sandlet::container {

std::unique_ptr<Backend> make_backend(const std::string& root);
BackendProbe probe();  // whether this host can run containers, and why not

}  // namespace sandlet::container
