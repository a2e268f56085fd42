/* Option structs of every size a caller can pass, through the real library (compiled as C against sandlet.h
   only). A struct from an older header (a smaller `size`) works and every field past its size takes its
   default, even when the bytes there say otherwise; a struct from a newer header (larger) works when the
   bytes past this library's fields are zero and is refused, naming the struct, when they are not; a size
   that cannot be right is refused. Also walks the backend array with its element size, as a caller built
   against an older header does. Needs root (sandboxes); SANDLET_TEST_ROOTFS is a busybox root.
   Exit: 0 pass, 1 fail, 77 skip (not root). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capi/c_check.h"

int passed, failed;  /* (c_check.h's counts) */
#include "sandlet/sandlet.h"

/* Checks that `err` is INVALID_ARGUMENT whose message holds `needle`, and frees it. */
static void expect_invalid(sandlet_error_t *err, const char *needle) {
  CHECK(sandlet_error_code(err) == SANDLET_INVALID_ARGUMENT);
  if (err && !strstr(sandlet_error_message(err), needle))
    fprintf(stderr, "message '%s' lacks '%s'\n", sandlet_error_message(err), needle);
  CHECK(err && strstr(sandlet_error_message(err), needle) != NULL);
  sandlet_error_delete(err);
}

/* A caller's struct followed by one more field of a newer header. */
struct newer_runtime_options {
  sandlet_runtime_options_t known;
  uint64_t newer_field;
};
struct newer_exec_options {
  sandlet_exec_options_t known;
  uint64_t newer_field;
};

static void test_runtime_options(const char *root) {
  sandlet_runtime_t *rt = NULL;
  sandlet_runtime_options_t o = SANDLET_RUNTIME_OPTIONS_INIT;
  struct newer_runtime_options newer;

  /* Only the size field: every option takes its default. */
  o.size = sizeof(uint32_t);
  o.worker_threads = 1000000; /* would be refused if it were read */
  OK(sandlet_runtime_open(root, &o, &rt));
  sandlet_runtime_close(rt);

  o = (sandlet_runtime_options_t)SANDLET_RUNTIME_OPTIONS_INIT;
  o.size = 0;
  rt = NULL;
  expect_invalid(sandlet_runtime_open(root, &o, &rt), "sandlet_runtime_options_t.size is 0");
  CHECK(rt == NULL);
  o.size = 1u << 20;
  expect_invalid(sandlet_runtime_open(root, &o, &rt), "sandlet_runtime_options_t.size");

  memset(&newer, 0, sizeof newer);
  newer.known.size = sizeof newer;
  OK(sandlet_runtime_open(root, &newer.known, &rt));
  sandlet_runtime_close(rt);
  newer.newer_field = 1;
  rt = NULL;
  expect_invalid(sandlet_runtime_open(root, &newer.known, &rt), "newer sandlet.h");
  CHECK(rt == NULL);
}

/* Opens a runtime with `o`, expecting INVALID_ARGUMENT naming `field`; nothing is opened. */
static void expect_refused_option(const char *root, const sandlet_runtime_options_t *o, const char *field) {
  sandlet_runtime_t *rt = NULL;
  expect_invalid(sandlet_runtime_open(root, o, &rt), field);
  CHECK(rt == NULL);
  sandlet_runtime_close(rt);
}

/* Whether a push with no store argument was refused for want of a store (the runtime's option unread). */
static int push_finds_no_store(sandlet_runtime_t *rt) {
  sandlet_error_t *err = sandlet_layer_push(rt, "some-layer", NULL, NULL);
  int none = sandlet_error_code(err) == SANDLET_INVALID_ARGUMENT && strstr(sandlet_error_message(err), "no store");
  sandlet_error_delete(err);
  return none;
}

/* The store and loader fields (appended after snapshot_max_depth): range checks name the field; a struct
   from before them ignores whatever its bytes there hold. */
