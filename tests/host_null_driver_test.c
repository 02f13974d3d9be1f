/* SPDX-License-Identifier: Apache-2.0 */
/* Host lane: the CUDA backend's bookkeeping against tests/null_driver.c, a
 * null CUDA driver (no GPU: kernels do nothing, copies are host memcpys,
 * events finish when recorded or, while held, when waited for).
 *
 * These tests prove nothing about a GPU; the GPU lane's tests do that on
 * the H200. They check what kdag asks of the driver, counted by the driver
 * itself rather than by kdag's own counters: which calls and how many, no
 * synchronizing call in steady state, and nothing a launch uses unloaded,
 * destroyed or freed before that launch is complete. They run in CI under
 * ASan and UBSan, where the GPU lane's tests skip. */
#include <cuda.h> /* CUresult codes to inject */
#include <pthread.h>
#include <time.h>

#include "kdag_test.h"
#include "kernels/embedded.h"
#include "null_driver.h"
#include "session/dlpack.h"

static kdag_null_api nd; /* set by null_session */

static kd_session *null_session_flags(kd_exec_mode mode, uint32_t ring, uint32_t flags) {
  /* Criterion runs each test in a process of its own: the driver is
   * loaded there, after this. */
  setenv("KDAG_CUDA_DRIVER_PATH", KDAG_NULL_DRIVER, 1);
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_CUDA;
  o.exec_mode = mode;
  o.flags = flags;
  if (ring) o.completion_ring_capacity = ring;
  kd_session *s;
  KDT_OK(kd_session_create(&o, &s));
  cr_assert(kdag_null_api_get(KDAG_NULL_DRIVER, &nd), "the null driver is not the library kdag loaded");
  kd_device_info info;
  KDT_OK(kd_session_device_info(s, &info));
  cr_assert_str_eq(info.name, KDAG_NULL_DEVICE_NAME);
  return s;
}

static kd_session *null_session(kd_exec_mode mode, uint32_t ring) { return null_session_flags(mode, ring, 0); }

/* A CUDA session on the null driver's second device (KDAG_NULL_DEVICES
 * set to 2 or more first), in exec mode `mode`. */
static kd_session *null_session_on_device1(kd_exec_mode mode) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_CUDA;
  o.exec_mode = mode;
  o.device_ordinal = 1;
  kd_session *s;
  KDT_OK(kd_session_create(&o, &s));
  return s;
}


static kdag_null_calls calls(void) {
  kdag_null_calls c;
  nd.calls_get(&c);
  return c;
}

static kd_session_stats counters(kd_session *s) {
  kd_session_stats k;
  KDT_OK(kd_session_stats_get(s, &k));
  return k;
}

/* After the session is gone: everything the driver handed out came back,
 * and nothing went before the work using it was complete. */
static void assert_all_returned(void) {
  kdag_null_calls c = calls();
  cr_assert_eq(c.lifetime_violations, 0, "something went while the work using it was pending");
  cr_assert_eq(c.device_frees, c.device_allocs);
  cr_assert_eq(c.pinned_frees, c.pinned_allocs);
  cr_assert_eq(c.module_unloads, c.module_loads);
  cr_assert_eq(c.events_destroyed, c.events_created);
  cr_assert_eq(c.exec_destroys, c.graph_instantiations);
}

#define LEN 256

typedef struct pipeline {
  kd_tensor a, b;
  kd_graph *g;
  kd_sink *sink;
  float in[LEN], out[LEN];
} pipeline;

/* upload a; a *= 2 and b = a (built-in kernels: no-ops here); sink a. The
 * sink sees the upload, whatever the kernels did not do. */
static void pipeline_make(kd_session *s, pipeline *p) {
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  KDT_OK(kd_tensor_create(s, &d, &p->a));
  KDT_OK(kd_tensor_create(s, &d, &p->b));
  KDT_OK(kd_graph_create(s, &p->g));
  KDT_OK(kd_graph_upload(p->g, "up", p->a, p->in, sizeof p->in, NULL));
  KDT_OK(kd_graph_op_scale(p->g, "a*=2", kd_whole(p->a), 2.0, NULL));
  KDT_OK(kd_graph_op_copy(p->g, "b=a", kd_whole(p->b), kd_whole(p->a), NULL));
  KDT_OK(kd_graph_sink(p->g, "a", p->a, p->out, sizeof p->out, &p->sink));
}

static void pipeline_check(pipeline *p, int round) {
  KDT_OK(kd_sink_wait(p->sink));
  for (int i = 0; i < LEN; ++i) cr_assert_eq(p->out[i], p->in[i], "round %d: out[%d]", round, i);
}

/* Many submissions, each waited for at its sink: the driver sees no
 * synchronizing call (stream or context wait, free, pinning, registering)
 * once the staging pool has grown, one event wait per sink wait, and the
 * same executable graph relaunched. */
static void submit_and_check(pipeline *p, int round) {
  for (int i = 0; i < LEN; ++i) p->in[i] = (float)(round * LEN + i);
  KDT_OK(kd_graph_submit(p->g, NULL));
  pipeline_check(p, round);
}

static void steady_state(kd_exec_mode mode) {
  kd_session *s = null_session(mode, 0);
  pipeline p;
  pipeline_make(s, &p);
  const int warm = 4, rounds = 1000;
  for (int r = 0; r < warm; ++r) submit_and_check(&p, r);
  kdag_null_calls c0 = calls();
  kd_session_stats k0 = counters(s);
  for (int r = warm; r < warm + rounds; ++r) submit_and_check(&p, r);
  kdag_null_calls c1 = calls();
  kd_session_stats k1 = counters(s);
  const uint64_t n = (uint64_t)rounds;
  cr_assert_eq(c1.stream_syncs, c0.stream_syncs, "no stream synchronize");
  cr_assert_eq(c1.sync_frees, c0.sync_frees, "no cuMemFree or cuMemFreeHost");
  cr_assert_eq(c1.pinned_allocs, c0.pinned_allocs, "no new pinned memory");
  cr_assert_eq(c1.host_registers, 0, "no host registration");
  cr_assert_eq(c1.device_allocs, c0.device_allocs, "no device allocation");
  cr_assert_eq(c1.events_created, c0.events_created, "events come from the pool");
  cr_assert_eq(c1.event_syncs - c0.event_syncs, n, "one event wait per sink wait");
  cr_assert_eq(k1.event_waits - k0.event_waits, n);
  cr_assert_eq(k1.stream_syncs + k1.device_syncs, 0);
  /* The driver calls of a round, each one named, so that one more per
   * submission fails here (the host time per launch is the driver's):
   *   both modes: cuCtxGetCurrent at the submit and at the wait (entering
   *   the session), the completion's cuEventRecord, the sink's
   *   cuEventSynchronize;
   *   GRAPH: cuGraphLaunch, and the upload's memcpy node pointed at this
   *   launch's staging block when it is not the last one's (the sink's
   *   block and event are the same every round: the sink keeps those of
   *   its waited copy, kd_sink_take);
   *   EAGER: the upload, two kernels, the sink's copy and its event;
   * and a reap's cuEventQuery every KD_REAP_EVERY submissions (two polls:
   * the oldest and the newest). */
  uint64_t queries = c1.event_queries - c0.event_queries, made = c1.calls - c0.calls - queries;
  if (mode == KD_EXEC_GRAPH) /* the upload's re-point is skipped only after a reap, when its block came back */
    cr_assert(made >= 6 * n - n / 64 - 2 && made <= 6 * n, "%.3f calls per round", (double)made / (double)n);
  else
    cr_assert_eq(made, 9 * n, "%.3f calls per round", (double)made / (double)n);
  cr_assert_leq(queries, n / 32 + 2, "%llu event queries", (unsigned long long)queries);
  if (mode == KD_EXEC_GRAPH) {
    cr_assert_eq(c1.graph_instantiations, 1);
    cr_assert_eq(c1.graph_launches - c0.graph_launches, n);
    cr_assert_eq(c1.kernel_launches, 0);
    cr_assert_eq(c1.kernel_node_patches, 0, "nothing changed: nothing patched");
    cr_assert_eq(k1.graph_launches, c1.graph_launches);
    /* The sink's event is a node of the graph: one record per launch. */
    cr_assert_eq(c1.event_records - c0.event_records, n);
  } else {
    cr_assert_eq(c1.kernel_launches - c0.kernel_launches, 2 * n);
    cr_assert_eq(c1.graph_launches, 0);
    cr_assert_eq(c1.event_records - c0.event_records, 2 * n, "the sink's event and the completion's");
  }
  kd_graph_destroy(p.g);
  KDT_OK(kd_tensor_release(s, p.a));
  KDT_OK(kd_tensor_release(s, p.b));
  kd_session_destroy(s);
  assert_all_returned();
}

Test(host_null_driver, eager_steady_state_makes_no_synchronizing_driver_call) { steady_state(KD_EXEC_EAGER); }
Test(host_null_driver, graph_steady_state_makes_no_synchronizing_driver_call) { steady_state(KD_EXEC_GRAPH); }

/* Launches in flight while the caller lets go of everything: no tensor
 * memory is freed, and no executable graph destroyed, before the launches
 * that use them are complete; a topology change instantiates anew and the
 * old executable graph goes only when its launches are done. */
Test(host_null_driver, graph_launches_in_flight_keep_what_they_use) {
  kd_session *s = null_session(KD_EXEC_GRAPH, 0);
  pipeline p;
  for (int i = 0; i < LEN; ++i) p.in[i] = (float)i;
  pipeline_make(s, &p);
  nd.hold(1);
  for (int r = 0; r < 8; ++r) KDT_OK(kd_graph_submit(p.g, NULL));
  cr_assert_eq(counters(s).inflight, 8);
  /* A new node: a new plan, a new executable graph; the old one has
   * launches in flight. */
  kd_tensor c;
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  KDT_OK(kd_tensor_create(s, &d, &c));
  KDT_OK(kd_graph_op_copy(p.g, "c=b", kd_whole(c), kd_whole(p.b), NULL));
  KDT_OK(kd_graph_submit(p.g, NULL));
  KDT_OK(kd_tensor_release(s, p.a)); /* the graph binds them still */
  KDT_OK(kd_tensor_release(s, p.b));
  kdag_null_calls c0 = calls();
  cr_assert_eq(c0.graph_instantiations, 2);
  cr_assert_eq(c0.exec_destroys, 0, "the first executable graph has launches in flight");
  /* Now the graph goes too, with one tensor rebound first. */
  kd_tensor c2;
  KDT_OK(kd_tensor_create(s, &d, &c2));
  KDT_OK(kd_graph_rebind(p.g, c, c2));
  KDT_OK(kd_tensor_release(s, c));
  KDT_OK(kd_tensor_release(s, c2));
  uint64_t frees = calls().device_frees;
  kd_graph_destroy(p.g);
  uint32_t pending = 0;
  KDT_OK(kd_session_reap(s, &pending));
  cr_assert_eq(pending, 9);
  kdag_null_calls c1 = calls();
  cr_assert_eq(c1.device_frees, frees, "tensor memory freed under work in flight");
  cr_assert_eq(c1.exec_destroys, 0);
  cr_assert_eq(c1.lifetime_violations, 0);
  cr_assert_eq(c1.stream_syncs + c1.event_syncs, 0, "letting go never waits");
  nd.hold(0);
  KDT_OK(kd_session_reap(s, &pending));
  cr_assert_eq(pending, 0);
  kdag_null_calls after = calls();
  cr_assert_eq(after.exec_destroys, 2);
  cr_assert_eq(after.device_frees, frees + 4, "a, b, c and c2, once the work was done");
  kd_session_destroy(s);
  assert_all_returned();
}

/* A full ring waits for its oldest entry alone: one event wait each. */
Test(host_null_driver, a_full_ring_waits_for_the_oldest_completion_alone) {
  kd_session *s = null_session(KD_EXEC_GRAPH, 4);
  pipeline p;
  for (int i = 0; i < LEN; ++i) p.in[i] = (float)-i;
  pipeline_make(s, &p);
  nd.hold(1);
  for (int r = 0; r < 10; ++r) KDT_OK(kd_graph_submit(p.g, NULL));
  kd_session_stats k = counters(s);
  cr_assert_eq(k.ring_full_waits, 6);
  cr_assert_eq(k.inflight, 4);
  kdag_null_calls c = calls();
  cr_assert_eq(c.event_syncs, 6, "one wait per full ring, on the oldest");
  cr_assert_eq(c.stream_syncs, 0);
  pipeline_check(&p, 9); /* the latest submission's copy */
  nd.hold(0);
  kd_graph_destroy(p.g);
  KDT_OK(kd_tensor_release(s, p.a));
  KDT_OK(kd_tensor_release(s, p.b));
  kd_session_destroy(s);
  assert_all_returned();
}

/* Rebinding patches exactly the kernel nodes using the rebound tensor (one
 * driver call each) and instantiates nothing; a rebinding undone before
 * the launch patches nothing. */
Test(host_null_driver, rebinding_patches_the_users_of_the_tensor_alone) {
  kd_session *s = null_session(KD_EXEC_GRAPH, 0);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  kd_tensor t[4], t2;
  for (int i = 0; i < 4; ++i) KDT_OK(kd_tensor_create(s, &d, &t[i]));
  KDT_OK(kd_tensor_create(s, &d, &t2));
  static const float zero = 0;
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  for (int i = 0; i < 4; ++i) KDT_OK(kd_graph_op_fill(g, "fill", kd_whole(t[i]), &zero, NULL));
  KDT_OK(kd_graph_op_scale(g, "t0*=2", kd_whole(t[0]), 2.0, NULL));
  KDT_OK(kd_graph_op_add(g, "t1=t0+t2", kd_whole(t[1]), kd_whole(t[0]), kd_whole(t[2]), NULL));
  KDT_OK(kd_graph_op_scale(g, "t3*=2", kd_whole(t[3]), 2.0, NULL));
  KDT_OK(kd_graph_submit(g, NULL));
  cr_assert_eq(calls().kernel_node_patches, 0);
  KDT_OK(kd_graph_rebind(g, t[0], t2)); /* its fill, scale and the add */
  KDT_OK(kd_graph_submit(g, NULL));
  kdag_null_calls c = calls();
  cr_assert_eq(c.kernel_node_patches, 3);
  cr_assert_eq(c.graph_instantiations, 1);
  cr_assert_eq(counters(s).graph_updates, 1);
  KDT_OK(kd_graph_rebind(g, t2, t[0]));
  KDT_OK(kd_graph_rebind(g, t[0], t2)); /* undone before the launch */
  KDT_OK(kd_graph_submit(g, NULL));
  cr_assert_eq(calls().kernel_node_patches, 3, "a rebinding undone patches nothing");
  kd_graph_destroy(g);
  for (int i = 0; i < 4; ++i) KDT_OK(kd_tensor_release(s, t[i]));
  KDT_OK(kd_tensor_release(s, t2));
  kd_session_destroy(s);
  assert_all_returned();
}

/* AUTO runs a plan eagerly graph_after times, then as one CUDA graph. */
Test(host_null_driver, auto_switches_to_a_cuda_graph_after_graph_after_submissions) {
  kd_session *s = null_session(KD_EXEC_AUTO, 0);
  pipeline p;
  for (int i = 0; i < LEN; ++i) p.in[i] = (float)(3 * i);
  pipeline_make(s, &p);
  kd_session_options o;
  kd_session_options_init(&o);
  for (uint32_t r = 0; r < o.graph_after; ++r) {
    KDT_OK(kd_graph_submit(p.g, NULL));
    pipeline_check(&p, (int)r);
  }
  kdag_null_calls c = calls();
  cr_assert_eq(c.graph_instantiations, 0);
  cr_assert_eq(c.kernel_launches, 2 * (uint64_t)o.graph_after);
  KDT_OK(kd_graph_submit(p.g, NULL));
  pipeline_check(&p, (int)o.graph_after);
  c = calls();
  cr_assert_eq(c.graph_instantiations, 1);
  cr_assert_eq(c.graph_launches, 1);
  kd_graph_destroy(p.g);
  KDT_OK(kd_tensor_release(s, p.a));
  KDT_OK(kd_tensor_release(s, p.b));
  kd_session_destroy(s);
  assert_all_returned();
}

/* Seeded random sequences of what a caller may do, in any order: create
 * and release tensors, create, extend, submit, rebind, switch and destroy
 * graphs, wait at sinks, reap, with completions held pending at random.
 * Refusals are fine (a released handle, an aliasing node, ...); a fault,
 * a failed allocation or a lifetime violation is not, and at the end the
 * driver has had everything back. */
#define RT 8 /* tensor slots */
#define RG 3 /* graph slots */

typedef struct rand_graph {
  kd_graph *g;
  kd_sink *sink;
  int bound[RT]; /* the graph may bind tensor slot i's tensor of the time */
  kd_tensor used[16];
  int used_count;
  float out[LEN];
} rand_graph;

static uint32_t next(uint64_t *x) {
  *x = *x * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*x >> 33);
}

static void refusal_only(kd_status st, const char *what) {
  cr_assert(st != KD_ERR_DEVICE_FAULT && st != KD_ERR_OUT_OF_MEMORY && st != KD_ERR_DRIVER, "%s: %s: %s", what,
            kd_status_name(st), kd_last_error());
  cr_assert(st == KD_OK || kd_last_error()[0], "%s refused without a message", what);
}

Test(host_null_driver, random_operations_return_everything_and_violate_nothing) {
  kd_session *s = null_session(KD_EXEC_AUTO, 16);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  static float init[LEN];
  kd_tensor t[RT];
  int live[RT] = {0};
  rand_graph gs[RG];
  memset(gs, 0, sizeof gs);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  uint32_t submits = 0, rebinds = 0, waits = 0, holds = 0;
  for (int step = 0; step < 30000; ++step) {
    uint32_t op = next(&x) % 16, i = next(&x) % RT, j = next(&x) % RT, k = next(&x) % RG;
    rand_graph *rg = &gs[k];
    kd_status st = KD_OK;
    switch (op) {
      case 0:
      case 1: /* a tensor into an empty slot */
        if (!live[i]) {
          KDT_OK(kd_tensor_from_host(s, &d, init, sizeof init, &t[i]));
          live[i] = 1;
        }
        break;
      case 2: /* the caller lets go of one (graphs keep theirs) */
        if (live[i]) {
          KDT_OK(kd_tensor_release(s, t[i]));
          live[i] = 0;
        }
        break;
      case 3:
        if (!rg->g) {
          KDT_OK(kd_graph_create(s, &rg->g));
          rg->sink = NULL;
          rg->used_count = 0;
        }
        break;
      case 4: /* now and then */
        if (rg->g && next(&x) % 4 == 0) {
          kd_graph_destroy(rg->g); /* and its sink */
          rg->g = NULL;
          rg->sink = NULL;
        }
        break;
      case 5:
      case 6:
      case 7: /* a node over live tensors: may be refused */
        if (rg->g && live[i] && live[j] && rg->used_count < 15) {
          kd_view a = kd_whole(t[i]), b = kd_whole(t[j]);
          switch (next(&x) % 3) {
            case 0: st = kd_graph_op_scale(rg->g, "scale", a, 0.5, NULL); break;
            case 1: st = kd_graph_op_copy(rg->g, "copy", a, b, NULL); break;
            default: st = kd_graph_op_add(rg->g, "add", a, a, b, NULL); break;
          }
          refusal_only(st, "node");
          if (!st) {
            rg->used[rg->used_count++] = t[i];
            rg->used[rg->used_count++] = t[j];
            if (!rg->sink) KDT_OK(kd_graph_sink(rg->g, "out", t[i], rg->out, sizeof rg->out, &rg->sink));
          }
        }
        break;
      case 8:
      case 9:
      case 10:
      case 11:
        if (rg->g && rg->used_count) {
          refusal_only(st = kd_graph_submit(rg->g, NULL), "submit");
          submits += !st;
        }
        break;
      case 12: /* rebind a tensor the graph used (its handle may be dead) */
        if (rg->g && rg->used_count && live[j]) {
          kd_tensor old = rg->used[next(&x) % (uint32_t)rg->used_count];
          refusal_only(st = kd_graph_rebind(rg->g, old, t[j]), "rebind");
          if (!st) {
            for (int u = 0; u < rg->used_count; ++u)
              if (rg->used[u].bits == old.bits) rg->used[u] = t[j];
            rebinds++;
          }
        }
        break;
      case 13:
        if (rg->sink) {
          st = kd_sink_wait(rg->sink); /* INVALID_ARGUMENT when nothing is pending */
          refusal_only(st, "sink wait");
          waits += !st;
        }
        break;
      case 14:
        holds += (i & 1);
        nd.hold((int)(i & 1));
        if (!(i & 1)) KDT_OK(kd_session_reap(s, NULL));
        break;
      default:
        if (rg->g) KDT_OK(kd_graph_set_exec_mode(rg->g, (kd_exec_mode)(i % 3)));
        break;
    }
    cr_assert_eq(calls().lifetime_violations, 0, "step %d (op %u)", step, op);
  }
  nd.hold(0);
  for (int k = 0; k < RG; ++k)
    if (gs[k].g) kd_graph_destroy(gs[k].g);
  for (int i = 0; i < RT; ++i)
    if (live[i]) KDT_OK(kd_tensor_release(s, t[i]));
  kdag_null_calls c = calls();
  cr_log_info("%u submissions, %u rebindings, %u sink waits, %u holds, %llu instantiations, %llu patches", submits,
              rebinds, waits, holds, (unsigned long long)c.graph_instantiations,
              (unsigned long long)c.kernel_node_patches);
  cr_assert_gt(submits, 2000, "the sequence exercised submissions (%u)", submits);
  cr_assert_gt(rebinds, 100, "and rebindings (%u)", rebinds);
  cr_assert_gt(waits, 400, "and sink waits (%u)", waits);
  cr_assert_gt(holds, 400);
  cr_assert_gt(c.graph_instantiations, 200, "and GRAPH mode (%llu instantiations)",
               (unsigned long long)c.graph_instantiations);
  cr_assert_gt(c.kernel_node_patches, 40);
  kd_session_destroy(s);
  assert_all_returned();
}

