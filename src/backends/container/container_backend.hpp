// The container backend's registry row (src/backends/registry.cpp).
#pragma once
#include <memory>
#include <string>

#include "backends/backend.hpp"

namespace sandlet::container {

std::unique_ptr<Backend> make_backend(const std::string& root);
std::string probe();  // "" when this host can run containers, else why not

}  // namespace sandlet::container
