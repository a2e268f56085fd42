/*
 * sandlet — the C ABI of job-level pause and resume: every sandbox of the runtime's root (whichever process
 * made it) whose labels match a selector is frozen, or thawed, in one call. The conventions at the top of
 * sandlet.h apply.
 *
 * A paused sandbox keeps its files, processes and connections; its processes get no CPU. Once frozen, its
 * memory group is asked to give back what the kernel can drop (cgroup v2 memory.reclaim; on a hybrid host
 * the v1 group's limit is lowered to its usage without file cache and put back at once): clean page cache,
 * read again from the layers on demand after the resume. Without swap its anonymous memory, its tmpfs
 * files (the writable layer, /tmp, /dev/shm) and kernel memory stay resident. The state
 * "paused" is persisted in the sandbox's record, so every process sees it (sandlet_runtime_list, info), and
 * an exec or file call on a paused sandbox, from any runtime on the root, resumes it first. Each sandbox
 * paused or resumed is audited as "pause" / "resume".
 *
 * CPU classes (the container backend): a sandbox whose spec carries the label "sandlet/priority" =
 * "batch" is best-effort; without it (or with "latency") it is latency-sensitive. A batch sandbox's
 * processes run under SCHED_IDLE (inherited by everything it starts; root inside cannot leave it), and
 * its cgroup gets the lowest CPU weight where the cpu controller is there (v2 cpu.idle = 1, v1
 * cpu.shares = 2), so it only gets CPU time latency-sensitive work leaves idle. Where the CPU runs SMT and
 * the kernel has core scheduling (CONFIG_SCHED_CORE), a batch sandbox also gets a core cookie of its own,
 * so its threads never run on a sibling of a latency-sensitive thread's core (elsewhere: not applied,
 * silently; these machines have neither). Node admission
 * (sandlet_metrics.h) queues latency-sensitive creates first by the same label. Any other value of the
 * label fails the create with INVALID_ARGUMENT.
 */
#ifndef SANDLET_SANDLET_JOBS_H
#define SANDLET_SANDLET_JOBS_H

#include "sandlet.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Pauses every running sandbox of the root whose labels match `label_selector`: "k=v" or "k=v,k2=v2"
   (every pair must match). The freezes run in parallel. A sandbox already paused is counted, not touched.
   On success *out_json (free with sandlet_free) is
     {"matched": N,            sandboxes the selector names (running or paused)
      "paused": N,             paused by this call
      "already": N,            paused before
      "failed": [{"id": "...", "error": "..."}],   each one that could not be paused (e.g. it died)
      "reclaimed_bytes": N,    memory given back after the freezes (what the groups' usage went down by)
      "elapsed_ns": N}
   A per-sandbox failure is reported there, not as the call's error. INVALID_ARGUMENT: a malformed or
   empty selector. */
SANDLET_API sandlet_error_t *sandlet_runtime_pause(sandlet_runtime_t *rt, const char *label_selector,
                                                   char **out_json);
/* The same for resume: running again every paused sandbox matching; "paused" in the result is then
   "resumed", "already" the ones that were running. */
SANDLET_API sandlet_error_t *sandlet_runtime_resume(sandlet_runtime_t *rt, const char *label_selector,
                                                    char **out_json);
/* By id: `ids` holds `n` sandbox ids (of this root); an id naming no sandbox is a "failed" entry. */
SANDLET_API sandlet_error_t *sandlet_runtime_pause_ids(sandlet_runtime_t *rt, const char *const *ids, size_t n,
                                                       char **out_json);
SANDLET_API sandlet_error_t *sandlet_runtime_resume_ids(sandlet_runtime_t *rt, const char *const *ids, size_t n,
                                                        char **out_json);

#ifdef __cplusplus
}
#endif

#endif /* SANDLET_SANDLET_JOBS_H */