/* ---- refusals the driver makes rarely, injected ---------------------------
 * Each is a clear error naming the call (and the node, where the driver
 * says which); nothing submitted before is lost, the session stays usable,
 * and everything comes back. */

static void release_pipeline(kd_session *s, pipeline *p) {
  kd_graph_destroy(p->g);
  KDT_OK(kd_tensor_release(s, p->a));
  KDT_OK(kd_tensor_release(s, p->b));
}

static void fill_in(pipeline *p, float base) {
  for (int i = 0; i < LEN; ++i) p->in[i] = base + (float)i;
}

/* A session of mode with the pipeline made, nothing submitted yet. */
static kd_session *made(kd_exec_mode mode, pipeline *p) {
  kd_session *s = null_session(mode, 0);
  fill_in(p, 0);
  pipeline_make(s, p);
  return s;
}

/* A session of mode with the pipeline made, submitted and checked once. */
static kd_session *started(kd_exec_mode mode, pipeline *p) {
  kd_session *s = made(mode, p);
  KDT_OK(kd_graph_submit(p->g, NULL));
  pipeline_check(p, 0);
  return s;
}

/* Lets go of the pipeline and the session; every object must be back. */
static void finish(kd_session *s, pipeline *p) {
  release_pipeline(s, p);
  kd_session_destroy(s);
  assert_all_returned();
}

Test(host_null_driver, a_refused_instantiation_names_the_node_and_the_eager_path_stays) {
  kd_session *s = null_session(KD_EXEC_GRAPH, 0);
  pipeline p;
  fill_in(&p, 0);
  pipeline_make(s, &p); /* CUDA graph nodes in plan order: up, a*=2, b=a, the sink's copy and event */
  nd.fail("cuGraphInstantiateWithParams", 0, CUDA_ERROR_NOT_SUPPORTED, 1);
  KDT_FAILS(kd_graph_submit(p.g, NULL), KD_ERR_DRIVER, "node 'a*=2' (#1)");
  cr_assert(strstr(kd_last_error(), "cuGraphInstantiateWithParams"), "%s", kd_last_error());
  KDT_FAILS(kd_sink_wait(p.sink), KD_ERR_INVALID_ARGUMENT, "no submission"); /* nothing was enqueued */
  cr_assert_eq(calls().graph_launches, 0);
  KDT_OK(kd_graph_set_exec_mode(p.g, KD_EXEC_EAGER));
  submit_and_check(&p, 1);
  KDT_OK(kd_graph_set_exec_mode(p.g, KD_EXEC_GRAPH)); /* and GRAPH works once the driver does */
  submit_and_check(&p, 2);
  cr_assert_eq(calls().graph_instantiations, 1);
  /* AUTO: a refusal at the switch leaves the plan EAGER for good, without an error. */
  KDT_OK(kd_graph_set_exec_mode(p.g, KD_EXEC_AUTO));
  KDT_OK(kd_graph_op_scale(p.g, "b*=2", kd_whole(p.b), 2.0, NULL)); /* a new plan: counted from 0 */
  kd_session_options o;
  kd_session_options_init(&o);
  for (uint32_t r = 0; r < o.graph_after; ++r) KDT_OK(kd_graph_submit(p.g, NULL));
  nd.fail("cuGraphInstantiateWithParams", 0, CUDA_ERROR_NOT_SUPPORTED, 0);
  for (int r = 0; r < 3; ++r) {
    submit_and_check(&p, 3 + r);
  }
  kdag_null_calls c = calls();
  cr_assert_eq(c.graph_instantiations, 1, "AUTO stayed EAGER after the refusal");
  cr_assert_eq(c.graph_launches, 1);
  finish(s, &p);
}

/* Rebinds the pipeline's b to a new tensor (a GRAPH launch then patches
 * b=a); returns the old b, for the caller to release. */
static kd_tensor rebind_b(kd_session *s, pipeline *p) {
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  kd_tensor c, old = p->b;
  KDT_OK(kd_tensor_from_host(s, &d, p->in, sizeof p->in, &c));
  KDT_OK(kd_graph_rebind(p->g, old, c));
  p->b = c;
  return old;
}

Test(host_null_driver, a_refused_update_instantiates_afresh) {
  pipeline p;
  kd_session *s = started(KD_EXEC_GRAPH, &p);
  kd_tensor old = rebind_b(s, &p);
  nd.fail("cuGraphExecKernelNodeSetParams", 0, CUDA_ERROR_INVALID_VALUE, 0);
  submit_and_check(&p, 1);
  kd_session_stats k = counters(s);
  cr_assert_eq(k.graph_instantiations, 2, "the refused update was replaced by a new instantiation");
  cr_assert_eq(k.graph_updates, 0);
  cr_assert_eq(calls().graph_instantiations, 2);
  KDT_OK(kd_tensor_release(s, old));
  finish(s, &p);
}

/* Out of memory in a patch is no verdict on the executable graph: the
 * submission is refused, the graph is kept, and the next submission makes
 * the patch again (what kdag records of the node's parameters is what the
 * executable graph has, not what the refused patch would have set). */
Test(host_null_driver, a_patch_refused_for_memory_is_made_again_on_the_same_graph) {
  pipeline p;
  kd_session *s = started(KD_EXEC_GRAPH, &p);
  kd_tensor old = rebind_b(s, &p); /* b's one user: the built-in copy b=a */
  uint64_t patches = calls().kernel_node_patches;
  nd.fail("cuGraphExecKernelNodeSetParams", 0, CUDA_ERROR_OUT_OF_MEMORY, 0);
  KDT_FAILS(kd_graph_submit(p.g, NULL), KD_ERR_OUT_OF_MEMORY, "node 'b=a' (#2)");
  cr_assert_eq(calls().kernel_node_patches, patches + 1);
  submit_and_check(&p, 1);
  cr_assert_eq(calls().kernel_node_patches, patches + 2, "the refused patch is made again");
  kd_session_stats k = counters(s);
  cr_assert_eq(k.graph_instantiations, 1, "the same executable graph");
  cr_assert_eq(k.graph_updates, 1);
  cr_assert_eq(calls().graph_instantiations, 1);
  submit_and_check(&p, 2);
  cr_assert_eq(calls().kernel_node_patches, patches + 2, "nothing left to patch");
  KDT_OK(kd_tensor_release(s, old));
  finish(s, &p);
}

/* Host stand-ins of add_kernel (float *out, const float *x, const float *y,
 * int n) and spin_kernel (unsigned long long ns, int *done), which the null
 * driver runs on its host memory: what the kernel nodes compute shows
 * which addresses and values they were given. */
static void add_on_host(void *const *p) {
  float *out;
  const float *x, *y;
  int n;
  memcpy(&out, p[0], sizeof out);
  memcpy(&x, p[1], sizeof x);
  memcpy(&y, p[2], sizeof y);
  memcpy(&n, p[3], sizeof n);
  for (int i = 0; i < n; ++i) out[i] = x[i] + y[i];
}

static void spin_on_host(void *const *p) {
  int *done;
  memcpy(&done, p[1], sizeof done);
  *done = 1;
}

typedef struct two_kernels {
  kd_module add_m, test_m;
  kd_function add, spin;
} two_kernels;

static kd_status load_two(kd_raw *raw, void *user) {
  two_kernels *k = user;
  kd_session *s = kd_raw_session(raw);
  kd_status st = kd_raw_load_ptx(raw, (const char *)kd_kernel_add_ptx, kd_kernel_add_ptx_size, &k->add_m);
  if (!st) st = kd_module_function(s, k->add_m, "add_kernel", &k->add);
  if (!st) st = kd_raw_load_ptx(raw, (const char *)kd_kernel_test_ptx, kd_kernel_test_ptx_size, &k->test_m);
  if (!st) st = kd_module_function(s, k->test_m, "spin_kernel", &k->spin);
  return st;
}

/* What each kernel node is given, submission after submission, in EAGER and
 * GRAPH mode: a compact view that starts inside a rebound tensor, a pointer
 * after a value argument into another rebound tensor, and a value set on
 * the node that also reads a rebound tensor. GRAPH patches them in place;
 * both modes compute the same, on the null driver's host stand-ins. */
static void kernel_nodes_given_current_tensors_and_values(kd_exec_mode mode) {
  kd_session *s = null_session(mode, 0);
  static const uint32_t add_sizes[] = {8, 8, 8, 4}, spin_sizes[] = {8, 8};
  cr_assert(nd.emulate("add_kernel", 4, add_sizes, add_on_host));
  cr_assert(nd.emulate("spin_kernel", 2, spin_sizes, spin_on_host));
  two_kernels k;
  KDT_OK(kd_with_raw(s, "test.load", load_two, &k));
  enum { ROWS = 64, COLS = 8, N = ROWS * 4 };
  float m[2][ROWS * COLS], y[N], z[N], want[N];
  for (int i = 0; i < ROWS * COLS; ++i) {
    m[0][i] = (float)i;
    m[1][i] = (float)(1000 + 3 * i);
  }
  for (int i = 0; i < N; ++i) y[i] = 0.5f * (float)i;
  int32_t zeros[4] = {0}, f[4];
  kd_tensor_desc dm = {.dtype = KD_F32, .rank = 2, .shape = {ROWS, COLS}};
  kd_tensor_desc dv = {.dtype = KD_F32, .rank = 1, .shape = {N}};
  kd_tensor_desc df = {.dtype = KD_I32, .rank = 1, .shape = {4}};
  kd_tensor tm[2], tf[2], ty, tz;
  for (int b = 0; b < 2; ++b) {
    KDT_OK(kd_tensor_from_host(s, &dm, m[b], sizeof m[b], &tm[b]));
    KDT_OK(kd_tensor_from_host(s, &df, zeros, sizeof zeros, &tf[b]));
  }
  KDT_OK(kd_tensor_from_host(s, &dv, y, sizeof y, &ty));
  KDT_OK(kd_tensor_from_host(s, &dv, y, sizeof y, &tz));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_view last = {.tensor = tm[0], .rank = 1, .offset = ROWS * 4, .shape = {N}, .strides = {1}};
  kd_view third = {.tensor = tf[0], .rank = 1, .offset = 2, .shape = {1}, .strides = {1}};
  kd_launch_config cfg = {{1, 1, 1}, {128, 1, 1}, 0, 0};
  kd_garg add[] = {kd_g_out(kd_whole(tz)), kd_g_in(last), kd_g_in(kd_whole(ty)), kd_g_value(kd_arg_i32(N))};
  kd_garg spin[] = {kd_g_value(kd_arg_u64(0)), kd_g_out(third)};
  kd_node add_node;
  KDT_OK(kd_graph_kernel(g, "z=m[:,4:]+y", k.add, &cfg, add, 4, &add_node));
  KDT_OK(kd_graph_kernel(g, "f[2]=1", k.spin, &cfg, spin, 2, NULL));
  kd_sink *sz, *sf;
  KDT_OK(kd_graph_sink(g, "z", tz, z, sizeof z, &sz));
  KDT_OK(kd_graph_sink(g, "f", tf[0], f, sizeof f, &sf));
  for (int i = 0; i < N; ++i) want[i] = y[i];
  int n = N;
  for (int round = 0; round < 6; ++round) {
    int b = round % 2; /* which of each pair the graph uses */
    if (round) {
      KDT_OK(kd_graph_rebind(g, tm[!b], tm[b]));
      KDT_OK(kd_graph_rebind(g, tf[!b], tf[b]));
    }
    if (round == 3 || round == 4) { /* a value with a rebinding, on the same node */
      n = round == 3 ? N / 2 : N / 4;
      KDT_OK(kd_graph_set_arg(g, add_node, 3, kd_arg_i32(n)));
    }
    KDT_OK(kd_tensor_upload(s, tf[0], zeros, sizeof zeros));
    KDT_OK(kd_tensor_upload(s, tf[1], zeros, sizeof zeros));
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_sink_wait(sz));
    KDT_OK(kd_sink_wait(sf));
    for (int i = 0; i < n; ++i) want[i] = m[b][ROWS * 4 + i] + y[i];
    for (int i = 0; i < N; ++i) cr_assert_eq(z[i], want[i], "round %d: z[%d] = %g, not %g", round, i, z[i], want[i]);
    int32_t other[4];
    KDT_OK(kd_tensor_download(s, tf[!b], other, sizeof other));
    for (int i = 0; i < 4; ++i) {
      cr_assert_eq(f[i], i == 2, "round %d: f[%d] of the bound tensor", round, i);
      cr_assert_eq(other[i], 0, "round %d: f[%d] of the unbound tensor", round, i);
    }
  }
  kd_session_stats c = counters(s);
  cr_assert_eq(c.graph_instantiations, mode == KD_EXEC_GRAPH, "patched in place, never built again");
  cr_assert_eq(c.graph_updates, mode == KD_EXEC_GRAPH ? 5u : 0u);
  kd_graph_destroy(g);
  for (int b = 0; b < 2; ++b) {
    KDT_OK(kd_tensor_release(s, tm[b]));
    KDT_OK(kd_tensor_release(s, tf[b]));
  }
  KDT_OK(kd_tensor_release(s, ty));
  KDT_OK(kd_tensor_release(s, tz));
  KDT_OK(kd_module_release(s, k.add_m));
  KDT_OK(kd_module_release(s, k.test_m));
  kd_session_destroy(s);
  assert_all_returned();
}

Test(host_null_driver, eager_kernel_nodes_are_given_current_tensors_and_values) {
  kernel_nodes_given_current_tensors_and_values(KD_EXEC_EAGER);
}

Test(host_null_driver, graph_patches_give_kernel_nodes_current_tensors_and_values) {
  kernel_nodes_given_current_tensors_and_values(KD_EXEC_GRAPH);
}

Test(host_null_driver, a_refused_graph_launch_enqueues_nothing_and_the_next_works) {
  pipeline p;
  kd_session *s = started(KD_EXEC_GRAPH, &p);
  uint64_t submitted = counters(s).submissions;
  kdag_null_calls before = calls();
  nd.fail("cuGraphLaunch", 0, CUDA_ERROR_INVALID_VALUE, 0);
  kd_ticket t;
  KDT_FAILS(kd_graph_submit(p.g, &t), KD_ERR_DRIVER, "cuGraphLaunch");
  cr_assert_eq(calls().event_records, before.event_records, "no completion recorded for nothing");
  cr_assert_eq(t.seq, UINT64_MAX, "no ticket for a failed submission");
  KDT_FAILS(kd_sink_wait(p.sink), KD_ERR_INVALID_ARGUMENT, "no submission");
  cr_assert_eq(counters(s).submissions, submitted);
  submit_and_check(&p, 1);
  finish(s, &p);
}

/* EAGER: the sink's event record refused after its copy was enqueued (the
 * copy's staging block must stay held: it is being written), then the
 * completion's own record refused (kdag then waits for the stream, the one
 * documented fallback, so it can let go of what the work holds). */
Test(host_null_driver, refused_event_records_name_the_call_and_lose_nothing) {
  pipeline p;
  kd_session *s = started(KD_EXEC_EAGER, &p);
  nd.hold(1); /* the refused submission's copy stays pending */
  nd.fail("cuEventRecord", 0, CUDA_ERROR_INVALID_VALUE, 0); /* the sink's */
  KDT_FAILS(kd_graph_submit(p.g, NULL), KD_ERR_DRIVER, "cuEventRecord");
  cr_assert(!strstr(kd_last_error(), "cuMemcpyDtoHAsync"), "names the call that failed: %s", kd_last_error());
  KDT_FAILS(kd_sink_wait(p.sink), KD_ERR_INVALID_ARGUMENT, "no submission");
  fill_in(&p, 10);
  KDT_OK(kd_graph_submit(p.g, NULL)); /* its staging must not be the pending copy's */
  cr_assert_eq(calls().lifetime_violations, 0, "a staging block reused while a copy into it was pending");
  nd.hold(0);
  pipeline_check(&p, 1);
  uint64_t syncs = calls().stream_syncs;
  nd.fail("cuEventRecord", 1, CUDA_ERROR_INVALID_VALUE, 0); /* the completion's */
  fill_in(&p, 20);
  KDT_FAILS(kd_graph_submit(p.g, NULL), KD_ERR_DRIVER, "cuEventRecord");
  cr_assert_eq(calls().stream_syncs, syncs + 1, "the stream waited for, once");
  cr_assert_eq(counters(s).stream_syncs, 1, "and counted");
  pipeline_check(&p, 2); /* the sink's copy was enqueued and recorded: its wait works */
  submit_and_check(&p, 3);
  finish(s, &p);
}

/* A submission whose completion could not be recorded ran (the stream was
 * waited for) but issued no ticket: its sink's copy belongs to no issued
 * submission. Destroying the graph and the session right after gives its
 * block and event back all the same. */
static void refused_completion_then_destroy(kd_exec_mode mode) {
  pipeline p;
  kd_session *s = started(mode, &p);
  /* EAGER records the sink's event, then the completion's; GRAPH records the sink's in the graph. */
  nd.fail("cuEventRecord", mode == KD_EXEC_EAGER ? 1 : 0, CUDA_ERROR_INVALID_VALUE, 0);
  KDT_FAILS(kd_graph_submit(p.g, NULL), KD_ERR_DRIVER, "cuEventRecord");
  nd.fail(NULL, 0, 0, 0);
  finish(s, &p);
}

Test(host_null_driver, eager_a_refused_completion_record_then_destroy_returns_everything) {
  refused_completion_then_destroy(KD_EXEC_EAGER);
}
Test(host_null_driver, graph_a_refused_completion_record_then_destroy_returns_everything) {
  refused_completion_then_destroy(KD_EXEC_GRAPH);
}

/* The completion's event is taken before anything is enqueued: a
 * submission (or an upload) that cannot create one is refused whole, with
 * no work launched that its failure would leave behind. */
Test(host_null_driver, no_event_for_the_completion_refuses_before_anything_is_enqueued) {
  static const kd_exec_mode modes[] = {KD_EXEC_EAGER, KD_EXEC_GRAPH};
  for (size_t m = 0; m < 2; ++m) {
    pipeline p;
    kd_session *s = made(modes[m], &p);
    kdag_null_calls before = calls();
    nd.fail("cuEventCreate", 0, CUDA_ERROR_OUT_OF_MEMORY, 0);
    kd_ticket t = {7, 1}; /* a caller's earlier ticket: the failure must overwrite it */
    KDT_FAILS(kd_graph_submit(p.g, &t), KD_ERR_OUT_OF_MEMORY, "cuEventCreate");
    cr_assert_eq(t.seq, UINT64_MAX, "a failed submission leaves a ticket kd_ticket_done refuses");
    kdag_null_calls after = calls();
    cr_assert_eq(after.copies + after.kernel_launches + after.graph_launches + after.graph_instantiations,
                 before.copies + before.kernel_launches + before.graph_launches + before.graph_instantiations,
                 "nothing was enqueued");
    KDT_FAILS(kd_sink_wait(p.sink), KD_ERR_INVALID_ARGUMENT, "no submission");
    nd.fail("cuEventCreate", 0, CUDA_ERROR_OUT_OF_MEMORY, 0);
    KDT_FAILS(kd_tensor_upload(s, p.b, p.in, sizeof p.in), KD_ERR_OUT_OF_MEMORY, "cuEventCreate");
    cr_assert_eq(calls().copies, after.copies, "the upload copied nothing");
    nd.fail(NULL, 0, 0, 0);
    KDT_OK(kd_graph_submit(p.g, NULL));
    pipeline_check(&p, 1);
    finish(s, &p);
  }
}

/* AUTO: out of memory while launching a plan as a CUDA graph is no verdict
 * on the plan (the driver refused nothing): that submission runs eagerly,
 * and the next launches the CUDA graph again. */
Test(host_null_driver, auto_keeps_graph_mode_after_running_out_of_memory) {
  pipeline p;
  kd_session *s = made(KD_EXEC_AUTO, &p);
  for (int r = 0; r < 3; ++r) { /* two eager submissions, then the CUDA graph */
    KDT_OK(kd_graph_submit(p.g, NULL));
    pipeline_check(&p, r);
  }
  cr_assert_eq(counters(s).graph_launches, 1);
  nd.hold(1); /* the staging blocks stay in flight: the next launch needs new ones */
  KDT_OK(kd_graph_submit(p.g, NULL));
  nd.fail("cuMemHostAlloc", 0, CUDA_ERROR_OUT_OF_MEMORY, 0);
  kd_status st = kd_graph_submit(p.g, NULL); /* eager may find the memory the graph did not */
  cr_assert(st == KD_OK || st == KD_ERR_OUT_OF_MEMORY, "%s", kd_last_error());
  cr_assert_eq(counters(s).graph_launches, 2, "the refused launch is not counted");
  nd.hold(0);
  (void)kd_sink_wait(p.sink);
  submit_and_check(&p, 5);
  cr_assert_eq(counters(s).graph_launches, 3, "GRAPH mode again");
  finish(s, &p);
}

