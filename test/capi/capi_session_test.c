/* Interactive use through the C ABI (sandlet_session.h, exec tty and stdin_stream in sandlet.h): a shell
   session's state, streams and status; a terminal exec fed, resized and ended through its control. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "capi/c_check.h"
#include "sandlet/sandlet.h"

struct screen {
  pthread_mutex_t mu;
  char text[4096];
  size_t len;
  int done;
  int exit_code, signal;
};

static void on_output(void *user_data, int stream, const void *data, size_t len) {
  struct screen *s = user_data;
  (void)stream;
  pthread_mutex_lock(&s->mu);
  if (len > sizeof s->text - 1 - s->len) len = sizeof s->text - 1 - s->len;
  memcpy(s->text + s->len, data, len);
  s->len += len;
  s->text[s->len] = '\0';
  pthread_mutex_unlock(&s->mu);
}

static void on_done(void *user_data, sandlet_error_t *err, sandlet_exec_result_t *r) {
  struct screen *s = user_data;
  pthread_mutex_lock(&s->mu);
  s->exit_code = r ? sandlet_exec_result_exit_code(r) : -2;
  s->signal = r ? sandlet_exec_result_signal(r) : 0;
  s->done = 1;
  pthread_mutex_unlock(&s->mu);
  sandlet_error_delete(err);
  sandlet_exec_result_delete(r);
}

/* Polls until the screen holds `text` (or the exec ended, with `until_done`), up to 10 s. */
static int wait_screen(struct screen *s, const char *text, int until_done) {
  for (int i = 0; i < 1000; ++i) {
    pthread_mutex_lock(&s->mu);
    const int ok = until_done ? s->done : strstr(s->text, text) != NULL;
    pthread_mutex_unlock(&s->mu);
    if (ok) return 1;
    usleep(10000);
  }
  return 0;
}

static void test_terminal(sandlet_sandbox_t *sb) {
  static struct screen s = {PTHREAD_MUTEX_INITIALIZER, {0}, 0, 0, 0, 0};
  const char *argv[] = {"sh", "-c", "trap 'stty size' WINCH; echo ready; read -r line; echo \"line=$line\"; "
                        "while :; do sleep 0.05; done", NULL};
  sandlet_exec_options_t o = SANDLET_EXEC_OPTIONS_INIT;
  o.argv = argv;
  o.tty = 1;
  o.tty_rows = 20;
  o.tty_cols = 70;
  o.on_output = on_output;
  o.output_user_data = &s;
  sandlet_exec_control_t *control = NULL;
  OK(sandlet_sandbox_exec_start(sb, &o, on_done, &s, &control));
  if (!control) return;
  CHECK(wait_screen(&s, "ready", 0));
  OK(sandlet_exec_control_write_stdin(control, "typed\r", 6));
  CHECK(wait_screen(&s, "line=typed", 0));
  OK(sandlet_exec_control_resize(control, 41, 99));
  CHECK(wait_screen(&s, "41 99", 0));
  sandlet_error_t *e = sandlet_exec_control_resize(control, 0, 99);
  CHECK(e && sandlet_error_code(e) == SANDLET_INVALID_ARGUMENT);
  sandlet_error_delete(e);
  OK(sandlet_exec_control_write_stdin(control, "\x03", 1)); /* Ctrl-C */
  CHECK(wait_screen(&s, NULL, 1));
  CHECK(s.signal == 2);
  sandlet_exec_control_delete(control);

  /* stdin_stream without a control handle to write through is refused. */
  o.tty = 0;
  o.stdin_stream = 1;
  e = sandlet_sandbox_exec_async(sb, &o, on_done, &s);
  CHECK(e && sandlet_error_code(e) == SANDLET_INVALID_ARGUMENT && strstr(sandlet_error_message(e), "stdin_stream"));
  sandlet_error_delete(e);
}

static void test_session_calls(sandlet_sandbox_t *sb) {
  sandlet_session_t *session = NULL;
  OK(sandlet_session_open(sb, NULL, &session));
  if (!session) return;
  CHECK(sandlet_session_alive(session));
  sandlet_exec_result_t *r = NULL;
  OK(sandlet_session_run(session, "cd /etc; V=5", 0, &r));
  CHECK(r && sandlet_exec_result_exit_code(r) == 0);
  sandlet_exec_result_delete(r);
  r = NULL;
  OK(sandlet_session_run(session, "echo \"$PWD $V\"; echo e >&2; exit 4", 0, &r));
  size_t len = 0;
  CHECK(r && strcmp(sandlet_exec_result_stdout(r, &len), "/etc 5\n") == 0);
  CHECK(r && strcmp(sandlet_exec_result_stderr(r, &len), "e\n") == 0);
  CHECK(r && sandlet_exec_result_exit_code(r) == 4);
  sandlet_exec_result_delete(r);
  CHECK(!sandlet_session_alive(session)); /* exit ended the shell */
  r = NULL;
  sandlet_error_t *e = sandlet_session_run(session, "true", 0, &r);
  CHECK(e && sandlet_error_code(e) == SANDLET_FAILED_PRECONDITION);
  sandlet_error_delete(e);
  sandlet_session_close(session);

  /* Options: a version check, and a shell that does not exist fails at open. */
  sandlet_session_options_t so = SANDLET_SESSION_OPTIONS_INIT;
  const char *shell[] = {"/no/shell", NULL};
  so.argv = shell;
  session = NULL;
  e = sandlet_session_open(sb, &so, &session);
  CHECK(e && sandlet_error_code(e) == SANDLET_NOT_FOUND && session == NULL);
  sandlet_error_delete(e);
  sandlet_session_close(NULL);
  sandlet_session_kill(NULL);
}

void test_session(const char *root) {
  sandlet_runtime_t *rt = NULL;
  OK(sandlet_runtime_open(root, NULL, &rt));
  if (!rt) return;
  sandlet_sandbox_t *sb = create_rootfs_sandbox(rt);
  if (sb) {
    test_terminal(sb);
    test_session_calls(sb);
    OK(sandlet_sandbox_destroy(sb));
    sandlet_sandbox_close(sb);
  }
  sandlet_runtime_close(rt);
}
