// The sandbox's working directory: made at start where the image lacks it, as `docker run -w` does.
#pragma once
#include <string>

#include "guest/status.hpp"

namespace sandlet::guest {

// Makes `workdir` (absolute, normalized; "/" or "" = nothing to do) and its missing parents, each owned
// by the sandbox's root, mode 0755; existing directories are left as they are. Symlinks of the image are
// followed but resolved inside the sandbox's root ("/" here, after pivot_root), never outside it.
// Call with the host mounts attached (a workdir below one is made there) and before the file rules.
// A path component that is not a directory: INVALID_ARGUMENT; a read-only place: FAILED_PRECONDITION.
Status make_workdir(const std::string& workdir);

}  // namespace sandlet::guest
