// sandlet C++ wrapper: sandlet::AuditReader, a reader of a root's audit log (sandlet_audit.h).
// Part of sandlet.hpp (C++17 or later); may be included alone.
#ifndef SANDLET_CXX_AUDIT_HPP
#define SANDLET_CXX_AUDIT_HPP

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sandlet/cxx/error.hpp"
#include "sandlet/sandlet.h"

namespace sandlet {
inline namespace cxx {  // see sandlet/cxx/error.hpp

struct AuditFilter {
  std::string sandbox;                        // empty = any
  std::map<std::string, std::string> labels;  // each must match
  double since = 0;                           // unix seconds; 0 = all
};

// Reads records oldest first and then follows the log (next() returns nullopt when none is there now).
// Movable, not copyable; one thread at a time.
class AuditReader {
 public:
  AuditReader() noexcept = default;
  static AuditReader open(const std::string& path, const AuditFilter& filter = AuditFilter()) {
    std::vector<std::string> kv;
    for (const auto& [k, v] : filter.labels) kv.push_back(k + "=" + v);
    std::vector<const char*> ptrs;
    for (const auto& s : kv) ptrs.push_back(s.c_str());
    sandlet_audit_filter_t c = SANDLET_AUDIT_FILTER_INIT;
    c.sandbox = filter.sandbox.empty() ? nullptr : filter.sandbox.c_str();
    c.labels = ptrs.empty() ? nullptr : ptrs.data();
    c.n_labels = ptrs.size();
    c.since = filter.since;
    AuditReader r;
    detail::check(sandlet_audit_reader_open(path.c_str(), &c, &r.r_));
    return r;
  }
  AuditReader(AuditReader&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
  AuditReader& operator=(AuditReader&& o) noexcept {
    if (this != &o) {
      sandlet_audit_reader_close(r_);
      r_ = std::exchange(o.r_, nullptr);
    }
    return *this;
  }
  AuditReader(const AuditReader&) = delete;
  AuditReader& operator=(const AuditReader&) = delete;
  ~AuditReader() { sandlet_audit_reader_close(r_); }

  bool valid() const noexcept { return r_ != nullptr; }
  // The next matching record (a JSON object), or nullopt when none is there now.
  std::optional<std::string> next() {
    char* line = nullptr;
    detail::check(sandlet_audit_reader_next(r_, &line));
    if (line == nullptr) return std::nullopt;
    return detail::take_string(line);
  }

 private:
  sandlet_audit_reader_t* r_ = nullptr;
};

}  // namespace cxx
}  // namespace sandlet

#endif  // SANDLET_CXX_AUDIT_HPP
