// C ABI: sandboxes, exec, files.
#include <boost/asio/post.hpp>

#include "capi/handles.hpp"

#include "capi/options.hpp"

using sandlet::capi::check_options_size;
using sandlet::capi::field_or;
using sandlet::capi::guard;

namespace {

// Copies the C options into owned C++ values (the caller's memory may go away after the call returns).
sandlet::ExecParams to_params(const sandlet_exec_options_t& o) {
  using sandlet::Code;
  using sandlet::Error;
  using T = sandlet_exec_options_t;
  check_options_size(o, "sandlet_exec_options_t", "SANDLET_EXEC_OPTIONS_INIT");
  const char* const* argv = field_or(o, &T::argv, nullptr);
  if (!argv || !argv[0]) throw Error(Code::kInvalidArgument, "invalid exec field 'argv': a command is required");
  sandlet::ExecParams p;
  for (auto a = argv; *a; ++a) p.argv.emplace_back(*a);
  if (const char* const* env = field_or(o, &T::env, nullptr))
    for (auto e = env; *e; ++e) p.env.emplace_back(*e);
  if (const char* cwd = field_or(o, &T::cwd, nullptr)) p.cwd = cwd;
  if (const char* user = field_or(o, &T::user, nullptr)) p.user = user;
  const void* stdin_data = field_or(o, &T::stdin_data, nullptr);
  const size_t stdin_len = field_or(o, &T::stdin_len, 0);
  if (stdin_data && stdin_len) p.stdin_data.assign(static_cast<const char*>(stdin_data), stdin_len);
  p.timeout_s = field_or(o, &T::timeout_s, 0.0);
  p.output_limit = field_or(o, &T::output_limit, 0);
  p.kill_on_output_limit = field_or(o, &T::kill_on_output_limit, 0) != 0;
  p.keep_background = field_or(o, &T::keep_background, 0) != 0;
  p.toolkit = field_or(o, &T::toolkit, 0) != 0;
  p.stdin_stream = field_or(o, &T::stdin_stream, 0) != 0;
  p.tty = field_or(o, &T::tty, 0) != 0;
  const uint32_t rows = field_or(o, &T::tty_rows, 0), cols = field_or(o, &T::tty_cols, 0);
  if (rows || cols) {
    p.tty_rows = rows ? rows : 24;
    p.tty_cols = cols ? cols : 80;
  }
  if (field_or(o, &T::reserved, 0) != 0)
    throw sandlet::Error(sandlet::Code::kInvalidArgument, "invalid sandlet_exec_options_t: 'reserved' must be 0");
  if (sandlet_output_cb cb = field_or(o, &T::on_output, nullptr)) {
    void* ud = field_or(o, &T::output_user_data, nullptr);
    p.on_output = [cb, ud](int stream, std::string_view data) { cb(ud, stream, data.data(), data.size()); };
  }
  return p;
}

sandlet_sandbox_t* wrap(std::shared_ptr<sandlet::Sandbox> sb) {
  auto* h = new sandlet_sandbox;
  h->sb = std::move(sb);
  return h;
}

}  // namespace

