// A fallible step's result as a value, for code built without exceptions (the in-sandbox agent) and code it
// shares with the host library (src/tree): a sandlet_code_t, the errno behind it (0 if none), and a message
// naming the object, the operation and errno. Each side turns a failed one into its own error.
#pragma once
#include <cstdint>
#include <string>

#include "sandlet/sandlet.h"

namespace sandlet {

struct StatusValue {
  uint32_t code = SANDLET_OK;
  int err_no = 0;
  std::string message;

  bool ok() const { return code == SANDLET_OK; }
  static StatusValue Ok() { return {}; }
};

}  // namespace sandlet
