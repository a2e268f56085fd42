/*
 * sandlet — the C ABI of builds (environments from a recipe). Part of sandlet.h, which includes it at its
 * end: include sandlet.h, not this file. The conventions at the top of sandlet.h apply.
 */
#ifndef SANDLET_SANDLET_BUILD_H
#define SANDLET_SANDLET_BUILD_H

#ifndef SANDLET_SANDLET_H
#error "include <sandlet/sandlet.h>, which includes this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------
 * Builds: an environment from a recipe, a Dockerfile subset (docs/BUILD.md): FROM (an environment, "name" or
 * "name@N", which imported OCI images are, else a store layer), RUN (shell or exec form), COPY / ADD of
 * files of the context directory, ENV, WORKDIR, USER, LABEL, ARG; CMD and ENTRYPOINT are accepted and
 * ignored (a note says so). Anything else is refused naming its line. Each RUN, COPY / ADD and WORKDIR runs
 * in a new sandbox on the layers so far (a RUN with the options' network, "none" by default; the others
 * with "none"; the env / workdir / user the recipe set so far)
 * and its changes are packed into a layer of role "diff" (a snapshot; /tmp and the other default excludes
 * of a snapshot are left out unless no_default_excludes). Steps are cached by (layers below, instruction
 * after substitution, env / workdir / user, ARG values, a RUN's network, the digests of a COPY's files) under
 * <root>/layers/build-cache; a cached step makes no sandbox.
 *
 * Errors: bad input is INVALID_ARGUMENT and is found before any sandbox is made: an unreadable recipe, a
 * context that is not a directory, a FROM the store does not have, an instruction outside the subset
 * ("RECIPE:LINE: why"), a COPY source that is missing, absolute, outside the context or a symlink out of
 * it. A step that fails is ABORTED: "step N/M (RECIPE:LINE INSTRUCTION): exit status X", the tail of
 * its stderr and the network it had. A failed or cancelled build leaves no sandbox, and no layer it added that nothing else
 * references (nor their cache entries).
 *
 * Result (*result_json, free with sandlet_free):
 *   "recipe"            string   the recipe path as given
 *   "environment"       string   "NAME@N" made from the result when a tag was given, else ""
 *   "layers"            array    layer digests of the result, lowest first (the FROM's, then one per step
 *                                that made or reused one)
 *   "top"               string   the last of them
 *   "env"               object   the result's environment variables (the FROM's, then each ENV)
 *   "workdir", "user"   string   the result's defaults ("/" and "" when never set)
 *   "labels"            object   LABEL values (kept here only: an environment has no labels)
 *   "steps"             array    one object per instruction: "step" (1-based), "line", "instruction" (as
 *                                written), "cached" (its layer came from the build cache), "layer" (the
 *                                layer it made or reused, "" for steps that make none)
 *   "cached_steps"      integer  steps taken from the cache
 *   "sandboxes"         integer  sandboxes the build created (0 when every step was cached)
 *   "notes"             array    strings: instructions accepted but ignored ("Dockerfile:9: CMD ignored...")
 *   "unused_build_args" array    names given in build_args that no ARG declares
 * ------------------------------------------------------------------------------------------------- */

/* One progress event, valid only during the callback. `size` is the library's sizeof(the struct): test
   fields newer than this first version with SANDLET_HAS_FIELD(sandlet_build_event_t, field, event->size). */
typedef struct sandlet_build_event {
  uint32_t size;
  uint32_t step;         /* 1-based */
  uint32_t steps;        /* how many the recipe has (one per instruction) */
  uint32_t line;         /* the recipe line the step starts on */
  const char *text;      /* the instruction as written, continuation lines joined (NUL-terminated) */
  const void *data;      /* stream 1/2: a chunk of the RUN's output */
  size_t len;
  int stream;            /* 0: the step begins; SANDLET_STDOUT / SANDLET_STDERR: output of its RUN */
  int cached;            /* stream 0: non-zero when its layer comes from the build cache (nothing runs) */
} sandlet_build_event_t;
typedef void (*sandlet_build_progress_fn)(void *user_data, const sandlet_build_event_t *event);

