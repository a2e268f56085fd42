// The spec's host directories inside the sandbox: the init attaches the detached mounts the host sent
// with its configuration (proto::InitMount), under the new root, before anything of the sandbox runs.
#pragma once
#include <vector>

#include "guest/status.hpp"
#include "proto/init_protocol.hpp"

namespace sandlet::guest {

// Attaches fds[i] at mounts[i].target (after pivot_root: "/" is the sandbox's root), making missing
// directories on the way (in the writable layer) and refusing a path through a symlink. Closes every fd,
// whatever happens.
Status attach_host_mounts(const std::vector<proto::InitMount>& mounts, const int* fds);

}  // namespace sandlet::guest
