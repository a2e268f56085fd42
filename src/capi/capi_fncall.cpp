// C ABI shims of FnCall (include/sandlet/sandlet_fncall.h) over runtime/fncall/fncall_pool.hpp.
#include "sandlet/sandlet_fncall.h"

#include <map>
#include <memory>
#include <mutex>

#include "capi/fncall_registry.hpp"
#include "capi/handles.hpp"
#include "capi/options.hpp"
#include "runtime/fncall/fncall_pool.hpp"

using sandlet::Code;
using sandlet::Error;
using sandlet::capi::check_options_size;
using sandlet::capi::field_or;
using sandlet::capi::guard;

namespace {

std::mutex g_mutex;
std::map<sandlet_runtime*, std::shared_ptr<sandlet::FncallPools>> g_pools;

std::shared_ptr<sandlet::FncallPools> pools_of(sandlet_runtime* rt) {
  std::lock_guard lock(g_mutex);
  auto& p = g_pools[rt];
  if (!p) p = std::make_shared<sandlet::FncallPools>(rt->rt);
  return p;
}

struct ExecOutcomeHolder {
  sandlet::ExecOutcome out;
};

std::vector<std::string> strings(const char* const* v) {
  std::vector<std::string> out;
  for (; v && *v; ++v) out.emplace_back(*v);
  return out;
}

sandlet::CallRequest request_of(const sandlet_call_options_t* opts) {
  if (!opts) throw Error(Code::kInvalidArgument, "argument 'opts' must not be NULL");
  const auto& o = *opts;
  check_options_size(o, "sandlet_call_options_t", "SANDLET_CALL_OPTIONS_INIT");
  sandlet::CallRequest r;
  if (auto* e = field_or(o, &sandlet_call_options_t::environment, nullptr)) r.environment = e;
  if (auto* s = field_or(o, &sandlet_call_options_t::spec_json, nullptr)) r.spec_json = s;
  r.argv = strings(field_or(o, &sandlet_call_options_t::argv, nullptr));
  if (auto* s = field_or(o, &sandlet_call_options_t::script, nullptr)) r.script = s;
  r.env = strings(field_or(o, &sandlet_call_options_t::env, nullptr));
  const void* in = field_or(o, &sandlet_call_options_t::stdin_data, nullptr);
  const size_t in_len = field_or(o, &sandlet_call_options_t::stdin_len, 0);
  if (in_len && !in) throw Error(Code::kInvalidArgument, "invalid call field 'stdin_data': NULL with stdin_len > 0");
  if (in) r.stdin_data.assign(static_cast<const char*>(in), in_len);
  r.timeout_s = field_or(o, &sandlet_call_options_t::timeout_s, 0.0);
  r.output_limit = field_or(o, &sandlet_call_options_t::output_limit, 0);
  r.cpus = field_or(o, &sandlet_call_options_t::cpus, 0.0);
  r.memory = field_or(o, &sandlet_call_options_t::memory, 0);
  r.pids = field_or(o, &sandlet_call_options_t::pids, 0);
  sandlet::check_call_request(r);
  return r;
}

}  // namespace

namespace sandlet::capi {

void fncall_forget(sandlet_runtime* rt) noexcept {
  std::shared_ptr<FncallPools> p;
  {
    std::lock_guard lock(g_mutex);
    auto it = g_pools.find(rt);
    if (it == g_pools.end()) return;
    p = std::move(it->second);
    g_pools.erase(it);
  }
  try {
    p->stop();
  } catch (...) {
  }
}

}  // namespace sandlet::capi

SANDLET_API sandlet_error_t* sandlet_call(sandlet_runtime_t* rt, const sandlet_call_options_t* opts,
                                          sandlet_exec_result_t** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  *out = nullptr;
  return guard([&] {
    rt->rt->check_not_on_loop("sandlet_call");
    auto req = request_of(opts);
    auto result = pools_of(rt)->call(req);
    auto* r = new sandlet_exec_result;
    r->outcome = std::move(result.out);
    *out = r;
  });
}

SANDLET_API sandlet_error_t* sandlet_call_async(sandlet_runtime_t* rt, const sandlet_call_options_t* opts,
                                                sandlet_exec_cb cb, void* user_data) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(cb);
  return guard([&] {
    auto req = request_of(opts);
    auto pools = pools_of(rt);
    auto result = std::make_shared<ExecOutcomeHolder>();
    rt->rt->long_call(
        [pools, req, result] {
          result->out = pools->call(req).out;
          return std::string();
        },
        [cb, user_data, result](std::exception_ptr error, std::string) {
          sandlet::capi::complete_exec(cb, user_data, error, std::move(result->out));
        });
  });
}

SANDLET_API sandlet_error_t* sandlet_runtime_set_fncall_pool(sandlet_runtime_t* rt, const char* environment,
                                                             const sandlet_fncall_pool_options_t* opts) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(environment);
  SANDLET_REQUIRE(opts);
  return guard([&] {
    const auto& o = *opts;
    check_options_size(o, "sandlet_fncall_pool_options_t", "SANDLET_FNCALL_POOL_OPTIONS_INIT");
    sandlet::FncallPoolOptions p;
    p.min_idle = field_or(o, &sandlet_fncall_pool_options_t::min_idle, 0);
    p.max_size = field_or(o, &sandlet_fncall_pool_options_t::max_size, 8);
    const char* reuse = field_or(o, &sandlet_fncall_pool_options_t::reuse, nullptr);
    const std::string r = reuse ? reuse : "reset";
    if (r != "reset" && r != "replace")
      throw Error(Code::kInvalidArgument, "invalid fncall pool field 'reuse': '" + r + "' (reset or replace)");
    p.reuse_reset = r == "reset";
    p.freeze_after_s = field_or(o, &sandlet_fncall_pool_options_t::freeze_after_s, 30.0);
    p.destroy_frozen_after_s = field_or(o, &sandlet_fncall_pool_options_t::destroy_frozen_after_s, 300.0);
    pools_of(rt)->set_options(environment, p);
  });
}

SANDLET_API sandlet_error_t* sandlet_runtime_fncall_stats_json(sandlet_runtime_t* rt, char** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(out);
  *out = nullptr;
  return guard([&] { *out = sandlet::capi::dup_string(pools_of(rt)->stats_json()); });
}