/* ... but a plan that runs out of memory as a CUDA graph every time (its
 * instantiation, here) stops trying after three times in a row. */
Test(host_null_driver, auto_gives_up_on_a_graph_that_keeps_running_out_of_memory) {
  pipeline p;
  kd_session *s = made(KD_EXEC_AUTO, &p);
  for (int r = 0; r < 2; ++r) {
    KDT_OK(kd_graph_submit(p.g, NULL));
    pipeline_check(&p, r);
  }
  for (int r = 2; r < 5; ++r) {
    nd.fail("cuGraphInstantiateWithParams", 0, CUDA_ERROR_OUT_OF_MEMORY, 0);
    fill_in(&p, (float)(10 * r));
    KDT_OK(kd_graph_submit(p.g, NULL)); /* eagerly, this time */
    pipeline_check(&p, r);
  }
  uint64_t tries = calls().graph_instantiations;
  KDT_OK(kd_graph_submit(p.g, NULL));
  pipeline_check(&p, 5);
  cr_assert_eq(calls().graph_instantiations, tries, "no fourth try");
  cr_assert_eq(counters(s).graph_launches, 0);
  finish(s, &p);
}

/* Out of device or pinned memory: KD_ERR_OUT_OF_MEMORY naming the call,
 * and the work submitted before is intact. */
Test(host_null_driver, out_of_device_or_pinned_memory_is_a_clear_error) {
  pipeline p;
  kd_session *s = made(KD_EXEC_GRAPH, &p);
  nd.hold(1);
  KDT_OK(kd_graph_submit(p.g, NULL)); /* pending while the failures happen */
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  kd_tensor t;
  nd.fail("cuMemAllocFromPoolAsync", 0, CUDA_ERROR_OUT_OF_MEMORY, 0);
  KDT_FAILS(kd_tensor_create(s, &d, &t), KD_ERR_OUT_OF_MEMORY, "cuMemAllocFromPoolAsync");
  /* Staging is pinned while its pool grows: two launches in flight need two blocks per transfer. */
  nd.fail("cuMemHostAlloc", 0, CUDA_ERROR_OUT_OF_MEMORY, 0);
  KDT_FAILS(kd_graph_submit(p.g, NULL), KD_ERR_OUT_OF_MEMORY, "cuMemHostAlloc");
  nd.hold(0);
  pipeline_check(&p, 0); /* the first submission's copy, intact */
  submit_and_check(&p, 1);
  cr_assert_eq(calls().lifetime_violations, 0);
  finish(s, &p);
}

/* Every call the null driver can refuse, refused in turn at each of its
 * first few calls, in EAGER and GRAPH mode, during submissions with
 * rebindings and completions held: each submission either succeeds with
 * the right data or is refused with a message, nothing goes before its
 * work is done, the session works once the driver does, and everything
 * comes back. */
Test(host_null_driver, every_refusable_call_refused_in_turn_loses_nothing) {
  static const char *points[] = {"cuEventRecord", "cuMemAllocFromPoolAsync", "cuMemHostAlloc", "cuLaunchKernel",
                                 "cuGraphInstantiateWithParams", "cuGraphLaunch",
                                 "cuGraphExecKernelNodeSetParams"};
  static const kd_exec_mode modes[] = {KD_EXEC_EAGER, KD_EXEC_GRAPH};
  uint32_t refused = 0, runs = 0, by_point[sizeof points / sizeof points[0]] = {0};
  for (size_t m = 0; m < 2; ++m)
    for (size_t f = 0; f < sizeof points / sizeof points[0]; ++f)
      for (uint32_t after = 0; after < 4; ++after) {
        kd_session *s = null_session(modes[m], 4);
        pipeline p;
        fill_in(&p, 0);
        pipeline_make(s, &p);
        kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
        kd_tensor spare;
        KDT_OK(kd_tensor_from_host(s, &d, p.in, sizeof p.in, &spare));
        KDT_OK(kd_graph_submit(p.g, NULL));
        pipeline_check(&p, 0);
        int code = strstr(points[f], "Alloc") ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
        nd.fail(points[f], after, code, 0);
        for (int r = 1; r <= 6; ++r) {
          nd.hold(r % 2);
          if (r == 3) { /* b <-> spare: a GRAPH launch patches its node */
            kd_tensor old = p.b;
            KDT_OK(kd_graph_rebind(p.g, old, spare));
            p.b = spare;
            spare = old;
          }
          if (r == 4) KDT_OK(kd_graph_op_scale(p.g, "b*=1", kd_whole(p.b), 1.0, NULL)); /* GRAPH: instantiates anew */
          fill_in(&p, (float)(100 * r));
          kdag_null_calls before = calls();
          kd_status st = kd_graph_submit(p.g, NULL);
          if (!st) { /* the kernels do nothing here: their launches are what shows they ran */
            kdag_null_calls after_submit = calls();
            if (modes[m] == KD_EXEC_EAGER)
              cr_assert_eq(after_submit.kernel_launches - before.kernel_launches, r >= 4 ? 3u : 2u,
                           "round %d: a successful EAGER submission launched %llu kernels", r,
                           (unsigned long long)(after_submit.kernel_launches - before.kernel_launches));
            else
              cr_assert_eq(after_submit.graph_launches - before.graph_launches, 1u,
                           "round %d: a successful GRAPH submission launched %llu graphs", r,
                           (unsigned long long)(after_submit.graph_launches - before.graph_launches));
          }
          if (st) { /* the injected refusal, named */
            cr_assert_eq(st, code == CUDA_ERROR_OUT_OF_MEMORY ? KD_ERR_OUT_OF_MEMORY : KD_ERR_DRIVER, "%s: %s",
                         kd_status_name(st), kd_last_error());
            cr_assert(strstr(kd_last_error(), points[f]), "the message names %s: %s", points[f], kd_last_error());
          }
          nd.hold(0);
          if (!st) {
            pipeline_check(&p, r);
          } else {
            refused++;
            by_point[f]++;
            (void)kd_sink_wait(p.sink); /* a copy committed before the refusal, if any */
          }
          cr_assert_eq(calls().lifetime_violations, 0, "%s after %u, round %d", points[f], after, r);
        }
        nd.fail(NULL, 0, 0, 0);
        submit_and_check(&p, 99);
        KDT_OK(kd_tensor_release(s, spare));
        release_pipeline(s, &p);
        kd_session_destroy(s);
        assert_all_returned();
        runs++;
      }
  cr_log_info("%u runs, %u submissions refused", runs, refused);
  /* Each call a submission makes failed one at least once, but for a device
   * allocation, which no submission here makes (out_of_device_or_pinned_memory
   * covers it), and a refused update, which kdag answers by instantiating
   * afresh, with no error (a_refused_update_instantiates_afresh). */
  for (size_t f = 0; f < sizeof points / sizeof points[0]; ++f)
    if (strcmp(points[f], "cuMemAllocFromPoolAsync") && strcmp(points[f], "cuGraphExecKernelNodeSetParams"))
      cr_assert_gt(by_point[f], 0, "%s was never refused during a submission", points[f]);
}

/* A sticky fault in work in flight: the next wait reports it as
 * KD_ERR_DEVICE_FAULT, the device's other session refuses work with it, a
 * new session is refused for the rest of the process, and releasing and
 * destroying still work and give every object back (the GPU lane shows
 * the same with real traps; here ASan checks that nothing leaks). */
Test(host_null_driver, a_sticky_fault_poisons_the_device_and_destroying_frees_everything) {
  kd_session *s1 = null_session(KD_EXEC_GRAPH, 0), *s2 = null_session(KD_EXEC_EAGER, 0);
  pipeline p1, p2;
  fill_in(&p1, 0);
  fill_in(&p2, 1);
  pipeline_make(s1, &p1);
  pipeline_make(s2, &p2);
  KDT_OK(kd_graph_submit(p1.g, NULL));
  pipeline_check(&p1, 0);
  nd.hold(1);
  KDT_OK(kd_graph_submit(p1.g, NULL)); /* in flight when the fault comes */
  KDT_OK(kd_graph_submit(p2.g, NULL));
  nd.fault(CUDA_ERROR_ILLEGAL_ADDRESS);
  KDT_FAILS(kd_sink_wait(p1.sink), KD_ERR_DEVICE_FAULT, "CUDA_ERROR_ILLEGAL_ADDRESS");
  KDT_FAILS(kd_graph_submit(p1.g, NULL), KD_ERR_DEVICE_FAULT, "unusable after a device fault");
  KDT_FAILS(kd_graph_submit(p2.g, NULL), KD_ERR_DEVICE_FAULT, "unusable after a device fault");
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_CUDA;
  kd_session *s3 = NULL;
  KDT_FAILS(kd_session_create(&o, &s3), KD_ERR_DEVICE_FAULT, "restart the process");
  release_pipeline(s1, &p1);
  release_pipeline(s2, &p2);
  kd_session_destroy(s1);
  kd_session_destroy(s2);
  KDT_FAILS(kd_session_create(&o, &s3), KD_ERR_DEVICE_FAULT, "faulted earlier in this process");
  cr_assert_null(s3);
  assert_all_returned();
}

/* A fault first met by an upload's or a download's pinned staging block
 * (the driver refuses cuMemHostAlloc with the sticky code) is the
 * session's fault as much as one a wait finds: later calls, even
 * host-only ones, refuse with it, and so does the device's other
 * session. */
static void staging_refusal_is_a_fault(int download) {
  kd_session *s = null_session(KD_EXEC_EAGER, 0), *other = null_session(KD_EXEC_EAGER, 0);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  static float host[LEN];
  kd_tensor t;
  KDT_OK(kd_tensor_create(s, &d, &t));
  if (download) { /* written on the device, so that no staging block is left over */
    kd_graph *g;
    float one = 1.0f;
    KDT_OK(kd_graph_create(s, &g));
    KDT_OK(kd_graph_op_fill(g, "t=1", kd_whole(t), &one, NULL));
    KDT_OK(kd_graph_submit(g, NULL));
    kd_graph_destroy(g);
  }
  nd.fault(CUDA_ERROR_ILLEGAL_ADDRESS);
  kd_status st = download ? kd_tensor_download(s, t, host, sizeof host) : kd_tensor_upload(s, t, host, sizeof host);
  cr_assert_eq(st, KD_ERR_DEVICE_FAULT, "%s", kd_last_error());
  cr_assert(strstr(kd_last_error(), "cuMemHostAlloc"), "%s", kd_last_error());
  kd_graph *g = NULL;
  KDT_FAILS(kd_graph_create(s, &g), KD_ERR_DEVICE_FAULT, "unusable after a device fault");
  KDT_FAILS(kd_graph_create(other, &g), KD_ERR_DEVICE_FAULT, "unusable after a device fault");
  KDT_OK(kd_tensor_release(s, t));
  kd_session_destroy(s);
  kd_session_destroy(other);
  assert_all_returned();
}

Test(host_null_driver, an_uploads_staging_refused_with_a_fault_faults_the_session) { staging_refusal_is_a_fault(0); }
Test(host_null_driver, a_downloads_staging_refused_with_a_fault_faults_the_session) { staging_refusal_is_a_fault(1); }

/* ---- foreign nodes ------------------------------------------------------- */

typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*copy_dtod_fn)(CUdeviceptr, CUdeviceptr, size_t, CUstream);

/* A foreign library stand-in: copies span 1 into span 0 on the stream it
 * is given, through the (null) driver, as cuBLAS would enqueue its work. */
typedef struct copier {
  copy_dtod_fn copy;
  int calls, released;
  size_t workspace_bytes;
  kd_status fail;      /* returned by the next fail_calls calls */
  int fail_calls;
  uint64_t out_ptr;    /* span 0 of the last call */
} copier;

static kd_status copy_node(const kd_foreign_call *call, void *user) {
  copier *c = user;
  c->calls++;
  c->out_ptr = call->span_count ? call->spans[0].device_ptr : 0;
  if (c->fail_calls > 0) {
    c->fail_calls--;
    return c->fail;
  }
  if (call->span_count != 2 || call->resource != c || !call->workspace || call->workspace_bytes != c->workspace_bytes ||
      call->spans[0].bytes != call->spans[1].bytes)
    return KD_ERR_INVALID_ARGUMENT;
  return c->copy(call->spans[0].device_ptr, call->spans[1].device_ptr, call->spans[0].bytes, call->stream)
             ? KD_ERR_DRIVER
             : KD_OK;
}

static void release_copier(void *p) { ((copier *)p)->released++; }

static void copier_open(copier *c) {
  memset(c, 0, sizeof *c);
  get_proc_fn get = (get_proc_fn)nd.get_proc; /* null_session looked it up */
  void *fn = NULL;
  cr_assert_eq(get("cuMemcpyDtoDAsync", &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, NULL), CUDA_SUCCESS);
  c->copy = (copy_dtod_fn)fn;
  c->workspace_bytes = 4096;
}

/* The pipeline of mode with the copier's foreign node "copy y=a" added:
 * it writes *y, and *y2 is a spare tensor of the same shape. */
static kd_session *with_copier(kd_exec_mode mode, pipeline *p, copier *c, kd_tensor *y, kd_tensor *y2) {
  kd_session *s = made(mode, p);
  copier_open(c);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  KDT_OK(kd_tensor_create(s, &d, y));
  KDT_OK(kd_tensor_create(s, &d, y2));
  kd_garg acc[] = {kd_g_out(kd_whole(*y)), kd_g_in(kd_whole(p->a))};
  KDT_OK(kd_graph_foreign(p->g, "copy y=a", copy_node, c, acc, 2, c->workspace_bytes, c, release_copier, NULL));
  return s;
}

/* A foreign node's workspace and resource outlive every submission using
 * them, in EAGER (a workspace per submission) and GRAPH mode (its capture:
 * the callback runs once per capture, again when a rebinding moves its
 * spans, and the work it enqueues becomes a child graph). */
static void foreign_lifetimes(kd_exec_mode mode) {
  copier c;
  pipeline p;
  kd_tensor y, y2;
  kd_session *s = with_copier(mode, &p, &c, &y, &y2);
  float got[LEN];
  kd_sink *ys;
  KDT_OK(kd_graph_sink(p.g, "y", y, got, sizeof got, &ys));
  KDT_OK(kd_graph_submit(p.g, NULL));
  pipeline_check(&p, 0);
  KDT_OK(kd_sink_wait(ys));
  if (mode == KD_EXEC_EAGER) /* captured work is not run by the null driver: EAGER only */
    for (int i = 0; i < LEN; ++i) cr_assert_eq(got[i], p.in[i], "y[%d]", i);
  cr_assert_eq(c.calls, 1);
  nd.hold(1);
  for (int r = 0; r < 3; ++r) KDT_OK(kd_graph_submit(p.g, NULL));
  KDT_OK(kd_graph_rebind(p.g, y, y2)); /* moves the node's span 0 */
  KDT_OK(kd_graph_submit(p.g, NULL));
  cr_assert_eq(c.calls, mode == KD_EXEC_EAGER ? 5 : 2, "EAGER: once per submission; GRAPH: per capture");
  uint64_t frees = calls().device_frees;
  kd_graph_destroy(p.g);
  KDT_OK(kd_tensor_release(s, p.a));
  KDT_OK(kd_tensor_release(s, p.b));
  KDT_OK(kd_tensor_release(s, y));
  KDT_OK(kd_tensor_release(s, y2));
  KDT_OK(kd_session_reap(s, NULL));
  cr_assert_eq(c.released, 0, "the resource is released only once its work is done");
  cr_assert_eq(calls().device_frees, frees, "workspaces and tensors stay while their work is pending");
  nd.hold(0);
  KDT_OK(kd_session_reap(s, NULL));
  cr_assert_eq(c.released, 1);
  kd_session_stats k = counters(s);
  if (mode == KD_EXEC_GRAPH) cr_assert_eq(k.graph_instantiations, 1, "a moved span re-captures in place");
  kd_session_destroy(s);
  assert_all_returned();
}

Test(host_null_driver, eager_foreign_node_keeps_workspace_and_resource_until_done) {
  foreign_lifetimes(KD_EXEC_EAGER);
}
Test(host_null_driver, graph_foreign_node_keeps_workspace_and_resource_until_done) {
  foreign_lifetimes(KD_EXEC_GRAPH);
}

/* A re-capture that fails for want of memory (here the callback says so;
 * cuStreamEndCapture or the exec update may too), or with the callback's
 * own error, leaves the executable graph as it was, and the node's
 * recorded spans with it: the next submission captures again with the
 * moved span. Recording the new spans before the capture was in left the
 * old child graph, over a tensor the caller may have released, launched
 * for good; taking the callback's error for a driver's refusal threw the
 * executable graph away and called the callback again to build another. */
static void failed_recapture_tried_again(kd_status fail) {
  copier c;
  pipeline p;
  kd_tensor y, y2;
  kd_session *s = with_copier(KD_EXEC_GRAPH, &p, &c, &y, &y2);
  KDT_OK(kd_graph_submit(p.g, NULL));
  cr_assert_eq(c.calls, 1);
  uint64_t first = c.out_ptr;
  KDT_OK(kd_graph_rebind(p.g, y, y2));
  c.fail = fail;
  c.fail_calls = 1;
  KDT_FAILS(kd_graph_submit(p.g, NULL), fail, "copy y=a");
  cr_assert_eq(c.calls, 2, "the callback ran once, for the re-capture");
  KDT_OK(kd_tensor_release(s, y)); /* the caller lets go of the old output */
  KDT_OK(kd_graph_submit(p.g, NULL));
  cr_assert_eq(c.calls, 3, "the next submission captures the moved span again");
  cr_assert_neq(c.out_ptr, first, "the capture now writes y2");
  KDT_OK(kd_graph_submit(p.g, NULL));
  cr_assert_eq(c.calls, 3, "and that capture stays until the spans move again");
  kd_session_stats k = counters(s);
  cr_assert_eq(k.graph_instantiations, 1, "patched in place, never rebuilt");
  kd_graph_destroy(p.g);
  KDT_OK(kd_tensor_release(s, p.a));
  KDT_OK(kd_tensor_release(s, p.b));
  KDT_OK(kd_tensor_release(s, y2));
  kd_session_destroy(s);
  cr_assert_eq(c.released, 1);
  assert_all_returned();
}

Test(host_null_driver, a_recapture_out_of_memory_is_tried_again_by_the_next_submission) {
  failed_recapture_tried_again(KD_ERR_OUT_OF_MEMORY);
}
Test(host_null_driver, a_recapture_the_callback_fails_is_tried_again_by_the_next_submission) {
  failed_recapture_tried_again(KD_ERR_INVALID_ARGUMENT);
}

/* A capture the callback broke (the driver refuses cuStreamEndCapture: it
 * waited, or used another stream) is an error naming the node and saying
 * what the callback must do, then the driver's words; nothing is left
 * capturing, and the next submission captures again and works. */
Test(host_null_driver, a_broken_capture_names_the_node_and_the_rule) {
  copier c;
  pipeline p;
  kd_tensor y, y2;
  kd_session *s = with_copier(KD_EXEC_GRAPH, &p, &c, &y, &y2);
  nd.fail("cuStreamEndCapture", 0, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 0);
  KDT_FAILS(kd_graph_submit(p.g, NULL), KD_ERR_DRIVER, "kd_graph_submit: foreign node 'copy y=a' (#");
  cr_assert(strstr(kd_last_error(), "captured for a CUDA graph: the callback must enqueue its work on "
                                    "call->stream only, without waiting: "),
            "%s", kd_last_error());
  cr_assert(strstr(kd_last_error(), "cuStreamEndCapture"), "%s", kd_last_error());
  KDT_OK(kd_graph_submit(p.g, NULL));
  cr_assert_eq(c.calls, 2, "captured again");
  pipeline_check(&p, 0);
  kd_graph_destroy(p.g);
  KDT_OK(kd_tensor_release(s, p.a));
  KDT_OK(kd_tensor_release(s, p.b));
  KDT_OK(kd_tensor_release(s, y));
  KDT_OK(kd_tensor_release(s, y2));
  kd_session_destroy(s);
  assert_all_returned();
}

/* Staging, events and foreign workspaces are taken before anything is
 * enqueued, in both modes: a submission that runs short of one (pinned
 * memory, an event, device memory, at each of its first calls) is refused
 * with nothing launched, copied, recorded or called back, its sink not
 * pending, and the next submission works. EAGER took them node by node:
 * the nodes before the shortage ran and a refused submission's sink copy
 * became the one to wait for. */
