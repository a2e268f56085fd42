// C ABI: specs.
#include "capi/handles.hpp"

using sandlet::capi::guard;

extern "C" {

SANDLET_API sandlet_error_t* sandlet_spec_new(sandlet_spec_t** out) {
  SANDLET_REQUIRE(out);
  return guard([&] { *out = new sandlet_spec; });
}

SANDLET_API sandlet_error_t* sandlet_spec_from_json(const char* json, size_t len, sandlet_spec_t** out) {
  SANDLET_REQUIRE(json);
  SANDLET_REQUIRE(out);
  return guard([&] {
    auto s = std::make_unique<sandlet_spec>();
    s->spec = sandlet::parse_spec_json(std::string_view(json, len));
    *out = s.release();
  });
}

SANDLET_API sandlet_error_t* sandlet_spec_to_json(const sandlet_spec_t* spec, char** out) {
  SANDLET_REQUIRE(spec);
  SANDLET_REQUIRE(out);
  return guard([&] { *out = sandlet::capi::dup_string(sandlet::spec_to_json(spec->spec)); });
}

SANDLET_API void sandlet_spec_delete(sandlet_spec_t* spec) { delete spec; }

#define SANDLET_STRING_SETTER(name, fn)                                                  \
  SANDLET_API sandlet_error_t* sandlet_spec_##name(sandlet_spec_t* spec, const char* v) { \
    SANDLET_REQUIRE(spec);                                                               \
    SANDLET_REQUIRE(v);                                                                  \
    return guard([&] { sandlet::fn(spec->spec, v); });                                   \
  }
#define SANDLET_KV_SETTER(name, fn)                                                                      \
  SANDLET_API sandlet_error_t* sandlet_spec_##name(sandlet_spec_t* spec, const char* key, const char* value) { \
    SANDLET_REQUIRE(spec);                                                                               \
    SANDLET_REQUIRE(key);                                                                                \
    SANDLET_REQUIRE(value);                                                                              \
    return guard([&] { sandlet::fn(spec->spec, key, value); });                                          \
  }
#define SANDLET_VALUE_SETTER(name, fn, type)                                        \
  SANDLET_API sandlet_error_t* sandlet_spec_##name(sandlet_spec_t* spec, type v) { \
    SANDLET_REQUIRE(spec);                                                          \
    return guard([&] { sandlet::fn(spec->spec, v); });                              \
  }

SANDLET_STRING_SETTER(set_backend, spec_set_backend)
SANDLET_STRING_SETTER(add_layer, spec_add_layer)
SANDLET_STRING_SETTER(set_environment, spec_set_environment)
SANDLET_KV_SETTER(set_env, spec_set_env)
SANDLET_KV_SETTER(set_secret, spec_set_secret)
SANDLET_STRING_SETTER(set_workdir, spec_set_workdir)
SANDLET_STRING_SETTER(set_hostname, spec_set_hostname)
SANDLET_STRING_SETTER(set_user, spec_set_user)
SANDLET_VALUE_SETTER(set_cpus, spec_set_cpus, double)
SANDLET_VALUE_SETTER(set_memory, spec_set_memory, uint64_t)
SANDLET_VALUE_SETTER(set_pids, spec_set_pids, uint64_t)
SANDLET_VALUE_SETTER(set_disk, spec_set_disk, uint64_t)
SANDLET_STRING_SETTER(set_network, spec_set_network)
SANDLET_STRING_SETTER(set_network_json, spec_set_network_json)
SANDLET_KV_SETTER(set_label, spec_set_label)
SANDLET_STRING_SETTER(set_lifetime, spec_set_lifetime)
SANDLET_VALUE_SETTER(set_max_lifetime, spec_set_max_lifetime, double)
SANDLET_VALUE_SETTER(set_idle_timeout, spec_set_idle_timeout, double)
SANDLET_STRING_SETTER(accept_weaker, spec_accept_weaker)

SANDLET_API sandlet_error_t* sandlet_spec_set_on_expiry(sandlet_spec_t* spec, const char* mode, double keep_seconds) {
  SANDLET_REQUIRE(spec);
  SANDLET_REQUIRE(mode);
  return guard([&] {
    sandlet::Spec checked;  // both checked before either changes
    sandlet::spec_set_on_expiry(checked, mode);
    if (checked.on_expiry != sandlet::OnExpiry::kDestroy) sandlet::spec_set_keep(checked, keep_seconds);
    spec->spec.on_expiry = checked.on_expiry;
    spec->spec.keep_s = checked.keep_s;
  });
}

SANDLET_API sandlet_error_t* sandlet_spec_add_mount(sandlet_spec_t* spec, const char* source, const char* target,
                                                    int readonly) {
  SANDLET_REQUIRE(spec);
  SANDLET_REQUIRE(source);
  SANDLET_REQUIRE(target);
  return guard([&] { sandlet::spec_add_mount(spec->spec, source, target, readonly != 0); });
}

}  // extern "C"
