#include "runtime/audit/audit_records.hpp"

#include <boost/json.hpp>
#include <cmath>

#include "common/error.hpp"
#include "policy/seccomp_profile.hpp"
#include "spec/spec_policy.hpp"
#include "runtime/audit/audit_text.hpp"

namespace json = boost::json;

namespace sandlet {

const char* inferred_exit_reason(const SandboxRecord& rec, double now) {
  if (rec.deadline > 0 && now + 1.0 >= rec.deadline) return end_reason::kMaxLifetime;
  if (rec.spec.idle_timeout_s > 0) return end_reason::kIdleTimeout;
  return end_reason::kExited;
}

json::object audit_create_fields(const SandboxRecord& rec) {
  const Spec& s = rec.spec;
  json::object f;
  f["backend"] = rec.backend;
  f["environment"] = rec.environment;
  json::array layers;
  for (const auto& l : rec.layers) layers.push_back(json::object{{"ref", l.ref}, {"digest", l.digest}});
  if (rec.layers.empty())  // host directories only: the resolution names no store layer
    for (const auto& dir : s.layers) layers.push_back(json::object{{"ref", dir}, {"digest", ""}});
  f["layers"] = std::move(layers);
  f["limits"] = json::object{{"cpus", s.limits.cpus}, {"memory", s.limits.memory}, {"pids", s.limits.pids},
                             {"disk", s.limits.disk}};
  f["network"] = json::parse(network_to_json(s.network));
  // The spec's policy as written, with its seccomp part as it takes effect (profile version, relaxations).
  json::object pol = json::parse(policy_to_json(s.policy)).as_object();
  pol["seccomp"] = policy::describe(s.policy.seccomp);
  f["policy"] = std::move(pol);
  f["toolkit"] = s.toolkit;
  f["lifetime"] = s.lifetime == Lifetime::kDetached ? "detached" : "owned";
  f["max_lifetime_s"] = s.max_lifetime_s;
  f["idle_timeout_s"] = s.idle_timeout_s;
  f["user"] = s.user;
  f["workdir"] = s.workdir;
  f["hostname"] = s.hostname;
  json::array mounts;
  for (const auto& m : s.mounts)
    mounts.push_back(json::object{{"source", m.source}, {"target", m.target}, {"readonly", m.readonly}});
  f["mounts"] = std::move(mounts);
  json::array weaker;
  for (const auto& w : s.accept_weaker) weaker.push_back(json::value(w));
  f["accept_weaker"] = std::move(weaker);
  // Names only: values may hold credentials.
  json::array keys;
  for (const auto& kv : s.env) keys.push_back(json::value(kv.first));
  f["env_keys"] = std::move(keys);
  f["secrets"] = s.secrets.size();
  f["owner_pid"] = static_cast<int64_t>(rec.owner_pid);
  f["deadline"] = audit_time(rec.deadline);
  return f;
}

json::object audit_error(std::exception_ptr error) {
  json::object e;
  try {
    std::rethrow_exception(error);
  } catch (const Error& err) {
    e["code"] = static_cast<int>(err.code());
    e["message"] = err.what();
  } catch (const std::exception& err) {
    e["code"] = static_cast<int>(Code::kInternal);
    e["message"] = err.what();
  } catch (...) {
    e["code"] = static_cast<int>(Code::kUnknown);
    e["message"] = "unknown error";
  }
  return e;
}

json::object audit_exec_fields(const ExecAudit& a, const ExecOutcome* out, std::exception_ptr error) {
  json::object f;
  json::array argv;
  for (const auto& arg : a.argv) argv.push_back(json::value(arg));
  f["argv"] = std::move(argv);
  f["cwd"] = a.cwd;
  f["user"] = a.user;
  f["start"] = audit_time(a.start);
  f["end"] = audit_time(a.end);
  f["duration_ms"] = std::round((a.end - a.start) * 1e6) / 1e3;
  f["one_shot"] = a.one_shot;
  f["keep_background"] = a.keep_background;
  f["streaming"] = a.streaming;
  if (a.output_limit) f["output_limit"] = a.output_limit;
  if (error) {
    f["error"] = audit_error(error);
  } else if (out) {
    f["exit_code"] = out->exit_code;
    f["signal"] = out->signal;
    f["timed_out"] = out->timed_out;
  }
  if (a.bytes_known) {
    f["stdout_bytes"] = a.stdout_bytes;
    f["stderr_bytes"] = a.stderr_bytes;
    f["stdout_truncated"] = out && !error ? out->stdout_truncated : false;
    f["stderr_truncated"] = out && !error ? out->stderr_truncated : false;
  }
  return f;
}

}  // namespace sandlet
