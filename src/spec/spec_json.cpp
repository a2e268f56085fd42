// The spec's JSON form: parse_spec_json and spec_to_json. This file checks the document's shape and the
// JSON types; the values themselves are validated by the setters in spec.cpp.
#include <boost/json.hpp>

#include <charconv>
#include <cmath>

#include "common/error.hpp"
#include "common/json_exact.hpp"
#include "spec/spec.hpp"
#include "spec/spec_policy.hpp"

namespace sandlet {
namespace {

namespace json = boost::json;

// For errors about the document as a whole, where there is no field to name.
[[noreturn]] void throw_document(const std::string& why) {
  throw Error(Code::kInvalidArgument, "invalid spec: " + why);
}

using json_exact::number_text;
using json_exact::shown;

// What a value is, for "expected X, got Y".
std::string describe(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return "null";
    case json::kind::bool_: return v.get_bool() ? "true" : "false";
    case json::kind::int64: return std::to_string(v.get_int64());
    case json::kind::uint64: return std::to_string(v.get_uint64());
    case json::kind::double_: return number_text(v.get_double());
    case json::kind::string: return "\"" + shown(v.get_string()) + "\"";
    case json::kind::array: return "an array";
    case json::kind::object: return "an object";
  }
  return "?";
}

[[noreturn]] void throw_type(const std::string& field, const std::string& expected, const json::value& v) {
  throw_invalid(field, "expected " + expected + ", got " + describe(v));
}

std::string_view as_string(const json::value& v, const std::string& field) {
  if (!v.is_string()) throw_type(field, "a string", v);
  const json::string& s = v.get_string();
  return {s.data(), s.size()};
}

const json::object& as_object(const json::value& v, const std::string& field, const std::string& expected) {
  if (!v.is_object()) throw_type(field, expected, v);
  return v.get_object();
}

double as_number(const json::value& v, const std::string& field, const std::string& expected) {
  switch (v.kind()) {
    case json::kind::int64: return static_cast<double>(v.get_int64());
    case json::kind::uint64: return static_cast<double>(v.get_uint64());
    case json::kind::double_: return v.get_double();
    default: throw_type(field, expected, v);
  }
}

// A non-negative integer; an integral double (256.0) counts, 1.5 or 1e400 does not.
uint64_t as_whole_number(const json::value& v, const std::string& field, const std::string& expected) {
  switch (v.kind()) {
    case json::kind::int64:
      if (v.get_int64() >= 0) return static_cast<uint64_t>(v.get_int64());
      break;
    case json::kind::uint64: return v.get_uint64();
    case json::kind::double_: {
      const double d = v.get_double();
      if (d >= 0 && d < 18446744073709551616.0 && std::trunc(d) == d) return static_cast<uint64_t>(d);
      break;
    }
    default: break;
  }
  throw_type(field, expected, v);
}

uint64_t as_size(const json::value& v, const std::string& field) {
  if (v.is_string()) return parse_size(as_string(v, field), field);
  return as_whole_number(v, field, "a size: a number of bytes or a string like \"512M\"");
}

std::string key_text(const json::key_value_pair& kv) { return {kv.key().data(), kv.key().size()}; }

// ---- fields --------------------------------------------------------------------------------------------

void parse_layers(Spec& s, const json::value& v) {
  if (!v.is_array()) throw_type("layers", "an array of directory paths, layer digests or names", v);
  s.layers.clear();
  const json::array& layers = v.get_array();
  for (size_t i = 0; i < layers.size(); ++i) {
    spec_add_layer(s, as_string(layers[i], "layers[" + std::to_string(i) + "]"));
  }
}

void parse_env(Spec& s, const json::value& v) {
  s.env.clear();
  for (const auto& kv : as_object(v, "env", "an object of strings")) {
    const std::string key = key_text(kv);
    spec_set_env(s, key, as_string(kv.value(), "env." + shown(key)));
  }
}

void parse_secrets(Spec& s, const json::value& v) {
  s.secrets.clear();
  for (const auto& kv : as_object(v, "secrets", "an object of strings")) {
    const std::string key = key_text(kv);
    spec_set_secret(s, key, as_string(kv.value(), "secrets." + shown(key)));
  }
}

void parse_labels(Spec& s, const json::value& v) {
  s.labels.clear();
  for (const auto& kv : as_object(v, "labels", "an object of strings")) {
    const std::string key = key_text(kv);
    spec_set_label(s, key, as_string(kv.value(), "labels." + shown(key)));
  }
}

void parse_limits(Spec& s, const json::value& v) {
  for (const auto& kv : as_object(v, "limits", "an object")) {
    const std::string key = key_text(kv);
    const std::string field = "limits." + shown(key);
    if (key == "cpus") {
      spec_set_cpus(s, as_number(kv.value(), field, "a number of CPUs"));
    } else if (key == "memory") {
      spec_set_memory(s, as_size(kv.value(), field));
    } else if (key == "pids") {
      spec_set_pids(s, as_whole_number(kv.value(), field, "a positive integer"));
    } else if (key == "disk") {
      spec_set_disk(s, as_size(kv.value(), field));
    } else {
      throw_invalid(field, "unknown field");
    }
  }
}

void parse_accept_weaker(Spec& s, const json::value& v) {
  if (!v.is_array()) throw_type("accept_weaker", "an array of guarantee names", v);
  s.accept_weaker.clear();
  const json::array& names = v.get_array();
  for (size_t i = 0; i < names.size(); ++i)
    spec_accept_weaker(s, as_string(names[i], "accept_weaker[" + std::to_string(i) + "]"));
}

// Each mount: "SRC:DST[:ro|rw]" or {"source", "target", "readonly" (default true)}.
void parse_mounts(Spec& s, const json::value& v) {
  if (!v.is_array()) throw_type("mounts", "an array of mounts", v);
  s.mounts.clear();
  const json::array& mounts = v.get_array();
  for (size_t i = 0; i < mounts.size(); ++i) {
    const std::string field = "mounts[" + std::to_string(i) + "]";
    const json::value& m = mounts[i];
    if (m.is_string()) {
      spec_add_mount_text(s, as_string(m, field));
      continue;
    }
    const std::string expected = "\"SOURCE:TARGET[:ro|rw]\" or an object {\"source\", \"target\", \"readonly\"}";
    const json::object& o = as_object(m, field, expected);
    std::string_view source, target;
    bool have_source = false, have_target = false, readonly = true;
    for (const auto& kv : o) {
      const std::string key = key_text(kv);
      const std::string sub = field + "." + shown(key);
      if (key == "source") {
        source = as_string(kv.value(), sub), have_source = true;
      } else if (key == "target") {
        target = as_string(kv.value(), sub), have_target = true;
      } else if (key == "readonly") {
        if (!kv.value().is_bool()) throw_type(sub, "true or false", kv.value());
        readonly = kv.value().get_bool();
      } else {
        throw_invalid(sub, "unknown field");
      }
    }
    if (!have_source) throw_invalid(field + ".source", "required");
    if (!have_target) throw_invalid(field + ".target", "required");
    spec_add_mount(s, source, target, readonly);
  }
}

using FieldParser = void (*)(Spec&, const json::value&);
struct Field {
  std::string_view name;
  FieldParser parse;
};

const Field kFields[] = {
    {"backend", [](Spec& s, const json::value& v) { spec_set_backend(s, as_string(v, "backend")); }},
    {"layers", parse_layers},
    {"environment", [](Spec& s, const json::value& v) { spec_set_environment(s, as_string(v, "environment")); }},
    {"env", parse_env},
    {"secrets", parse_secrets},
    {"workdir", [](Spec& s, const json::value& v) { spec_set_workdir(s, as_string(v, "workdir")); }},
    {"hostname", [](Spec& s, const json::value& v) { spec_set_hostname(s, as_string(v, "hostname")); }},
    {"user", [](Spec& s, const json::value& v) { spec_set_user(s, as_string(v, "user")); }},
    {"limits", parse_limits},
    {"network", [](Spec& s, const json::value& v) { s.network = parse_network_value(v); }},
    {"labels", parse_labels},
    {"lifetime", [](Spec& s, const json::value& v) { spec_set_lifetime(s, as_string(v, "lifetime")); }},
    {"max_lifetime_s",
     [](Spec& s, const json::value& v) {
       spec_set_max_lifetime(s, as_number(v, "max_lifetime_s", "a number of seconds"));
     }},
    {"idle_timeout_s",
     [](Spec& s, const json::value& v) {
       spec_set_idle_timeout(s, as_number(v, "idle_timeout_s", "a number of seconds"));
     }},
    {"on_expiry", [](Spec& s, const json::value& v) { spec_set_on_expiry(s, as_string(v, "on_expiry")); }},
    {"keep_s", [](Spec& s, const json::value& v) { spec_set_keep(s, as_number(v, "keep_s", "a number of seconds")); }},
    {"accept_weaker", parse_accept_weaker},
    {"mounts", parse_mounts},
    {"policy", [](Spec& s, const json::value& v) { parse_policy_json(s.policy, v); }},
    {"toolkit", [](Spec& s, const json::value& v) { spec_set_toolkit(s, as_string(v, "toolkit")); }},
};

// ---- reading the document ------------------------------------------------------------------------------

json::value parse_document(std::string_view text) {
  json_exact::Parsed parsed = json_exact::parse(text);
  if (!parsed.error.empty()) throw_document(parsed.error);
  if (!parsed.value.is_object()) throw_document("expected a JSON object, got " + describe(parsed.value));
  if (!parsed.duplicate.empty()) throw_invalid(parsed.duplicate, "duplicate key");
  return std::move(parsed.value);
}

// ---- writing -------------------------------------------------------------------------------------------

// Written by hand rather than through json::serialize so that numbers read naturally ("0.5", not "5E-1");
// to_chars gives the shortest text that reads back as the same double.
class Writer {
 public:
  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }
  void key(std::string_view k) {
    separate();
    out_ += json::serialize(json::string_view(k.data(), k.size()));
    out_ += ':';
    after_key_ = true;
  }
  void string(std::string_view v) {
    separate();
    out_ += json::serialize(json::string_view(v.data(), v.size()));
  }
  void number(uint64_t v) {
    separate();
    out_ += std::to_string(v);
  }
  void number(double v) {
    separate();
    if (!std::isfinite(v)) {
      out_ += "null";  // not representable in JSON; only an invalid spec has it
      return;
    }
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, r.ptr);
  }
  void boolean(bool v) {
    separate();
    out_ += v ? "true" : "false";
  }
  void field(std::string_view k, std::string_view v) { key(k), string(v); }
  void raw(std::string_view json_text) {  // an already serialized value
    separate();
    out_ += json_text;
  }
  std::string take() { return std::move(out_); }

 private:
  void open(char c) {
    separate();
    out_ += c;
    first_ = true;
  }
  void close(char c) {
    out_ += c;
    first_ = false;
  }
  void separate() {
    if (after_key_) {
      after_key_ = false;
    } else if (!first_) {
      out_ += ',';
    }
    first_ = false;
  }

  std::string out_;
  bool first_ = true;
  bool after_key_ = false;
};

}  // namespace

