// How one audit record becomes one line (audit_log.hpp): the common fields first, every string made valid
// UTF-8 (what a sandbox said may be any bytes) and cut to kAuditMaxString, every array to kAuditMaxArray,
// and the whole line kept under kAuditMaxLine; a record that had anything cut says "truncated": true.
#pragma once
#include <boost/json/object.hpp>
#include <map>
#include <string>
#include <string_view>

namespace sandlet {

// A line is at most this long: longer strings in a record's fields are cut (and the record says so).
constexpr size_t kAuditMaxLine = 64 * 1024;
constexpr size_t kAuditMaxString = 4096;  // each string of the event fields
constexpr size_t kAuditMaxArray = 256;    // each array of the event fields (argv)

// RFC 3339 UTC with microseconds, e.g. "2026-12-02T02:35:28.123456Z" (fixed width: records sort as text).
std::string audit_time(double unix_seconds);

// `text` as valid UTF-8 (each invalid byte becomes U+FFFD), at most `max` bytes (cut at a character
// boundary); *cut is set when anything was cut.
std::string audit_utf8(std::string_view text, size_t max, bool* cut);

// The line (ending in '\n') of one record written now by this process.
std::string audit_line(const char* event, const std::string& sandbox, const std::map<std::string, std::string>& labels,
                       boost::json::object fields, bool* cut);

// One write(2) of the whole line (O_APPEND: lines of concurrent writers never interleave). Throws on error.
void write_line(int fd, const std::string& line);

}  // namespace sandlet
