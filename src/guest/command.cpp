#include "guest/command.hpp"

#include <sys/resource.h>

#include <cstring>

#include "common/errno_code.hpp"
#include "proto/arg_limits.hpp"
#include "sandlet/sandlet.h"

namespace sandlet::guest {
namespace {

bool has_prefix(const std::string& s, const char* p, size_t n) { return s.size() >= n && s.compare(0, n, p) == 0; }

uint64_t own_stack_limit() {
  struct rlimit r;
  if (getrlimit(RLIMIT_STACK, &r) != 0) return 8u << 20;
  return r.rlim_cur == RLIM_INFINITY ? ~0ull : static_cast<uint64_t>(r.rlim_cur);
}

// The kernel refused the arguments (E2BIG): say by how much, as the host would have. The kernel also
// counts the file name it found on PATH, which can tip a total the host let through.
[[gnu::cold]] Status too_big_status(const CommandVectors& cmd, size_t exec_path_len, const char* what) {
  std::vector<std::string> argv, env;
  for (const char* const* p = cmd.argv.data(); *p; ++p) argv.emplace_back(*p);
  for (const char* const* p = cmd.envp.data(); *p; ++p) env.emplace_back(*p);
  proto::ArgProblem p = proto::check_exec_args(argv, env, own_stack_limit);
  if (p.ok() || p.kind == proto::ArgProblem::kTotalTooLarge) {
    p.kind = proto::ArgProblem::kTotalTooLarge;
    p.stack_limit = own_stack_limit();
    p.size = proto::exec_arg_bytes(argv, env, exec_path_len);
    p.limit = proto::arg_space_for_stack(p.stack_limit);
  }
  return make_status(SANDLET_INVALID_ARGUMENT, E2BIG, proto::describe(p, what));
}

}  // namespace

Status spawn_failure_status(const SpawnError& se, const CommandVectors& cmd, const std::string& cwd,
                            const std::string& user, const char* request) {
  if (se.step == SpawnStep::kExec && se.err == E2BIG) return too_big_status(cmd, se.exec_path_len, request);
  const std::string argv0 = cmd.argv.empty() || !cmd.argv[0] ? std::string() : std::string(cmd.argv[0]);
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
