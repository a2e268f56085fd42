// sandlet C++ wrapper: sandlet::Spec, what a sandbox looks like. Part of sandlet.hpp (C++17 or later); may
// be included alone.
#ifndef SANDLET_CXX_SPEC_HPP
#define SANDLET_CXX_SPEC_HPP

#include <string>
#include <string_view>
#include <utility>

#include "sandlet/cxx/error.hpp"
#include "sandlet/sandlet.h"

namespace sandlet {
inline namespace cxx {  // see sandlet/cxx/error.hpp

// ---- spec ---------------------------------------------------------------------------------------------

// What a sandbox looks like. Every setter validates and throws INVALID_ARGUMENT naming the field.
//   auto spec = sandlet::Spec().layer("/images/base").memory(512 << 20).label("task", "t1");
class Spec {
 public:
  Spec() { detail::check(sandlet_spec_new(&spec_)); }
  // JSON schema: see sandlet.h (sizes there accept "512M" and the like).
  static Spec from_json(std::string_view json) {
    sandlet_spec_t* s = nullptr;
    detail::check(sandlet_spec_from_json(json.data(), json.size(), &s));
    return Spec(s);
  }
  // Adopts a C handle (takes ownership).
  explicit Spec(sandlet_spec_t* s) noexcept : spec_(s) {}

  Spec(Spec&& o) noexcept : spec_(std::exchange(o.spec_, nullptr)) {}
  Spec& operator=(Spec&& o) noexcept {
    if (this != &o) {
      sandlet_spec_delete(spec_);
      spec_ = std::exchange(o.spec_, nullptr);
    }
    return *this;
  }
  Spec(const Spec&) = delete;
  Spec& operator=(const Spec&) = delete;
  ~Spec() { sandlet_spec_delete(spec_); }

  Spec clone() const { return from_json(to_json()); }
  std::string to_json() const {
    char* out = nullptr;
    detail::check(sandlet_spec_to_json(spec_, &out));
    return detail::take_string(out);
  }

  // Setters chain on lvalues (returning Spec&) and on temporaries (returning Spec&&, so that
  // `Spec s = Spec().layer(dir).memory(n);` moves instead of needing a copy).
#define SANDLET_SPEC_SETTER_(name, params, call)                          \
  Spec& name params& { return set(call); }                                \
  Spec&& name params&& { return std::move(set(call)); }
  SANDLET_SPEC_SETTER_(backend, (const std::string& name), sandlet_spec_set_backend(spec_, name.c_str()))
  // A host directory or a store layer (digest, unique hex prefix, name); stacked lowest first.
  SANDLET_SPEC_SETTER_(layer, (const std::string& layer), sandlet_spec_add_layer(spec_, layer.c_str()))
  // A store environment, "name" or "name@N".
  SANDLET_SPEC_SETTER_(environment, (const std::string& env), sandlet_spec_set_environment(spec_, env.c_str()))
  SANDLET_SPEC_SETTER_(env, (const std::string& key, const std::string& value),
                       sandlet_spec_set_env(spec_, key.c_str(), value.c_str()))
  // An env variable never shown by info/list nor given to fork children unless asked (see sandlet.h).
  SANDLET_SPEC_SETTER_(secret, (const std::string& key, const std::string& value),
                       sandlet_spec_set_secret(spec_, key.c_str(), value.c_str()))
  SANDLET_SPEC_SETTER_(workdir, (const std::string& path), sandlet_spec_set_workdir(spec_, path.c_str()))
  SANDLET_SPEC_SETTER_(hostname, (const std::string& name), sandlet_spec_set_hostname(spec_, name.c_str()))
  SANDLET_SPEC_SETTER_(user, (const std::string& user), sandlet_spec_set_user(spec_, user.c_str()))
  SANDLET_SPEC_SETTER_(cpus, (double cpus), sandlet_spec_set_cpus(spec_, cpus))
  SANDLET_SPEC_SETTER_(memory, (uint64_t bytes), sandlet_spec_set_memory(spec_, bytes))
  SANDLET_SPEC_SETTER_(pids, (uint64_t pids), sandlet_spec_set_pids(spec_, pids))
  SANDLET_SPEC_SETTER_(disk, (uint64_t bytes), sandlet_spec_set_disk(spec_, bytes))
  SANDLET_SPEC_SETTER_(network, (const std::string& mode), sandlet_spec_set_network(spec_, mode.c_str()))
  // "none" or a policy object as JSON (docs/NETWORK.md).
  SANDLET_SPEC_SETTER_(network_json, (const std::string& json), sandlet_spec_set_network_json(spec_, json.c_str()))
  SANDLET_SPEC_SETTER_(label, (const std::string& key, const std::string& value),
                       sandlet_spec_set_label(spec_, key.c_str(), value.c_str()))
  SANDLET_SPEC_SETTER_(lifetime, (const std::string& policy), sandlet_spec_set_lifetime(spec_, policy.c_str()))
  SANDLET_SPEC_SETTER_(max_lifetime, (double seconds), sandlet_spec_set_max_lifetime(spec_, seconds))
  SANDLET_SPEC_SETTER_(idle_timeout, (double seconds), sandlet_spec_set_idle_timeout(spec_, seconds))
  // "destroy", "keep_logs" or "keep" (for keep_seconds after the expiry): sandlet_spec_set_on_expiry.
  SANDLET_SPEC_SETTER_(on_expiry, (const std::string& mode, double keep_seconds = 3600),
                       sandlet_spec_set_on_expiry(spec_, mode.c_str(), keep_seconds))
  // A guarantee this sandbox may get in a weaker form on this host ("memory_swap", ...; see sandlet.h).
  SANDLET_SPEC_SETTER_(accept_weaker, (const std::string& guarantee),
                       sandlet_spec_accept_weaker(spec_, guarantee.c_str()))
  // A host directory mounted at `target` inside (read-only unless `readonly` is false; see sandlet.h).
  SANDLET_SPEC_SETTER_(mount, (const std::string& source, const std::string& target, bool readonly = true),
                       sandlet_spec_add_mount(spec_, source.c_str(), target.c_str(), readonly ? 1 : 0))
#undef SANDLET_SPEC_SETTER_

  const sandlet_spec_t* get() const noexcept { return spec_; }
  sandlet_spec_t* get() noexcept { return spec_; }
  sandlet_spec_t* release() noexcept { return std::exchange(spec_, nullptr); }

 private:
  Spec& set(sandlet_error_t* err) {
    detail::check(err);
    return *this;
  }
  sandlet_spec_t* spec_ = nullptr;
};

}  // inline namespace cxx
}  // namespace sandlet

#endif  // SANDLET_CXX_SPEC_HPP
