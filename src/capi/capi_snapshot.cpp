// C shims for snapshots and forks (the Snapshots service, runtime/snapshot/snapshots.hpp).
#include <boost/json.hpp>

#include "capi/handles.hpp"
#include "capi/options.hpp"

using sandlet::capi::check_options_size;
using sandlet::capi::field_or;
using sandlet::capi::guard;

struct sandlet_fork_result {
  std::string snapshot_json;
  std::vector<std::shared_ptr<sandlet::Sandbox>> children;
  std::vector<sandlet_error_t*> errors;
  ~sandlet_fork_result() {
    for (auto* e : errors) sandlet_error_delete(e);
  }
};

namespace {

std::vector<std::string> strings(const char* const* v, size_t n, const char* field) {
  if (n && !v) throw sandlet::Error(sandlet::Code::kInvalidArgument, std::string("argument '") + field + "' is NULL with a count of " + std::to_string(n));
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    if (!v[i]) throw sandlet::Error(sandlet::Code::kInvalidArgument, std::string(field) + "[" + std::to_string(i) + "] is NULL");
    out.emplace_back(v[i]);
  }
  return out;
}

sandlet::SnapshotOptions snapshot_options(const sandlet_snapshot_options_t* opts) {
  sandlet::SnapshotOptions o;
  if (!opts) return o;
  using T = sandlet_snapshot_options_t;
  check_options_size(*opts, "sandlet_snapshot_options_t", "SANDLET_SNAPSHOT_OPTIONS_INIT");
  o.exclude = strings(field_or(*opts, &T::exclude, nullptr), field_or(*opts, &T::n_exclude, 0), "exclude");
  o.default_excludes = !field_or(*opts, &T::no_default_excludes, 0);
  o.full = field_or(*opts, &T::full, 0) != 0;
  if (const char* name = field_or(*opts, &T::name, nullptr)) o.name = name;
  o.max_depth = field_or(*opts, &T::max_depth, 0);
  if (o.max_depth == 1) throw sandlet::Error(sandlet::Code::kInvalidArgument, "invalid snapshot option 'max_depth': must be 0 or >= 2");
  return o;
}

sandlet::ForkOptions fork_options(const sandlet_fork_options_t* opts) {
  using T = sandlet_fork_options_t;
  check_options_size(*opts, "sandlet_fork_options_t", "SANDLET_FORK_OPTIONS_INIT");
  sandlet::ForkOptions o;
  o.n = field_or(*opts, &T::n, 1);
  for (const auto& kv : strings(field_or(*opts, &T::labels, nullptr), field_or(*opts, &T::n_labels, 0), "labels")) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos)
      throw sandlet::Error(sandlet::Code::kInvalidArgument, "invalid fork label '" + kv.substr(0, 100) + "': expected KEY=VALUE");
    o.labels[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  o.exclude = strings(field_or(*opts, &T::exclude, nullptr), field_or(*opts, &T::n_exclude, 0), "exclude");
  o.copy_secrets = field_or(*opts, &T::copy_secrets, 0) != 0;
  o.detached = field_or(*opts, &T::detached, 0) != 0;
  o.max_depth = field_or(*opts, &T::max_depth, 0);
  if (o.max_depth == 1) throw sandlet::Error(sandlet::Code::kInvalidArgument, "invalid fork option 'max_depth': must be 0 or >= 2");
  return o;
}

}  // namespace

namespace sandlet::capi {

std::string snapshot_result_json(const sandlet::SnapshotResult& r) {
  boost::json::object o;
  o["layer"] = boost::json::parse(r.layer.to_json());
  o["existed"] = r.existed;
  o["frozen_ns"] = r.frozen_ns;
  o["total_ns"] = r.total_ns;
  o["entries"] = r.entries;
  o["bytes"] = r.bytes;
  o["flattened"] = r.flattened;
  return boost::json::serialize(o);
}

sandlet_fork_result_t* wrap_fork(sandlet::ForkResult&& r) {
  auto out = std::make_unique<sandlet_fork_result>();
  out->snapshot_json = snapshot_result_json(r.snapshot);
  out->children = std::move(r.children);
  for (auto& e : r.errors) out->errors.push_back(e ? error_from(e) : nullptr);
  return out.release();
}

}  // namespace sandlet::capi

