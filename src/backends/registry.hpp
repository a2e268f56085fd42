// The one table of backends: {name, summary, factory, probe}. Adding a backend is one folder under
// src/backends/ and one row in registry.cpp; nothing else names a backend (the spec's field, the CLI's help,
// the backend list and `sandlet doctor` all read this table).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"

namespace sandlet {

struct BackendEntry {
  const char* name;
  const char* summary;  // one line: what it is for
  // Makes the backend object; cheap (no kernel work: that is Backend::start's). Null when this row makes
  // no sandboxes of its own (see `calls_only`) or is not built into this version.
  std::unique_ptr<Backend> (*factory)(const std::string& root);
  BackendProbe (*probe)();
  // Set for a row that serves calls on the sandboxes of other backends (fncall): a create naming it is
  // refused with this explanation, and it is available when a backend that can prepare ahead is.
  const char* calls_only = nullptr;
};

const std::vector<BackendEntry>& backend_registry();
// The row named `name`, or null.
const BackendEntry* find_backend_entry(std::string_view name);
// "container, fncall, ..." in table order, for messages and help.
std::string backend_names();

}  // namespace sandlet
