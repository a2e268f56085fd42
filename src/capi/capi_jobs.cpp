// C ABI: pause and resume of many sandboxes by label or id (sandlet_jobs.h).
#include "sandlet/sandlet_jobs.h"

#include <boost/json.hpp>

#include "capi/handles.hpp"

using sandlet::capi::guard;

namespace {

std::string result_json(const sandlet::JobPauseResult& r, bool pause) {
  boost::json::array failed;
  for (const auto& [id, error] : r.failed) failed.push_back({{"id", id}, {"error", error}});
  boost::json::object o;
  o["matched"] = r.matched;
  o[pause ? "paused" : "resumed"] = r.changed;
  o["already"] = r.already;
  o["failed"] = std::move(failed);
  o["reclaimed_bytes"] = r.reclaimed_bytes;
  o["elapsed_ns"] = r.elapsed_ns;
  return boost::json::serialize(o);
}

sandlet_error_t* by_selector(sandlet_runtime_t* rt, const char* selector, char** out, bool pause) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  SANDLET_REQUIRE(selector);
  return guard([&] {
    if (!*selector)
      throw sandlet::Error(sandlet::Code::kInvalidArgument, "invalid field 'label_selector': must not be empty");
    *out = sandlet::capi::dup_string(result_json(rt->rt->pause_jobs(selector, {}, pause), pause));
  });
}

sandlet_error_t* by_ids(sandlet_runtime_t* rt, const char* const* ids, size_t n, char** out, bool pause) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  SANDLET_REQUIRE(ids || n == 0);
  return guard([&] {
    std::vector<std::string> list;
    for (size_t i = 0; i < n; ++i) {
      if (!ids[i]) throw sandlet::Error(sandlet::Code::kInvalidArgument, "invalid field 'ids': entry is NULL");
      list.emplace_back(ids[i]);
    }
    if (list.empty()) throw sandlet::Error(sandlet::Code::kInvalidArgument, "invalid field 'ids': no id given");
    *out = sandlet::capi::dup_string(result_json(rt->rt->pause_jobs("", list, pause), pause));
  });
}

}  // namespace

extern "C" {

SANDLET_API sandlet_error_t* sandlet_runtime_pause(sandlet_runtime_t* rt, const char* label_selector, char** out_json) {
  return by_selector(rt, label_selector, out_json, true);
}
SANDLET_API sandlet_error_t* sandlet_runtime_resume(sandlet_runtime_t* rt, const char* label_selector, char** out_json) {
  return by_selector(rt, label_selector, out_json, false);
}
SANDLET_API sandlet_error_t* sandlet_runtime_pause_ids(sandlet_runtime_t* rt, const char* const* ids, size_t n,
                                                       char** out_json) {
  return by_ids(rt, ids, n, out_json, true);
}
SANDLET_API sandlet_error_t* sandlet_runtime_resume_ids(sandlet_runtime_t* rt, const char* const* ids, size_t n,
                                                        char** out_json) {
  return by_ids(rt, ids, n, out_json, false);
}

}  // extern "C"
