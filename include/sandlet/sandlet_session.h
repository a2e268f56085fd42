/*
 * sandlet — the C ABI of shell sessions: one shell kept alive in a sandbox across calls, as agent harnesses
 * (SWE-agent-style tools, "sessions" of hosted sandboxes) use it. Part of sandlet.h, which includes it at
 * its end: include sandlet.h, not this file. The conventions at the top of sandlet.h apply.
 *
 * A session starts one shell process (an exec with an open stdin) and hands it one command per
 * sandlet_session_run: the shell itself runs it, so the working directory, exported variables, functions
 * and background jobs of one command are there for the next. Each run returns that command's stdout and
 * stderr (separately, exactly as the command wrote them: the shell reads from a pipe, so there is no
 * terminal echo and no prompt) and its exit status. A command's stdin is /dev/null; for a program that
 * needs a terminal, use an exec with `tty` (sandlet.h) instead.
 *
 * How a command's end is found: after it, the shell prints its status behind a marker holding a random
 * nonce drawn for that command, which the command cannot know. A command that closes or redirects the
 * shell's own stdout or stderr for good (`exec >/dev/null`) hides the marker; its run then ends at its
 * timeout. A timeout kills the shell and everything it started and ends the session (later runs fail
 * with FAILED_PRECONDITION); so does the shell exiting (`exit 3`: the run reports status 3).
 * (docs/SHELLS.md)
 */
#ifndef SANDLET_SANDLET_SESSION_H
#define SANDLET_SANDLET_SESSION_H

#ifndef SANDLET_SANDLET_H
#error "include <sandlet/sandlet.h>, which includes this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Thread-safety: one run at a time (a second concurrent run fails with FAILED_PRECONDITION); kill may be
   called from any thread at any time; close only when no other thread uses the handle. */
typedef struct sandlet_session sandlet_session_t;

typedef struct sandlet_session_options {
  uint32_t size;                 /* sizeof(sandlet_session_options_t) */
  const char *const *argv;       /* the shell, reading commands from its stdin; NULL = `bash --noprofile
                                    --norc` where the sandbox has bash, else /bin/sh */
  const char *const *env;        /* NULL-terminated "KEY=VALUE" added to the spec's env; may be NULL */
  const char *cwd;               /* NULL = the spec's workdir */
  const char *user;              /* NULL = the spec's user */
  uint64_t output_limit;         /* per command and stream; 0 = 16 MiB. Beyond it output is dropped and
                                    the result flags it truncated */
} sandlet_session_options_t;
#define SANDLET_SESSION_OPTIONS_INIT {sizeof(sandlet_session_options_t), 0, 0, 0, 0, 0}

/* Starts the shell in `sb` and waits until it answers (a missing shell, user or cwd fails here:
   NOT_FOUND / PERMISSION_DENIED). opts may be NULL. On success *out is owned by the caller
   (sandlet_session_close). A paused sandbox is resumed first. Blocks; not from a library callback. */
SANDLET_API sandlet_error_t *sandlet_session_open(sandlet_sandbox_t *sb, const sandlet_session_options_t *opts,
                                                  sandlet_session_t **out);
/* Runs `command` (shell syntax, may span lines; no NUL) in the session's shell and waits for it:
   *out (sandlet_exec_result_delete) holds its exit_code, stdout, stderr, truncation flags and duration.
   timeout_s = 0: none; on expiry *out says timed_out (with the output so far) and the session has ended. */
SANDLET_API sandlet_error_t *sandlet_session_run(sandlet_session_t *session, const char *command, double timeout_s,
                                                 sandlet_exec_result_t **out);
/* Non-zero while the shell runs (not timed out, exited, killed or closed). */
SANDLET_API int sandlet_session_alive(const sandlet_session_t *session);
/* Kills the shell and everything it started, from any thread: a run in flight returns at once (CANCELLED)
   and the session has ended. The handle stays valid until sandlet_session_close. NULL is fine. */
SANDLET_API void sandlet_session_kill(sandlet_session_t *session);
/* Kills the shell and everything it started, and frees the handle. NULL is fine. */
SANDLET_API void sandlet_session_close(sandlet_session_t *session);

#ifdef __cplusplus
}
#endif

#endif /* SANDLET_SANDLET_SESSION_H */
