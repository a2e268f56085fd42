// Checks and message helpers the spec's field validators share (spec.cpp, spec_mounts.cpp).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace sandlet::spec_text {

// User text made safe for an error message: control characters, quotes and invalid bytes escaped, cut
// after `max_chars` characters so that a huge value cannot blow up the message.
std::string escaped(std::string_view s, size_t max_chars = 64);
std::string quoted(std::string_view s);  // escaped, in double quotes
// Text must be JSON-representable and usable as a C string: valid UTF-8, no NUL.
void check_text(const std::string& field, std::string_view v, const std::string& what);
// Non-empty, valid text, starting with '/', at most PATH_MAX - 1 bytes.
void check_absolute_path(const std::string& field, std::string_view v);
// Absolute and lexically normalized (no empty, "." or ".." component, no trailing '/'); else throws naming `field`.
void check_normalized_path(const std::string& field, std::string_view v);

}  // namespace sandlet::spec_text
