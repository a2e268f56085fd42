/*
 * sandlet — the C ABI of the platform metrics. The conventions at the top of sandlet.h apply.
 *
 * What is reported (every name starts with sandlet_; docs/METRICS.md lists each family):
 *   - counted by this runtime handle since it was opened (other processes' runtimes count their own;
 *     the _node_ variants below sum them):
 *     creates by result, execs, destroys; histograms of the scheduling latency (create request to usable
 *     sandbox) and of the queue wait (request to a worker taking it), in seconds; busy time (an exec in
 *     flight) and utilisation (busy time / lifetime) of the sandboxes created here; the warm pool's size,
 *     target, hits, misses and hit ratio;
 *   - read from the root's records when asked, so node-wide (every process on the root): sandboxes by
 *     state (running, paused, creating), paused count, and per label key/value/state, at most 64 values
 *     per key and 32 keys, the rest counted under the value (or key) "other".
 * Thread-safety: like sandlet_runtime_stats_json, from any thread.
 */
#ifndef SANDLET_SANDLET_METRICS_H
#define SANDLET_SANDLET_METRICS_H

#include "sandlet/sandlet.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The metrics as Prometheus text exposition format 0.0.4 (HELP and TYPE lines; label values escaped).
   On success *out is a NUL-terminated string owned by the caller (free with sandlet_free). */
SANDLET_API sandlet_error_t *sandlet_runtime_metrics_text(sandlet_runtime_t *rt, char **out);

/* The same families as JSON: {"families":[{"name","help","type","samples":[{"name","labels":{},"value"}]}]}
   where "type" is counter, gauge, histogram or summary, and each sample's "name" is its full name (with
   _bucket/_sum/_count for histograms and summaries). A value that is not finite is the string "+Inf",
   "-Inf" or "NaN". *out is owned by the caller (free with sandlet_free). */
SANDLET_API sandlet_error_t *sandlet_runtime_metrics_json(sandlet_runtime_t *rt, char **out);

/* The same two, with the counters and histograms summed over every live runtime on the root: each
   runtime publishes its own under <root>/metrics at most once a second after a change (so these lag by up
   to a second), and removes them when it closes. What `sandlet metrics` prints. */
SANDLET_API sandlet_error_t *sandlet_runtime_metrics_node_text(sandlet_runtime_t *rt, char **out);
SANDLET_API sandlet_error_t *sandlet_runtime_metrics_node_json(sandlet_runtime_t *rt, char **out);

/* Node admission: a budget shared by every process that opens a runtime on the same root (kept in
   <root>/admission.json under flock; what a process reserved is dropped when it dies, so a detached
   sandbox's reservation ends with the process that created it). Each bound is off at 0. A create that does
   not fit waits — latency-sensitive ones (spec label "sandlet/priority" = "latency") before batch ones (no
   label, or "batch"), then in order of arrival — for up to timeout_s, then fails with SANDLET_UNAVAILABLE
   naming the resource (sandboxes, memory, pids, cpu share, initialisations) or the full queue; a spec whose
   memory, pids or cpus alone exceed the budget fails at once with SANDLET_INVALID_ARGUMENT. Memory, pids and
   CPU share are the specs' limits (a spec without a memory or cpus limit reserves none of it); max_cpus may
   exceed the node's CPUs, to oversubscribe them by a factor that fits how much of their share sandboxes use. Every process on a root should set the same budget.
   max_queue 0 = the default (1024). */
typedef struct sandlet_admission_options {
  uint32_t size;             /* sizeof(sandlet_admission_options_t) */
  uint64_t max_sandboxes;    /* sandboxes admitted and not ended, node-wide */
  uint64_t max_memory;       /* bytes: the sum of their specs' memory limits */
  uint64_t max_pids;         /* the sum of their specs' pids limits */
  uint64_t max_initializing; /* creates under way (admitted, not yet usable or failed) */
  double timeout_s;          /* how long a create may wait for room */
  uint64_t max_queue;        /* waiting creates of this runtime beyond which a create fails at once */
  double max_cpus;           /* CPUs: the sum of their specs' limits.cpus (0 = unbounded) */
} sandlet_admission_options_t;
#define SANDLET_ADMISSION_OPTIONS_INIT {sizeof(sandlet_admission_options_t), 0, 0, 0, 0, 30.0, 1024, 0.0}

/* Sets (or with NULL, or every bound 0, turns off) node admission for this runtime's later creates.
   `opts` is copied. Any thread. */
SANDLET_API sandlet_error_t *sandlet_runtime_set_admission(sandlet_runtime_t *rt, const sandlet_admission_options_t *opts);

#ifdef __cplusplus
}
#endif

#endif /* SANDLET_SANDLET_METRICS_H */
