// sandlet_run: the one-shot run (see sandlet.h and runtime/run_once.cpp).
#include "capi/handles.hpp"
#include "capi/options.hpp"

using sandlet::capi::check_options_size;
using sandlet::capi::field_or;
using sandlet::capi::guard;

namespace {

sandlet::RunOnceParams to_params(const sandlet_run_options_t& o) {
  using sandlet::Code;
  using sandlet::Error;
  using T = sandlet_run_options_t;
  check_options_size(o, "sandlet_run_options_t", "SANDLET_RUN_OPTIONS_INIT");
  const char* const* argv = field_or(o, &T::argv, nullptr);
  if (!argv || !argv[0]) throw Error(Code::kInvalidArgument, "invalid run field 'argv': a command is required");
  sandlet::RunOnceParams p;
  for (auto a = argv; *a; ++a) p.argv.emplace_back(*a);
  if (const char* const* env = field_or(o, &T::env, nullptr))
    for (auto e = env; *e; ++e) p.env.emplace_back(*e);
  if (const char* cwd = field_or(o, &T::cwd, nullptr)) p.cwd = cwd;
  if (const char* user = field_or(o, &T::user, nullptr)) p.user = user;
  p.timeout_s = field_or(o, &T::timeout_s, 0.0);
  // A descriptor the caller's struct does not have is -1 (/dev/null, no cancel), never 0 (its stdin).
  p.stdio[0] = field_or(o, &T::stdin_fd, -1);
  p.stdio[1] = field_or(o, &T::stdout_fd, -1);
  p.stdio[2] = field_or(o, &T::stderr_fd, -1);
  p.cancel_fd = field_or(o, &T::cancel_fd, -1);
  return p;
}

}  // namespace

SANDLET_API sandlet_error_t* sandlet_run_async(sandlet_runtime_t* rt, const sandlet_spec_t* spec,
                                               const sandlet_run_options_t* opts, sandlet_exec_cb cb,
                                               void* user_data) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(spec);
  SANDLET_REQUIRE(opts);
  SANDLET_REQUIRE(cb);
  return guard([&] {
    rt->rt->run_once_async(spec->spec, to_params(*opts), [cb, user_data](std::exception_ptr error, sandlet::ExecOutcome out) {
      sandlet::capi::complete_exec(cb, user_data, std::move(error), std::move(out));
    });
  });
}

SANDLET_API sandlet_error_t* sandlet_run(sandlet_runtime_t* rt, const sandlet_spec_t* spec,
                                         const sandlet_run_options_t* opts, sandlet_exec_result_t** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(spec);
  SANDLET_REQUIRE(opts);
  SANDLET_REQUIRE(out);
  return guard([&] {
    auto result = std::make_unique<sandlet_exec_result>();
    result->outcome = rt->rt->run_once(spec->spec, to_params(*opts));
    *out = result.release();
  });
}
