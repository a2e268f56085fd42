/*
 * sandlet — the C ABI of one-shot runs. Part of sandlet.h, which includes it at its end: include sandlet.h,
 * not this file. The conventions at the top of sandlet.h apply.
 */
#ifndef SANDLET_SANDLET_RUN_H
#define SANDLET_SANDLET_RUN_H

#ifndef SANDLET_SANDLET_H
#error "include <sandlet/sandlet.h>, which includes this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------
 * One-shot run: a new sandbox, one command with the caller's own descriptors as its standard streams,
 * then the sandbox is destroyed (what `sandlet run` and bubblewrap-style callers do). Cheaper than
 * create + exec + destroy: the sandbox's init starts the command itself (no agent round trip) and output
 * goes straight to the caller's descriptors (nothing is relayed or buffered by the library).
 * ------------------------------------------------------------------------------------------------- */
typedef struct sandlet_run_options {
  uint32_t size;                 /* sizeof(sandlet_run_options_t) */
  const char *const *argv;       /* NULL-terminated, argv[0] required; resolved through PATH */
  const char *const *env;        /* NULL-terminated "KEY=VALUE" added to the spec's env; may be NULL */
  const char *cwd;               /* NULL = the spec's workdir */
  const char *user;              /* NULL = the spec's user */
  double timeout_s;              /* 0 = none; on expiry every process of the sandbox is killed */
  int stdin_fd;                  /* the command's stdin, stdout, stderr: descriptors of the caller, passed */
  int stdout_fd;                 /*   into the sandbox (the caller keeps its own); -1 = /dev/null. The command */
  int stderr_fd;                 /*   runs in a new session, so a terminal given here is not its controlling one */
  int cancel_fd;                 /* -1, or a descriptor that becomes readable to cancel the run: everything is
                                    killed, the sandbox destroyed, and the call fails with CANCELLED. The
                                    library only polls it (never reads it); end of file counts as readable,
                                    so closing a pipe's write end cancels too */
} sandlet_run_options_t;
#define SANDLET_RUN_OPTIONS_INIT {sizeof(sandlet_run_options_t), 0, 0, 0, 0, 0.0, -1, -1, -1, -1}

/* Creates a sandbox from `spec` (its lifetime must be "owned", the default), runs the command in it and
   destroys the sandbox; blocks the calling thread throughout (not the event-loop thread). When the command
   exits, whatever it left running is killed; when this returns nothing of the sandbox runs or is listed
   any more, and its host resources are reclaimed in the background, as with sandlet_sandbox_destroy
   (sandlet_runtime_close waits for that). On success *out (owned by the caller, free with
   sandlet_exec_result_delete) holds exit_code, signal, timed_out, run_ns and duration_ns; its stdout and
   stderr are empty (output went to the descriptors). A command that cannot be started is an error
   (NOT_FOUND / PERMISSION_DENIED), as with exec. Closing the runtime from another thread ends a run in
   flight (UNAVAILABLE). Any thread but a completion callback's (the event-loop thread) may call it. On a
   backend without SANDLET_CAP_ONE_SHOT (microvm) the run is a create, one exec and a destroy: the same to
   the caller, slower (sandlet_run_async there runs it on a thread of the library's). */
SANDLET_API sandlet_error_t *sandlet_run(sandlet_runtime_t *rt, const sandlet_spec_t *spec,
                                         const sandlet_run_options_t *opts, sandlet_exec_result_t **out);
/* The same without blocking: the options are copied (the descriptors are used until the completion) and
   `cb` is called exactly once, on the event-loop thread, with the error or the result (both owned by the
   callback), unless this returns an error (invalid input: then `cb` is never called). Any thread may call
   it, completion callbacks included. */
SANDLET_API sandlet_error_t *sandlet_run_async(sandlet_runtime_t *rt, const sandlet_spec_t *spec,
                                               const sandlet_run_options_t *opts, sandlet_exec_cb cb,
                                               void *user_data);

#ifdef __cplusplus
}
#endif

#endif /* SANDLET_SANDLET_RUN_H */
