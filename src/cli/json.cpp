#include "json.hpp"

#include <cmath>

#include "common/json_exact.hpp"

namespace sandlet::cli::json {
namespace {

void serialize_to(std::string& out, const bj::value& v, int indent, int depth) {
  const auto newline = [&](int d) {
    if (indent == 0) return;
    out += '\n';
    out.append(static_cast<size_t>(d * indent), ' ');
  };
  switch (v.kind()) {
    case bj::kind::double_:  // (not finite: only out of a --spec "1e400", which the library then rejects)
      out += std::isfinite(v.get_double()) ? json_exact::number_text(v.get_double()) : "null";
      return;
    case bj::kind::array: {
      const bj::array& a = v.get_array();
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i != 0) out += ',';
        newline(depth + 1);
        serialize_to(out, a[i], indent, depth + 1);
      }
      if (!a.empty()) newline(depth);
      out += ']';
      return;
    }
    case bj::kind::object: {
      const bj::object& o = v.get_object();
      out += '{';
      bool first = true;
      for (const auto& kv : o) {
        if (!first) out += ',';
        first = false;
        newline(depth + 1);
        out += bj::serialize(bj::string_view(kv.key()));
        out += indent != 0 ? ": " : ":";
        serialize_to(out, kv.value(), indent, depth + 1);
      }
      if (!o.empty()) newline(depth);
      out += '}';
      return;
    }
    default: out += bj::serialize(v); return;  // null, bool, integers, strings
  }
}

}  // namespace

bj::value parse(std::string_view text) {
  json_exact::Parsed parsed = json_exact::parse(text);
  if (!parsed.error.empty()) throw ParseError(parsed.error);
  if (!parsed.duplicate.empty()) throw ParseError("duplicate key '" + parsed.duplicate + "'");
  return std::move(parsed.value);
}

std::string serialize(const bj::value& v) {
  std::string out;
  serialize_to(out, v, 0, 0);
  return out;
}

std::string serialize_pretty(const bj::value& v) {
  std::string out;
  serialize_to(out, v, 2, 0);
  return out;
}

const bj::value* find(const bj::value* v, std::string_view key) {
  if (v == nullptr || !v->is_object()) return nullptr;
  return v->get_object().if_contains(bj::string_view(key.data(), key.size()));
}

std::string text(const bj::value* v) {
  if (v == nullptr) return "";
  if (v->is_string()) return std::string(v->get_string());
  if (v->is_number()) return json::serialize(*v);
  return "";
}

double number(const bj::value* v) {
  if (v == nullptr) return 0;
  switch (v->kind()) {
    case bj::kind::double_: return v->get_double();
    case bj::kind::int64: return static_cast<double>(v->get_int64());
    case bj::kind::uint64: return static_cast<double>(v->get_uint64());
    default: return 0;
  }
}

const bj::array& items(const bj::value* v) {
  static const bj::array kNone;
  return v != nullptr && v->is_array() ? v->get_array() : kNone;
}

bj::object& object_at(bj::object& parent, std::string_view key) {
  bj::value& member = parent[bj::string_view(key.data(), key.size())];
  if (!member.is_object()) member.emplace_object();
  return member.get_object();
}

bj::value number_or_string(const std::string& text) {
  json_exact::Parsed parsed = json_exact::parse(text);
  if (parsed.error.empty() && parsed.value.is_number() && std::isfinite(number(&parsed.value)))
    return std::move(parsed.value);
  return bj::value(bj::string_view(text.data(), text.size()));
}

}  // namespace sandlet::cli::json
