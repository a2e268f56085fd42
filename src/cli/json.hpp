// The CLI's JSON: Boost.JSON values, read with the library's own exact reader (common/json_exact.hpp),
// plus the lookups and the printing the commands need.
#pragma once
#include <boost/json.hpp>

#include <stdexcept>
#include <string>
#include <string_view>

namespace sandlet::cli::json {

namespace bj = boost::json;

class ParseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses one JSON document; numbers exactly as written, a duplicate key is an error. Throws ParseError.
bj::value parse(std::string_view text);
// Compact and indented (two spaces, no trailing newline) text; numbers as the shortest text that reads back.
std::string serialize(const bj::value& v);
std::string serialize_pretty(const bj::value& v);

// Object member `key` of `v` (nullptr when `v` is null, not an object, or has no such member).
const bj::value* find(const bj::value* v, std::string_view key);
inline const bj::value* find(const bj::value& v, std::string_view key) { return find(&v, key); }
// A string's text, or a number's as JSON writes it; "" for anything else.
std::string text(const bj::value* v);
// A number's value; 0 for anything else.
double number(const bj::value* v);
// The elements of an array; none for anything else.
const bj::array& items(const bj::value* v);
// The member `key`, made into an object if absent or not an object.
bj::object& object_at(bj::object& parent, std::string_view key);
// A number literal stays a JSON number; anything else becomes a string (the library names the field).
bj::value number_or_string(const std::string& text);

}  // namespace sandlet::cli::json
