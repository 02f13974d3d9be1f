/* SPDX-License-Identifier: Apache-2.0 */
/* A kdag session for one benchmark case, timed on its own stream. */
#include <string.h>

#include "bench/kdag_session.h"

kb_status kb_kdag_open(kb_run *run, kd_exec_mode mode, kb_kdag *out) { return kb_kdag_open_flags(run, mode, 0, out); }

kb_status kb_kdag_open_flags(kb_run *run, kd_exec_mode mode, uint32_t flags, kb_kdag *out) {
  memset(out, 0, sizeof *out);
  kb_gpu *g;
  char why[KB_MESSAGE_MAX];
  kb_status st = kb_gpu_acquire(&g, why, sizeof why);
  if (st != KB_OK) return st == KB_SKIP ? kb_run_skip(run, "%s", why) : kb_run_fail(run, "%s", why);
  out->cu = g->cu;
  out->mode = mode;
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_CUDA;
  o.device_ordinal = 0; /* the shared GPU is device 0 */
  o.exec_mode = mode;
  o.flags = flags;
  o.flags_set = KD_SESSION_NO_PDL; /* a case says whether it uses PDL, not the environment */
  if (kd_session_create(&o, &out->session) != KD_OK) {
    out->session = NULL;
    return kb_run_fail(run, "kd_session_create: %s", kd_last_error());
  }
  if ((st = kb_gpu_check(run, out->cu->cuEventCreate(&out->start, CU_EVENT_DEFAULT), "cuEventCreate(start)")) ||
      (st = kb_gpu_check(run, out->cu->cuEventCreate(&out->stop, CU_EVENT_DEFAULT), "cuEventCreate(stop)"))) {
    kb_kdag_close(out);
    return st;
  }
  return KB_OK;
}

void kb_kdag_close(kb_kdag *k) {
  if (!k || !k->cu) return;
  kd_session_destroy(k->session);
  if (k->start) k->cu->cuEventDestroy(k->start);
  if (k->stop) k->cu->cuEventDestroy(k->stop);
  memset(k, 0, sizeof *k);
}

typedef struct load_request {
  const void *cubin, *ptx;
  size_t cubin_size, ptx_size;
  const char *name;
  kd_function *out;
} load_request;

static kd_status load_function(kd_raw *raw, void *user) {
  load_request *q = user;
  kd_module m;
  kd_status st = kd_raw_load_image(raw, q->cubin, q->cubin_size, &m);
  if (st == KD_ERR_NO_BINARY_FOR_GPU) st = kd_raw_load_ptx(raw, q->ptx, q->ptx_size, &m);
  if (!st) st = kd_module_function(kd_raw_session(raw), m, q->name, q->out);
  return st;
}

kb_status kb_kdag_function(kb_run *run, kb_kdag *k, const void *cubin, size_t cubin_size,
                           const void *ptx, size_t ptx_size, const char *name, kd_function *out) {
  load_request q = {cubin, ptx, cubin_size, ptx_size, name, out};
  if (kd_with_raw(k->session, "bench.load", load_function, &q))
    return kb_run_fail(run, "loading %s: %s", name, kd_last_error());
  return KB_OK;
}

typedef struct stream_call {
  kb_stream_fn *fn;
  void *user;
  CUresult result;
} stream_call;

static kd_status call_on_session(kd_raw *raw, void *user) {
  stream_call *c = user;
  void *stream = NULL;
  kd_status st = kd_raw_stream(raw, &stream);
  if (st) return st;
  c->result = c->fn((CUstream)stream, c->user);
  return KD_OK;
}

kb_status kb_kdag_on_stream(kb_run *run, kb_kdag *k, kb_stream_fn *fn, void *user, const char *call) {
  stream_call c = {fn, user, CUDA_SUCCESS};
  if (kd_with_raw(k->session, "bench.stream", call_on_session, &c))
    return kb_run_fail(run, "%s in a raw scope: %s", call, kd_last_error());
  return kb_gpu_check(run, c.result, call);
}

typedef struct stream_event {
  const kd_cu_table *cu;
  CUevent event;
} stream_event;

static CUresult record_on(CUstream stream, void *user) {
  stream_event *e = user;
  return e->cu->cuEventRecord(e->event, stream);
}