Test(host_null_driver, a_shortage_of_staging_events_or_workspace_enqueues_nothing) {
  static const char *points[] = {"cuEventCreate", "cuMemHostAlloc", "cuMemAllocFromPoolAsync"};
  static const kd_exec_mode modes[] = {KD_EXEC_EAGER, KD_EXEC_GRAPH};
  for (size_t m = 0; m < 2; ++m)
    for (size_t f = 0; f < sizeof points / sizeof points[0]; ++f) {
      uint32_t refused = 0;
      for (uint32_t after = 0; after < 4; ++after) {
        copier c;
        pipeline p;
        kd_tensor y, y2;
        kd_session *s = with_copier(modes[m], &p, &c, &y, &y2); /* fresh pools: every take creates */
        kdag_null_calls before = calls();
        nd.fail(points[f], after, CUDA_ERROR_OUT_OF_MEMORY, 0);
        kd_status st = kd_graph_submit(p.g, NULL);
        nd.fail(NULL, 0, 0, 0);
        if (st) {
          refused++;
          cr_assert_eq(st, KD_ERR_OUT_OF_MEMORY, "%s: %s", points[f], kd_last_error());
          cr_assert(strstr(kd_last_error(), points[f]), "names %s: %s", points[f], kd_last_error());
          kdag_null_calls now = calls();
          cr_assert_eq(now.copies, before.copies, "%s after %u: copied", points[f], after);
          cr_assert_eq(now.kernel_launches + now.graph_launches, before.kernel_launches + before.graph_launches,
                       "%s after %u: launched", points[f], after);
          cr_assert_eq(now.event_records, before.event_records, "%s after %u: recorded", points[f], after);
          if (modes[m] == KD_EXEC_EAGER) cr_assert_eq(c.calls, 0, "the foreign node was called");
          KDT_FAILS(kd_sink_wait(p.sink), KD_ERR_INVALID_ARGUMENT, "no submission");
        } else {
          pipeline_check(&p, 0);
        }
        submit_and_check(&p, 1);
        KDT_OK(kd_tensor_release(s, y));
        KDT_OK(kd_tensor_release(s, y2));
        finish(s, &p);
        cr_assert_eq(c.released, 1);
      }
      cr_assert_gt(refused, 0, "%s never ran short in mode %d", points[f], (int)modes[m]);
    }
}

/* AUTO: a failure of the CUDA graph that the eager run of the same
 * submission shares (here the foreign callback fails both times) says
 * nothing about the graph: the submission fails and the next one is a
 * CUDA graph launch. A failure the eager run does not share (a refused
 * launch) turns the plan EAGER for good, and its executable graph, with
 * what it holds, goes once its launches are done. */
Test(host_null_driver, auto_gives_up_on_the_cuda_graph_only_for_its_own_failures) {
  copier c;
  pipeline p;
  kd_tensor y, y2;
  kd_session *s = with_copier(KD_EXEC_AUTO, &p, &c, &y, &y2);
  kd_session_options o;
  kd_session_options_init(&o);
  for (uint32_t r = 0; r < o.graph_after; ++r) submit_and_check(&p, (int)r);
  c.fail = KD_ERR_INVALID_ARGUMENT;
  c.fail_calls = 2; /* the capture, then the eager call */
  KDT_FAILS(kd_graph_submit(p.g, NULL), KD_ERR_INVALID_ARGUMENT, "copy y=a");
  cr_assert_eq(c.fail_calls, 0, "both ways were tried");
  submit_and_check(&p, 10);
  cr_assert_eq(counters(s).graph_launches, 1, "still GRAPH after a failure both ways share");
  nd.fail("cuGraphLaunch", 0, CUDA_ERROR_INVALID_VALUE, 0);
  submit_and_check(&p, 11); /* eagerly */
  KDT_OK(kd_session_reap(s, NULL));
  kdag_null_calls k = calls();
  cr_assert_eq(k.graph_instantiations, 1);
  cr_assert_eq(k.exec_destroys, 1, "the refused plan's executable graph is gone");
  uint32_t released = (uint32_t)c.released;
  cr_assert_eq(released, 0, "the node keeps its resource");
  submit_and_check(&p, 12);
  cr_assert_eq(counters(s).graph_launches, 1, "EAGER for good");
  KDT_OK(kd_tensor_release(s, y));
  KDT_OK(kd_tensor_release(s, y2));
  finish(s, &p);
}

/* A refused re-pointing of a transfer (the driver would not move the
 * upload's copy to this launch's staging block) is answered like a refused
 * kernel update: a fresh executable graph, no error. */
Test(host_null_driver, a_refused_transfer_update_instantiates_afresh) {
  pipeline p;
  kd_session *s = started(KD_EXEC_GRAPH, &p);
  nd.hold(1); /* the first launch's blocks stay in flight: the next needs others */
  fill_in(&p, 5);
  KDT_OK(kd_graph_submit(p.g, NULL));
  nd.fail("cuGraphExecMemcpyNodeSetParams", 0, CUDA_ERROR_INVALID_VALUE, 0);
  fill_in(&p, 6);
  KDT_OK(kd_graph_submit(p.g, NULL));
  nd.hold(0);
  pipeline_check(&p, 2);
  cr_assert_eq(counters(s).graph_instantiations, 2, "instantiated afresh");
  submit_and_check(&p, 3);
  cr_assert_eq(counters(s).graph_instantiations, 2);
  finish(s, &p);
}

/* A patched executable graph whose launch was refused still counts its
 * update when the next launch runs it. */
Test(host_null_driver, an_update_is_counted_by_the_launch_that_runs_it) {
  pipeline p;
  kd_session *s = started(KD_EXEC_GRAPH, &p);
  kd_tensor old = rebind_b(s, &p);
  nd.fail("cuGraphLaunch", 0, CUDA_ERROR_INVALID_VALUE, 0);
  KDT_FAILS(kd_graph_submit(p.g, NULL), KD_ERR_DRIVER, "cuGraphLaunch");
  cr_assert_eq(counters(s).graph_updates, 0);
  cr_assert_eq(calls().kernel_node_patches, 1, "patched before the refused launch");
  submit_and_check(&p, 1);
  kd_session_stats k = counters(s);
  cr_assert_eq(k.graph_updates, 1);
  cr_assert_eq(k.graph_instantiations, 1);
  KDT_OK(kd_tensor_release(s, old));
  finish(s, &p);
}

/* kd_graph_destroy waits for nothing, a host function node's graph too:
 * its record (which the driver may yet call back) is released after the
 * work in flight like the tensors, in room made before any release. In a
 * session that had deferred nothing yet, it used to wait for the whole
 * stream, and a host function waiting for the caller deadlocked. */
static void count_host(void *user) { ++*(int *)user; }

static void destroy_with_host_node(kd_exec_mode mode) {
  kd_session *s = null_session(mode, 0);
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  int ran = 0;
  KDT_OK(kd_graph_host(g, "count", count_host, &ran, NULL, 0, NULL));
  nd.hold(1);
  KDT_OK(kd_graph_submit(g, NULL));
  kdag_null_calls before = calls();
  kd_graph_destroy(g);
  kdag_null_calls after = calls();
  cr_assert_eq(after.event_syncs + after.stream_syncs, before.event_syncs + before.stream_syncs,
               "kd_graph_destroy waited for the work in flight");
  uint32_t pending = 0;
  KDT_OK(kd_session_reap(s, &pending));
  cr_assert_eq(pending, 1, "the submission is still in flight");
  nd.hold(0);
  KDT_OK(kd_session_reap(s, &pending));
  cr_assert_eq(pending, 0);
  kd_session_destroy(s);
  assert_all_returned();
}

Test(host_null_driver, eager_destroying_a_graph_with_a_host_node_in_flight_waits_for_nothing) {
  destroy_with_host_node(KD_EXEC_EAGER);
}
Test(host_null_driver, graph_destroying_a_graph_with_a_host_node_in_flight_waits_for_nothing) {
  destroy_with_host_node(KD_EXEC_GRAPH);
}

/* Callbacks that must not call kdag: a foreign node's fn and its
 * resource's release. A call from either is refused with KD_ERR_BUSY naming
 * the callback (it used to re-enter the executor mid-walk: a submit from fn
 * recursed into itself, a destroy freed what the outer walk still read),
 * and the graph goes on working. */
typedef struct reentrant {
  kd_session *s;
  kd_graph *g;
  kd_raw *raw; /* set while a raw scope submits the graph */
  kd_status fn_stats, fn_submit, fn_raw, release_counters, host_counters;
  char fn_msg[256], release_msg[256], host_msg[256], destroy_msg[256];
  int calls, released, host_calls;
} reentrant;

/* A host function node: the driver calls it back (here, on the submitting
 * thread, inside the launch; on a GPU, on the driver's thread). */
static void host_calls_kdag(void *p) {
  reentrant *r = p;
  r->host_calls++;
  kd_session_stats k;
  r->host_counters = kd_session_stats_get(r->s, &k);
  snprintf(r->host_msg, sizeof r->host_msg, "%s", kd_last_error());
}

static kd_status calls_kdag(const kd_foreign_call *call, void *user) {
  (void)call;
  reentrant *r = user;
  r->calls++;
  kd_graph_stats st;
  r->fn_stats = kd_graph_stats_get(r->g, &st);
  snprintf(r->fn_msg, sizeof r->fn_msg, "%s", kd_last_error());
  r->fn_submit = kd_graph_submit(r->g, NULL);
  kd_graph_destroy(r->g); /* refused: destroys nothing */
  snprintf(r->destroy_msg, sizeof r->destroy_msg, "%s", kd_last_error());
  if (r->raw) r->fn_raw = kd_raw_synchronize(r->raw); /* the scope handed over through user */
  return KD_OK;
}

static kd_status submit_in_scope(kd_raw *raw, void *user) {
  reentrant *r = user;
  r->raw = raw;
  kd_status st = kd_graph_submit(r->g, NULL); /* allowed from a raw scope */
  r->raw = NULL;
  return st;
}

static void release_calls_kdag(void *p) {
  reentrant *r = p;
  r->released++;
  kd_session_stats k;
  r->release_counters = kd_session_stats_get(r->s, &k);
  snprintf(r->release_msg, sizeof r->release_msg, "%s", kd_last_error());
}

static void callbacks_calling_kdag(kd_exec_mode mode) {
  kd_session *s = null_session(mode, 0);
  reentrant r = {.s = s};
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  kd_tensor y;
  KDT_OK(kd_tensor_create(s, &d, &y));
  KDT_OK(kd_graph_create(s, &r.g));
  kd_garg acc = kd_g_out(kd_whole(y));
  KDT_OK(kd_graph_foreign(r.g, "calls kdag", calls_kdag, &r, &acc, 1, 0, &r, release_calls_kdag, NULL));
  KDT_OK(kd_graph_host(r.g, "host calls kdag", host_calls_kdag, &r, NULL, 0, NULL));
  for (int i = 0; i < 3; ++i) KDT_OK(kd_graph_submit(r.g, NULL));
  cr_assert_eq(r.host_calls, 3);
  cr_assert_eq(r.host_counters, KD_ERR_BUSY, "kd_session_stats_get from a host function node: %d", r.host_counters);
  cr_assert(strstr(r.host_msg, "called from inside a host function node"), "%s", r.host_msg);
  cr_assert_geq(r.calls, 1);
  cr_assert_eq(r.fn_stats, KD_ERR_BUSY, "kd_graph_stats_get from a foreign callback: %d", r.fn_stats);
  cr_assert_eq(r.fn_submit, KD_ERR_BUSY, "kd_graph_submit from a foreign callback: %d", r.fn_submit);
  cr_assert(strstr(r.fn_msg, "kd_graph_stats_get: called from inside a foreign node's callback"), "%s", r.fn_msg);
  cr_assert(strstr(r.destroy_msg, "kd_graph_destroy: called from inside a foreign node's callback"), "%s",
            r.destroy_msg);
  kd_graph_stats st;
  KDT_OK(kd_graph_stats_get(r.g, &st)); /* the graph outlived the refused destroy */
  cr_assert_eq(st.nodes, 2);
  KDT_OK(kd_graph_submit(r.g, NULL));
  int before = r.calls;
  if (mode == KD_EXEC_GRAPH) { /* fn runs when captured: a new node makes the next launch capture again */
    kd_tensor z;
    KDT_OK(kd_tensor_create(s, &d, &z));
    float zero = 0;
    KDT_OK(kd_graph_op_fill(r.g, "z=0", kd_whole(z), &zero, NULL));
    KDT_OK(kd_tensor_release(s, z));
  }
  KDT_OK(kd_with_raw(s, "outer", submit_in_scope, &r));
  cr_assert_gt(r.calls, before);
  cr_assert_eq(r.fn_raw, KD_ERR_BUSY, "a raw call from a foreign callback: %d", r.fn_raw);
  kd_graph_destroy(r.g);
  KDT_OK(kd_tensor_release(s, y));
  KDT_OK(kd_session_reap(s, NULL));
  cr_assert_eq(r.released, 1);
  cr_assert_eq(r.release_counters, KD_ERR_BUSY);
  cr_assert(strstr(r.release_msg, "kd_session_stats_get: called from inside a foreign resource's release callback"),
            "%s", r.release_msg);
  KDT_OK(kd_session_stats_get(s, &(kd_session_stats){0})); /* outside any callback: fine again */
  kd_session_destroy(s);
  assert_all_returned();
}

Test(host_null_driver, eager_callbacks_calling_kdag_are_refused) { callbacks_calling_kdag(KD_EXEC_EAGER); }
Test(host_null_driver, graph_callbacks_calling_kdag_are_refused) { callbacks_calling_kdag(KD_EXEC_GRAPH); }

static kd_status span_sizes(const kd_foreign_call *call, void *user) {
  int64_t *seen = user;
  seen[0] = call->spans[0].elements;
  seen[1] = (int64_t)call->spans[0].bytes;
  return KD_OK;
}

/* A span is one contiguous run: a foreign node refuses a strided or a
 * broadcast view (it used to pass a span sized by the view's element count
 * from its offset, over elements the view does not name, or past the
 * tensor's end), and the graph stays as it was. An empty view is compact,
 * so a foreign node may take one whose other dimensions multiply past 2^63
 * (counting its span's elements was undefined, which the sanitized build
 * of this test reports): its span is empty. */
Test(host_null_driver, a_foreign_node_takes_compact_views_only) {
  kd_session *s = null_session(KD_EXEC_EAGER, 0);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {8}};
  kd_tensor t;
  KDT_OK(kd_tensor_create(s, &d, &t));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_view even = {.tensor = t, .rank = 1, .offset = 0, .shape = {4}, .strides = {2}};
  kd_garg out = kd_g_out(even);
  KDT_FAILS(kd_graph_foreign(g, "strided", calls_kdag, NULL, &out, 1, 0, NULL, NULL, NULL), KD_ERR_NOT_COMPACT,
            "node 'strided' (#0), argument 0");
  kd_view broadcast = {.tensor = t, .rank = 1, .offset = 0, .shape = {1024}, .strides = {0}};
  float one = 1.0f;
  KDT_OK(kd_graph_op_fill(g, "init", kd_whole(t), &one, NULL));
  kd_garg in = kd_g_in(broadcast);
  KDT_FAILS(kd_graph_foreign(g, "broadcast", calls_kdag, NULL, &in, 1, 0, NULL, NULL, NULL), KD_ERR_NOT_COMPACT,
            "argument 0");
  kd_graph_stats st;
  KDT_OK(kd_graph_stats_get(g, &st));
  cr_assert_eq(st.nodes, 1, "a refused foreign node leaves the graph as it was");
  kd_view empty = {.tensor = t, .rank = 3, .shape = {1ll << 40, 1ll << 40, 0}, .strides = {1, 1, 1}};
  kd_garg none = kd_g_out(empty);
  int64_t seen[2] = {-1, -1};
  KDT_OK(kd_graph_foreign(g, "empty", span_sizes, seen, &none, 1, 0, NULL, NULL, NULL));
  KDT_OK(kd_graph_submit(g, NULL));
  cr_assert_eq(seen[0], 0);
  cr_assert_eq(seen[1], 0);
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, t));
  kd_session_destroy(s);
  assert_all_returned();
}

/* A callback that fails without a message of its own (it made no failing
 * kdag call) gets one naming it and its code, not whatever older, unrelated
 * message the thread had. */
static kd_status fails_quietly(kd_raw *raw, void *user) {
  (void)raw;
  (void)user;
  return KD_ERR_NOT_FOUND;
}

static kd_status foreign_fails_quietly(const kd_foreign_call *call, void *user) {
  (void)call;
  (void)user;
  return KD_ERR_NOT_FOUND;
}

Test(host_null_driver, a_callback_failing_without_a_message_is_named) {
  kd_session *s = null_session(KD_EXEC_EAGER, 0);
  kd_tensor t, unused;
  KDT_FAILS(kd_tensor_create(s, NULL, &unused), KD_ERR_INVALID_ARGUMENT, "kd_tensor_create"); /* an older message */
  KDT_FAILS(kd_with_raw(s, "quiet.op", fails_quietly, NULL), KD_ERR_NOT_FOUND,
            "kd_with_raw: the callback of scope 'quiet.op' returned KD_ERR_NOT_FOUND without a message");
  cr_assert_null(strstr(kd_last_error(), "kd_tensor_create"), "%s", kd_last_error());
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  KDT_OK(kd_tensor_create(s, &d, &t));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_garg acc = kd_g_out(kd_whole(t));
  KDT_OK(kd_graph_foreign(g, "quiet", foreign_fails_quietly, NULL, &acc, 1, 0, NULL, NULL, NULL));
  KDT_FAILS(kd_tensor_create(s, NULL, &unused), KD_ERR_INVALID_ARGUMENT, "kd_tensor_create");
  KDT_FAILS(kd_graph_submit(g, NULL), KD_ERR_NOT_FOUND, "foreign node 'quiet'");
  cr_assert(strstr(kd_last_error(), "the callback returned KD_ERR_NOT_FOUND without a message"), "%s", kd_last_error());
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, t));
  kd_session_destroy(s);
  assert_all_returned();
}

/* ---- user kernels: the raw scope and kernel nodes -------------------------- */

typedef struct raw_add {
  kd_tensor lhs, rhs, out;
  kd_function fn;
  kd_module m;
  int release_inside;
} raw_add;

/* Loads add_kernel from PTX, launches out = lhs + rhs (a no-op here) and,
 * with release_inside, lets go of the module and both inputs at once. */
static kd_status raw_add_fn(kd_raw *raw, void *user) {
  raw_add *c = user;
  kd_session *s = kd_raw_session(raw);
  kd_span lhs, rhs;
  kd_span_mut out;
  kd_launch_config cfg;
  kd_status st = kd_raw_load_ptx(raw, (const char *)kd_kernel_add_ptx, kd_kernel_add_ptx_size, &c->m);
  if (!st) st = kd_module_function(s, c->m, "add_kernel", &c->fn);
  if (!st) st = kd_raw_tensor(raw, c->lhs, &lhs);
  if (!st) st = kd_raw_tensor(raw, c->rhs, &rhs);
  if (!st) st = kd_raw_alloc_output(raw, KD_F32, 1, (int64_t[]){LEN}, &c->out);
  if (!st) st = kd_raw_tensor_mut(raw, c->out, &out);
  if (!st) st = kd_launch_config_flat(LEN, 128, 0, &cfg);
  if (st) return st;
  kd_arg args[] = {kd_arg_tensor_mut(&out), kd_arg_tensor(&lhs), kd_arg_tensor(&rhs), kd_arg_i32(LEN)};
  /* SAFETY: add_kernel is (float *out, const float *lhs, const float *rhs,
   * int n); all three hold LEN floats; on the null driver it does not run. */
  st = kd_raw_launch(raw, c->fn, &cfg, args, 4);
  if (!st && c->release_inside) {
    st = kd_module_release(s, c->m);
    if (!st) st = kd_tensor_release(s, c->lhs);
    if (!st) st = kd_tensor_release(s, c->rhs);
  }
  return st;
}

/* A mutable borrow passed as a read argument: refused while nothing has
 * written that tensor (kd_raw_tensor refuses such a borrow itself; a
 * mutable borrow checks nothing, its kernel may be about to write it),
 * allowed once a launch of the scope has written it. */
typedef struct raw_reads {
  raw_add c;           /* lhs, rhs written; out and next made in the scope */
  kd_tensor next;
  kd_status first, second, third;
  char first_msg[512];
} raw_reads;

static kd_status raw_reads_fn(kd_raw *raw, void *user) {
  raw_reads *r = user;
  kd_span lhs, rhs;
  kd_span_mut out, next;
  kd_launch_config cfg;
  kd_status st = kd_raw_load_ptx(raw, (const char *)kd_kernel_add_ptx, kd_kernel_add_ptx_size, &r->c.m);
  if (!st) st = kd_module_function(kd_raw_session(raw), r->c.m, "add_kernel", &r->c.fn);
  if (!st) st = kd_raw_tensor(raw, r->c.lhs, &lhs);
  if (!st) st = kd_raw_tensor(raw, r->c.rhs, &rhs);
  if (!st) st = kd_raw_alloc_output(raw, KD_F32, 1, (int64_t[]){LEN}, &r->c.out);
  if (!st) st = kd_raw_tensor_mut(raw, r->c.out, &out);
  if (!st) st = kd_raw_alloc_output(raw, KD_F32, 1, (int64_t[]){LEN}, &r->next);
  if (!st) st = kd_raw_tensor_mut(raw, r->next, &next);
  if (!st) st = kd_launch_config_flat(LEN, 128, 0, &cfg);
  if (st) return st;
  /* SAFETY: add_kernel is (float *out, const float *lhs, const float *rhs,
   * int n); every tensor holds LEN floats; on the null driver it does not run. */
  kd_arg early[] = {kd_arg_tensor_mut(&next), kd_arg_tensor(&out.span), kd_arg_tensor(&rhs), kd_arg_i32(LEN)};
  r->first = kd_raw_launch(raw, r->c.fn, &cfg, early, 4);
  snprintf(r->first_msg, sizeof r->first_msg, "%s", kd_last_error());
  kd_arg write[] = {kd_arg_tensor_mut(&out), kd_arg_tensor(&lhs), kd_arg_tensor(&rhs), kd_arg_i32(LEN)};
  r->second = kd_raw_launch(raw, r->c.fn, &cfg, write, 4);
  r->third = kd_raw_launch(raw, r->c.fn, &cfg, early, 4);
  return KD_OK;
}

