// One-shot sandboxes (kInitRunOnce): right after reporting ready the init starts the command itself, with
// the stdio the host handed over, waits for it, reports its exit on the setup socket and exits; the
// kernel then kills whatever the command left running. No agent, no per-exec cgroup, no request round
// trip: what `sandlet run` needs, at the cost of one exec per sandbox.
#pragma once
#include <sys/resource.h>

#include "proto/init_protocol.hpp"

namespace sandlet::guest {

// stdio[i] is the command's fd i, or -1 for the sandbox's /dev/null. Reports kRunExit (or kError when the
// command cannot be started) on the setup socket, then exits.
[[noreturn]] void run_once(const proto::InitConfig& cfg, const int stdio[3], const struct rlimit* child_nofile);

}  // namespace sandlet::guest