extern "C" {

SANDLET_API sandlet_error_t* sandlet_sandbox_create(sandlet_runtime_t* rt, const sandlet_spec_t* spec,
                                                    sandlet_sandbox_t** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(spec);
  SANDLET_REQUIRE(out);
  return guard([&] {
    auto sb = rt->rt->create(spec->spec);
    *out = wrap(std::move(sb));
  });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_create_async(sandlet_runtime_t* rt, const sandlet_spec_t* spec,
                                                          sandlet_create_cb cb, void* user_data) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(spec);
  SANDLET_REQUIRE(cb);
  return guard([&] {
    rt->rt->create_async(spec->spec, [cb, user_data](std::exception_ptr error, std::shared_ptr<sandlet::Sandbox> sb) {
      if (error) {
        cb(user_data, sandlet::capi::error_from(error), nullptr);
        return;
      }
      sandlet_sandbox_t* handle = nullptr;
      try {
        handle = wrap(std::move(sb));
      } catch (...) {
        cb(user_data, sandlet::capi::current_error(), nullptr);
        return;
      }
      cb(user_data, nullptr, handle);
    });
  });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_attach(sandlet_runtime_t* rt, const char* id, sandlet_sandbox_t** out) {
  SANDLET_REQUIRE_HANDLE(rt);
  SANDLET_REQUIRE(id);
  SANDLET_REQUIRE(out);
  return guard([&] { *out = wrap(rt->rt->attach(id)); });
}

SANDLET_API const char* sandlet_sandbox_id(const sandlet_sandbox_t* sb) { return sb ? sb->sb->id().c_str() : ""; }

SANDLET_API sandlet_error_t* sandlet_sandbox_destroy(sandlet_sandbox_t* sb) {
  SANDLET_REQUIRE_HANDLE(sb);
  return guard([&] { sb->sb->destroy(); });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_destroy_async(sandlet_sandbox_t* sb,
                                                           void (*cb)(void* user_data, sandlet_error_t* err),
                                                           void* user_data) {
  SANDLET_REQUIRE_HANDLE(sb);
  return guard([&] {
    sb->sb->destroy_async([cb, user_data](std::exception_ptr error) {
      sandlet_error_t* err = error ? sandlet::capi::error_from(error) : nullptr;
      if (cb)
        cb(user_data, err);
      else
        sandlet_error_delete(err);
    });
  });
}

SANDLET_API void sandlet_sandbox_close(sandlet_sandbox_t* sb) {
  if (sb && sb->opened.forked()) return;  // a fork()ed child leaks it (see handles.hpp)
  delete sb;
}

SANDLET_API sandlet_error_t* sandlet_sandbox_info_json(sandlet_sandbox_t* sb, char** out) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(out);
  return guard([&] { *out = sandlet::capi::dup_string(sb->sb->info_json()); });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_pause(sandlet_sandbox_t* sb) {
  SANDLET_REQUIRE_HANDLE(sb);
  return guard([&] { sb->sb->pause(); });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_net_update(sandlet_sandbox_t* sb, const char* policy_json) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(policy_json);
  return guard([&] { sb->sb->net_update(policy_json); });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_net_stats_json(sandlet_sandbox_t* sb, char** out) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(out);
  return guard([&] { *out = sandlet::capi::dup_string(sb->sb->net_stats_json()); });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_seccomp_stats_json(sandlet_sandbox_t* sb, char** out) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(out);
  return guard([&] { *out = sandlet::capi::dup_string(sb->sb->seccomp_stats_json()); });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_resume(sandlet_sandbox_t* sb) {
  SANDLET_REQUIRE_HANDLE(sb);
  return guard([&] { sb->sb->resume(); });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_exec(sandlet_sandbox_t* sb, const sandlet_exec_options_t* opts,
                                                  sandlet_exec_result_t** out) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(opts);
  SANDLET_REQUIRE(out);
  return guard([&] {
    auto result = std::make_unique<sandlet_exec_result>();
    result->outcome = sb->sb->exec(to_params(*opts));
    *out = result.release();
  });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_exec_start(sandlet_sandbox_t* sb, const sandlet_exec_options_t* opts,
                                                        sandlet_exec_cb cb, void* user_data,
                                                        sandlet_exec_control_t** control) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(opts);
  SANDLET_REQUIRE(cb);
  return guard([&] {
    sandlet::ExecParams params = to_params(*opts);
    if (params.stdin_stream && !control)
      throw sandlet::Error(sandlet::Code::kInvalidArgument,
                           "invalid exec field 'stdin_stream': only with a control handle to write it through "
                           "(sandlet_sandbox_exec_start)");
    // Allocated first: once the exec is started, nothing here may fail any more.
    std::unique_ptr<sandlet_exec_control> handle(
        control ? new sandlet_exec_control{sandlet::ExecControl({}, false, false)} : nullptr);
    auto started = sb->sb->exec_async(std::move(params), [cb, user_data](std::exception_ptr error, sandlet::ExecOutcome outcome) {
      sandlet::capi::complete_exec(cb, user_data, std::move(error), std::move(outcome));
    });
    if (handle) {
      handle->control = started;
      *control = handle.release();
    }
  });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_exec_async(sandlet_sandbox_t* sb, const sandlet_exec_options_t* opts,
                                                        sandlet_exec_cb cb, void* user_data) {
  return sandlet_sandbox_exec_start(sb, opts, cb, user_data, nullptr);
}

SANDLET_API sandlet_error_t* sandlet_exec_control_signal(sandlet_exec_control_t* control, int signo) {
  SANDLET_REQUIRE(control);
  return guard([&] { control->control.signal(signo); });
}

SANDLET_API void sandlet_exec_control_cancel(sandlet_exec_control_t* control) {
  if (!control) return;
  try {
    control->control.cancel();
  } catch (...) {
  }
}

SANDLET_API sandlet_error_t* sandlet_exec_control_write_stdin(sandlet_exec_control_t* control, const void* data,
                                                              size_t len) {
  SANDLET_REQUIRE(control);
  SANDLET_REQUIRE(data || len == 0);
  return guard([&] { control->control.write_stdin(std::string_view(static_cast<const char*>(data), len)); });
}

SANDLET_API void sandlet_exec_control_close_stdin(sandlet_exec_control_t* control) {
  if (!control) return;
  try {
    control->control.close_stdin();
  } catch (...) {
  }
}

SANDLET_API sandlet_error_t* sandlet_exec_control_resize(sandlet_exec_control_t* control, uint32_t rows,
                                                         uint32_t cols) {
  SANDLET_REQUIRE(control);
  return guard([&] { control->control.resize(rows, cols); });
}

SANDLET_API void sandlet_exec_control_delete(sandlet_exec_control_t* control) { delete control; }

SANDLET_API int sandlet_exec_result_exit_code(const sandlet_exec_result_t* r) { return r ? r->outcome.exit_code : -1; }
SANDLET_API int sandlet_exec_result_signal(const sandlet_exec_result_t* r) { return r ? r->outcome.signal : 0; }
SANDLET_API int sandlet_exec_result_timed_out(const sandlet_exec_result_t* r) { return r && r->outcome.timed_out; }
SANDLET_API const char* sandlet_exec_result_stdout(const sandlet_exec_result_t* r, size_t* len) {
  if (len) *len = r ? r->outcome.stdout_data.size() : 0;
  return r ? r->outcome.stdout_data.c_str() : "";
}
SANDLET_API const char* sandlet_exec_result_stderr(const sandlet_exec_result_t* r, size_t* len) {
  if (len) *len = r ? r->outcome.stderr_data.size() : 0;
  return r ? r->outcome.stderr_data.c_str() : "";
}
SANDLET_API int sandlet_exec_result_stdout_truncated(const sandlet_exec_result_t* r) {
  return r && r->outcome.stdout_truncated;
}
SANDLET_API int sandlet_exec_result_stderr_truncated(const sandlet_exec_result_t* r) {
  return r && r->outcome.stderr_truncated;
}
SANDLET_API uint64_t sandlet_exec_result_duration_ns(const sandlet_exec_result_t* r) {
  return r ? r->outcome.duration_ns : 0;
}
SANDLET_API uint64_t sandlet_exec_result_run_ns(const sandlet_exec_result_t* r) { return r ? r->outcome.run_ns : 0; }
SANDLET_API void sandlet_exec_result_delete(sandlet_exec_result_t* r) { delete r; }

SANDLET_API sandlet_error_t* sandlet_sandbox_write_file(sandlet_sandbox_t* sb, const char* path, const void* data,
                                                        size_t len, uint32_t mode) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(path);
  if (len && !data) return sandlet::capi::null_arg("data");
  return guard([&] { sb->sb->write_file(path, std::string(static_cast<const char*>(data), len), mode); });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_read_file(sandlet_sandbox_t* sb, const char* path, uint64_t max_bytes,
                                                       void** data, size_t* len) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(path);
  SANDLET_REQUIRE(data);
  SANDLET_REQUIRE(len);
  return guard([&] {
    std::string content = sb->sb->read_file(path, max_bytes);
    *data = sandlet::capi::dup_string(content);
    *len = content.size();
  });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_write_file_async(sandlet_sandbox_t* sb, const char* path,
                                                              const void* data, size_t len, uint32_t mode,
                                                              sandlet_file_cb cb, void* user_data) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(path);
  SANDLET_REQUIRE(cb);
  if (len && !data) return sandlet::capi::null_arg("data");
  return guard([&] {
    sb->sb->write_file_async(path, std::string(static_cast<const char*>(data), len), mode,
                             [cb, user_data](std::exception_ptr error, std::string, uint32_t) {
                               cb(user_data, error ? sandlet::capi::error_from(error) : nullptr, nullptr, 0, 0);
                             });
  });
}

SANDLET_API sandlet_error_t* sandlet_sandbox_read_file_async(sandlet_sandbox_t* sb, const char* path,
                                                             uint64_t max_bytes, sandlet_file_cb cb, void* user_data) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(path);
  SANDLET_REQUIRE(cb);
  return guard([&] {
    sb->sb->read_file_async(path, max_bytes, [cb, user_data](std::exception_ptr error, std::string data, uint32_t mode) {
      if (error)
        cb(user_data, sandlet::capi::error_from(error), nullptr, 0, 0);
      else
        cb(user_data, nullptr, data.data(), data.size(), mode);
    });
  });
}

}  // extern "C"