static void test_store_options(const char *root) {
  sandlet_runtime_t *rt = NULL;
  sandlet_runtime_options_t o = SANDLET_RUNTIME_OPTIONS_INIT;

  o.fetch_unit = 1000; /* not whole 64 KiB chunks */
  expect_refused_option(root, &o, "fetch_unit");
  o.fetch_unit = (64u << 20) + (64u << 10); /* past 64 MiB */
  expect_refused_option(root, &o, "fetch_unit");
  o.fetch_unit = 0;
  o.fetch_concurrency = 257;
  expect_refused_option(root, &o, "fetch_concurrency");
  o.fetch_concurrency = 0;
  o.fill_timeout_ms = 99;
  expect_refused_option(root, &o, "fill_timeout_ms");
  o.fill_timeout_ms = 0;
  o.audit_keep = 1001;
  expect_refused_option(root, &o, "audit_keep");
  o.audit_keep = 0;
  o.audit_max_bytes = 100;
  expect_refused_option(root, &o, "audit_max_bytes");
  o.audit_max_bytes = 0;

  /* The bounds themselves are accepted. */
  o = (sandlet_runtime_options_t)SANDLET_RUNTIME_OPTIONS_INIT;
  o.cache_max_bytes = 1;
  o.fetch_unit = 64u << 20;
  o.fetch_concurrency = 256;
  o.fill_timeout_ms = 100;
  OK(sandlet_runtime_open(root, &o, &rt));
  sandlet_runtime_close(rt);
  rt = NULL;
  o.fetch_unit = 64u << 10;
  o.fetch_concurrency = 1;
  OK(sandlet_runtime_open(root, &o, &rt));
  sandlet_runtime_close(rt);
  rt = NULL;

  /* From before the store fields: bytes that would be refused, and a store, are not read. */
  o.fetch_unit = 1000;
  o.audit_keep = 1001;
  o.store = "file:///nowhere";
  o.size = offsetof(sandlet_runtime_options_t, store);
  OK(sandlet_runtime_open(root, &o, &rt));
  CHECK(rt && push_finds_no_store(rt));
  sandlet_runtime_close(rt);
  rt = NULL;
  /* Ending inside the loader's fields: those it holds are checked, the rest not read. */
  o.size = offsetof(sandlet_runtime_options_t, fetch_unit);
  OK(sandlet_runtime_open(root, &o, &rt));
  CHECK(rt && !push_finds_no_store(rt)); /* the store is within its size: the push has one */
  sandlet_runtime_close(rt);
  rt = NULL;
  o.size = offsetof(sandlet_runtime_options_t, fetch_concurrency);
  expect_refused_option(root, &o, "fetch_unit");
}

static int streamed;
static void on_output(void *user_data, int stream, const void *data, size_t len) {
  (void)user_data;
  (void)stream;
  (void)data;
  (void)len;
  streamed = 1;
}

static void test_exec_options(sandlet_sandbox_t *sb) {
  const char *argv[] = {"sh", "-c", "echo out", NULL};
  sandlet_exec_options_t o = SANDLET_EXEC_OPTIONS_INIT;
  struct newer_exec_options newer;
  sandlet_exec_result_t *res = NULL;
  size_t len = 0;

  /* From before on_output existed: the callback in the bytes past `size` is not used, output is buffered. */
  o.argv = argv;
  o.on_output = on_output;
  o.size = offsetof(sandlet_exec_options_t, on_output);
  CHECK(!SANDLET_HAS_FIELD(sandlet_exec_options_t, on_output, o.size));
  OK(sandlet_sandbox_exec(sb, &o, &res));
  CHECK(res && strcmp(sandlet_exec_result_stdout(res, &len), "out\n") == 0 && !streamed);
  sandlet_exec_result_delete(res);
  res = NULL;

  /* With it, the callback gets the output. */
  o.size = sizeof o;
  OK(sandlet_sandbox_exec(sb, &o, &res));
  CHECK(res && streamed);
  sandlet_exec_result_delete(res);
  res = NULL;

  /* Only the size field: argv is NULL whatever the bytes say, so the command is missing. */
  o.size = sizeof(uint32_t);
  expect_invalid(sandlet_sandbox_exec(sb, &o, &res), "argv");
  CHECK(res == NULL);

  memset(&newer, 0, sizeof newer);
  newer.known.size = sizeof newer;
  newer.known.argv = argv;
  OK(sandlet_sandbox_exec(sb, &newer.known, &res));
  CHECK(res && sandlet_exec_result_exit_code(res) == 0);
  sandlet_exec_result_delete(res);
  res = NULL;
  newer.newer_field = 7;
  expect_invalid(sandlet_sandbox_exec(sb, &newer.known, &res), "sandlet_exec_options_t");
  CHECK(res == NULL);
}

static void test_run_options(sandlet_runtime_t *rt, const sandlet_spec_t *spec) {
  const char *argv[] = {"sh", "-c", "echo ran", NULL};
  sandlet_run_options_t o = SANDLET_RUN_OPTIONS_INIT;
  sandlet_exec_result_t *res = NULL;
  int out[2];
  char buf[16];

  CHECK(pipe(out) == 0);
  /* From before the descriptors existed: stdout is /dev/null (-1), not the pipe in the bytes past `size`
     nor descriptor 0; cancel_fd is -1 too (were it 0, a readable stdin would cancel the run). */
  o.argv = argv;
  o.stdout_fd = out[1];
  o.cancel_fd = 0;
  o.size = offsetof(sandlet_run_options_t, stdin_fd);
  OK(sandlet_run(rt, spec, &o, &res));
  CHECK(res && sandlet_exec_result_exit_code(res) == 0);
  sandlet_exec_result_delete(res);
  res = NULL;
  close(out[1]);
  CHECK(read(out[0], buf, sizeof buf) == 0);
  close(out[0]);

  CHECK(pipe(out) == 0);
  o = (sandlet_run_options_t)SANDLET_RUN_OPTIONS_INIT;
  o.argv = argv;
  o.stdout_fd = out[1];
  OK(sandlet_run(rt, spec, &o, &res));
  sandlet_exec_result_delete(res);
  close(out[1]);
  memset(buf, 0, sizeof buf);
  CHECK(read(out[0], buf, sizeof buf - 1) == 4 && strcmp(buf, "ran\n") == 0);
  close(out[0]);
}

