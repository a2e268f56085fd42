// sandlet_run: the one-shot run (see sandlet.h and runtime/run_once.cpp).
#include <cstddef>

#include "handles.hpp"

using sandlet::capi::guard;

namespace {

sandlet::RunOnceParams to_params(const sandlet_run_options_t* o) {
  using sandlet::Code;
  using sandlet::Error;
  // Every field so far is the first version's: a later one adding fields accepts this size too.
  if (o->size < offsetof(sandlet_run_options_t, cancel_fd) + sizeof(int))
    throw Error(Code::kInvalidArgument, "sandlet_run_options_t.size is too small (use SANDLET_RUN_OPTIONS_INIT)");
  if (!o->argv || !o->argv[0]) throw Error(Code::kInvalidArgument, "invalid run field 'argv': a command is required");
  sandlet::RunOnceParams p;
  for (auto a = o->argv; *a; ++a) p.argv.emplace_back(*a);
  if (o->env)
    for (auto e = o->env; *e; ++e) p.env.emplace_back(*e);
  if (o->cwd) p.cwd = o->cwd;
  if (o->user) p.user = o->user;
  p.timeout_s = o->timeout_s;
  p.stdio[0] = o->stdin_fd;
  p.stdio[1] = o->stdout_fd;
  p.stdio[2] = o->stderr_fd;
  p.cancel_fd = o->cancel_fd;
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
    rt->rt->run_once_async(spec->spec, to_params(opts), [cb, user_data](std::exception_ptr error, sandlet::ExecOutcome out) {
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
    result->outcome = rt->rt->run_once(spec->spec, to_params(opts));
    *out = result.release();
  });
}