/* call: "cuEventRecord(start)" or "(stop)", for the messages. */
static kb_status record(kb_run *run, kb_kdag *k, CUevent event, const char *call) {
  stream_event ev = {k->cu, event};
  return kb_kdag_on_stream(run, k, record_on, &ev, call);
}

kb_status kb_kdag_begin(kb_run *run, kb_kdag *k, uint64_t *t0_ns) {
  kb_status st = record(run, k, k->start, "cuEventRecord(start)");
  *t0_ns = kb_now_ns();
  return st;
}

kb_status kb_kdag_end(kb_run *run, kb_kdag *k, uint64_t t0_ns, kb_timing *out) {
  out->host_ns = (double)(kb_now_ns() - t0_ns);
  kb_status st = record(run, k, k->stop, "cuEventRecord(stop)");
  if (st) return st;
  if ((st = kb_gpu_check(run, k->cu->cuEventSynchronize(k->stop), "cuEventSynchronize(stop)"))) return st;
  float ms = 0;
  if ((st = kb_gpu_check(run, k->cu->cuEventElapsedTime(&ms, k->start, k->stop), "cuEventElapsedTime")))
    return st;
  out->gpu_ns = (double)ms * 1e6;
  /* Retire the batch's completions (they have all fired), so the next
   * batch starts with none in flight; a device fault found here fails the
   * case. Retiring is part of what a submission costs (in a loop the
   * submissions' own reaps do it), so its time counts as the batch's host
   * time: left out, kdag's ratios against the baselines, which have
   * nothing to retire, leaned its way (the more so the fewer completions
   * fire while a batch is submitted: every one at N = 10000). */
  uint64_t r0 = kb_now_ns();
  if (kd_session_reap(k->session, NULL)) return kb_run_fail(run, "kd_session_reap: %s", kd_last_error());
  out->host_ns += (double)(kb_now_ns() - r0);
  return KB_OK;
}

static kd_status synchronize(kd_raw *raw, void *user) {
  (void)user;
  return kd_raw_synchronize(raw);
}

kb_status kb_kdag_wait(kb_run *run, kb_kdag *k) {
  if (kd_with_raw(k->session, "bench.wait", synchronize, NULL) || kd_session_reap(k->session, NULL))
    return kb_run_fail(run, "waiting for the session stream: %s", kd_last_error());
  return KB_OK;
}

kb_status kb_kdag_counters(kb_run *run, kb_kdag *k, kd_session_stats *out) {
  if (kd_session_stats_get(k->session, out)) return kb_run_fail(run, "kd_session_stats_get: %s", kd_last_error());
  return KB_OK;
}

kb_status kb_kdag_check_mode(kb_run *run, const kb_kdag *k, const kd_session_stats *before,
                             const kd_session_stats *after) {
  if (k->mode != KD_EXEC_GRAPH || after->graph_launches > before->graph_launches) return KB_OK;
  return kb_run_skip(run,
                     "exec_mode GRAPH did not launch a CUDA graph (counters: graph_launches %llu -> %llu, "
                     "graph_instantiations %llu, launches %llu -> %llu): this kdag build has no GRAPH "
                     "executor, and its eager figures are not reported as GRAPH ones",
                     (unsigned long long)before->graph_launches, (unsigned long long)after->graph_launches,
                     (unsigned long long)after->graph_instantiations, (unsigned long long)before->launches,
                     (unsigned long long)after->launches);
}

kb_status kb_kdag_submit_batch(kb_run *run, kb_kdag *k, kd_graph *g, uint64_t iterations, kb_timing *out) {
  uint64_t t0 = 0; /* set by the begin call, after its event */
  kb_status st = kb_kdag_begin(run, k, &t0);
  if (st) return st;
  for (uint64_t it = 0; it < iterations; ++it)
    if (kd_graph_submit(g, NULL)) return kb_run_fail(run, "kd_graph_submit: %s", kd_last_error());
  return kb_kdag_end(run, k, t0, out);
}

kb_status kb_kdag_preflight(kb_run *run, kb_kdag *k, kd_graph *g) {
  kd_session_stats before, after;
  kb_status st = kb_kdag_counters(run, k, &before);
  if (st) return st;
  if (kd_graph_submit(g, NULL)) return kb_run_fail(run, "kd_graph_submit: %s", kd_last_error());
  if ((st = kb_kdag_wait(run, k)) || (st = kb_kdag_counters(run, k, &after))) return st;
  return kb_kdag_check_mode(run, k, &before, &after);
}