/* Makes <root>/<name>/hello holding `content`; returns the directory in `dir`. */
static void make_layer_dir(const char *root, const char *name, const char *content, char *dir, size_t size) {
  char file[600];
  int fd;
  snprintf(dir, size, "%s/%s", root, name);
  snprintf(file, sizeof file, "%s/hello", dir);
  CHECK(mkdir(dir, 0755) == 0);
  fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  CHECK(fd >= 0 && write(fd, content, strlen(content)) == (ssize_t)strlen(content));
  if (fd >= 0) close(fd);
}

static void test_layer_import_options(sandlet_runtime_t *rt, const char *root) {
  char dir[512], dir2[512];
  char *json = NULL;
  sandlet_layer_import_options_t o = SANDLET_LAYER_IMPORT_OPTIONS_INIT;

  make_layer_dir(root, "layer-a", "hello\n", dir, sizeof dir);
  make_layer_dir(root, "layer-b", "another layer\n", dir2, sizeof dir2);

  /* The first version's `version` field held 1: as a size that is too small to be anything. */
  o.size = 1;
  expect_invalid(sandlet_layer_import(rt, dir, &o, &json), "sandlet_layer_import_options_t.size is 1");
  CHECK(json == NULL);

  /* A struct that ends before `name`: the layer stays unnamed though the bytes past `size` name it. */
  o.size = offsetof(sandlet_layer_import_options_t, name);
  o.name = "should-not-be-used";
  o.role = "toolkit";
  OK(sandlet_layer_import(rt, dir, &o, &json));
  CHECK(json && strstr(json, "\"role\":\"toolkit\"") && strstr(json, "\"name\":\"\"") &&
        !strstr(json, "should-not-be-used"));
  sandlet_free(json);
  json = NULL;

  o.size = sizeof o;
  o.name = "named-now";
  OK(sandlet_layer_import(rt, dir2, &o, &json));
  CHECK(json && strstr(json, "\"name\":\"named-now\""));
  sandlet_free(json);
  OK(sandlet_layer_import(rt, dir, NULL, NULL)); /* NULL options: the defaults */
}

/* What a caller built against a header whose backend struct had only the name sees. */
typedef struct old_backend_info {
  const char *name;
} old_backend_info_t;

static void test_backend_array(sandlet_runtime_t *rt) {
  const sandlet_backend_info_t *first = NULL;
  size_t n = 0, elem_size = 0, i;
  int container = 0;
  OK(sandlet_runtime_backends(rt, &first, &n, &elem_size));
  CHECK(elem_size == sizeof(sandlet_backend_info_t) && n >= 4);
  CHECK(SANDLET_HAS_FIELD(sandlet_backend_info_t, reason, elem_size));
  CHECK(!SANDLET_HAS_FIELD(sandlet_backend_info_t, reason, sizeof(old_backend_info_t)));
  CHECK(SANDLET_HAS_FIELD(sandlet_backend_info_t, details_json, elem_size));
  for (i = 0; i < n; ++i) {
    const old_backend_info_t *old = SANDLET_ARRAY_AT(old_backend_info_t, first, elem_size, i);
    const sandlet_backend_info_t *now = SANDLET_ARRAY_AT(sandlet_backend_info_t, first, elem_size, i);
    CHECK(old->name == now->name);
    CHECK(now->summary && now->summary[0] && now->details_json && now->details_json[0] == '{');
    if (strcmp(now->name, "container") == 0)
      container = now->available && (now->capabilities & SANDLET_CAP_PAUSE) && (now->capabilities & SANDLET_CAP_ONE_SHOT);
    else
      CHECK(now->available || now->capabilities == 0);
  }
  CHECK(container); /* available, and says it can pause and run one-shot */
  expect_invalid(sandlet_runtime_backends(rt, &first, &n, NULL), "elem_size");
}

int main(void) {
  char root[] = "/tmp/sandlet-abi-options-XXXXXX";
  char cmd[128];
  sandlet_runtime_t *rt = NULL;
  sandlet_spec_t *spec = NULL;
  sandlet_sandbox_t *sb = NULL;

  if (geteuid() != 0) {
    printf("SKIP: sandboxes need root\n");
    return 77;
  }
  if (!mkdtemp(root)) return 1;
  unsetenv("SANDLET_STORE"); /* the "no store" checks need none from the environment */
  test_runtime_options(root);
  test_store_options(root);
  OK(sandlet_runtime_open(root, NULL, &rt));
  if (rt) {
    OK(sandlet_spec_new(&spec));
    OK(sandlet_spec_add_layer(spec, SANDLET_TEST_ROOTFS));
    OK(sandlet_sandbox_create(rt, spec, &sb));
    if (sb) test_exec_options(sb);
    sandlet_sandbox_close(sb);
    test_run_options(rt, spec);
    test_layer_import_options(rt, root);
    test_backend_array(rt);
    sandlet_spec_delete(spec);
    sandlet_runtime_close(rt);
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  if (system(cmd) != 0) ++failed;
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