Test(host_null_driver, a_raw_launch_refuses_to_read_a_tensor_nothing_wrote) {
  kd_session *s = null_session(KD_EXEC_EAGER, 0);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  static const float zeros[LEN];
  raw_reads r = {0};
  KDT_OK(kd_tensor_from_host(s, &d, zeros, sizeof zeros, &r.c.lhs));
  KDT_OK(kd_tensor_from_host(s, &d, zeros, sizeof zeros, &r.c.rhs));
  KDT_OK(kd_with_raw(s, "test.reads", raw_reads_fn, &r));
  cr_assert_eq(r.first, KD_ERR_UNINITIALIZED, "%s", r.first_msg);
  cr_assert(strstr(r.first_msg, "args[1] reads a tensor that was never written"), "%s", r.first_msg);
  KDT_OK(r.second);
  KDT_OK(r.third); /* out is written now */
  kd_tensor all[] = {r.c.lhs, r.c.rhs, r.c.out, r.next};
  for (size_t i = 0; i < 4; ++i) KDT_OK(kd_tensor_release(s, all[i]));
  KDT_OK(kd_module_release(s, r.c.m));
  kd_session_destroy(s);
  assert_all_returned();
}

/* A fault met inside a raw scope (here by kd_raw_synchronize) makes the
 * scope's later calls return it, as every other call of the session does;
 * kd_raw_session still names the session, for releases. */
static kd_status raw_after_fault_fn(kd_raw *raw, void *user) {
  kd_tensor *t = user;
  nd.fault(CUDA_ERROR_ILLEGAL_ADDRESS);
  kd_status st = kd_raw_synchronize(raw);
  cr_assert_eq(st, KD_ERR_DEVICE_FAULT, "%s", kd_last_error());
  kd_span span;
  st = kd_raw_tensor(raw, *t, &span);
  cr_assert_eq(st, KD_ERR_DEVICE_FAULT, "%s", kd_last_error());
  cr_assert(strstr(kd_last_error(), "kd_raw_tensor: raw scope 'test.fault'"), "%s", kd_last_error());
  cr_assert_not_null(kd_raw_session(raw));
  return KD_OK;
}

Test(host_null_driver, a_fault_inside_a_raw_scope_refuses_its_later_calls) {
  kd_session *s = null_session(KD_EXEC_EAGER, 0);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  static const float zeros[LEN];
  kd_tensor t;
  KDT_OK(kd_tensor_from_host(s, &d, zeros, sizeof zeros, &t));
  KDT_OK(kd_with_raw(s, "test.fault", raw_after_fault_fn, &t));
  KDT_OK(kd_tensor_release(s, t));
  kd_session_destroy(s);
  assert_all_returned();
}

/* The raw scope's launch keeps its module and the tensors released inside
 * the scope until its completion has fired; so does a kernel node of a
 * GRAPH-mode graph whose module handle and graph are let go of while its
 * launches are pending. */
Test(host_null_driver, user_kernels_keep_module_and_tensors_until_done) {
  kd_session *s = null_session(KD_EXEC_GRAPH, 0);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  static const float zeros[LEN];
  raw_add c = {.release_inside = 1};
  KDT_OK(kd_tensor_from_host(s, &d, zeros, sizeof zeros, &c.lhs));
  KDT_OK(kd_tensor_from_host(s, &d, zeros, sizeof zeros, &c.rhs));
  nd.hold(1);
  kdag_null_calls c0 = calls();
  KDT_OK(kd_with_raw(s, "test.add", raw_add_fn, &c));
  KDT_OK(kd_session_reap(s, NULL));
  kdag_null_calls c1 = calls();
  cr_assert_eq(c1.kernel_launches, c0.kernel_launches + 1);
  cr_assert_eq(c1.module_unloads, c0.module_unloads, "the module stays while its launch is pending");
  cr_assert_eq(c1.device_frees, c0.device_frees, "so do the inputs released inside the scope");
  cr_assert_eq(counters(s).bytes_retained, 2 * sizeof zeros);
  nd.hold(0);
  KDT_OK(kd_session_reap(s, NULL));
  kdag_null_calls c2 = calls();
  cr_assert_eq(c2.module_unloads, c1.module_unloads, "an unload waits for the context: deferred");
  cr_assert_eq(counters(s).modules_deferred, 1);
  cr_assert_eq(c2.device_frees, c1.device_frees + 2);
  KDT_OK(kd_session_trim(s));
  cr_assert_eq(calls().module_unloads, c1.module_unloads + 1, "kd_session_trim unloads it");
  cr_assert_eq(counters(s).modules_deferred, 0);
  cr_assert_eq(counters(s).module_bytes_deferred, 0);
  /* A kernel node in GRAPH mode: module handle, graph and tensors let go
   * of while three launches are pending. */
  raw_add k = {0};
  KDT_OK(kd_tensor_from_host(s, &d, zeros, sizeof zeros, &k.lhs));
  KDT_OK(kd_tensor_from_host(s, &d, zeros, sizeof zeros, &k.rhs));
  KDT_OK(kd_with_raw(s, "test.add", raw_add_fn, &k)); /* loads the module, keeps the handle */
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_launch_config cfg;
  KDT_OK(kd_launch_config_flat(LEN, 128, 0, &cfg));
  kd_garg args[] = {kd_g_out(kd_whole(c.out)), kd_g_in(kd_whole(k.lhs)), kd_g_in(kd_whole(k.rhs)),
                    kd_g_value(kd_arg_i32(LEN))};
  kd_node kn;
  KDT_OK(kd_graph_kernel(g, "out=l+r", k.fn, &cfg, args, 4, &kn));
  kd_arg bogus = kd_arg_i32(LEN);
  bogus.kind = (kd_arg_kind)42;
  KDT_FAILS(kd_graph_set_arg(g, kn, 3, bogus), KD_ERR_INVALID_ARGUMENT, "value kind 42 is not a kd_arg_kind");
  KDT_OK(kd_module_release(s, k.m)); /* the node holds it */
  nd.hold(1);
  for (int r = 0; r < 3; ++r) KDT_OK(kd_graph_submit(g, NULL));
  uint64_t unloads = calls().module_unloads;
  kd_graph_destroy(g);
  KDT_OK(kd_session_reap(s, NULL));
  cr_assert_eq(calls().module_unloads, unloads, "the executable graph's module stays while it may run");
  cr_assert_eq(calls().lifetime_violations, 0);
  nd.hold(0);
  KDT_OK(kd_session_reap(s, NULL));
  cr_assert_eq(calls().module_unloads, unloads);
  cr_assert_eq(counters(s).modules_deferred, 1);
  cr_assert_gt(counters(s).module_bytes_deferred, 0);
  KDT_OK(kd_session_trim(s));
  cr_assert_eq(calls().module_unloads, unloads + 1);
  cr_assert_eq(calls().context_waits, 0, "no call waited for the context while work was pending");
  KDT_OK(kd_tensor_release(s, c.out));
  KDT_OK(kd_tensor_release(s, k.lhs));
  KDT_OK(kd_tensor_release(s, k.rhs));
  KDT_OK(kd_tensor_release(s, k.out));
  kd_session_destroy(s);
  assert_all_returned();
}

/* What the calls of host_only_calls_run returned, and the driver's counts
 * around them. */
typedef struct host_only_calls {
  kd_session *s;
  kd_graph *g;
  raw_add k;
  kd_tensor spare;
  kd_status st[11];
  float in[LEN], out[LEN];
  kd_sink *sink;
  kd_status big_st;
  kdag_null_calls start, loaded, big_start, big_done, before, declared, submitted;
} host_only_calls;

/* On a thread of its own: the graph's first built-in node, which loads
 * kdag's built-in kernels, a driver call. */
static void *first_builtin_run(void *p) {
  host_only_calls *h = p;
  static const float zero = 0;
  h->start = calls();
  h->st[0] = kd_graph_op_fill(h->g, "out=0", kd_whole(h->k.out), &zero, NULL);
  h->loaded = calls();
  return NULL;
}

/* On a thread of its own: a kernel node asking for more dynamic shared
 * memory than the kernel allows yet (48 KiB), which raises its limit with
 * cuFuncSetAttribute, a driver call. */
static void *big_shared_run(void *p) {
  host_only_calls *h = p;
  kd_launch_config cfg;
  h->big_st = kd_launch_config_flat(LEN, 128, 64 * 1024, &cfg);
  kd_garg args[] = {kd_g_out(kd_whole(h->k.out)), kd_g_in(kd_whole(h->k.lhs)), kd_g_in(kd_whole(h->k.rhs)),
                    kd_g_value(kd_arg_i32(LEN))};
  h->big_start = calls();
  if (!h->big_st) h->big_st = kd_graph_kernel(h->g, "out=l+r, 64 KiB", h->k.fn, &cfg, args, 4, NULL);
  h->big_done = calls();
  return NULL;
}

/* Runs on a thread of its own, where no context is current: Criterion's
 * asserts belong to the test's thread, which checks what this records. */
static void *host_only_calls_run(void *p) {
  host_only_calls *h = p;
  kd_launch_config cfg;
  kd_status *st = h->st;
  st[1] = kd_launch_config_flat(LEN, 128, 0, &cfg);
  kd_garg args[] = {kd_g_out(kd_whole(h->k.out)), kd_g_in(kd_whole(h->k.lhs)), kd_g_in(kd_whole(h->k.rhs)),
                    kd_g_value(kd_arg_i32(1))};
  kd_node kn = 0, scaled = 0;
  kd_graph_stats stats;
  kd_tensor_desc info;
  size_t params = 0;
  kd_view v;
  h->before = calls();
  if (!st[1]) st[1] = kd_graph_kernel(h->g, "out=l+r", h->k.fn, &cfg, args, 4, &kn);
  st[2] = kd_graph_op_scale(h->g, "out*=2", kd_whole(h->k.out), 2.0, &scaled);
  st[3] = kd_graph_edge(h->g, kn, scaled);
  st[4] = kd_graph_set_arg(h->g, kn, 3, kd_arg_i32(LEN));
  st[5] = kd_graph_rebind(h->g, h->k.lhs, h->spare); /* nothing in flight: old's graph hold goes at once */
  st[6] = kd_graph_stats_get(h->g, &stats);
  st[7] = kd_tensor_info(h->s, h->spare, &info);
  if (!st[7]) st[7] = kd_view_whole(h->s, h->spare, &v);
  if (!st[7]) st[7] = kd_view_check(h->s, &v);
  kd_device_info dev;
  st[8] = kd_function_params(h->s, h->k.fn, &params, NULL, 0);
  if (!st[8]) st[8] = kd_graph_set_exec_mode(h->g, KD_EXEC_GRAPH);
  if (!st[8]) st[8] = kd_session_device_info(h->s, &dev);
  st[9] = kd_graph_upload(h->g, "up", h->k.rhs, h->in, sizeof h->in, NULL);
  if (!st[9]) st[9] = kd_graph_sink(h->g, "down", h->k.out, h->out, sizeof h->out, &h->sink);
  h->declared = calls();
  st[10] = kd_graph_submit(h->g, NULL);
  if (!st[10]) st[10] = kd_sink_wait(h->sink);
  h->submitted = calls();
  return NULL;
}

/* Declaring nodes and edges, setting values, rebinding and asking about a
 * graph touch host structures alone: they call no driver function, not
 * even cuCtxGetCurrent (4-15 ns a call on the GPU lane's H100 host), so they
 * work on a thread where no context is current, and the submission that
 * follows there makes the session's context current itself. The first
 * built-in node calls none either: the session loaded the built-in
 * kernels when it was created. The one declaration that does call the
 * driver, a kernel node raising its kernel's shared memory limit, makes
 * the context current first, on a thread where none was. */
Test(host_null_driver, declaring_and_rebinding_call_no_driver_function) {
  host_only_calls h = {.s = null_session(KD_EXEC_EAGER, 0)};
  static const float zeros[LEN];
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  KDT_OK(kd_tensor_from_host(h.s, &d, zeros, sizeof zeros, &h.k.lhs));
  KDT_OK(kd_tensor_from_host(h.s, &d, zeros, sizeof zeros, &h.k.rhs));
  KDT_OK(kd_tensor_from_host(h.s, &d, zeros, sizeof zeros, &h.spare));
  KDT_OK(kd_with_raw(h.s, "test.add", raw_add_fn, &h.k)); /* loads add_kernel, makes out */
  KDT_OK(kd_graph_create(h.s, &h.g));
  KDT_OK(kd_session_reap(h.s, NULL));
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, first_builtin_run, &h), 0);
  pthread_join(t, NULL);
  cr_assert_eq(pthread_create(&t, NULL, big_shared_run, &h), 0);
  pthread_join(t, NULL);
  KDT_OK(h.big_st);
  cr_assert_eq(h.big_done.ctx_set_current, h.big_start.ctx_set_current + 1, "the limit was raised in the context");
  cr_assert_eq(pthread_create(&t, NULL, host_only_calls_run, &h), 0);
  pthread_join(t, NULL);
  for (int i = 0; i < 11; ++i) cr_assert_eq(h.st[i], KD_OK, "call %d on the bare thread: %d", i, h.st[i]);
  cr_assert_eq(h.loaded.calls, h.start.calls, "the first built-in node called the driver");
  cr_assert_eq(h.declared.calls, h.before.calls, "%llu driver calls while declaring, %llu cuCtxGetCurrent",
               (unsigned long long)(h.declared.calls - h.before.calls),
               (unsigned long long)(h.declared.ctx_get_current - h.before.ctx_get_current));
  cr_assert_eq(h.submitted.ctx_set_current, h.declared.ctx_set_current + 1,
               "the submission made the context current on its thread");
  cr_assert_eq(h.submitted.graph_launches, h.declared.graph_launches + 1);
  kd_graph_destroy(h.g);
  KDT_OK(kd_tensor_release(h.s, h.k.lhs));
  KDT_OK(kd_tensor_release(h.s, h.k.rhs));
  KDT_OK(kd_tensor_release(h.s, h.k.out));
  KDT_OK(kd_tensor_release(h.s, h.spare));
  KDT_OK(kd_module_release(h.s, h.k.m));
  kd_session_destroy(h.s);
  assert_all_returned();
}

static kd_status compile_to_null(kd_raw *raw, void *user) {
  (void)user;
  return kd_raw_compile_nvrtc(raw, "extern \"C\" __global__ void k() {}", NULL, NULL);
}

/* kd_raw_compile_nvrtc checks its arguments before compiling, naming
 * itself (a NULL out was found only after a whole compile, and named
 * kd_raw_load_binary). */
Test(host_null_driver, raw_compile_checks_its_arguments_first) {
  kd_session *s = null_session(KD_EXEC_EAGER, 0);
  KDT_FAILS(kd_with_raw(s, "compile", compile_to_null, NULL), KD_ERR_INVALID_ARGUMENT,
            "kd_raw_compile_nvrtc: raw scope 'compile': argument out_module is NULL");
  kd_session_destroy(s);
  assert_all_returned();
}

/* A device ordinal the driver does not have is the caller's mistake: even
 * AUTO reports it rather than quietly making a HOST session. */
Test(host_null_driver, a_device_ordinal_out_of_range_is_refused_even_with_auto) {
  setenv("KDAG_CUDA_DRIVER_PATH", KDAG_NULL_DRIVER, 1);
  kd_session_options o;
  kd_session_options_init(&o);
  o.device_ordinal = 7;
  kd_session *s = NULL;
  KDT_FAILS(kd_session_create(&o, &s), KD_ERR_INVALID_ARGUMENT, "options->device_ordinal 7 out of range (1 device)");
  cr_assert_null(s);
  o.device_ordinal = 0;
  KDT_OK(kd_session_create(&o, &s));
  cr_assert_eq(kd_session_backend(s), KD_BACKEND_CUDA);
  kd_session_destroy(s);
}

/* A raw scope belongs to the thread running its callback: another thread
 * handed the kd_raw gets KD_ERR_BUSY, and another thread's call into the
 * session waits until the callback returns (the scope holds the lock). */
typedef struct scope_probe {
  kd_session *s;
  kd_raw *raw;
  kd_status other_raw, other_counters;
  int counters_done; /* set once the other thread's kd_session_stats_get returned */
  int done_during_scope;
  pthread_t reader;
} scope_probe;

static void *call_raw_from_another_thread(void *p) {
  scope_probe *sp = p;
  sp->other_raw = kd_raw_synchronize(sp->raw);
  return NULL;
}

static void *read_counters(void *p) {
  scope_probe *sp = p;
  kd_session_stats k;
  sp->other_counters = kd_session_stats_get(sp->s, &k);
  __atomic_store_n(&sp->counters_done, 1, __ATOMIC_RELEASE);
  return NULL;
}

static kd_status scope_with_threads(kd_raw *raw, void *user) {
  scope_probe *sp = user;
  sp->raw = raw;
  pthread_t a;
  if (pthread_create(&a, NULL, call_raw_from_another_thread, sp)) return KD_ERR_RESOURCE_EXHAUSTED;
  pthread_join(a, NULL);
  if (pthread_create(&sp->reader, NULL, read_counters, sp)) return KD_ERR_RESOURCE_EXHAUSTED;
  struct timespec ts = {0, 50 * 1000000L};
  nanosleep(&ts, NULL);
  sp->done_during_scope = __atomic_load_n(&sp->counters_done, __ATOMIC_ACQUIRE);
  return KD_OK; /* the reader is joined after the scope */
}

Test(host_null_driver, a_raw_scope_belongs_to_its_thread_and_holds_the_session) {
  kd_session *s = null_session(KD_EXEC_EAGER, 0);
  scope_probe sp = {.s = s};
  KDT_OK(kd_with_raw(s, "probe", scope_with_threads, &sp));
  cr_assert_eq(sp.other_raw, KD_ERR_BUSY, "a raw call from another thread: %d", sp.other_raw);
  cr_assert_null(kd_raw_session(sp.raw), "a kd_raw kept past its scope names no session");
  cr_assert(strstr(kd_last_error(), "kd_raw_session: the raw scope has ended"), "%s", kd_last_error());
  cr_assert_eq(sp.done_during_scope, 0, "another thread's call ran while the scope held the session");
  pthread_join(sp.reader, NULL); /* returns once the scope let the session go */
  cr_assert(sp.counters_done);
  cr_assert_eq(sp.other_counters, KD_OK);
  kd_session_destroy(s);
}

/* KD_SESSION_POISON_ALLOCATIONS fills a fresh device tensor with the poison
 * pattern: 0x7FA5A5A5 per 32-bit word (a float NaN), or 0xA5 per byte when
 * the size is not a multiple of 4. On the null driver device memory is
 * host memory, so a write borrow's pointer shows what the memsets left. */
typedef struct poisoned {
  kd_tensor words, bytes;
  int bad_words, bad_bytes;
} poisoned;

static kd_status read_poison(kd_raw *raw, void *user) {
  poisoned *p = user;
  kd_span_mut w, b;
  kd_status st = kd_raw_tensor_mut(raw, p->words, &w);
  if (!st) st = kd_raw_tensor_mut(raw, p->bytes, &b);
  if (st) return st;
  const uint32_t *wv = (const uint32_t *)(uintptr_t)w.span.device_ptr;
  const uint8_t *bv = (const uint8_t *)(uintptr_t)b.span.device_ptr;
  for (size_t i = 0; i < w.span.bytes / 4; ++i) p->bad_words += wv[i] != 0x7FA5A5A5u;
  for (size_t i = 0; i < b.span.bytes; ++i) p->bad_bytes += bv[i] != 0xA5;
  return KD_OK;
}

Test(host_null_driver, poisoned_allocations_hold_the_pattern) {
  kd_session *s = null_session_flags(KD_EXEC_EAGER, 0, KD_SESSION_POISON_ALLOCATIONS);
  poisoned p = {0};
  kd_tensor_desc dw = {.dtype = KD_F32, .rank = 1, .shape = {5}}, db = {.dtype = KD_U8, .rank = 1, .shape = {7}};
  KDT_OK(kd_tensor_create(s, &dw, &p.words));
  KDT_OK(kd_tensor_create(s, &db, &p.bytes));
  KDT_OK(kd_with_raw(s, "poison", read_poison, &p));
  cr_assert_eq(p.bad_words, 0, "%d words of the f32 tensor are not 0x7FA5A5A5", p.bad_words);
  cr_assert_eq(p.bad_bytes, 0, "%d bytes of the 7-byte tensor are not 0xA5", p.bad_bytes);
  KDT_OK(kd_tensor_release(s, p.words));
  KDT_OK(kd_tensor_release(s, p.bytes));
  kd_session_destroy(s);
}

/* Module handles are checked as tensor handles are: a zero handle, a
 * released one and another session's each get their own code, naming the
 * call, and a second release is KD_ERR_RELEASED. */
static kd_status load_add(kd_raw *raw, void *user) {
  return kd_raw_load_ptx(raw, (const char *)kd_kernel_add_ptx, kd_kernel_add_ptx_size, user);
}

