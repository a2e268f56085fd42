// What an exec request and a one-shot command have in common: their argv and environment turned into
// the NULL-terminated arrays the spawn wants, with HOME and USER from passwd when the environment lacks
// them, and the PATH to search.
#pragma once
#include <string>
#include <vector>

#include "guest/spawn.hpp"
#include "guest/status.hpp"
#include "guest/users.hpp"

namespace sandlet::guest {

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Pointers into the strings given to build() and into its own members: keep both alive, and do not move
// it, while the arrays are in use. Reusable: build() starts over (no allocation once warmed up).
struct CommandVectors {
  std::vector<const char*> argv, envp;
  const char* path = kDefaultPath;  // the first PATH= of the environment, else the default
  std::string home_kv, user_kv;

  void build(const std::vector<std::string>& args, const std::vector<std::string>& env, const Identity& id);
  // A spawn of these vectors as `id` in `cwd` (both must outlive it); stdio, cgroup and limits stay unset.
  SpawnSpec spawn_spec(const Identity& id, const std::string& cwd) const;
};

// A failed spawn of `cmd` as a status for the host: NOT_FOUND / PERMISSION_DENIED for the command or its
// working directory (what the CLI turns into 127 / 126), the step and errno in the message; E2BIG as the
// host's own INVALID_ARGUMENT naming the sizes and the kernel's limit (proto/arg_limits.hpp). `what` is
// "exec" or "run", whose fields the message names.
Status spawn_failure_status(const SpawnError& se, const CommandVectors& cmd, const std::string& cwd,
                            const std::string& user, const char* what);

}  // namespace sandlet::guest
