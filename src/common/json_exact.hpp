// Reading JSON documents exactly, for the spec parser (src/spec) and the CLI: Boost.JSON's parser with a
// handler that converts doubles with std::from_chars and finds duplicate keys. Header-only, so that the
// CLI, a client of the public API, uses the same reader as the library without reaching into it.
#pragma once
#include <boost/json.hpp>
#include <boost/json/basic_parser_impl.hpp>

#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace sandlet::json_exact {

namespace json = boost::json;

// A key or string from the document (valid UTF-8, Boost.JSON checked) made safe for an error message:
// control characters escaped, cut after 64 characters on a character boundary.
inline std::string shown(std::string_view s) {
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

// Builds the document like json::parser does, with two differences that matter for a spec (and for a CLI
// that merges a spec file with its flags):
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

// A parsed document, or why it is not one.
struct Parsed {
  json::value value;
  std::string error;      // empty on success, else "malformed JSON at offset N (line L, column C): why"
  std::string duplicate;  // the path of the first duplicate key ("env.K"), empty when there is none
};

inline Parsed parse(std::string_view text) {
  Parsed out;
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
    out.error = "malformed JSON at offset " + std::to_string(offset) + " (line " + std::to_string(line) +
                ", column " + std::to_string(column) + "): " + ec.message();
    return out;
  }
  out.value = parser.handler().release();
  out.duplicate = parser.handler().duplicate();
  return out;
}

// The shortest text that reads back as the same double ("0.5", not "5E-1" as json::serialize writes).
inline std::string number_text(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace sandlet::json_exact
