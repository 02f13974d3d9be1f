/* SPDX-License-Identifier: Apache-2.0 */
/* bench/kdag_session.h — a kdag session for one benchmark case, on the
 * shared GPU's device, with the kd_exec_mode the case compares, and a pair
 * of timing events recorded on the session's own stream (inside raw
 * scopes). kdag's submissions are timed the way kb_gpu_batch_begin/end time
 * raw driver calls:
 *
 *   kb_kdag k;
 *   kb_kdag_open(run, KD_EXEC_GRAPH, &k);      setup
 *   uint64_t t0;
 *   kb_kdag_begin(run, &k, &t0);               start event on the session stream, then t0
 *   ... kd_graph_submit, `iterations` times ...
 *   kb_kdag_end(run, &k, t0, out);             out->host_ns is t0 to here; stop
 *                                              event; waits on it; out->gpu_ns
 *                                              is start to stop
 *   kb_kdag_close(&k);                         teardown
 *
 * Every failure is reported through the run (kb_run_fail) with kdag's or
 * the driver's message, and returned.
 */
#ifndef KDAG_BENCH_KDAG_SESSION_H
#define KDAG_BENCH_KDAG_SESSION_H

#include "bench/gpu.h"
#include "kdag/kdag.h"

typedef struct kb_kdag {
  const kd_cu_table *cu;
  kd_session *session;
  kd_exec_mode mode;
  CUevent start, stop;
} kb_kdag;

/* Creates a CUDA session of device 0 with options.exec_mode = mode, and the
 * timing events. On failure nothing is left open. */
kb_status kb_kdag_open(kb_run *run, kd_exec_mode mode, kb_kdag *out);
/* The same with kd_session_options.flags (KD_SESSION_*); whether the
 * session uses PDL is the case's (flags_set has KD_SESSION_NO_PDL). */
kb_status kb_kdag_open_flags(kb_run *run, kd_exec_mode mode, uint32_t flags, kb_kdag *out);
/* Destroys the session (it drains its own work) and the events. A zeroed or
 * failed kb_kdag is ignored. */
void kb_kdag_close(kb_kdag *k);

/* Loads function `name` of an embedded image into the session: the CUBIN,
 * else (no binary for this GPU) the PTX. */
kb_status kb_kdag_function(kb_run *run, kb_kdag *k, const void *cubin, size_t cubin_size,
                           const void *ptx, size_t ptx_size, const char *name, kd_function *out);

/* Calls fn with the session's stream, inside a raw scope; its CUresult
 * becomes the case's failure, named call. */
typedef CUresult kb_stream_fn(CUstream stream, void *user);
kb_status kb_kdag_on_stream(kb_run *run, kb_kdag *k, kb_stream_fn *fn, void *user, const char *call);

kb_status kb_kdag_begin(kb_run *run, kb_kdag *k, uint64_t *t0_ns);
kb_status kb_kdag_end(kb_run *run, kb_kdag *k, uint64_t t0_ns, kb_timing *out);

/* The batch most kdag cases time: g submitted `iterations` times between
 * kb_kdag_begin and kb_kdag_end. */
kb_status kb_kdag_submit_batch(kb_run *run, kb_kdag *k, kd_graph *g, uint64_t iterations, kb_timing *out);

/* Waits for everything enqueued on the session stream, then retires the
 * session's completions. */
kb_status kb_kdag_wait(kb_run *run, kb_kdag *k);

kb_status kb_kdag_counters(kb_run *run, kb_kdag *k, kd_session_stats *out);

/* Submits g once and waits for it (outside any timing: it also pays for
 * planning and, in GRAPH mode, instantiation). In GRAPH mode the submission
 * must have launched a CUDA graph (counters.graph_launches moved): a kdag
 * build without GRAPH mode runs the plan eagerly, and those figures must not
 * be reported as GRAPH ones, so the case is then skipped with that reason. */
kb_status kb_kdag_preflight(kb_run *run, kb_kdag *k, kd_graph *g);
/* The same check over counters taken before and after a submission. */
kb_status kb_kdag_check_mode(kb_run *run, const kb_kdag *k, const kd_session_stats *before,
                             const kd_session_stats *after);

#endif /* KDAG_BENCH_KDAG_SESSION_H */
