// Where a runtime keeps its volatile state. Per-sandbox records and agent sockets are created and removed
// for every sandbox; on a disk filesystem inode allocation makes that several times dearer than on tmpfs
// (docs/ARCHITECTURE.md, "Known limits"). They need not survive a reboot (the sandboxes do not), so, like other runtimes'
// state under /run, they live on tmpfs when the host has one: <root>/sandboxes is then a symlink to
// <tmpfs>/roots/<hash of root>/sandboxes, and the node-wide uid slot table sits beside it.
#pragma once
#include <string>

namespace sandlet {

struct StateLayout {
  std::string sandboxes;      // <root>/sandboxes (a directory or a symlink to the tmpfs one)
  std::string tmpfs_target;   // the tmpfs directory it points to; empty when state stays on disk
  std::string tmpfs_base;     // our private tmpfs directory ("" when none): node-wide state of backends
};

// Creates (or repairs) the layout for runtime root `root`. Thread-safe, idempotent.
StateLayout prepare_state(const std::string& root);
// Removes the tmpfs directories of `layout` when no sandbox is left in them (at runtime close).
void release_state_if_empty(const StateLayout& layout);

}  // namespace sandlet
