// The one table of backends: {name, factory, probe}. Adding a backend is one folder under src/backends/
// and one row in registry.cpp; nothing else names a backend.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"

namespace sandlet {

struct BackendEntry {
  const char* name;
  // Makes the backend object; cheap (no kernel work: that is Backend::start's). Null when not built yet.
  std::unique_ptr<Backend> (*factory)(const std::string& root);
  std::string (*probe)();  // "" when this host can run it, else why not
};

const std::vector<BackendEntry>& backend_registry();

}  // namespace sandlet
