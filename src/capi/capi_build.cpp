// C ABI: builds from a recipe (src/recipe), synchronous and on a thread of their own.
#include <memory>

#include "recipe/build_network.hpp"
#include "recipe/builder.hpp"
#include "capi/handles.hpp"
#include "capi/options.hpp"

using sandlet::capi::check_options_size;
using sandlet::capi::field_or;
using sandlet::capi::guard;

namespace {

// The C options as owned C++ values (the caller's memory may go away once the call returns).
sandlet::build::BuildOptions to_options(const char* recipe, const char* context, const sandlet_build_options_t* opts) {
  using sandlet::Code;
  using sandlet::Error;
  sandlet::build::BuildOptions o;
  o.recipe = recipe;
  o.context = context;
  if (!opts) return o;
  using T = sandlet_build_options_t;
  check_options_size(*opts, "sandlet_build_options_t", "SANDLET_BUILD_OPTIONS_INIT");
  o.no_cache = field_or(*opts, &T::no_cache, 0) != 0;
  if (const char* tag = field_or(*opts, &T::tag, nullptr)) o.tag = tag;
  if (const char* const* args = field_or(*opts, &T::build_args, nullptr)) {
    for (auto a = args; *a; ++a) {
      std::string kv = *a;
      size_t eq = kv.find('=');
      if (eq == 0 || eq == std::string::npos)
        throw Error(Code::kInvalidArgument, "invalid build field 'build_args': '" + kv + "' is not NAME=VALUE");
      o.build_args[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  if (const char* const* secrets = field_or(*opts, &T::secrets, nullptr))
    for (auto sp = secrets; *sp; ++sp) o.secrets.emplace_back(*sp);
  if (const char* network = field_or(*opts, &T::network, nullptr)) o.network = sandlet::build::parse_build_network(network);
  o.cancel_fd = field_or(*opts, &T::cancel_fd, -1);
  o.default_excludes = field_or(*opts, &T::no_default_excludes, 0) == 0;
  if (sandlet_build_progress_fn fn = field_or(*opts, &T::progress, nullptr)) {
    void* ud = field_or(*opts, &T::progress_user_data, nullptr);
    o.progress = [fn, ud](const sandlet::build::BuildEvent& e) {
      std::string text(e.text);  // NUL-terminated for C
      sandlet_build_event_t ev{};
      ev.size = sizeof ev;
      ev.step = static_cast<uint32_t>(e.step);
      ev.steps = static_cast<uint32_t>(e.steps);
      ev.line = static_cast<uint32_t>(e.line);
      ev.text = text.c_str();
      ev.data = e.data.data();
      ev.len = e.data.size();
      ev.stream = e.stream;
      ev.cached = e.cached ? 1 : 0;
      fn(ud, &ev);
    };
  }
  return o;
}

}  // namespace

extern "C" {

SANDLET_API sandlet_error_t* sandlet_build(sandlet_runtime_t* rt, const char* recipe_path, const char* context_dir,
                                           const sandlet_build_options_t* opts, char** result_json) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(recipe_path);
  SANDLET_REQUIRE(context_dir);
  return guard([&] {
    auto result = sandlet::build::build(*rt->rt, to_options(recipe_path, context_dir, opts));
    if (result_json) *result_json = sandlet::capi::dup_string(result.to_json());
  });
}

SANDLET_API sandlet_error_t* sandlet_build_async(sandlet_runtime_t* rt, const char* recipe_path,
                                                 const char* context_dir, const sandlet_build_options_t* opts,
                                                 sandlet_build_cb cb, void* user_data) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(recipe_path);
  SANDLET_REQUIRE(context_dir);
  SANDLET_REQUIRE(cb);
  return guard([&] {
    auto options = std::make_shared<sandlet::build::BuildOptions>(to_options(recipe_path, context_dir, opts));
    std::shared_ptr<sandlet::Runtime> runtime = rt->rt;
    rt->builds->start([runtime, options, cb, user_data](const std::atomic<bool>& stop) {
      options->stop = &stop;
      sandlet_error_t* err = nullptr;
      char* json = nullptr;
      try {
        json = sandlet::capi::dup_string(sandlet::build::build(*runtime, *options).to_json());
      } catch (...) {
        err = sandlet::capi::current_error();
      }
      cb(user_data, err, json);
    });
  });
}

}  // extern "C"
