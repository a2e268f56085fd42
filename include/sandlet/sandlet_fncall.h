/*
 * sandlet — the C ABI of function calls (FnCall): short stateless commands run in pooled, already running
 * containers of one environment. The conventions at the top of sandlet.h apply.
 *
 * A call takes an idle container of its environment's pool (or makes one, up to the pool's max_size; beyond
 * that it waits), runs one command as sandlet_sandbox_exec would, and gives the container back to the pool
 * only if the host finds it exactly as it was handed out: no process left, nothing written to /, /tmp,
 * /dev or /dev/shm, no SysV IPC object. Otherwise (or with reuse "replace") the container is destroyed and
 * a replacement made in the background: one call never sees another's files, processes, environment or
 * output. docs/FNCALL.md describes the pool's sizing.
 */
#ifndef SANDLET_SANDLET_FNCALL_H
#define SANDLET_SANDLET_FNCALL_H

#include "sandlet/sandlet.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sandlet_call_options {
  uint32_t size;                /* sizeof(sandlet_call_options_t) */
  const char *environment;      /* a store environment ("name" or "name@N"); or NULL and ... */
  const char *spec_json;        /* ... a whole spec (its layers, limits); exactly one of the two. Each
                                   distinct value has its own pool */
  const char *const *argv;      /* NULL-terminated; or NULL and ... */
  const char *script;           /* ... a shell script, run as /bin/sh -c SCRIPT; exactly one of the two */
  const char *const *env;       /* NULL-terminated "KEY=VALUE"; may be NULL */
  const void *stdin_data;       /* bytes fed to stdin, then EOF; NULL = empty */
  size_t stdin_len;
  double timeout_s;             /* 0 = none; on expiry every process of the call is killed */
  uint64_t output_limit;        /* per stream; 0 = 16 MiB */
  double cpus;                  /* 0 = the pool's limits; else this call's (restored after it) */
  uint64_t memory;              /* bytes; 0 = the pool's */
  uint64_t pids;                /* 0 = the pool's */
} sandlet_call_options_t;
#define SANDLET_CALL_OPTIONS_INIT {sizeof(sandlet_call_options_t), 0, 0, 0, 0, 0, 0, 0, 0.0, 0, 0.0, 0, 0}

/* Blocks until the command ended. *out as sandlet_sandbox_exec's (sandlet_exec_result_duration_ns: the
   command's run, without the wait for a container); free it with sandlet_exec_result_delete. Bad options
   give INVALID_ARGUMENT naming the field. */
SANDLET_API sandlet_error_t *sandlet_call(sandlet_runtime_t *rt, const sandlet_call_options_t *opts,
                                          sandlet_exec_result_t **out);
/* The same without blocking: `cb` runs once on the event-loop thread (the options are copied before this
   returns; when this returns an error the callback is never called). */
SANDLET_API sandlet_error_t *sandlet_call_async(sandlet_runtime_t *rt, const sandlet_call_options_t *opts,
                                                sandlet_exec_cb cb, void *user_data);

typedef struct sandlet_fncall_pool_options {
  uint32_t size;                  /* sizeof(sandlet_fncall_pool_options_t) */
  uint32_t min_idle;              /* idle containers kept ready; default 0 */
  uint32_t max_size;              /* containers at most (idle and in use); default 8 */
  const char *reuse;              /* "reset" (default: reuse a container the call left clean) or "replace"
                                     (never reuse) */
  double freeze_after_s;          /* idle this long: frozen (thawed when taken); default 30 */
  double destroy_frozen_after_s;  /* frozen this long: destroyed (down to min_idle, 20% of the pool per
                                     step); default 300 */
} sandlet_fncall_pool_options_t;
#define SANDLET_FNCALL_POOL_OPTIONS_INIT {sizeof(sandlet_fncall_pool_options_t), 0, 8, 0, 30.0, 300.0}

/* Settings of the pool of `environment` (an environment name, or the spec JSON given to calls). A pool
   with min_idle > 0 starts filling at once. */
SANDLET_API sandlet_error_t *sandlet_runtime_set_fncall_pool(sandlet_runtime_t *rt, const char *environment,
                                                             const sandlet_fncall_pool_options_t *opts);
/* *out: {"pools": [{"key", "idle", "frozen", "in_use", "creating", "waiting", "created", "reused",
   "discarded_dirty", "discarded_replace", "destroyed_idle", "max_size", "min_idle", "reuse", and once an
   idle container was taken "handovers", "handover_p50_us", "handover_p99_us" (the time a call took to get
   an idle container, thaw included, over the last 4096 such takes)}]}. Free *out with sandlet_free. */
SANDLET_API sandlet_error_t *sandlet_runtime_fncall_stats_json(sandlet_runtime_t *rt, char **out);

#ifdef __cplusplus
}
#endif

#endif /* SANDLET_SANDLET_FNCALL_H */
