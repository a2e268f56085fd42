#include "policy/seccomp_profile.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "common/error.hpp"
#include "policy/seccomp/profile_rules.hpp"
#include "policy/seccomp/profile_table.hpp"

namespace sandlet::policy {
namespace {

// kBaselineSeccompBpf: the newest profile's rules (src/policy/seccomp/profile_table.cpp), compiled at build
// time.
#include "seccomp_baseline.inc"

struct Canonical {
  std::string version;
  std::vector<std::string> allow, deny;  // sorted, each once
  auto operator<=>(const Canonical&) const = default;
};

std::vector<std::string> sorted_once(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

Canonical canonical(const SeccompPolicy& p) {
  const std::string_view version = seccomp::resolve_profile(p.profile);
  if (version.empty()) throw Error(Code::kInvalidArgument, "unknown seccomp profile '" + p.profile + "'");
  return {std::string(version), sorted_once(p.allow), sorted_once(p.deny)};
}

bool is_embedded(const Canonical& c) {
  return c.version == seccomp::kNewestProfile && c.allow.empty() && c.deny.empty();
}

}  // namespace

const std::string& baseline_seccomp_bpf() {
  static const std::string bpf(reinterpret_cast<const char*>(kBaselineSeccompBpf), sizeof kBaselineSeccompBpf);
  return bpf;
}

const std::string& seccomp_bpf_for(const SeccompPolicy& p) {
  Canonical key = canonical(p);
  if (is_embedded(key)) return baseline_seccomp_bpf();
  // Entries are never removed (a process sees few distinct policies), so references stay valid.
  static std::mutex mu;
  static std::map<Canonical, std::unique_ptr<const std::string>> cache;
  std::lock_guard lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) {
    auto bpf = std::make_unique<const std::string>(seccomp::compile_seccomp_bpf(key.version, key.allow, key.deny));
    it = cache.emplace(std::move(key), std::move(bpf)).first;
  }
  return *it->second;
}

boost::json::object describe(const SeccompPolicy& p) {
  namespace json = boost::json;
  const Canonical c = canonical(p);
  json::array relaxations;
  for (const std::string& name : c.allow) {
    const seccomp::Relaxation* r = seccomp::find_relaxation(name);
    json::array calls, arguments;
    if (r) {
      for (std::string_view s : r->syscalls) calls.emplace_back(json::string_view(s.data(), s.size()));
      // What argument rules it lifts, by label ("AF_VSOCK"), each once.
      for (const seccomp::ArgMatch* m : r->arguments) {
        const json::string label(m->label.data(), m->label.size());
        if (std::find(arguments.begin(), arguments.end(), json::value(label)) == arguments.end())
          arguments.emplace_back(label);
      }
    }
    relaxations.push_back(
        json::object{{"name", name}, {"syscalls", std::move(calls)}, {"arguments", std::move(arguments)}});
  }
  return json::object{{"profile", c.version},
                      {"requested", p.profile},
                      {"relaxations", std::move(relaxations)},
                      {"extra_denied", json::array(c.deny.begin(), c.deny.end())},
                      {"precompiled", is_embedded(c)}};
}

}  // namespace sandlet::policy
