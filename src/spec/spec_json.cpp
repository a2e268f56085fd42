// The spec's JSON form: parse_spec_json and spec_to_json. This file checks the document's shape and the
// JSON types; the values themselves are validated by the setters in spec.cpp.
#include <boost/json.hpp>
#include <boost/json/basic_parser_impl.hpp>

#include <charconv>
#include <cmath>
#include <limits>
#include <set>

#include "common/error.hpp"
#include "spec/spec.hpp"

namespace sandlet {
namespace {

namespace json = boost::json;

// For errors about the document as a whole, where there is no field to name.
[[noreturn]] void throw_document(const std::string& why) {
  throw Error(Code::kInvalidArgument, "invalid spec: " + why);
}

// A key or string from the document (valid UTF-8, Boost.JSON checked) made safe for an error message:
// control characters escaped, cut after 64 characters on a character boundary.
std::string shown(std::string_view s) {
  constexpr size_t kMaxShown = 64;
  std::string out;
  size_t chars = 0, i = 0;
  for (; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const bool starts_char = (c & 0xC0) != 0x80;
    if (starts_char && chars++ == kMaxShown) break;
    if (c < 0x20 || c == 0x7F) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (i < s.size()) out += "...";
  return out;
}

std::string number_text(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

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
    {"workdir", [](Spec& s, const json::value& v) { spec_set_workdir(s, as_string(v, "workdir")); }},
    {"hostname", [](Spec& s, const json::value& v) { spec_set_hostname(s, as_string(v, "hostname")); }},
    {"user", [](Spec& s, const json::value& v) { spec_set_user(s, as_string(v, "user")); }},
    {"limits", parse_limits},
    {"network", [](Spec& s, const json::value& v) { spec_set_network(s, as_string(v, "network")); }},
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
    {"accept_weaker", parse_accept_weaker},
};

// ---- reading the document ------------------------------------------------------------------------------

// Builds the document like json::parser does, with two differences that matter for a spec:
//  - doubles are converted from their text with std::from_chars, which rounds correctly. Boost 1.81's own
//    conversion is fast but can be an ulp off (about 1 in 8 random doubles), and spec_to_json output
//    must read back exactly;
//  - duplicate keys are found (Boost keeps the last one silently). A spec that says "network" twice is
//    ambiguous — another tool may read the first — so the first duplicate is reported by its path.
class DocumentBuilder {
 public:
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);

  DocumentBuilder() { values_.reset(); }
  json::value release() { return values_.release(); }
  const std::string& duplicate() const { return duplicate_; }

  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code&) { return true; }
  bool on_array_begin(json::error_code&) {
    frames_.push_back({false, {}, {}, 0});
    return true;
  }
  bool on_array_end(std::size_t n, json::error_code&) {
    values_.push_array(n);
    return end_container();
  }
  bool on_object_begin(json::error_code&) {
    frames_.push_back({true, {}, {}, 0});
    return true;
  }
  bool on_object_end(std::size_t n, json::error_code&) {
    values_.push_object(n);
    return end_container();
  }
  bool on_string_part(json::string_view s, std::size_t, json::error_code&) {
    values_.push_chars(s);
    return true;
  }
  bool on_string(json::string_view s, std::size_t, json::error_code&) {
    values_.push_string(s);
    return end_value();
  }
  bool on_key_part(json::string_view s, std::size_t, json::error_code&) {
    values_.push_chars(s);
    key_.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, std::size_t, json::error_code&) {
    values_.push_key(s);
    key_.append(s.data(), s.size());
    Frame& frame = frames_.back();
    if (!frame.keys.insert(key_).second && duplicate_.empty()) duplicate_ = path() + shown(key_);
    frame.key = std::move(key_);
    key_.clear();
    return true;
  }
  bool on_number_part(json::string_view s, json::error_code&) {
    number_.append(s.data(), s.size());
    return true;
  }
  bool on_int64(int64_t i, json::string_view, json::error_code&) {
    number_.clear();
    values_.push_int64(i);
    return end_value();
  }
  bool on_uint64(uint64_t u, json::string_view, json::error_code&) {
    number_.clear();
    values_.push_uint64(u);
    return end_value();
  }
  bool on_double(double d, json::string_view s, json::error_code&) {
    number_.append(s.data(), s.size());
    double exact;
    const auto r = std::from_chars(number_.data(), number_.data() + number_.size(), exact);
    if (r.ec == std::errc() && r.ptr == number_.data() + number_.size()) {
      d = exact;
    } else if (r.ec == std::errc::result_out_of_range && d == 0) {
      // 1e-400 is not zero: 0 means "unlimited" for some fields, so keep it the smallest non-zero value.
      d = std::copysign(std::numeric_limits<double>::denorm_min(), number_[0] == '-' ? -1.0 : 1.0);
    }  // else too large (1e400): keep Boost's infinity, which every field rejects
    number_.clear();
    values_.push_double(d);
    return end_value();
  }
  bool on_bool(bool b, json::error_code&) {
    values_.push_bool(b);
    return end_value();
  }
  bool on_null(json::error_code&) {
    values_.push_null();
    return end_value();
  }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;  // objects: the current member
    size_t index;     // arrays: the current element
  };

  bool end_value() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
    return true;
  }
  bool end_container() {
    frames_.pop_back();
    return end_value();
  }
  // The path of the innermost container, ready for a key to be appended ("", "env.", "layers[2].").
  std::string path() const {
    std::string out;
    for (size_t i = 0; i + 1 < frames_.size(); ++i) {
      out += frames_[i].object ? shown(frames_[i].key) : "[" + std::to_string(frames_[i].index) + "]";
      if (frames_[i + 1].object) out += '.';
    }
    return out;
  }

  json::value_stack values_;
  std::vector<Frame> frames_;
  std::string key_;
  std::string number_;
  std::string duplicate_;
};

json::value parse_document(std::string_view text) {
  json::basic_parser<DocumentBuilder> parser{json::parse_options{}};
  json::error_code ec;
  const size_t offset = parser.write_some(false, text.data(), text.size(), ec);
  if (!ec && offset < text.size()) ec = json::error::extra_data;
  if (ec) {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < offset && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line, column = 1;
      } else {
        ++column;
      }
    }
    throw_document("malformed JSON at offset " + std::to_string(offset) + " (line " + std::to_string(line) +
                   ", column " + std::to_string(column) + "): " + ec.message());
  }
  json::value doc = parser.handler().release();
  if (!doc.is_object()) throw_document("expected a JSON object, got " + describe(doc));
  if (!parser.handler().duplicate().empty()) throw_invalid(parser.handler().duplicate(), "duplicate key");
  return doc;
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
  void field(std::string_view k, std::string_view v) { key(k), string(v); }
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
  w.field("network", spec.network);
  w.key("labels");
  w.begin_object();
  for (const auto& [key, value] : spec.labels) w.field(key, value);
  w.end_object();
  w.field("lifetime", spec.lifetime == Lifetime::kDetached ? "detached" : "owned");
  w.key("max_lifetime_s"), w.number(spec.max_lifetime_s);
  w.key("idle_timeout_s"), w.number(spec.idle_timeout_s);
  w.key("accept_weaker");
  w.begin_array();
  for (const auto& g : spec.accept_weaker) w.string(g);
  w.end_array();
  w.end_object();
  return w.take();
}

}  // namespace sandlet
