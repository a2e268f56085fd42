#include "json.hpp"

#include <cstdint>

namespace sandlet::cli::json {

Value Value::string(std::string s) {
  Value v;
  v.type = Type::kString;
  v.text = std::move(s);
  return v;
}
Value Value::number(std::string literal) {
  Value v;
  v.type = Type::kNumber;
  v.text = std::move(literal);
  return v;
}
Value Value::object() {
  Value v;
  v.type = Type::kObject;
  return v;
}
Value Value::array() {
  Value v;
  v.type = Type::kArray;
  return v;
}

const Value* Value::find(std::string_view key) const {
  if (type != Type::kObject) return nullptr;
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == key) return &items[i];
  return nullptr;
}
Value* Value::find(std::string_view key) {
  return const_cast<Value*>(static_cast<const Value*>(this)->find(key));
}

Value& Value::set(std::string_view key, Value v) {
  if (Value* existing = find(key)) {
    *existing = std::move(v);
    return *existing;
  }
  keys.emplace_back(key);
  items.push_back(std::move(v));
  return items.back();
}

Value& Value::object_at(std::string_view key) {
  Value* v = find(key);
  if (v == nullptr || !v->is_object()) v = &set(key, Value::object());
  return *v;
}

namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Value document() {
    Value v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ParseError("invalid JSON at offset " + std::to_string(pos_) + ": " + what);
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool eat(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Value value(int depth) {
    if (depth > kMaxDepth) fail("nesting too deep");
    skip_ws();
    if (pos_ >= s_.size()) fail("unexpected end of input");
    const char c = s_[pos_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return Value::string(string());
    Value v;
    if (literal("true")) {
      v.type = Value::Type::kBool;
      v.boolean = true;
    } else if (literal("false")) {
      v.type = Value::Type::kBool;
    } else if (literal("null")) {
    } else {
      v = number();
    }
    return v;
  }

  Value object(int depth) {
    ++pos_;
    Value v = Value::object();
    if (eat('}')) return v;
    do {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a member name");
      std::string key = string();
      expect(':');
      v.set(key, value(depth + 1));  // a duplicate name keeps the last value
    } while (eat(','));
    expect('}');
    return v;
  }

  Value array(int depth) {
    ++pos_;
    Value v = Value::array();
    if (eat(']')) return v;
    do v.items.push_back(value(depth + 1));
    while (eat(','));
    expect(']');
    return v;
  }

  Value number() {
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::string_view("+-.eE").find(s_[pos_]) != std::string_view::npos ||
                                (s_[pos_] >= '0' && s_[pos_] <= '9')))
      ++pos_;
    const std::string_view lit = s_.substr(start, pos_ - start);
    if (lit.empty()) fail("unexpected character");
    if (!is_number(lit)) fail("malformed number");
    return Value::number(std::string(lit));
  }

  unsigned hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
      else fail("bad \\u escape");
    }
    return v;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string string() {
    ++pos_;  // opening quote
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated string");
      switch (s_[pos_++]) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {  // a high surrogate must be followed by a low one
            if (!literal("\\u")) fail("unpaired surrogate");
            const uint32_t lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            fail("unpaired surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default: fail("bad escape");
      }
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

void serialize_to(std::string& out, const Value& v) {
  switch (v.type) {
    case Value::Type::kNull: out += "null"; break;
    case Value::Type::kBool: out += v.boolean ? "true" : "false"; break;
    case Value::Type::kNumber: out += v.text; break;
    case Value::Type::kString: out += quote(v.text); break;
    case Value::Type::kArray:
      out += '[';
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i != 0) out += ',';
        serialize_to(out, v.items[i]);
      }
      out += ']';
      break;
    case Value::Type::kObject:
      out += '{';
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i != 0) out += ',';
        out += quote(v.keys[i]);
        out += ':';
        serialize_to(out, v.items[i]);
      }
      out += '}';
      break;
  }
}

void serialize_pretty_to(std::string& out, const Value& v, int depth) {
  const std::string pad(static_cast<size_t>(depth + 1) * 2, ' ');
  const std::string close_pad(static_cast<size_t>(depth) * 2, ' ');
  if ((v.type == Value::Type::kArray || v.type == Value::Type::kObject) && !v.items.empty()) {
    const bool obj = v.type == Value::Type::kObject;
    out += obj ? "{\n" : "[\n";
    for (size_t i = 0; i < v.items.size(); ++i) {
      out += pad;
      if (obj) {
        out += quote(v.keys[i]);
        out += ": ";
      }
      serialize_pretty_to(out, v.items[i], depth + 1);
      out += i + 1 < v.items.size() ? ",\n" : "\n";
    }
    out += close_pad;
    out += obj ? '}' : ']';
    return;
  }
  serialize_to(out, v);
}

}  // namespace

std::string serialize_pretty(const Value& v) {
  std::string out;
  serialize_pretty_to(out, v, 0);
  return out;
}

Value parse(std::string_view text) { return Parser(text).document(); }

std::string serialize(const Value& v) {
  std::string out;
  serialize_to(out, v);
  return out;
}

std::string quote(std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\\u00";
          out += kHex[(c >> 4) & 0xF];
          out += kHex[c & 0xF];
        } else {
          out += c;  // UTF-8 passes through; the library validates encodings
        }
    }
  }
  out += '"';
  return out;
}

bool is_number(std::string_view s) {
  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  size_t i = 0;
  auto digit = [&](size_t k) { return k < s.size() && s[k] >= '0' && s[k] <= '9'; };
  if (i < s.size() && s[i] == '-') ++i;
  if (!digit(i)) return false;
  if (s[i] == '0') ++i;
  else while (digit(i)) ++i;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digit(i)) return false;
    while (digit(i)) ++i;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digit(i)) return false;
    while (digit(i)) ++i;
  }
  return i == s.size();
}

}  // namespace sandlet::cli::json
