// C ABI: shell sessions (sandlet_session.h; runtime/agent/shell_session.cpp).
#include <memory>

#include "capi/handles.hpp"
#include "capi/options.hpp"
#include "runtime/agent/shell_session.hpp"

using sandlet::capi::check_options_size;
using sandlet::capi::field_or;
using sandlet::capi::guard;

struct sandlet_session {
  std::unique_ptr<sandlet::ShellSession> session;
  sandlet::capi::OpenedBy opened;
};

namespace {

sandlet::SessionParams to_params(const sandlet_session_options_t* opts) {
  sandlet::SessionParams p;
  if (!opts) return p;
  using T = sandlet_session_options_t;
  check_options_size(*opts, "sandlet_session_options_t", "SANDLET_SESSION_OPTIONS_INIT");
  if (const char* const* argv = field_or(*opts, &T::argv, nullptr)) {
    for (auto a = argv; *a; ++a) p.argv.emplace_back(*a);
    if (p.argv.empty() || p.argv[0].empty())
      throw sandlet::Error(sandlet::Code::kInvalidArgument, "invalid session field 'argv': empty (NULL means the default shell)");
  }
  if (const char* const* env = field_or(*opts, &T::env, nullptr))
    for (auto e = env; *e; ++e) p.env.emplace_back(*e);
  if (const char* cwd = field_or(*opts, &T::cwd, nullptr)) p.cwd = cwd;
  if (const char* user = field_or(*opts, &T::user, nullptr)) p.user = user;
  p.output_limit = field_or(*opts, &T::output_limit, 0);
  return p;
}

sandlet_error_t* check_session(const sandlet_session* s) noexcept {
  if (!s) return sandlet::capi::null_arg("session");
  return s->opened.forked() ? sandlet::capi::forked_error("session", s->opened.pid) : nullptr;
}

}  // namespace

SANDLET_API sandlet_error_t* sandlet_session_open(sandlet_sandbox_t* sb, const sandlet_session_options_t* opts,
                                                  sandlet_session_t** out) {
  SANDLET_REQUIRE_HANDLE(sb);
  SANDLET_REQUIRE(out);
  return guard([&] {
    auto handle = std::make_unique<sandlet_session>();
    handle->session = std::make_unique<sandlet::ShellSession>(sb->sb, to_params(opts));
    *out = handle.release();
  });
}

SANDLET_API sandlet_error_t* sandlet_session_run(sandlet_session_t* session, const char* command, double timeout_s,
                                                 sandlet_exec_result_t** out) {
  if (sandlet_error_t* e = check_session(session)) return e;
  SANDLET_REQUIRE(command);
  SANDLET_REQUIRE(out);
  return guard([&] {
    auto result = std::make_unique<sandlet_exec_result>();
    result->outcome = session->session->run(command, timeout_s);
    *out = result.release();
  });
}

SANDLET_API int sandlet_session_alive(const sandlet_session_t* session) {
  return session && !session->opened.forked() && session->session->alive();
}

SANDLET_API void sandlet_session_kill(sandlet_session_t* session) {
  if (!session || session->opened.forked()) return;
  try {
    session->session->close();
  } catch (...) {
  }
}

SANDLET_API void sandlet_session_close(sandlet_session_t* session) {
  if (!session) return;
  if (session->opened.forked()) {
    (void)session->session.release();  // the parent's shell: not ours to kill (see sandlet.h on fork)
    return;
  }
  try {
    session->session->close();
  } catch (...) {
  }
  delete session;
}