typedef struct sandlet_build_options {
  uint32_t size;                     /* sizeof(sandlet_build_options_t) */
  int no_cache;                      /* non-zero: run every step (the cache is neither read nor trusted; the
                                        steps run still record their layers in it) */
  const char *tag;                   /* NULL, or the environment to make of the result (a new version of it
                                        each build) */
  const char *const *build_args;     /* NULL-terminated "NAME=VALUE" values for the recipe's ARGs; may be NULL */
  sandlet_build_progress_fn progress; /* NULL, or called on the building thread (the caller's for sandlet_build,
                                        the build's own for sandlet_build_async; never the event-loop thread)
                                        as each step begins and with its RUN's output */
  void *progress_user_data;
  int cancel_fd;                     /* -1, or a descriptor that becomes readable (or hangs up) to cancel: the
                                        running step's commands are killed, its sandbox destroyed, and the
                                        build fails with CANCELLED. Only polled, never read */
  int no_default_excludes;           /* non-zero: step layers keep /tmp/ and the other paths a snapshot leaves
                                        out by default */
  const char *const *secrets;        /* NULL-terminated build secrets for RUN --mount=type=secret,id=NAME: each
                                        "id=NAME,src=FILE" (the file's bytes) or "id=NAME,env=VAR" (the calling
                                        process's variable), at most 64 of at most 512 KiB, read when the build
                                        starts; may be NULL. A value is seen only by the RUN steps that mount it,
                                        as a read-only file, and never enters a layer, the build cache, the
                                        audit log, progress or an error (docs/BUILD.md). Newer than the first
                                        version: SANDLET_HAS_FIELD(sandlet_build_options_t, secrets, size) */
  const char *network;               /* NULL, "" or "none": RUN steps have no network (the default: a recipe
                                        reaches nothing the builder did not allow). Else a policy as JSON, as a
                                        sandbox spec's "network" takes it (rules, "dns"; no "publish"), checked
                                        as for a sandbox ("invalid spec field 'network.allow[0]'"). For the build's
                                        RUN steps only (RUN --network=none opts a step out); the result stores
                                        no network. Part of a RUN's cache key. Newer than the first version:
                                        SANDLET_HAS_FIELD(sandlet_build_options_t, network, size) */
} sandlet_build_options_t;
#define SANDLET_BUILD_OPTIONS_INIT {sizeof(sandlet_build_options_t), 0, 0, 0, 0, 0, -1, 0, 0, 0}

/* Builds `recipe_path` (a file) with `context_dir` as the context COPY reads from; `opts` may be NULL.
   Blocks the calling thread (not a completion callback's) until the build ends. *result_json (may be
   NULL) receives the result above. Any thread may call it; builds may run concurrently. */
SANDLET_API sandlet_error_t *sandlet_build(sandlet_runtime_t *rt, const char *recipe_path, const char *context_dir,
                                           const sandlet_build_options_t *opts, char **result_json);
/* Completion of an asynchronous build: the error (NULL on success) or the result JSON, each owned by the
   callback (sandlet_error_delete / sandlet_free). */
typedef void (*sandlet_build_cb)(void *user_data, sandlet_error_t *err, char *result_json);
/* The same on a thread of its own: the options are copied, `cb` is called exactly once on that thread
   (which may call blocking functions of this header, but not sandlet_runtime_close), unless this returns an
   error (then it is never called). sandlet_runtime_close cancels builds in flight and waits for their
   completions. Any thread may call it, completion callbacks included. */
SANDLET_API sandlet_error_t *sandlet_build_async(sandlet_runtime_t *rt, const char *recipe_path,
                                                 const char *context_dir, const sandlet_build_options_t *opts,
                                                 sandlet_build_cb cb, void *user_data);

#ifdef __cplusplus
}
#endif
#endif /* SANDLET_SANDLET_BUILD_H */
