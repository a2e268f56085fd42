// C ABI: the audit log (sandlet_audit.h) -> AuditLog's path and AuditReader.
#include <memory>

#include "capi/handles.hpp"
#include "capi/options.hpp"
#include "runtime/audit/audit_reader.hpp"

using sandlet::capi::guard;

struct sandlet_audit_reader {
  std::unique_ptr<sandlet::AuditReader> reader;
};

extern "C" {

SANDLET_API const char* sandlet_runtime_audit_path(const sandlet_runtime_t* rt) {
  return rt && rt->rt->audit() ? rt->rt->audit()->path().c_str() : "";
}

SANDLET_API sandlet_error_t* sandlet_audit_reader_open(const char* path, const sandlet_audit_filter_t* filter,
                                                       sandlet_audit_reader_t** out) {
  SANDLET_REQUIRE(path);
  SANDLET_REQUIRE(out);
  return guard([&] {
    if (!*path || path[0] != '/')
      throw sandlet::Error(sandlet::Code::kInvalidArgument, "audit reader: 'path' must be an absolute path");
    sandlet::AuditFilter f;
    if (filter) {
      using T = sandlet_audit_filter_t;
      const T& o = *filter;
      sandlet::capi::check_options_size(o, "sandlet_audit_filter_t", "SANDLET_AUDIT_FILTER_INIT");
      if (const char* id = sandlet::capi::field_or(o, &T::sandbox, nullptr)) f.sandbox = id;
      const char* const* labels = sandlet::capi::field_or(o, &T::labels, nullptr);
      const size_t n = sandlet::capi::field_or(o, &T::n_labels, size_t{0});
      if (n && !labels)
        throw sandlet::Error(sandlet::Code::kInvalidArgument, "invalid audit filter field 'labels': NULL with n_labels > 0");
      for (size_t i = 0; i < n; ++i) {
        const std::string kv = labels[i] ? labels[i] : "";
        const size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0)
          throw sandlet::Error(sandlet::Code::kInvalidArgument,
                               "invalid audit filter field 'labels[" + std::to_string(i) + "]': '" + kv +
                                   "' is not KEY=VALUE");
        f.labels[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
      const double since = sandlet::capi::field_or(o, &T::since, 0.0);
      if (!(since >= 0))
        throw sandlet::Error(sandlet::Code::kInvalidArgument, "invalid audit filter field 'since': must be >= 0");
      f.since = since;
    }
    auto r = std::make_unique<sandlet_audit_reader>();
    r->reader = std::make_unique<sandlet::AuditReader>(path, std::move(f));
    *out = r.release();
  });
}

SANDLET_API sandlet_error_t* sandlet_audit_reader_next(sandlet_audit_reader_t* reader, char** line) {
  SANDLET_REQUIRE(reader);
  SANDLET_REQUIRE(line);
  return guard([&] {
    std::string text;
    *line = reader->reader->next(&text) ? sandlet::capi::dup_string(text) : nullptr;
  });
}

SANDLET_API void sandlet_audit_reader_close(sandlet_audit_reader_t* reader) { delete reader; }

}  // extern "C"
