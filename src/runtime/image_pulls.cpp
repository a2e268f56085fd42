// Registry images in the runtime: explicit pulls (sandlet_image_pull) and the environments specs, recipes and
// harnesses name by image reference (pulled on first use, as the runtime's pull policy says).
#include <boost/json.hpp>

#include "common/error.hpp"
#include "runtime/runtime.hpp"

namespace json = boost::json;

namespace sandlet {

std::string Runtime::image_pull(const std::string& ref_text, const std::string& name,
                                const std::function<void(const registry::PullProgress&)>& progress) {
  if (closed_) throw Error(Code::kFailedPrecondition, "runtime is closed");
  const registry::ImageRef ref = registry::parse_image_ref(ref_text, "image reference");
  if (!name.empty()) image::check_env_name(name, "environment name");
  registry::ImagePullOptions o;
  o.name = name;
  o.progress = progress;
  const registry::ImagePullResult r = registry::pull_image(*layer_store_, registry_config_, ref, o);
  json::object out{{"reference", r.reference},
                   {"environment", r.environment},
                   {"version", r.version},
                   {"new_version", r.new_version},
                   {"manifest_digest", r.manifest_digest},
                   {"platform", r.platform},
                   {"endpoint", r.endpoint},
                   {"layers", json::value_from(r.layers)},
                   {"blobs_fetched", r.blobs_fetched},
                   {"layers_reused", r.layers_reused},
                   {"bytes_fetched", r.bytes_fetched},
                   {"seconds", r.seconds}};
  return json::serialize(out);
}

std::string Runtime::resolve_environment(const std::string& text, bool bare_names_are_images) {
  return registry::resolve_environment(*layer_store_, registry_config_, text, bare_names_are_images);
}

Spec Runtime::with_local_environment(const Spec& spec) {
  if (spec.environment.empty()) return spec;
  Spec out = spec;
  try {
    out.environment = resolve_environment(spec.environment);
  } catch (const Error& e) {
    throw Error(e.code() == Code::kNotFound ? Code::kInvalidArgument : e.code(),
                "invalid spec field 'environment': " + std::string(e.what()), e.err_no());
  }
  return out;
}

}  // namespace sandlet
