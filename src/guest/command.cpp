#include "guest/command.hpp"

#include <cstring>

#include "common/errno_code.hpp"
#include "sandlet/sandlet.h"

namespace sandlet::guest {
namespace {

bool has_prefix(const std::string& s, const char* p, size_t n) { return s.size() >= n && s.compare(0, n, p) == 0; }

}  // namespace

Status spawn_failure_status(const SpawnError& se, const std::string& argv0, const std::string& cwd,
                            const std::string& user) {
  const char* what = std::strerror(se.err);
  // The shared table: exec/chdir ENOENT is NOT_FOUND, EACCES PERMISSION_DENIED, clone EAGAIN (the pids
  // limit) RESOURCE_EXHAUSTED, ENOEXEC FAILED_PRECONDITION, ...
  const uint32_t code = code_for_errno(se.err);
  std::string msg;
  switch (se.step) {
    case SpawnStep::kExec: msg = "exec \"" + argv0 + "\": " + what; break;
    case SpawnStep::kChdir: msg = "chdir \"" + cwd + "\": " + what; break;
    case SpawnStep::kGroups: case SpawnStep::kSetgid: case SpawnStep::kSetuid:
      msg = std::string(spawn_step_name(se.step)) + " for user \"" + user + "\": " + what;
      break;
    default: msg = std::string(spawn_step_name(se.step)) + ": " + what; break;
  }
  return make_status(code, se.err, msg);
}

SpawnSpec CommandVectors::spawn_spec(const Identity& id, const std::string& cwd) const {
  SpawnSpec sp;
  sp.argv = argv.data();
  sp.envp = envp.data();
  sp.path = path;
  sp.cwd = cwd.c_str();
  sp.uid = id.uid;
  sp.gid = id.gid;
  sp.groups = id.groups.data();
  sp.ngroups = id.groups.size();
  return sp;
}

void CommandVectors::build(const std::vector<std::string>& args, const std::vector<std::string>& env,
                           const Identity& id) {
  path = nullptr;
  bool has_home = false, has_user = false;
  envp.clear();
  for (const std::string& kv : env) {
    envp.push_back(kv.c_str());
    if (has_prefix(kv, "PATH=", 5)) {
      if (!path) path = kv.c_str() + 5;  // the first one wins, as with getenv()
    } else if (has_prefix(kv, "HOME=", 5)) {
      has_home = true;
    } else if (has_prefix(kv, "USER=", 5)) {
      has_user = true;
    }
  }
  if (!path) path = kDefaultPath;
  if (!has_home) envp.push_back((home_kv = "HOME=" + id.home).c_str());
  if (!has_user && !id.name.empty()) envp.push_back((user_kv = "USER=" + id.name).c_str());
  envp.push_back(nullptr);
  argv.clear();
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
}

}  // namespace sandlet::guest