Test(host_null_driver, module_handles_are_checked) {
  kd_session *s = null_session(KD_EXEC_EAGER, 0), *other = null_session(KD_EXEC_EAGER, 0);
  kd_module m, foreign, zero = {0};
  KDT_OK(kd_with_raw(s, "load", load_add, &m));
  KDT_OK(kd_with_raw(other, "load", load_add, &foreign));
  kd_function fn;
  KDT_OK(kd_module_function(s, m, "add_kernel", &fn));
  KDT_FAILS(kd_module_function(s, m, "no_such_kernel", &fn), KD_ERR_NOT_FOUND, "no_such_kernel");
  KDT_FAILS(kd_module_function(s, zero, "add_kernel", &fn), KD_ERR_INVALID_ARGUMENT, "kd_module_function");
  KDT_FAILS(kd_module_function(s, foreign, "add_kernel", &fn), KD_ERR_WRONG_SESSION, "kd_module_function");
  KDT_FAILS(kd_module_release(s, foreign), KD_ERR_WRONG_SESSION, "kd_module_release");
  KDT_OK(kd_module_release(s, m));
  KDT_FAILS(kd_module_release(s, m), KD_ERR_RELEASED, "kd_module_release");
  KDT_FAILS(kd_module_function(s, m, "add_kernel", &fn), KD_ERR_RELEASED, "kd_module_function");
  KDT_FAILS(kd_module_release(s, zero), KD_ERR_INVALID_ARGUMENT, "kd_module_release");
  KDT_OK(kd_module_release(other, foreign));
  kd_session_destroy(other);
  kd_session_destroy(s);
  assert_all_returned();
}

/* ---- waits on the whole context ---------------------------------------- */

/* Module loads and unloads, and unpinning memory, wait for all work in
 * the context on a GPU (tools/wait-probe); the null driver counts each such
 * call made while work is pending (context_waits). With a submission held
 * pending, in each mode: submitting, releasing every handle (modules
 * included: the last reference to one goes), destroying the graphs, a
 * reap every 64th submission, kd_session_reap and a ticket query make
 * none, and kdag's own counter agrees; kd_session_trim then unloads, a
 * wait on the context, counted by both. */
static void no_hidden_wait(kd_exec_mode mode) {
  kd_session *s = null_session(mode, 0);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  static const float zeros[LEN];
  raw_add k = {0};
  KDT_OK(kd_tensor_from_host(s, &d, zeros, sizeof zeros, &k.lhs));
  KDT_OK(kd_tensor_from_host(s, &d, zeros, sizeof zeros, &k.rhs));
  KDT_OK(kd_with_raw(s, "test.add", raw_add_fn, &k)); /* loads a module: a documented wait */
  kd_graph *g, *other;
  KDT_OK(kd_graph_create(s, &g));
  kd_launch_config cfg;
  KDT_OK(kd_launch_config_flat(LEN, 128, 0, &cfg));
  kd_garg args[] = {kd_g_out(kd_whole(k.out)), kd_g_in(kd_whole(k.lhs)), kd_g_in(kd_whole(k.rhs)),
                    kd_g_value(kd_arg_i32(LEN))};
  float out[LEN];
  kd_sink *sink;
  KDT_OK(kd_graph_kernel(g, "out=l+r", k.fn, &cfg, args, 4, NULL));
  KDT_OK(kd_graph_op_scale(g, "out*=2", kd_whole(k.out), 2.0, NULL));
  KDT_OK(kd_graph_sink(g, "out", k.out, out, sizeof out, &sink));
  KDT_OK(kd_graph_create(s, &other));
  KDT_OK(kd_graph_op_scale(other, "lhs*=1", kd_whole(k.lhs), 1.0, NULL));
  for (int r = 0; r < 3; ++r) { /* AUTO reaches GRAPH mode */
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_sink_wait(sink));
  }
  kd_session_stats k0 = counters(s);
  kdag_null_calls c0 = calls();
  nd.hold(1); /* every submission from here stays pending, as behind a long kernel */
  kd_ticket t;
  KDT_OK(kd_graph_submit(g, &t));
  KDT_OK(kd_module_release(s, k.m));
  KDT_OK(kd_tensor_release(s, k.lhs));
  KDT_OK(kd_tensor_release(s, k.rhs));
  KDT_OK(kd_tensor_release(s, k.out));
  kd_graph_destroy(g); /* its node held the module's last reference */
  for (int r = 0; r < 2 * 64; ++r) KDT_OK(kd_graph_submit(other, NULL)); /* two reaps */
  kd_graph_destroy(other);
  uint32_t pending;
  KDT_OK(kd_session_reap(s, &pending));
  int done = 1;
  KDT_OK(kd_ticket_done(s, t, &done));
  cr_assert_eq(done, 0);
  cr_assert_gt(pending, 0);
  kd_session_stats k1 = counters(s);
  kdag_null_calls c1 = calls();
  cr_assert_eq(c1.context_waits, c0.context_waits, "mode %d: %llu calls waited for the context", (int)mode,
               (unsigned long long)(c1.context_waits - c0.context_waits));
  cr_assert_eq(k1.context_waits, k0.context_waits, "mode %d: kdag counted a call that waits for the context",
               (int)mode);
  cr_assert_eq(c1.module_unloads, c0.module_unloads);
  cr_assert_eq(k1.modules_deferred, 0, "the module is still in use");
  /* The work completes; new work is pending when a reap retires the
   * completed work, which drops the module's last reference: unloading
   * then would wait for the new work. */
  kd_tensor x;
  KDT_OK(kd_tensor_from_host(s, &d, zeros, sizeof zeros, &x));
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_scale(g, "x*=2", kd_whole(x), 2.0, NULL));
  nd.hold(0);
  nd.hold(1);
  KDT_OK(kd_graph_submit(g, NULL)); /* pending */
  KDT_OK(kd_session_reap(s, NULL));
  cr_assert_eq(calls().context_waits, c0.context_waits, "the reap waited for the pending work");
  cr_assert_eq(calls().module_unloads, c0.module_unloads, "an unload waits for the context: deferred");
  cr_assert_eq(counters(s).modules_deferred, 1);
  KDT_OK(kd_session_trim(s));
  kd_session_stats k2 = counters(s);
  cr_assert_eq(calls().module_unloads, c0.module_unloads + 1, "kd_session_trim unloads");
  cr_assert_eq(calls().context_waits, c0.context_waits + 1, "and waits for the context, as documented");
  cr_assert_geq(k2.context_waits, k1.context_waits + 1, "kdag counts the unload (and any unpinning)");
  cr_assert_eq(k2.modules_deferred, 0);
  nd.hold(0);
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, x));
  kd_session_destroy(s);
  assert_all_returned();
}

Test(host_null_driver, no_call_but_the_documented_ones_waits_for_the_context_eager) { no_hidden_wait(KD_EXEC_EAGER); }
Test(host_null_driver, no_call_but_the_documented_ones_waits_for_the_context_graph) { no_hidden_wait(KD_EXEC_GRAPH); }
Test(host_null_driver, no_call_but_the_documented_ones_waits_for_the_context_auto) { no_hidden_wait(KD_EXEC_AUTO); }

/* Past unload_cap deferred modules, the next wait the caller asks for
 * unloads them (and past idle_staging_cap, unpins the idle staging). */
static kd_status load_and_release(kd_raw *raw, void *user) {
  (void)user;
  kd_module m;
  kd_status st = kd_raw_load_ptx(raw, (const char *)kd_kernel_add_ptx, kd_kernel_add_ptx_size, &m);
  return st ? st : kd_module_release(kd_raw_session(raw), m);
}

Test(host_null_driver, past_the_caps_a_requested_wait_releases) {
  setenv("KDAG_CUDA_DRIVER_PATH", KDAG_NULL_DRIVER, 1);
  kd_session_options o;
  kd_session_options_init(&o);
  cr_assert_eq(o.unload_cap, 64);
  cr_assert_eq(o.idle_staging_cap, (uint64_t)1 << 30);
  o.backend = KD_BACKEND_CUDA;
  o.unload_cap = 2;
  o.idle_staging_cap = 0;
  kd_session *s;
  KDT_OK(kd_session_create(&o, &s));
  cr_assert(kdag_null_api_get(KDAG_NULL_DRIVER, &nd));
  pipeline p;
  pipeline_make(s, &p);
  submit_and_check(&p, 0);
  for (int i = 0; i < 3; ++i) KDT_OK(kd_with_raw(s, "test.load", load_and_release, NULL));
  cr_assert_eq(counters(s).modules_deferred, 3);
  cr_assert_gt(counters(s).module_bytes_deferred, 0);
  uint64_t unloads = calls().module_unloads;
  submit_and_check(&p, 1); /* 3 > 2: this wait unloads them */
  cr_assert_eq(calls().module_unloads, unloads + 3);
  cr_assert_eq(counters(s).modules_deferred, 0);
  cr_assert_eq(counters(s).module_bytes_deferred, 0);
  /* A download's staging block is idle once its wait is over: past a cap
   * of 0 bytes that wait unpins it. */
  uint64_t frees = calls().pinned_frees;
  KDT_OK(kd_tensor_download(s, p.b, p.out, sizeof p.out));
  cr_assert_gt(calls().pinned_frees, frees, "the idle staging went");
  cr_assert_eq(counters(s).staging_idle_bytes, 0);
  cr_assert_gt(counters(s).staging_blocks, 0, "the sink keeps its block for its next copy");
  submit_and_check(&p, 2);
  kd_graph_destroy(p.g);
  KDT_OK(kd_tensor_release(s, p.a));
  KDT_OK(kd_tensor_release(s, p.b));
  kd_session_destroy(s);
  assert_all_returned();
}

/* After a device fault kd_session_trim still releases what waits for a
 * wait (and says the session faulted): nothing stays for destroy to find. */
Test(host_null_driver, trim_after_a_fault_releases_all_the_same) {
  kd_session *s = null_session(KD_EXEC_EAGER, 0);
  for (int i = 0; i < 2; ++i) KDT_OK(kd_with_raw(s, "test.load", load_and_release, NULL));
  cr_assert_eq(counters(s).modules_deferred, 2);
  uint64_t unloads = calls().module_unloads;
  pipeline p;
  fill_in(&p, 0);
  pipeline_make(s, &p);
  nd.hold(1);
  KDT_OK(kd_graph_submit(p.g, NULL)); /* in flight when the fault comes, which the reap then meets */
  nd.fault(CUDA_ERROR_ILLEGAL_ADDRESS);
  KDT_FAILS(kd_session_reap(s, NULL), KD_ERR_DEVICE_FAULT, "CUDA_ERROR_ILLEGAL_ADDRESS");
  KDT_FAILS(kd_session_trim(s), KD_ERR_DEVICE_FAULT, "kd_session_trim: the session is unusable after a device fault");
  cr_assert_eq(counters(s).modules_deferred, 0);
  cr_assert_eq(calls().module_unloads, unloads + 2);
  release_pipeline(s, &p);
  kd_session_destroy(s);
  assert_all_returned();
}

/* Every refusal of a call made inside a raw scope names the call first,
 * then the scope (raw.h), whatever the argument: NULL outputs and inputs,
 * too many arguments, handles of nothing, a binary that cannot be loaded,
 * a build that fails. A NULL raw cannot name a scope: it says so. */
typedef struct raw_walk {
  kd_tensor t;
  kd_function fn;
  int checked;
} raw_walk;

static kd_status failing_build(kd_raw *raw, void *user, kd_module *out) {
  (void)raw, (void)user, (void)out;
  return KD_ERR_INVALID_ARGUMENT; /* no message: kdag writes one */
}

#define RAW_REFUSES(call, name, code)                                                                    \
  do {                                                                                                   \
    kd_status rw_st_ = (call);                                                                           \
    cr_assert_eq(rw_st_, (code), "%s -> %s: %s", #call, kd_status_name(rw_st_), kd_last_error());        \
    cr_assert(strncmp(kd_last_error(), name ": raw scope 'walk': ", strlen(name ": raw scope 'walk': ")) \
                  == 0, "%s: the message does not start with the call and the scope: %s", #call,        \
              kd_last_error());                                                                          \
    w->checked++;                                                                                        \
  } while (0)

static kd_status walk_refusals(kd_raw *raw, void *user) {
  raw_walk *w = user;
  kd_launch_config cfg = {{1, 1, 1}, {32, 1, 1}, 0, 0};
  kd_arg many[129];
  memset(many, 0, sizeof many);
  kd_span span;
  kd_span_mut span_mut;
  kd_module m;
  kd_tensor out;
  kd_view v = kd_whole(w->t);
  kd_tensor nothing = {0};
  /* SAFETY: none of these launches reaches the driver: each is refused
   * for its arguments (no config, no args, too many, no function) before
   * anything is enqueued, which is what this test checks. */
  RAW_REFUSES(kd_raw_launch(raw, w->fn, NULL, NULL, 0), "kd_raw_launch", KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_launch(raw, w->fn, &cfg, NULL, 2), "kd_raw_launch", KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_launch(raw, w->fn, &cfg, many, 129), "kd_raw_launch", KD_ERR_ARGUMENT_MISMATCH);
  RAW_REFUSES(kd_raw_launch(raw, (kd_function){0}, &cfg, NULL, 0), "kd_raw_launch", KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_tensor(raw, w->t, NULL), "kd_raw_tensor", KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_tensor(raw, nothing, &span), "kd_raw_tensor", KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_tensor_mut(raw, w->t, NULL), "kd_raw_tensor_mut", KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_view(raw, NULL, &span), "kd_raw_view", KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_view(raw, &v, NULL), "kd_raw_view", KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_view_mut(raw, NULL, &span_mut), "kd_raw_view_mut", KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_compile_nvrtc(raw, NULL, NULL, &m), "kd_raw_compile_nvrtc", KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_compile_nvrtc(raw, "__global__ void k() {}", NULL, NULL), "kd_raw_compile_nvrtc",
              KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_stream(raw, NULL), "kd_raw_stream", KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_load_binary(raw, NULL, &m), "kd_raw_load_binary", KD_ERR_INVALID_ARGUMENT);
  static const unsigned char ltoir[16] = {0xed, 0x43, 0x4e, 0x7f}; /* the LTO-IR magic: refused unlinked */
  kd_binary *b;
  KDT_OK(kd_binary_from_memory(KD_BINARY_LTOIR, ltoir, sizeof ltoir, "sm_90", 0, &b));
  RAW_REFUSES(kd_raw_load_binary(raw, b, NULL), "kd_raw_load_binary", KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_load_binary(raw, b, &m), "kd_raw_load_binary", KD_ERR_INVALID_ARGUMENT);
  kd_binary_destroy(b);
  RAW_REFUSES(kd_raw_load_ptx(raw, "", 0, NULL), "kd_raw_load_ptx", KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_load_image(raw, ltoir, sizeof ltoir, NULL), "kd_raw_load_image", KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_cached_module(raw, NULL, failing_build, NULL, &m), "kd_raw_cached_module",
              KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_cached_module(raw, "walk.key", NULL, NULL, &m), "kd_raw_cached_module",
              KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_cached_module(raw, "walk.key", failing_build, NULL, &m), "kd_raw_cached_module",
              KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_alloc_output(raw, KD_F32, 1, (int64_t[]){4}, NULL), "kd_raw_alloc_output",
              KD_ERR_INVALID_ARGUMENT);
  RAW_REFUSES(kd_raw_alloc_output(raw, KD_F32, -2, (int64_t[]){4}, &out), "kd_raw_alloc_output",
              KD_ERR_INVALID_ARGUMENT);
  return KD_OK;
}

Test(host_null_driver, every_raw_refusal_names_the_call_and_the_scope) {
  kd_session *s = null_session(KD_EXEC_EAGER, 0);
  raw_walk w = {.checked = 0};
  float x[4] = {1, 2, 3, 4};
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {4}};
  KDT_OK(kd_tensor_from_host(s, &d, x, sizeof x, &w.t));
  two_kernels k;
  KDT_OK(kd_with_raw(s, "test.load", load_two, &k));
  w.fn = k.add;
  KDT_OK(kd_with_raw(s, "walk", walk_refusals, &w));
  cr_assert_eq(w.checked, 23, "%d refusals checked", w.checked);
  KDT_FAILS(kd_raw_tensor(NULL, w.t, NULL), KD_ERR_INVALID_ARGUMENT, "kd_raw_tensor: argument raw is NULL");
  KDT_OK(kd_module_release(s, k.add_m));
  KDT_OK(kd_module_release(s, k.test_m));
  KDT_OK(kd_tensor_release(s, w.t));
  kd_session_destroy(s);
}

/* The raw callback runs under the session lock, which is not recursive:
 * the session calls raw.h allows from it (counters, downloads, graphs,
 * releases, a destroy that waits for the scope's end) must neither
 * deadlock nor unlock the scope's hold. */
typedef struct in_scope_calls {
  kd_tensor t;
  int ran;
} in_scope_calls;

static kd_status session_calls_inside(kd_raw *raw, void *user) {
  in_scope_calls *c = user;
  kd_session *s = kd_raw_session(raw);
  kd_session_stats before;
  KDT_OK(kd_session_stats_get(s, &before));
  float got[4];
  KDT_OK(kd_tensor_download(s, c->t, got, sizeof got));
  cr_assert_eq(got[3], 4.0f);
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  float two = 2;
  KDT_OK(kd_graph_op_fill(g, "fill", kd_whole(c->t), &two, NULL));
  kd_graph_destroy(g);
  kd_span span;
  KDT_OK(kd_raw_tensor(raw, c->t, &span)); /* the scope is still open and owned */
  KDT_OK(kd_tensor_release(s, c->t));
  kd_session_destroy(s); /* deferred to the scope's end */
  KDT_OK(kd_session_stats_get(s, &before));
  c->ran = 1;
  return KD_OK;
}

Test(host_null_driver, session_calls_inside_a_raw_callback_keep_the_scope_and_the_lock) {
  kd_session *s = null_session(KD_EXEC_EAGER, 0);
  in_scope_calls c = {.ran = 0};
  float x[4] = {1, 2, 3, 4};
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {4}};
  KDT_OK(kd_tensor_from_host(s, &d, x, sizeof x, &c.t));
  KDT_OK(kd_with_raw(s, "inside", session_calls_inside, &c)); /* destroys the session as it returns */
  cr_assert(c.ran);
  assert_all_returned(); /* the deferred destroy freed everything */
}

/* A module handle counts its holders as a tensor handle does: each
 * kd_module_retain needs its kd_module_release; the module cache's own
 * modules take neither. */
static kd_status cache_add(kd_raw *raw, void *user, kd_module *out) {
  (void)user;
  return kd_raw_load_ptx(raw, (const char *)kd_kernel_add_ptx, kd_kernel_add_ptx_size, out);
}

static kd_status cached(kd_raw *raw, void *user) {
  return kd_raw_cached_module(raw, "test.retain", cache_add, NULL, user);
}

Test(host_null_driver, a_retained_module_needs_as_many_releases) {
  kd_session *s = null_session(KD_EXEC_EAGER, 0);
  two_kernels k;
  KDT_OK(kd_with_raw(s, "test.load", load_two, &k));
  KDT_OK(kd_module_retain(s, k.add_m));
  KDT_OK(kd_module_release(s, k.add_m));
  kd_function fn;
  KDT_OK(kd_module_function(s, k.add_m, "add_kernel", &fn)); /* still held once */
  KDT_OK(kd_module_release(s, k.add_m));
  KDT_FAILS(kd_module_release(s, k.add_m), KD_ERR_RELEASED, "kd_module_release");
  KDT_FAILS(kd_module_retain(s, k.add_m), KD_ERR_RELEASED, "kd_module_retain");
  kd_module c;
  KDT_OK(kd_with_raw(s, "test.cache", cached, &c));
  KDT_FAILS(kd_module_retain(s, c), KD_ERR_INVALID_ARGUMENT, "module cache");
  KDT_FAILS(kd_module_retain(NULL, c), KD_ERR_INVALID_ARGUMENT, "argument session is NULL");
  KDT_OK(kd_module_release(s, k.test_m));
  kd_session_destroy(s);
  assert_all_returned();
}

/* ---- memory another library owns (kd_tensor_wrap) ---------------------- */

static void count_release(void *user) { ++*(int *)user; }

static kd_status borrow_mut(kd_raw *raw, void *user) {
  kd_span_mut span;
  return kd_raw_tensor_mut(raw, *(kd_tensor *)user, &span);
}

static kd_external_desc foreign_desc(unsigned long long p, int64_t n, int *released) {
  kd_external_desc d;
  kd_external_desc_init(&d);
  d.data = (void *)(uintptr_t)p;
  d.dtype = KD_F32;
  d.rank = 1;
  d.shape[0] = n;
  d.release = count_release;
  d.release_user = released;
  return d;
}

/* What the driver says of the memory decides: device memory of this
 * device, inside one allocation, aligned; kdag never frees it, and hands
 * it back once the work in flight that uses it is done. */
