#include "spec/exec_env.hpp"

#include <cmath>
#include <map>

#include "common/error.hpp"

namespace sandlet {

std::vector<std::string> base_env(const Spec& spec) {
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      {"HOSTNAME", spec.hostname},
  };
  if (spec.limits.cpus > 0) {
    std::string n = std::to_string(std::max(1L, std::lround(std::ceil(spec.limits.cpus))));
    for (const char* k : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                          "RAYON_NUM_THREADS", "GOMAXPROCS"})
      env[k] = n;
  }
  for (const auto& [k, v] : spec.env) env[k] = v;
  for (const auto& [k, v] : spec.secrets) env[k] = v;
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<std::string> merge_env(const std::vector<std::string>& base, const std::vector<std::string>& extra) {
  if (extra.empty()) return base;
  std::vector<std::string> out = base;
  for (const auto& kv : extra) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(Code::kInvalidArgument, "invalid exec field 'env': \"" + kv + "\" is not KEY=VALUE");
    std::string_view key(kv.data(), eq + 1);
    bool replaced = false;
    for (auto& e : out)
      if (std::string_view(e).substr(0, eq + 1) == key) {
        e = kv;
        replaced = true;
        break;
      }
    if (!replaced) out.push_back(kv);
  }
  return out;
}

}  // namespace sandlet
