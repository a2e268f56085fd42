// The state of a put-tree or get-tree request on one connection (guest/tree_files.cpp).
#pragma once
#include <cstdint>

#include "guest/users.hpp"
#include "tree/tree_apply.hpp"
#include "tree/tree_walk.hpp"

namespace sandlet::guest {

struct TreePutJob {
  tree::TreeApplier applier;
  Identity id;          // whose credentials the writes use (root when the entries' owners are kept)
  std::string path;     // for messages
  bool failed = false;  // an error was sent: frames are dropped until the end of the request
};

struct TreeGetJob {
  tree::TreeWalker walker;
  Identity id;
  std::string path;
  bool in_file = false;  // the current entry's data is being sent
};

}  // namespace sandlet::guest