static void wrapped_device_memory(kd_exec_mode mode) {
  kd_session *s = null_session(mode, 0);
  enum { N = 256 };
  int released = 0;
  unsigned long long mine = nd.foreign_alloc(N * sizeof(float), 0, 0);
  unsigned long long other = nd.foreign_alloc(N * sizeof(float), 1, 0);
  unsigned long long managed = nd.foreign_alloc(N * sizeof(float), 0, 1);
  cr_assert(mine && other && managed);
  kd_tensor t;
  float host[N];
  kd_external_desc d = foreign_desc(mine, N, &released);
  d.data = host;
  KDT_FAILS(kd_tensor_wrap(s, &d, &t), KD_ERR_NOT_RESIDENT, "is not device memory");
  d = foreign_desc(other, N, &released);
  KDT_FAILS(kd_tensor_wrap(s, &d, &t), KD_ERR_WRONG_DEVICE, "memory of device 1, the session's is device 0");
  d = foreign_desc(managed, N, &released);
  KDT_FAILS(kd_tensor_wrap(s, &d, &t), KD_ERR_NOT_RESIDENT, "managed memory; wrap it with KD_EXTERNAL_ALLOW_MANAGED");
  d.flags = KD_EXTERNAL_ALLOW_MANAGED;
  KDT_OK(kd_tensor_wrap(s, &d, &t));
  KDT_OK(kd_tensor_release(s, t));
  cr_assert_eq(released, 1);
  d = foreign_desc(mine + 2, N, &released);
  KDT_FAILS(kd_tensor_wrap(s, &d, &t), KD_ERR_MISALIGNED, "not aligned to its 4-byte f32 elements");
  d = foreign_desc(mine + 4, N, &released);
  KDT_FAILS(kd_tensor_wrap(s, &d, &t), KD_ERR_OUT_OF_BOUNDS, "reaches past its allocation");
  d = foreign_desc(mine + 4, N - 1, &released); /* inside it: fine */
  d.flags = KD_EXTERNAL_READ_ONLY;
  KDT_OK(kd_tensor_wrap(s, &d, &t));
  KDT_FAILS(kd_with_raw(s, "writes it", borrow_mut, &t), KD_ERR_INVALID_ARGUMENT,
            "kd_raw_tensor_mut: raw scope 'writes it': the tensor is read-only");
  KDT_OK(kd_tensor_release(s, t));
  cr_assert_eq(released, 2, "failed wraps never call release");

  /* In a graph: written by a built-in, released and the graph destroyed
   * while its submission is in flight. */
  d = foreign_desc(mine, N, &released);
  KDT_OK(kd_tensor_wrap(s, &d, &t));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  float one = 1.0f;
  KDT_OK(kd_graph_op_fill(g, "y = 1", kd_whole(t), &one, NULL));
  uint64_t frees = calls().device_frees;
  nd.hold(1);
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_tensor_release(s, t));
  kd_graph_destroy(g);
  uint32_t pending = 0;
  KDT_OK(kd_session_reap(s, &pending));
  cr_assert_eq(pending, 1);
  cr_assert_eq(released, 2, "handed back while the fill was in flight");
  nd.hold(0);
  KDT_OK(kd_session_reap(s, &pending));
  cr_assert_eq(pending, 0);
  cr_assert_eq(released, 3, "handed back once the work was done");
  cr_assert_eq(calls().device_frees, frees, "kdag freed memory it does not own");
  cr_assert_eq(calls().stream_syncs + calls().event_syncs, 0, "wrapping and handing back never wait");
  kd_session_destroy(s);
  cr_assert_eq(released, 3);
  nd.foreign_free(mine);
  nd.foreign_free(other);
  nd.foreign_free(managed);
  assert_all_returned();
}
Test(host_null_driver, wrapped_device_memory_eager) { wrapped_device_memory(KD_EXEC_EAGER); }
Test(host_null_driver, wrapped_device_memory_graph) { wrapped_device_memory(KD_EXEC_GRAPH); }

/* DLPack on a CUDA session: kDLCUDA memory of the session's device, the
 * producer's event waited for on the device, the deleter once done. */
static int dl_deleted;
static void dl_delete(kd_dl_managed_versioned *self) { dl_deleted++, (void)self; }

Test(host_null_driver, dlpack_import_of_device_memory_waits_on_the_device) {
  kd_session *s = null_session(KD_EXEC_GRAPH, 0);
  enum { N = 64 };
  unsigned long long mem = nd.foreign_alloc(N * sizeof(float), 0, 0);
  int64_t shape[2] = {8, 8};
  kd_dl_managed_versioned m;
  memset(&m, 0, sizeof m);
  m.version = (kd_dl_version){1, 1};
  m.dl_tensor.data = (void *)(uintptr_t)mem;
  m.dl_tensor.device = (kd_dl_device){KD_DL_CUDA, 0};
  m.dl_tensor.ndim = 2;
  m.dl_tensor.dtype = (kd_dl_dtype){KD_DL_FLOAT, 32, 1};
  m.dl_tensor.shape = shape;
  m.deleter = dl_delete;
  dl_deleted = 0;
  kd_tensor t;
  kd_view v;
  m.dl_tensor.device.device_id = 1;
  KDT_FAILS(kd_tensor_from_dlpack(s, &m, KD_DLPACK_VERSIONED, NULL, &t, &v), KD_ERR_WRONG_DEVICE,
            "the DLPack tensor is on device 1, the session's is device 0");
  m.dl_tensor.device = (kd_dl_device){KD_DL_CPU, 0};
  KDT_FAILS(kd_tensor_from_dlpack(s, &m, KD_DLPACK_VERSIONED, NULL, &t, &v), KD_ERR_NOT_RESIDENT,
            "DLPack device type 1 on a CUDA session");
  m.dl_tensor.device = (kd_dl_device){KD_DL_CUDA, 0};
  m.dl_tensor.shape[0] = 9; /* past the allocation */
  KDT_FAILS(kd_tensor_from_dlpack(s, &m, KD_DLPACK_VERSIONED, NULL, &t, &v), KD_ERR_OUT_OF_BOUNDS,
            "kd_tensor_from_dlpack: the DLPack tensor's data");
  m.dl_tensor.shape[0] = 8;
  cr_assert_eq(dl_deleted, 0);
  get_proc_fn get = (get_proc_fn)nd.get_proc;
  void *create = NULL, *destroy = NULL;
  cr_assert_eq(get("cuEventCreate", &create, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, NULL), CUDA_SUCCESS);
  cr_assert_eq(get("cuEventDestroy", &destroy, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, NULL), CUDA_SUCCESS);
  CUevent produced;
  cr_assert_eq(((CUresult(*)(CUevent *, unsigned))create)(&produced, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  uint64_t waits = calls().stream_event_waits, syncs = calls().event_syncs + calls().stream_syncs;
  KDT_OK(kd_tensor_from_dlpack(s, &m, KD_DLPACK_VERSIONED, produced, &t, &v));
  cr_assert_eq(calls().stream_event_waits, waits + 1, "the stream waits for the producer's event");
  cr_assert_eq(calls().event_syncs + calls().stream_syncs, syncs, "the host does not");
  cr_assert(v.rank == 2 && v.shape[0] == 8 && v.strides[1] == 8);
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_scale(g, "x *= 2", v, 2.0, NULL));
  nd.hold(1);
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_tensor_release(s, t));
  kd_graph_destroy(g);
  cr_assert_eq(dl_deleted, 0, "deleted under work in flight");
  nd.hold(0);
  uint32_t pending;
  KDT_OK(kd_session_reap(s, &pending));
  cr_assert_eq(dl_deleted, 1);
  cr_assert_eq(((CUresult(*)(CUevent))destroy)(produced), CUDA_SUCCESS);
  kd_session_destroy(s);
  nd.foreign_free(mem);
  assert_all_returned();
}

/* Export from a CUDA session: kDLCUDA, with an event after kdag's work for
 * the consumer to wait on; the host waits for nothing. */
Test(host_null_driver, dlpack_export_records_an_event_for_the_consumer) {
  kd_session *s = null_session(KD_EXEC_EAGER, 0);
  kd_tensor_desc d = {.dtype = KD_I64, .rank = 3, .shape = {2, 3, 4}};
  int64_t x[24] = {0};
  kd_tensor t;
  KDT_OK(kd_tensor_from_host(s, &d, x, sizeof x, &t));
  uint64_t records = calls().event_records, syncs = calls().event_syncs + calls().stream_syncs;
  void *event = NULL, *managed = NULL;
  KDT_OK(kd_tensor_to_dlpack(s, t, KD_DLPACK_VERSIONED, &event, &managed));
  cr_assert_not_null(event);
  cr_assert_eq(calls().event_records, records + 1);
  cr_assert_eq(calls().event_syncs + calls().stream_syncs, syncs, "the export does not wait");
  kd_dl_managed_versioned *m = managed;
  cr_assert(m->dl_tensor.device.device_type == KD_DL_CUDA && m->dl_tensor.device.device_id == 0);
  cr_assert(m->dl_tensor.dtype.code == KD_DL_INT && m->dl_tensor.dtype.bits == 64);
  cr_assert(m->dl_tensor.shape[0] == 4 && m->dl_tensor.shape[1] == 3 && m->dl_tensor.shape[2] == 2);
  cr_assert(m->dl_tensor.strides[0] == 6 && m->dl_tensor.strides[1] == 2 && m->dl_tensor.strides[2] == 1);
  get_proc_fn get = (get_proc_fn)nd.get_proc;
  void *destroy = NULL;
  cr_assert_eq(get("cuEventDestroy", &destroy, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, NULL), CUDA_SUCCESS);
  cr_assert_eq(((CUresult(*)(CUevent))destroy)((CUevent)event), CUDA_SUCCESS, "the caller's event");
  uint64_t frees = calls().device_frees;
  KDT_OK(kd_tensor_release(s, t));
  cr_assert_eq(calls().device_frees, frees, "the export holds the memory");
  m->deleter(m);
  cr_assert_eq(calls().device_frees, frees + 1, "freed once the consumer let go");
  kd_session_destroy(s);
  assert_all_returned();
}

static kd_status wait_inside(kd_raw *raw, void *event) {
  return kd_session_wait_event(kd_raw_session(raw), event); /* the scope's launches after it wait too */
}

/* Ordering across sessions and with other libraries' events: the device
 * waits, the host never does. */
Test(host_null_driver, sessions_wait_for_each_other_and_for_events_on_the_device) {
  pipeline p;
  kd_session *a = made(KD_EXEC_GRAPH, &p);
  kd_session *b = null_session(KD_EXEC_EAGER, 0);
  nd.hold(1);
  kd_ticket t;
  KDT_OK(kd_graph_submit(p.g, &t));
  kdag_null_calls c0 = calls();
  KDT_OK(kd_session_wait_ticket(b, a, t));
  kdag_null_calls c1 = calls();
  cr_assert_eq(c1.stream_event_waits, c0.stream_event_waits + 1, "b's stream waits for a's submission");
  cr_assert_eq(c1.event_records, c0.event_records + 1, "an event recorded on a's stream");
  cr_assert_eq(c1.event_syncs + c1.stream_syncs, c0.event_syncs + c0.stream_syncs, "no host wait");
  cr_assert_eq(counters(b).stream_event_waits, 1);
  void *e = NULL;
  KDT_OK(kd_ticket_event(a, t, &e));
  cr_assert_not_null(e);
  KDT_OK(kd_session_wait_event(b, e));
  cr_assert_eq(counters(b).stream_event_waits, 2);
  KDT_OK(kd_with_raw(b, "waits inside", wait_inside, e)); /* from a raw scope's own thread */
  cr_assert_eq(counters(b).stream_event_waits, 3);
  get_proc_fn get = (get_proc_fn)nd.get_proc;
  void *destroy = NULL;
  cr_assert_eq(get("cuEventDestroy", &destroy, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, NULL), CUDA_SUCCESS);
  cr_assert_eq(((CUresult(*)(CUevent))destroy)((CUevent)e), CUDA_SUCCESS);
  /* Once retired: no wait to add, and an event that is complete. */
  nd.hold(0);
  uint32_t pending;
  KDT_OK(kd_session_reap(a, &pending));
  kdag_null_calls c2 = calls();
  KDT_OK(kd_session_wait_ticket(b, a, t));
  KDT_OK(kd_ticket_event(a, t, &e));
  kdag_null_calls c3 = calls();
  cr_assert_eq(c3.stream_event_waits, c2.stream_event_waits);
  cr_assert_eq(c3.event_records, c2.event_records, "a retired ticket's event is never recorded");
  cr_assert_eq(((CUresult(*)(CUevent))destroy)((CUevent)e), CUDA_SUCCESS);
  KDT_OK(kd_session_wait_ticket(a, a, t)); /* its own: in order already */
  kd_ticket wrong = t;
  wrong.seq = 999;
  KDT_FAILS(kd_session_wait_ticket(b, a, wrong), KD_ERR_INVALID_ARGUMENT, "kd_session_wait_ticket: argument ticket (999) was never issued");
  KDT_FAILS(kd_ticket_event(b, t, &e), KD_ERR_WRONG_SESSION, "kd_ticket_event: argument ticket is of another session");
  KDT_FAILS(kd_ticket_event(a, t, NULL), KD_ERR_INVALID_ARGUMENT, "out_event");
  KDT_FAILS(kd_session_wait_event(b, NULL), KD_ERR_INVALID_ARGUMENT, "argument event is NULL");
  KDT_FAILS(kd_session_wait_ticket(b, NULL, t), KD_ERR_INVALID_ARGUMENT, "argument other is NULL");
  kd_session *h = kdt_host_session();
  KDT_FAILS(kd_session_wait_ticket(h, a, t), KD_ERR_WRONG_BACKEND, "kd_session_wait_ticket: backend session is not CUDA");
  KDT_FAILS(kd_session_wait_event(h, &p), KD_ERR_WRONG_BACKEND, "kd_session_wait_event: backend session is not CUDA");
  kd_session_destroy(h);
  kd_graph_destroy(p.g);
  KDT_OK(kd_tensor_release(a, p.a));
  KDT_OK(kd_tensor_release(a, p.b));
  kd_session_destroy(b);
  kd_session_destroy(a);
  assert_all_returned();
}

/* kd_device_count and kd_device_query ask the driver without a session. */
Test(null_driver, devices_are_counted_and_described_without_a_session) {
  setenv("KDAG_CUDA_DRIVER_PATH", KDAG_NULL_DRIVER, 1);
  int count = -1;
  KDT_OK(kd_device_count(&count));
  cr_assert_gt(count, 0);
  kd_device_info info;
  KDT_OK(kd_device_query(0, &info));
  cr_assert_str_eq(info.name, KDAG_NULL_DEVICE_NAME);
  cr_assert_eq(info.ordinal, 0);
  cr_assert_gt(info.sm_count, 0);
  cr_assert_eq(info.numa_node, -1, "only a session places staging");
  cr_assert_gt(info.driver_version, 0);
  KDT_FAILS(kd_device_query(count, &info), KD_ERR_INVALID_ARGUMENT, "out of range");
  KDT_FAILS(kd_device_query(-1, &info), KD_ERR_INVALID_ARGUMENT, "argument ordinal -1");
  KDT_FAILS(kd_device_query(0, NULL), KD_ERR_INVALID_ARGUMENT, "argument out_info is NULL");
  KDT_FAILS(kd_device_count(NULL), KD_ERR_INVALID_ARGUMENT, "argument out_count is NULL");
  /* The same answers a session on it gives. */
  kd_session *s = null_session(KD_EXEC_EAGER, 0);
  kd_device_info in_session;
  KDT_OK(kd_session_device_info(s, &in_session));
  cr_assert_str_eq(in_session.name, info.name);
  cr_assert_eq(in_session.sm_count, info.sm_count);
  cr_assert_eq(in_session.memory_bytes, info.memory_bytes);
  cr_assert_str_eq(in_session.pci_bus_id, info.pci_bus_id);
  kd_session_destroy(s);
}

Test(null_driver, without_a_driver_the_count_says_why) {
  setenv("KDAG_CUDA_DRIVER_PATH", "/nonexistent/libcuda.so.1", 1);
  int count = -1;
  KDT_FAILS(kd_device_count(&count), KD_ERR_DRIVER_MISSING, "could not be loaded");
  cr_assert_eq(count, 0);
}

/* Loops on the null driver (whose kernels do nothing here, so a loop's
 * condition never changes): EAGER drives a loop from the host, a copy and
 * a wait per trip, and stops at its limit with the trip count written;
 * GRAPH needs conditional nodes, which this driver lacks: refused naming
 * the loop, and AUTO then stays EAGER. Everything is returned. */
Test(host_null_driver, loops_run_eager_to_their_limit_and_graph_mode_says_why_not) {
  for (int m = 0; m < 3; ++m) {
    kd_exec_mode mode = m == 0 ? KD_EXEC_EAGER : m == 1 ? KD_EXEC_GRAPH : KD_EXEC_AUTO;
    kd_session *s = null_session(mode, 0);
    kd_tensor_desc i1 = {.dtype = KD_I32, .rank = 1, .shape = {1}};
    int32_t five = 5, trips = -1;
    kd_tensor c, t, y;
    KDT_OK(kd_tensor_from_host(s, &i1, &five, sizeof five, &c));
    KDT_OK(kd_tensor_create(s, &i1, &t));
    KDT_OK(kd_tensor_from_host(s, &i1, &five, sizeof five, &y));
    kd_graph *g;
    KDT_OK(kd_graph_create(s, &g));
    kd_node loop;
    KDT_OK(kd_graph_while_begin(g, "spin", c, 3, t, &loop));
    KDT_OK(kd_graph_op_copy(g, "c = y", kd_whole(c), kd_whole(y), NULL));
    KDT_OK(kd_graph_end(g, loop));
    if (mode == KD_EXEC_GRAPH) {
      KDT_FAILS(kd_graph_submit(g, NULL), KD_ERR_DRIVER, "loop 'spin' (#0): the driver has no conditional graph nodes");
    } else {
      for (int run = 0; run < 4; ++run) { /* AUTO: eager twice, then its CUDA graph is refused, then eager again */
        kd_session_stats k0 = counters(s);
        KDT_OK(kd_graph_submit(g, NULL));
        kd_session_stats k1 = counters(s);
        cr_assert_eq(k1.event_waits - k0.event_waits, 3, "run %d: %llu waits, one a trip", run,
                     (unsigned long long)(k1.event_waits - k0.event_waits));
        KDT_OK(kd_tensor_download(s, t, &trips, sizeof trips));
        cr_assert_eq(trips, 3, "run %d: the limit, 3 trips: %d", run, trips);
      }
    }
    kd_graph_destroy(g);
    kd_session_destroy(s);
    assert_all_returned();
  }
}

/* Two devices (KDAG_NULL_DEVICES=2), a session on each in one process:
 * each its own context, device and memory; the second waits on the device
 * for the first's submission (kd_session_wait_ticket), no host wait; a
 * tensor of one session in the other's graph, memory of the other device
 * wrapped, and an ordinal the driver lacks are refused. */
Test(host_null_driver, a_session_per_device_orders_through_tickets_and_keeps_to_its_device) {
  setenv("KDAG_NULL_DEVICES", "2", 1);
  kd_session *a = null_session(KD_EXEC_GRAPH, 0), *b = null_session_on_device1(KD_EXEC_AUTO);
  kd_device_info ia, ib;
  KDT_OK(kd_session_device_info(a, &ia));
  KDT_OK(kd_session_device_info(b, &ib));
  cr_assert_eq(ia.ordinal, 0);
  cr_assert_eq(ib.ordinal, 1);
  cr_assert_str_neq(ia.pci_bus_id, ib.pci_bus_id, "two devices, two buses: %s", ia.pci_bus_id);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {8}};
  float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1}, got[8];
  kd_tensor ta, tb;
  KDT_OK(kd_tensor_from_host(a, &d, ones, sizeof ones, &ta));
  KDT_OK(kd_tensor_from_host(b, &d, ones, sizeof ones, &tb));
  kd_graph *ga, *gb;
  KDT_OK(kd_graph_create(a, &ga));
  KDT_OK(kd_graph_create(b, &gb));
  KDT_OK(kd_graph_op_scale(ga, "a *= 2", kd_whole(ta), 2.0, NULL));
  KDT_FAILS(kd_graph_op_scale(gb, "a in b", kd_whole(ta), 2.0, NULL), KD_ERR_WRONG_SESSION, "");
  KDT_OK(kd_graph_op_scale(gb, "b *= 3", kd_whole(tb), 3.0, NULL));
  kd_ticket t;
  nd.hold(1); /* a's submission stays pending: b's wait is a real one */
  KDT_OK(kd_graph_submit(ga, &t));
  kd_session_stats k0 = counters(b);
  KDT_OK(kd_session_wait_ticket(b, a, t));
  KDT_OK(kd_graph_submit(gb, NULL));
  kd_session_stats k1 = counters(b);
  nd.hold(0);
  cr_assert_eq(k1.stream_event_waits - k0.stream_event_waits, 1, "b waits for a's submission on the device");
  cr_assert_eq(k1.event_waits, k0.event_waits, "and not on the host");
  KDT_OK(kd_tensor_download(b, tb, got, sizeof got));
  KDT_OK(kd_tensor_download(a, ta, got, sizeof got));
  /* Memory of device 1 is not session a's. */
  unsigned long long other = nd.foreign_alloc(64, 1, 0);
  cr_assert(other, "the null driver allocated on device 1");
  kd_external_desc e;
  kd_external_desc_init(&e);
  e.data = (void *)(uintptr_t)other;
  e.dtype = KD_F32;
  e.rank = 1;
  e.shape[0] = 16;
  kd_tensor w;
  KDT_FAILS(kd_tensor_wrap(a, &e, &w), KD_ERR_WRONG_DEVICE, "");
  nd.foreign_free(other);
  /* An ordinal the driver lacks. */
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_CUDA;
  o.device_ordinal = 2;
  kd_session *c = NULL;
  KDT_FAILS(kd_session_create(&o, &c), KD_ERR_INVALID_ARGUMENT, "");
  kd_graph_destroy(ga);
  kd_graph_destroy(gb);
  kd_session_destroy(b);
  kd_session_destroy(a);
  assert_all_returned();
}

