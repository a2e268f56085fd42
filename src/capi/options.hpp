// The one versioning scheme of the C ABI's option structs (see the conventions in sandlet.h): each starts
// with `uint32_t size`, the caller's sizeof(the struct). Fields are only ever appended, so a field the
// caller's struct does not reach takes its default; a larger struct (a newer header) is accepted when the
// bytes past what this library knows are zero. Shims read every field through field_or, never directly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.hpp"

namespace sandlet::capi {

// Past this, `size` is garbage (an uninitialised struct), not a newer header.
inline constexpr uint32_t kMaxOptionsSize = 4096;

// The offset just past member `m` of T (what `size` must reach for the caller's struct to hold it).
template <class T, class M>
size_t field_end(M T::*m) noexcept {
  static constexpr T probe{};  // only its addresses are used: no object of the caller's is touched
  const auto* base = reinterpret_cast<const char*>(&probe);
  return static_cast<size_t>(reinterpret_cast<const char*>(&(probe.*m)) - base) + sizeof(M);
}

// Whether the caller's struct holds member `m` entirely.
template <class T, class M>
bool field_present(const T& opts, M T::*m) noexcept {
  return opts.size >= field_end(m);
}

// The caller's value of `m`, or `fallback` (the field's default) when its struct predates the field.
template <class T, class M, class D>
M field_or(const T& opts, M T::*m, D fallback) noexcept {
  return field_present(opts, m) ? opts.*m : static_cast<M>(fallback);
}

// Refuses a `size` that cannot be right: smaller than the size field itself, implausibly large, or larger
// than this library's struct with non-zero bytes past it (a field of a newer header this library lacks).
template <class T>
void check_options_size(const T& opts, const char* type_name, const char* init_macro) {
  const uint32_t size = opts.size;
  auto refuse = [&](const std::string& why) {
    throw Error(Code::kInvalidArgument, std::string(type_name) + ".size is " + std::to_string(size) + ": " + why +
                                            " (initialise the struct with " + init_macro + ")");
  };
  if (size < sizeof(uint32_t)) refuse("too small to hold the size field");
  if (size > kMaxOptionsSize) refuse("larger than any version of the struct");
  if (size <= sizeof(T)) return;
  const auto* tail = reinterpret_cast<const unsigned char*>(&opts);
  for (size_t i = sizeof(T); i < size; ++i) {
    if (tail[i] != 0) {
      refuse("byte " + std::to_string(i) + " is set, past the " + std::to_string(sizeof(T)) +
             " bytes this library knows: the caller was built against a newer sandlet.h and sets a field "
             "this library does not have");
    }
  }
}

}  // namespace sandlet::capi
