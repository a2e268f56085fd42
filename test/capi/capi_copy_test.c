/* Directory copies through the C ABI (sandlet_copy.h): a tree in and out with stats and progress, a tar
   stream out, a progress callback that stops a copy, option and argument errors. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capi/c_check.h"
#include "sandlet/sandlet.h"

struct progress {
  int calls;
  uint64_t last_entries;
  uint64_t stop_at; /* 0 = never */
};

static int on_progress(void *user_data, const sandlet_copy_stats_t *so_far) {
  struct progress *p = user_data;
  ++p->calls;
  p->last_entries = so_far->entries;
  return p->stop_at && so_far->entries >= p->stop_at;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

void test_copy(const char *root) {
  sandlet_runtime_t *rt = NULL;
  OK(sandlet_runtime_open(root, NULL, &rt));
  if (!rt) return;
  sandlet_sandbox_t *sb = create_rootfs_sandbox(rt);
  if (!sb) {
    sandlet_runtime_close(rt);
    return;
  }

  char src[] = "/tmp/sandlet-capi-copy-XXXXXX";
  CHECK(mkdtemp(src) != NULL);
  char path[256];
  snprintf(path, sizeof path, "%s/dir", src);
  CHECK(mkdir(path, 0750) == 0);
  snprintf(path, sizeof path, "%s/dir/a.txt", src);
  write_text(path, "alpha");
  snprintf(path, sizeof path, "%s/b.txt", src);
  write_text(path, "beta!");

  /* In, with progress and stats; NULL options are the defaults. */
  struct progress p = {0, 0, 0};
  sandlet_copy_options_t opts = SANDLET_COPY_OPTIONS_INIT;
  opts.progress = on_progress;
  opts.progress_user_data = &p;
  sandlet_copy_stats_t st = {0, 0, 0};
  OK(sandlet_sandbox_copy_in(sb, src, "/c/tree", &opts, &st));
  CHECK(st.entries == 4 && st.bytes == 10 && st.skipped == 0);
  CHECK(p.calls >= 4 && p.last_entries == 4);
  void *data = NULL;
  size_t len = 0;
  OK(sandlet_sandbox_read_file(sb, "/c/tree/dir/a.txt", 0, &data, &len));
  CHECK(len == 5 && data && memcmp(data, "alpha", 5) == 0);
  sandlet_free(data);

  /* Out, to a directory and as a tar stream. */
  char out[300];
  snprintf(out, sizeof out, "%s/out", src);
  OK(sandlet_sandbox_copy_out(sb, "/c/tree", out, NULL, NULL));
  snprintf(path, sizeof path, "%s/out/dir/a.txt", src);
  struct stat s;
  CHECK(stat(path, &s) == 0 && s.st_size == 5);
  snprintf(path, sizeof path, "%s/out/dir", src);
  CHECK(stat(path, &s) == 0 && (s.st_mode & 07777) == 0750);
  snprintf(path, sizeof path, "%s/tree.tar", src);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  CHECK(fd >= 0);
  OK(sandlet_sandbox_get_archive(sb, "/c/tree", fd, NULL, &st));
  close(fd);
  CHECK(st.entries == 4);
  CHECK(stat(path, &s) == 0 && s.st_size >= 2048 && s.st_size % 512 == 0);
  /* ... and back in. */
  fd = open(path, O_RDONLY | O_CLOEXEC);
  OK(sandlet_sandbox_put_archive(sb, fd, "/c/from-tar", NULL, &st));
  close(fd);
  OK(sandlet_sandbox_read_file(sb, "/c/from-tar/tree/b.txt", 0, &data, &len));
  CHECK(len == 5 && data && memcmp(data, "beta!", 5) == 0);
  sandlet_free(data);

  /* A link inside that points outside the copy is left out on the host unless asked for. */
  const char *mklink[] = {"ln", "-s", "/etc/passwd", "/c/tree/outside", NULL};
  sandlet_exec_options_t eo = SANDLET_EXEC_OPTIONS_INIT;
  eo.argv = mklink;
  sandlet_exec_result_t *res = NULL;
  OK(sandlet_sandbox_exec(sb, &eo, &res));
  sandlet_exec_result_delete(res);
  snprintf(out, sizeof out, "%s/links", src);
  OK(sandlet_sandbox_copy_out(sb, "/c/tree", out, NULL, &st));
  CHECK(st.skipped == 1);
  snprintf(path, sizeof path, "%s/links/outside", src);
  CHECK(lstat(path, &s) != 0);
  sandlet_copy_options_t links = SANDLET_COPY_OPTIONS_INIT;
  links.allow_outside_links = 1;
  OK(sandlet_sandbox_copy_out(sb, "/c/tree", out, &links, &st));
  CHECK(st.skipped == 0 && lstat(path, &s) == 0 && S_ISLNK(s.st_mode));

  /* A progress callback that returns non-zero stops the copy: CANCELLED. */
  struct progress stop = {0, 0, 2};
  opts.progress_user_data = &stop;
  snprintf(out, sizeof out, "%s/stopped", src);
  sandlet_error_t *err = sandlet_sandbox_copy_out(sb, "/c/tree", out, &opts, NULL);
  CHECK(err && sandlet_error_code(err) == SANDLET_CANCELLED);
  sandlet_error_delete(err);

  /* Bad input: named. */
  err = sandlet_sandbox_copy_in(sb, src, "relative", NULL, NULL);
  CHECK(err && sandlet_error_code(err) == SANDLET_INVALID_ARGUMENT && strstr(sandlet_error_message(err), "'path'"));
  sandlet_error_delete(err);
  err = sandlet_sandbox_copy_in(sb, NULL, "/x", NULL, NULL);
  CHECK(err && sandlet_error_code(err) == SANDLET_INVALID_ARGUMENT && strstr(sandlet_error_message(err), "host_path"));
  sandlet_error_delete(err);
  sandlet_copy_options_t bad = SANDLET_COPY_OPTIONS_INIT;
  bad.size = 2;
  err = sandlet_sandbox_copy_in(sb, src, "/x", &bad, NULL);
  CHECK(err && sandlet_error_code(err) == SANDLET_INVALID_ARGUMENT &&
        strstr(sandlet_error_message(err), "sandlet_copy_options_t.size"));
  sandlet_error_delete(err);
  err = sandlet_sandbox_get_archive(sb, "/c/tree", -1, NULL, NULL);
  CHECK(err && sandlet_error_code(err) == SANDLET_INVALID_ARGUMENT);
  sandlet_error_delete(err);
  err = sandlet_sandbox_copy_out(sb, "/c/missing", out, NULL, NULL);
  CHECK(err && sandlet_error_code(err) == SANDLET_NOT_FOUND && strstr(sandlet_error_message(err), "/c/missing"));
  sandlet_error_delete(err);

  OK(sandlet_sandbox_destroy(sb));
  sandlet_sandbox_close(sb);
  sandlet_runtime_close(rt);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", src);
  CHECK(system(cmd) == 0);
}
