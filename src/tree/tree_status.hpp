// The result of a step of a tree copy (src/tree). The tree code runs in two places: in the in-sandbox agent,
// which is built without exceptions or a C library, and in the host library; so it reports failures as
// values, in the codes of sandlet.h, and each side turns them into its own errors.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "common/errno_code.hpp"
#include "common/status_value.hpp"
#include "sandlet/sandlet.h"

namespace sandlet::tree {

using TreeStatus = StatusValue;

inline TreeStatus tree_error(uint32_t code, int e, std::string message) {
  TreeStatus s;
  s.code = code;
  s.err_no = e;
  s.message = std::move(message);
  return s;
}

// "<op> \"<path>\": <strerror(e)>"
inline TreeStatus tree_errno(int e, const char* op, const std::string& path) {
  return tree_error(code_for_errno(e), e, std::string(op) + " \"" + path + "\": " + std::strerror(e));
}

// `root` joined with a tree path ("" = root itself): for messages.
inline std::string tree_join(const std::string& root, const std::string& rel) {
  if (rel.empty()) return root;
  return root + (root.empty() || root.back() == '/' ? "" : "/") + rel;
}

}  // namespace sandlet::tree
