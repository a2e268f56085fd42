/*
 * sandlet quickstart, in C: create a sandbox from one layer directory, put a script in it, run it,
 * read a file it wrote, destroy the sandbox.
 *
 *   example-quickstart-c [STATE_ROOT [LAYER_DIR]]
 *
 * STATE_ROOT defaults to $SANDLET_ROOT, else /var/lib/sandlet ("" or "-" also mean the default).
 * LAYER_DIR defaults to $SANDLET_EXAMPLE_ROOTFS: a root filesystem directory with /bin/sh (busybox will do).
 * Needs root.
 */
#include <sandlet/sandlet.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char kScript[] =
    "echo \"hello from $(hostname), running as uid $(id -u)\"\n"
    "echo 'written inside the sandbox' > /work/answer.txt\n"
    "exit 0\n";

/* Prints the error with what was being done, frees it, and returns non-zero for `goto` chains. */
static int report(const char *what, sandlet_error_t *err) {
  fprintf(stderr, "quickstart: %s: %s [%s]\n", what, sandlet_error_message(err),
          sandlet_code_name(sandlet_error_code(err)));
  sandlet_error_delete(err);
  return 1;
}

int main(int argc, char **argv) {
  const char *root = argc > 1 && argv[1][0] != '\0' && strcmp(argv[1], "-") != 0 ? argv[1] : NULL;
  const char *layer = argc > 2 ? argv[2] : getenv("SANDLET_EXAMPLE_ROOTFS");
  if (layer == NULL || layer[0] == '\0') {
    fprintf(stderr, "usage: %s [STATE_ROOT [LAYER_DIR]]  (or set SANDLET_EXAMPLE_ROOTFS)\n", argv[0]);
    return 2;
  }

  int rc = 1;
  sandlet_error_t *err = NULL;
  sandlet_runtime_t *rt = NULL;
  sandlet_spec_t *spec = NULL;
  sandlet_sandbox_t *sb = NULL;
  sandlet_exec_result_t *result = NULL;
  void *data = NULL;
  size_t len = 0;

  /* 1. The runtime: one per process; it owns the state directory and an event-loop thread. */
  if ((err = sandlet_runtime_open(root, NULL, &rt)) != NULL) return report("open runtime", err);
  printf("runtime at %s, sandlet %s\n", sandlet_runtime_root(rt), sandlet_version_string());

  /* 2. The spec: one read-only layer, a label, a memory limit. Setters validate and name the field. */
  if ((err = sandlet_spec_new(&spec)) != NULL) { report("new spec", err); goto out; }
  if ((err = sandlet_spec_add_layer(spec, layer)) != NULL) { report("add layer", err); goto out; }
  if ((err = sandlet_spec_set_label(spec, "example", "quickstart")) != NULL) { report("set label", err); goto out; }
  if ((err = sandlet_spec_set_memory(spec, 256u << 20)) != NULL) { report("set memory", err); goto out; }

  /* 3. Create it (owned by default: it dies with this runtime or this process). */
  if ((err = sandlet_sandbox_create(rt, spec, &sb)) != NULL) { report("create sandbox", err); goto out; }
  printf("created sandbox %s\n", sandlet_sandbox_id(sb));

  /* 4. Put a script in it; missing parent directories are created. */
  if ((err = sandlet_sandbox_write_file(sb, "/work/hello.sh", kScript, strlen(kScript), 0755)) != NULL) {
    report("write /work/hello.sh", err);
    goto out;
  }

  /* 5. Run it and wait; output is collected in the result (up to 16 MiB per stream by default). */
  {
    const char *const cmd[] = {"sh", "/work/hello.sh", NULL};
    sandlet_exec_options_t opts = SANDLET_EXEC_OPTIONS_INIT;
    opts.argv = cmd;
    opts.timeout_s = 30;
    if ((err = sandlet_sandbox_exec(sb, &opts, &result)) != NULL) { report("exec", err); goto out; }
  }
  {
    size_t out_len = 0;
    const char *out = sandlet_exec_result_stdout(result, &out_len);
    printf("stdout: %.*s", (int)out_len, out);
    if (out_len == 0 || out[out_len - 1] != '\n') printf("\n");
    printf("exit code: %d (signal %d, timed out: %d)\n", sandlet_exec_result_exit_code(result),
           sandlet_exec_result_signal(result), sandlet_exec_result_timed_out(result));
  }

  /* 6. Read back the file the script wrote. */
  if ((err = sandlet_sandbox_read_file(sb, "/work/answer.txt", 0, &data, &len)) != NULL) {
    report("read /work/answer.txt", err);
    goto out;
  }
  printf("/work/answer.txt: %.*s", (int)len, (const char *)data);

  /* 7. Destroy it explicitly (closing the last handle of an owned sandbox would too). */
  if ((err = sandlet_sandbox_destroy(sb)) != NULL) { report("destroy", err); goto out; }
  printf("destroyed\n");
  rc = sandlet_exec_result_exit_code(result) == 0 ? 0 : 1;

out:
  sandlet_free(data);
  sandlet_exec_result_delete(result);
  sandlet_sandbox_close(sb);
  sandlet_spec_delete(spec);
  sandlet_runtime_close(rt);
  return rc;
}
