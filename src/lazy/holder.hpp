// The loader's first process: it owns the fanotify group (so the kernel's hold on cold reads outlives a
// fetcher crash: a group that goes away lets unfilled ranges read as zeros), answers every access event of a
// marked cache file — at once when its chunks are verified, else when the fetcher reports them written, or
// with EIO past the fill deadline — serves the control socket (attach, detach, status, stop), and restarts the
// fetcher whenever it dies, handing the new one every request still waiting. The fetcher keeps a copy of
// the group: killed, the holder is succeeded by one the fetcher starts (docs/LAZY.md).
#pragma once
#include <optional>
#include <string>

#include "lazy/loader_settings.hpp"
#include "lazy/takeover.hpp"

namespace sandlet::lazy {

struct HolderOptions {
  std::string root;       // runtime root
  std::string self_exe;   // this binary, to start the fetcher from
  LoaderSettings settings;
  int lock_fd = -1;       // holds the root's loader lock; handed to the fetcher with the group
  std::optional<Handover> adopt;  // a successor of a killed holder: what it takes over
};

// Runs until stopped (an idle stop, SIGTERM). Returns the exit status.
int run_holder(const HolderOptions& options);
// The same, writing "r" to `ready_fd` (then closing it) once requests are served; -1: none.
int run_holder_ready(const HolderOptions& options, int ready_fd);

}  // namespace sandlet::lazy
