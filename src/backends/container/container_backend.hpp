#pragma once
#include <memory>
#include <string>

#include "backends/backend.hpp"

namespace sandlet {

std::unique_ptr<Backend> make_container_backend(const HostContext& host);
std::string probe_container();

}  // namespace sandlet