Spec parse_spec_json(std::string_view text) {
  const json::value doc = parse_document(text);

  Spec spec;
  for (const auto& kv : doc.get_object()) {
    const std::string_view key(kv.key().data(), kv.key().size());
    const Field* field = nullptr;
    for (const Field& f : kFields) {
      if (f.name == key) field = &f;
    }
    if (field == nullptr) throw_invalid(shown(key), "unknown field");
    field->parse(spec, kv.value());
  }
  return spec;
}

std::string spec_to_json(const Spec& spec) {
  Writer w;
  w.begin_object();
  w.field("backend", spec.backend);
  w.key("layers");
  w.begin_array();
  for (const auto& layer : spec.layers) w.string(layer);
  w.end_array();
  w.field("environment", spec.environment);
  w.key("env");
  w.begin_object();
  for (const auto& [key, value] : spec.env) w.field(key, value);
  w.end_object();
  if (!spec.secrets.empty()) {
    w.key("secrets");
    w.begin_object();
    for (const auto& [key, value] : spec.secrets) w.field(key, value);
    w.end_object();
  }
  w.field("workdir", spec.workdir);
  w.field("hostname", spec.hostname);
  w.field("user", spec.user);
  w.key("limits");
  w.begin_object();
  w.key("cpus"), w.number(spec.limits.cpus);
  w.key("memory"), w.number(spec.limits.memory);
  w.key("pids"), w.number(spec.limits.pids);
  w.key("disk"), w.number(spec.limits.disk);
  w.end_object();
  w.key("network"), w.raw(network_to_json(spec.network));
  w.key("labels");
  w.begin_object();
  for (const auto& [key, value] : spec.labels) w.field(key, value);
  w.end_object();
  w.field("lifetime", spec.lifetime == Lifetime::kDetached ? "detached" : "owned");
  w.key("max_lifetime_s"), w.number(spec.max_lifetime_s);
  w.key("idle_timeout_s"), w.number(spec.idle_timeout_s);
  w.field("on_expiry", on_expiry_name(spec.on_expiry));
  w.key("keep_s"), w.number(spec.keep_s);
  w.key("accept_weaker");
  w.begin_array();
  for (const auto& g : spec.accept_weaker) w.string(g);
  w.end_array();
  w.key("mounts");
  w.begin_array();
  for (const auto& m : spec.mounts) {
    w.begin_object();
    w.field("source", m.source);
    w.field("target", m.target);
    w.key("readonly"), w.boolean(m.readonly);
    w.end_object();
  }
  w.end_array();
  w.key("policy"), w.raw(policy_to_json(spec.policy));
  if (!spec.toolkit.empty()) w.field("toolkit", spec.toolkit);
  w.end_object();
  return w.take();
}

}  // namespace sandlet
