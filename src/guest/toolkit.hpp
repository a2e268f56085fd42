// The protected toolkit: a read-only mount at /.sandlet/toolkit (proto::kToolkitPath) that the harness's
// own commands run from (exec option `toolkit`). The init keeps a descriptor of the mount's root from
// set-up on (proto::kInitToolkitFd) and resolves every toolkit command through it, never through a path
// root inside could have changed (docs/POLICY.md, "Protected toolkit").
#pragma once
#include <string>
#include <vector>

#include "guest/status.hpp"

namespace sandlet::guest {

// Attaches the toolkit's detached read-only mount `fd` at /.sandlet/toolkit, /.sandlet being a read-only
// tmpfs of its own (so neither can be renamed, removed or written to), keeps the mount's root at
// kInitToolkitFd, and pins /etc/ld.so.preload empty and read-only (glibc's loader reads that file whatever
// it is told). Closes `fd`.
Status attach_toolkit(int fd);
// kInitToolkitFd when the sandbox has a toolkit, else -1.
int toolkit_fd();

// A toolkit exec turned into what to spawn: argv[0] found only in the toolkit (in bin, usr/bin, sbin,
// usr/sbin; a name with '/' taken relative to the toolkit's root), symlinks resolved inside it; PATH fixed
// to the toolkit's bin directories; loader-influencing variables removed. A dynamic binary runs through
// the toolkit's own loader (its PT_INTERP, resolved in the toolkit) with the toolkit's library
// directories; a script through its #! interpreter, resolved in the toolkit.
struct ToolkitLaunch {
  std::vector<std::string> argv;
  std::vector<std::string> env;
  int exec_fd = -1;     // what the child execveat()s (O_PATH, close-on-exec)
  int program_fd = -1;  // for a loader or an interpreter: the program, given to the child as fd 3
  ~ToolkitLaunch();
};
Status toolkit_launch(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                      ToolkitLaunch* out);

}  // namespace sandlet::guest
