// The spec's file policy inside the sandbox, as mounts in the init's own mount namespace (after pivot_root,
// before anything of the sandbox runs): read-only and writable rules re-attach the path's own tree with
// that mount flag; hidden rules put an empty read-only stand-in over it; kernel files get the same
// stand-ins. Commands cannot undo any of it: the seccomp filter denies the whole mount family, and no
// process inside can make a mount namespace of its own (docs/POLICY.md).
#pragma once
#include <vector>

#include "guest/status.hpp"
#include "proto/init_protocol.hpp"

namespace sandlet::guest {

// /proc's kernel-internal files and directories (kcore, kpage*, sysrq-trigger, ...) behind empty
// read-only stand-ins; those the kernel does not have are skipped. Done while staging (off the create's
// critical path for a warm pool's sandboxes) when the stage asks; kernel_files_masked says whether it did.
Status mask_kernel_files();
bool kernel_files_masked();

// Applies `rules` (shortest path first, so that the most specific one wins below it). A read-only or
// writable rule's path must exist (INVALID_ARGUMENT naming the rule otherwise); a missing hidden path is
// nothing to hide. No path through a symlink.
Status apply_file_rules(const std::vector<proto::InitFileRule>& rules);

// An empty read-only regular file or directory over `path` (what hidden rules and masks put there).
Status put_stand_in(const char* path, bool directory);

}  // namespace sandlet::guest