Test(host_null_driver, a_communicator_without_nccl_says_where_it_looked) {
  /* No NCCL where kdag looks (this machine has none on the loader's path):
   * the CUDA side of kdag/comm.h fails cleanly, naming the variable. */
  setenv("KDAG_NCCL_PATH", "/nonexistent/libnccl.so.2", 1);
  setenv("KDAG_PYTHON_SITE", "/nonexistent", 1);
  kd_session *s = null_session(KD_EXEC_EAGER, 0);
  kd_comm_id id;
  KDT_FAILS(kd_comm_id_create(s, &id), KD_ERR_LIBRARY_MISSING, "KDAG_NCCL_PATH");
  memset(&id, 0, sizeof id);
  kd_comm *c;
  KDT_FAILS(kd_comm_create(s, &id, 1, 0, &c), KD_ERR_LIBRARY_MISSING, "NCCL");
  KDT_FAILS(kd_comm_create_all(&s, 1, &c), KD_ERR_LIBRARY_MISSING, "NCCL");
  /* Nothing was left behind: the session's tensors are all gone. */
  kd_session_stats st;
  KDT_OK(kd_session_stats_get(s, &st));
  cr_assert_eq(st.bytes_device, 0, "%llu device bytes left", (unsigned long long)st.bytes_device);
  kd_session_destroy(s);
}

/* ---- communicators over the null NCCL (tests/null_nccl.c) ----------------- */

/* Two sessions, one per null device, joined in one communicator group
 * (kd_comm_create_all, one thread), over the null NCCL. */
typedef struct nccl_ranks {
  kd_session *s[2];
  kd_comm *c[2];
} nccl_ranks;

static void nccl_ranks_open(nccl_ranks *r, kd_exec_mode mode, int count) {
  setenv("KDAG_NULL_DEVICES", "2", 1);
  setenv("KDAG_NCCL_PATH", KDAG_NULL_NCCL, 1);
  r->s[0] = null_session(mode, 0);
  if (count == 2) r->s[1] = null_session_on_device1(mode);
  KDT_OK(kd_comm_create_all(r->s, count, r->c));
}

static int null_nccl_live(void) {
  void *lib = dlopen(KDAG_NULL_NCCL, RTLD_NOW | RTLD_NOLOAD);
  cr_assert(lib, "the null NCCL is not loaded");
  int (*live)(void) = (int (*)(void))dlsym(lib, "kdag_null_nccl_live");
  cr_assert(live);
  int n = live();
  dlclose(lib);
  return n;
}

#define NCCL_N 64

typedef struct nccl_rank_graph {
  kd_session *s;
  int rank;
  kd_graph *g;
  kd_tensor x, sum, gathered, part, bcast, ring;
  kd_sink *sinks[5];
  float out_sum[NCCL_N], out_gathered[2 * NCCL_N], out_part[NCCL_N / 2], out_bcast[NCCL_N], out_ring[NCCL_N];
  kd_status st;
} nccl_rank_graph;

static float nccl_x(int rank, int i) { return (float)(rank * 1000 + i); }

static void nccl_declare(nccl_rank_graph *k, kd_session *s, kd_comm *c, int rank) {
  k->s = s;
  k->rank = rank;
  float x[NCCL_N];
  for (int i = 0; i < NCCL_N; ++i) x[i] = nccl_x(rank, i);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {NCCL_N}}, d2 = d, dh = d;
  d2.shape[0] = 2 * NCCL_N;
  dh.shape[0] = NCCL_N / 2;
  KDT_OK(kd_tensor_from_host(s, &d, x, sizeof x, &k->x));
  KDT_OK(kd_tensor_create(s, &d, &k->sum));
  KDT_OK(kd_tensor_create(s, &d2, &k->gathered));
  KDT_OK(kd_tensor_create(s, &dh, &k->part));
  KDT_OK(kd_tensor_from_host(s, &d, x, sizeof x, &k->bcast)); /* kernels (a copy) do nothing here */
  KDT_OK(kd_tensor_create(s, &d, &k->ring));
  KDT_OK(kd_graph_create(s, &k->g));
  kd_graph *g = k->g;
  KDT_OK(kd_graph_all_reduce(g, "sum", c, kd_whole(k->sum), kd_whole(k->x), KD_REDUCE_SUM, NULL));
  KDT_OK(kd_graph_all_gather(g, "gather", c, kd_whole(k->gathered), kd_whole(k->x), NULL));
  KDT_OK(kd_graph_reduce_scatter(g, "scatter", c, kd_whole(k->part), kd_whole(k->x), KD_REDUCE_SUM, NULL));
  KDT_OK(kd_graph_broadcast(g, "bcast", c, kd_whole(k->bcast), 1, NULL));
  KDT_OK(kd_graph_send_recv(g, "ring", c, kd_whole(k->x), 1 - rank, kd_whole(k->ring), 1 - rank, NULL));
  KDT_OK(kd_graph_sink(g, "sum", k->sum, k->out_sum, sizeof k->out_sum, &k->sinks[0]));
  KDT_OK(kd_graph_sink(g, "gathered", k->gathered, k->out_gathered, sizeof k->out_gathered, &k->sinks[1]));
  KDT_OK(kd_graph_sink(g, "part", k->part, k->out_part, sizeof k->out_part, &k->sinks[2]));
  KDT_OK(kd_graph_sink(g, "bcast", k->bcast, k->out_bcast, sizeof k->out_bcast, &k->sinks[3]));
  KDT_OK(kd_graph_sink(g, "ring", k->ring, k->out_ring, sizeof k->out_ring, &k->sinks[4]));
}

/* A rank's thread: two submissions, each waited for (NCCL's rule: a thread
 * per rank). Criterion's asserts stay on the main thread. */
static void *nccl_rank_run(void *p) {
  nccl_rank_graph *k = p;
  for (int round = 0; round < 2 && !k->st; ++round) {
    k->st = kd_graph_submit(k->g, NULL);
    for (int i = 0; i < 5 && !k->st; ++i) k->st = kd_sink_wait(k->sinks[i]);
  }
  return NULL;
}

static void nccl_check(const nccl_rank_graph *k) {
  cr_assert_eq(k->st, KD_OK, "rank %d: %s", k->rank, kd_status_name(k->st));
  for (int i = 0; i < NCCL_N; ++i) {
    cr_assert_eq(k->out_sum[i], nccl_x(0, i) + nccl_x(1, i), "rank %d: sum[%d]", k->rank, i);
    cr_assert_eq(k->out_gathered[i], nccl_x(0, i), "rank %d: gathered[%d]", k->rank, i);
    cr_assert_eq(k->out_gathered[NCCL_N + i], nccl_x(1, i), "rank %d: gathered[%d]", k->rank, NCCL_N + i);
    cr_assert_eq(k->out_bcast[i], nccl_x(1, i), "rank %d: bcast[%d]", k->rank, i);
    cr_assert_eq(k->out_ring[i], nccl_x(1 - k->rank, i), "rank %d: ring[%d]", k->rank, i);
  }
  for (int i = 0; i < NCCL_N / 2; ++i) {
    int at = k->rank * NCCL_N / 2 + i;
    cr_assert_eq(k->out_part[i], nccl_x(0, at) + nccl_x(1, at), "rank %d: part[%d]", k->rank, i);
  }
}

static void nccl_free(nccl_rank_graph *k) {
  kd_graph_destroy(k->g);
  kd_tensor all[] = {k->x, k->sum, k->gathered, k->part, k->bcast, k->ring};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) KDT_OK(kd_tensor_release(k->s, all[i]));
}

static void two_ranks_a_thread_each(kd_exec_mode mode) {
  nccl_ranks r;
  nccl_ranks_open(&r, mode, 2);
  cr_assert_eq(null_nccl_live(), 2);
  nccl_rank_graph k[2];
  memset(k, 0, sizeof k);
  for (int i = 0; i < 2; ++i) nccl_declare(&k[i], r.s[i], r.c[i], i);
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) cr_assert_eq(pthread_create(&t[i], NULL, nccl_rank_run, &k[i]), 0);
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; ++i) {
    nccl_check(&k[i]);
    kd_session_stats st;
    KDT_OK(kd_session_stats_get(r.s[i], &st));
    if (mode == KD_EXEC_GRAPH) /* NCCL's calls captured once, run at each launch */
      cr_assert(st.graph_instantiations == 1 && st.graph_launches == 2, "rank %d: %llu instantiations, %llu launches",
                i, (unsigned long long)st.graph_instantiations, (unsigned long long)st.graph_launches);
    else
      cr_assert_eq(st.graph_launches, 0);
  }
  for (int i = 0; i < 2; ++i) {
    kd_comm_destroy(r.c[i]);
    cr_assert_eq(null_nccl_live(), 2, "the graphs hold both communicators");
  }
  for (int i = 0; i < 2; ++i) nccl_free(&k[i]);
  for (int i = 0; i < 2; ++i) kd_session_destroy(r.s[i]);
  cr_assert_eq(null_nccl_live(), 0, "every NCCL communicator destroyed");
}

Test(host_null_driver, two_ranks_run_every_collective_from_a_thread_each_eager) { two_ranks_a_thread_each(KD_EXEC_EAGER); }

Test(host_null_driver, two_ranks_run_every_collective_from_a_thread_each_captured) {
  two_ranks_a_thread_each(KD_EXEC_GRAPH);
}

Test(host_null_driver, one_thread_driving_two_ranks_is_refused_before_nccl_is_called) {
  setenv("KDAG_NULL_NCCL_WAIT_MS", "100", 1); /* rank 0's all-reduce waits for rank 1 that long, then gives up */
  nccl_ranks r;
  nccl_ranks_open(&r, KD_EXEC_EAGER, 2);
  kd_graph *g[2];
  kd_tensor x[2];
  for (int i = 0; i < 2; ++i) {
    kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {4}};
    float v[4] = {1, 2, 3, 4};
    KDT_OK(kd_tensor_from_host(r.s[i], &d, v, sizeof v, &x[i]));
    KDT_OK(kd_graph_create(r.s[i], &g[i]));
    KDT_OK(kd_graph_all_reduce(g[i], "sum", r.c[i], kd_whole(x[i]), kd_whole(x[i]), KD_REDUCE_SUM, NULL));
  }
  KDT_OK(kd_graph_submit(g[0], NULL));
  KDT_FAILS(kd_graph_submit(g[1], NULL), KD_ERR_BUSY, "issued rank 0's collectives of the same kd_comm_create_all "
            "group, and now rank 1's");
  KDT_FAILS(kd_graph_submit(g[1], NULL), KD_ERR_BUSY, "submit each rank's graphs from a thread of its own");
  for (int i = 0; i < 2; ++i) {
    kd_graph_destroy(g[i]);
    KDT_OK(kd_tensor_release(r.s[i], x[i]));
    kd_comm_destroy(r.c[i]);
    kd_session_destroy(r.s[i]);
  }
  cr_assert_eq(null_nccl_live(), 0);
}

/* One rank on the null NCCL, x = {1, 2, 3, 4}, and a graph of one in-place
 * all-reduce of x named name. */
static kd_graph *one_rank_all_reduce(nccl_ranks *r, kd_exec_mode mode, const char *name, kd_reduce op,
                                     kd_tensor *x) {
  nccl_ranks_open(r, mode, 1);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {4}};
  float v[4] = {1, 2, 3, 4};
  KDT_OK(kd_tensor_from_host(r->s[0], &d, v, sizeof v, x));
  kd_graph *g;
  KDT_OK(kd_graph_create(r->s[0], &g));
  KDT_OK(kd_graph_all_reduce(g, name, r->c[0], kd_whole(*x), kd_whole(*x), op, NULL));
  return g;
}

static void refused_by_nccl(kd_exec_mode mode, const char *where) {
  nccl_ranks r;
  kd_tensor x;
  float got[4];
  kd_graph *g = one_rank_all_reduce(&r, mode, "max", KD_REDUCE_MAX, &x);
  KDT_FAILS(kd_graph_submit(g, NULL), KD_ERR_COMM_FAILED, "all_reduce node 'max': ncclAllReduce: NCCL invalid "
            "argument (null NCCL) (4): the null NCCL reduces f32 sums only");
  cr_assert(strstr(kd_last_error(), where), "%s", kd_last_error());
  /* Nothing already submitted is lost: the session goes on. */
  KDT_OK(kd_tensor_download(r.s[0], x, got, sizeof got));
  cr_assert_eq(got[3], 4.0f);
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(r.s[0], x));
  kd_comm_destroy(r.c[0]);
  kd_session_destroy(r.s[0]);
  cr_assert_eq(null_nccl_live(), 0);
}

Test(host_null_driver, nccl_refusing_a_call_fails_the_submission_naming_the_node) {
  refused_by_nccl(KD_EXEC_EAGER, "kd_graph_submit");
  refused_by_nccl(KD_EXEC_GRAPH, "captured for a CUDA graph");
}

/* ---- copies between sessions (kd_graph_copy_peer) --------------------------- */

static void peer_copy_between_devices(kd_exec_mode mode) {
  setenv("KDAG_NULL_DEVICES", "2", 1);
  kd_session *a = null_session(KD_EXEC_EAGER, 0), *b = null_session_on_device1(mode);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {16}};
  float v[16], got[8];
  for (int i = 0; i < 16; ++i) v[i] = (float)i;
  kd_tensor x, y;
  KDT_OK(kd_tensor_from_host(a, &d, v, sizeof v, &x));
  d.shape[0] = 8;
  KDT_OK(kd_tensor_create(b, &d, &y));
  kd_graph *g;
  KDT_OK(kd_graph_create(b, &g));
  kd_view upper = {.tensor = x, .rank = 1, .offset = 8, .shape = {8}, .strides = {1}};
  KDT_OK(kd_graph_copy_peer(g, "pull", kd_whole(y), a, upper, NULL));
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "y", y, got, sizeof got, &sink));
  for (int round = 0; round < 2; ++round) {
    kd_session_stats a0 = counters(a), b0 = counters(b);
    kd_ticket t;
    nd.hold(1); /* b's submission stays pending: a's wait for it is a real one */
    KDT_OK(kd_graph_submit(g, &t));
    nd.hold(0);
    KDT_OK(kd_sink_wait(sink));
    for (int i = 0; i < 8; ++i) cr_assert_eq(got[i], v[8 + i], "round %d: y[%d] = %g", round, i, got[i]);
    kd_session_stats a1 = counters(a), b1 = counters(b);
    cr_assert_eq(b1.stream_event_waits - b0.stream_event_waits, 1, "b waits for a's work so far, on the device");
    cr_assert_eq(a1.stream_event_waits - a0.stream_event_waits, 1, "a's later work waits for b's submission");
    cr_assert_eq(b1.event_waits - b0.event_waits, 1, "the sink wait is b's one host wait");
    cr_assert_eq(a1.event_waits - a0.event_waits, 0, "a never waits on the host");
    for (int i = 0; i < 16; ++i) v[i] += 100.0f; /* a writes x after the copy: the next submission sees it */
    KDT_OK(kd_tensor_upload(a, x, v, sizeof v));
  }
  /* The peer lets the tensor go: the next submission fails before anything
   * is enqueued, naming the node. */
  KDT_OK(kd_tensor_release(a, x));
  kd_session_stats b2 = counters(b);
  KDT_FAILS(kd_graph_submit(g, NULL), KD_ERR_RELEASED, "node 'pull'");
  cr_assert_eq(counters(b).submissions, b2.submissions);
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(b, y));
  kd_session_destroy(b);
  kd_session_destroy(a);
}

Test(host_null_driver, a_peer_copy_between_devices_orders_both_sessions_eager) { peer_copy_between_devices(KD_EXEC_EAGER); }

Test(host_null_driver, a_peer_copy_between_devices_orders_both_sessions_graph) { peer_copy_between_devices(KD_EXEC_GRAPH); }

Test(host_null_driver, peer_copy_refusals_name_the_argument) {
  setenv("KDAG_NULL_DEVICES", "2", 1);
  kd_session *a = null_session(KD_EXEC_EAGER, 0), *h = kdt_host_session(), *b = null_session_on_device1(KD_EXEC_AUTO);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {8}}, di = {.dtype = KD_I32, .rank = 1, .shape = {8}};
  kd_tensor_desc dh = {.dtype = KD_F32, .rank = 1, .shape = {8}, .residency = KD_RESIDENCY_HOST};
  kd_tensor x, xi, xh, y, hy;
  KDT_OK(kd_tensor_create(a, &d, &x));
  KDT_OK(kd_tensor_create(a, &di, &xi));
  KDT_OK(kd_tensor_create(a, &dh, &xh));
  KDT_OK(kd_tensor_create(b, &d, &y));
  KDT_OK(kd_tensor_create(h, &d, &hy));
  kd_graph *g, *hg;
  KDT_OK(kd_graph_create(b, &g));
  KDT_OK(kd_graph_create(h, &hg));
  KDT_FAILS(kd_graph_copy_peer(g, "n", kd_whole(y), NULL, kd_whole(x), NULL), KD_ERR_INVALID_ARGUMENT,
            "argument peer is NULL");
  KDT_FAILS(kd_graph_copy_peer(g, "n", kd_whole(y), b, kd_whole(y), NULL), KD_ERR_INVALID_ARGUMENT,
            "kd_graph_op_copy");
  KDT_FAILS(kd_graph_copy_peer(hg, "n", kd_whole(hy), a, kd_whole(x), NULL), KD_ERR_WRONG_BACKEND,
            "the graph's session is a HOST session");
  KDT_FAILS(kd_graph_copy_peer(g, "n", kd_whole(y), h, kd_whole(hy), NULL), KD_ERR_WRONG_BACKEND,
            "peer is a HOST session");
  KDT_FAILS(kd_graph_copy_peer(g, "n", kd_whole(y), a, kd_whole(xi), NULL), KD_ERR_INVALID_ARGUMENT,
            "dst is 8 f32 elements and src 8 i32");
  kd_view half = {.tensor = x, .rank = 1, .offset = 0, .shape = {4}, .strides = {1}};
  KDT_FAILS(kd_graph_copy_peer(g, "n", kd_whole(y), a, half, NULL), KD_ERR_INVALID_ARGUMENT, "src 4 f32");
  kd_view strided = {.tensor = x, .rank = 1, .offset = 0, .shape = {4}, .strides = {2}};
  kd_view yhalf = half;
  yhalf.tensor = y;
  KDT_FAILS(kd_graph_copy_peer(g, "n", yhalf, a, strided, NULL), KD_ERR_NOT_COMPACT, "argument src is strided");
  kd_view past = {.tensor = x, .rank = 1, .offset = 6, .shape = {4}, .strides = {1}};
  KDT_FAILS(kd_graph_copy_peer(g, "n", yhalf, a, past, NULL), KD_ERR_OUT_OF_BOUNDS, "argument src");
  KDT_FAILS(kd_graph_copy_peer(g, "n", kd_whole(y), a, kd_whole(xh), NULL), KD_ERR_NOT_RESIDENT, "host-resident");
  KDT_FAILS(kd_graph_copy_peer(g, "n", kd_whole(y), a, kd_whole(y), NULL), KD_ERR_WRONG_SESSION, "argument src");
  kd_graph_destroy(g);
  kd_graph_destroy(hg);
  kd_tensor ta[] = {x, xi, xh};
  for (size_t i = 0; i < 3; ++i) KDT_OK(kd_tensor_release(a, ta[i]));
  KDT_OK(kd_tensor_release(b, y));
  KDT_OK(kd_tensor_release(h, hy));
  kd_session_destroy(b);
  kd_session_destroy(a);
  kd_session_destroy(h);
}

Test(host_null_driver, an_error_nccl_reports_after_the_fact_fails_the_session_at_its_next_wait) {
  nccl_ranks r;
  kd_tensor x;
  float got[4];
  kd_graph *g = one_rank_all_reduce(&r, KD_EXEC_EAGER, "sum", KD_REDUCE_SUM, &x);
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "x", x, got, sizeof got, &sink));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sink));
  void *lib = dlopen(KDAG_NULL_NCCL, RTLD_NOW | RTLD_NOLOAD);
  cr_assert(lib);
  void (*fail_async)(int) = (void (*)(int))dlsym(lib, "kdag_null_nccl_fail_async");
  cr_assert(fail_async);
  fail_async(6); /* ncclRemoteError: a peer lost */
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_FAILS(kd_sink_wait(sink), KD_ERR_COMM_FAILED, "rank 0 of 1: NCCL reported remote process exited");
  KDT_FAILS(kd_graph_submit(g, NULL), KD_ERR_COMM_FAILED, "unusable after a communicator failed");
  fail_async(0);
  dlclose(lib);
  kd_graph_destroy(g); /* the release calls still work */
  KDT_OK(kd_tensor_release(r.s[0], x));
  kd_comm_destroy(r.c[0]);
  kd_session_destroy(r.s[0]);
  cr_assert_eq(null_nccl_live(), 0);
}
