/*
 * sandlet — the C ABI of the platform metrics. The conventions at the top of sandlet.h apply.
 *
 * What is reported (every name starts with sandlet_; docs/METRICS.md lists each family):
 *   - counted by this runtime handle since it was opened (other processes' runtimes count their own):
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

#ifdef __cplusplus
}
#endif

#endif /* SANDLET_SANDLET_METRICS_H */