extern "C" {

SANDLET_API sandlet_error_t* sandlet_sandbox_snapshot(sandlet_sandbox_t* sb, const sandlet_snapshot_options_t* opts,
                                                      char** result_json) {
  SANDLET_REQUIRE_HANDLE(sb);
  return guard([&] {
    sandlet::SnapshotResult r = sb->sb->snapshot(snapshot_options(opts));
    if (result_json) *result_json = sandlet::capi::dup_string(sandlet::capi::snapshot_result_json(r));
  });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_snapshot_async(sandlet_sandbox_t* sb, const sandlet_snapshot_options_t* opts,
                                                            sandlet_json_cb cb, void* user_data) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(cb);
  return guard([&] {
    sandlet::SnapshotOptions o = snapshot_options(opts);
    std::shared_ptr<sandlet::Sandbox> box = sb->sb;
    box->blocking_async([box, o] { return sandlet::capi::snapshot_result_json(box->snapshot(o)); },
                    [cb, user_data](std::exception_ptr err, std::string json) {
                      if (err) return cb(user_data, sandlet::capi::error_from(err), nullptr);
                      char* out = nullptr;
                      try {
                        out = sandlet::capi::dup_string(json);
                      } catch (...) {
                        return cb(user_data, sandlet::capi::current_error(), nullptr);
                      }
                      cb(user_data, nullptr, out);
                    });
  });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_fork(sandlet_sandbox_t* sb, const sandlet_fork_options_t* opts,
                                                  sandlet_fork_result_t** out) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(opts);
  SANDLET_REQUIRE(out);
  return guard([&] { *out = sandlet::capi::wrap_fork(sb->sb->fork(fork_options(opts))); });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_fork_async(sandlet_sandbox_t* sb, const sandlet_fork_options_t* opts,
                                                        sandlet_fork_cb cb, void* user_data) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(opts);
  SANDLET_REQUIRE(cb);
  return guard([&] {
    sandlet::ForkOptions o = fork_options(opts);
    std::shared_ptr<sandlet::Sandbox> box = sb->sb;
    auto result = std::make_shared<sandlet::ForkResult>();
    box->blocking_async(
        [box, o, result] {
          *result = box->fork(o);
          return std::string();
        },
        [cb, user_data, result](std::exception_ptr err, std::string) {
          if (err) return cb(user_data, sandlet::capi::error_from(err), nullptr);
          sandlet_fork_result_t* r = nullptr;
          try {
            r = sandlet::capi::wrap_fork(std::move(*result));
          } catch (...) {
            return cb(user_data, sandlet::capi::current_error(), nullptr);
          }
          cb(user_data, nullptr, r);
        });
  });
}

SANDLET_API sandlet_error_t* sandlet_snapshot_fork(sandlet_runtime_t* rt, const char* snapshot, const sandlet_spec_t* base,
                                                   const sandlet_fork_options_t* opts, sandlet_fork_result_t** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(snapshot);
  SANDLET_REQUIRE(opts);
  SANDLET_REQUIRE(out);
  return guard([&] {
    sandlet::Spec spec = base ? base->spec : sandlet::Spec{};
    *out = sandlet::capi::wrap_fork(rt->rt->fork_snapshot(snapshot, spec, fork_options(opts)));
  });
}

SANDLET_API size_t sandlet_fork_result_count(const sandlet_fork_result_t* r) { return r ? r->children.size() : 0; }

SANDLET_API sandlet_sandbox_t* sandlet_fork_result_take(sandlet_fork_result_t* r, size_t i) {
  if (!r || i >= r->children.size() || !r->children[i]) return nullptr;
  try {
    auto* h = new sandlet_sandbox{std::move(r->children[i]), {}};
    r->children[i].reset();
    return h;
  } catch (...) {
    return nullptr;
  }
}

SANDLET_API const sandlet_error_t* sandlet_fork_result_error(const sandlet_fork_result_t* r, size_t i) {
  return r && i < r->errors.size() ? r->errors[i] : nullptr;
}

SANDLET_API const char* sandlet_fork_result_snapshot_json(const sandlet_fork_result_t* r) {
  return r ? r->snapshot_json.c_str() : "";
}

SANDLET_API void sandlet_fork_result_delete(sandlet_fork_result_t* r) { delete r; }

}  // extern "C"
