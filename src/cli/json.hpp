// A minimal JSON DOM for the CLI: enough to merge a --spec file with command-line flags and to read
// the fields `ps` shows from sandbox records. Validation of what a spec means stays in the library.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sandlet::cli::json {

class ParseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Value {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  Type type = Type::kNull;
  bool boolean = false;
  std::string text;                 // kString: the decoded string; kNumber: the literal as written
  std::vector<Value> items;         // kArray elements; kObject member values
  std::vector<std::string> keys;    // kObject member names, parallel to items (order kept)

  static Value string(std::string s);
  static Value number(std::string literal);  // literal must satisfy is_number()
  static Value object();
  static Value array();

  bool is_object() const { return type == Type::kObject; }
  // Object member lookup (nullptr when absent or not an object).
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  // Sets (replaces or appends) an object member and returns it.
  Value& set(std::string_view key, Value v);
  // The member `key`, made into an object if absent or not an object.
  Value& object_at(std::string_view key);
};

// Parses one JSON value (RFC 8259; nesting capped). Throws ParseError naming the offset.
Value parse(std::string_view text);
// Compact serialisation.
std::string serialize(const Value& v);
// Indented (two spaces) serialisation, no trailing newline.
std::string serialize_pretty(const Value& v);
// A JSON string literal for `s` (quoted and escaped).
std::string quote(std::string_view s);
// True when `s` is exactly a JSON number literal.
bool is_number(std::string_view s);

}  // namespace sandlet::cli::json
