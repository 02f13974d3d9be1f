/* SPDX-License-Identifier: Apache-2.0 */
/* GPU lane: loops and conditionals (kd_graph_while_begin, kd_graph_if_begin)
 * in EAGER and GRAPH mode against a HOST session running the same graph:
 * a countdown of built-ins with a trip count and a limit, nested loops and
 * an IF, a second submission that makes no trip, rebinding the condition
 * and a body tensor (GRAPH patches the loop's kernels and the body's in
 * place), and a loop of an NVRTC kernel that writes its own condition.
 * GRAPH runs a loop on the device: its host waits do not grow with the
 * trips. Random graphs with loops in both modes against their unrolling
 * on HOST. host_loop_test.c checks the declarations and HOST alone. */
#include "kdag_test.h"
#include "random_graph.h"

static kd_session *session_of(kd_backend backend, kd_exec_mode mode) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = backend;
  o.exec_mode = mode;
  if (backend == KD_BACKEND_HOST) {
    kd_session *s = NULL;
    KDT_OK(kd_session_create(&o, &s));
    return s;
  }
  return kdt_gpu_session_opts(&o);
}

/* What one run of the loops graph leaves: the inner loop's trips, the
 * outer countdown, x. */
typedef struct result {
  int32_t trips[3], counter[3];
  float x[3][4];
} result;

/* outer: a countdown from 3 with a limit of 2 trips, inside it an inner
 * countdown from 4 that scales x by 1.75 (its trips counted), then an IF
 * on flag that triples x. Three submissions: the limit stops the first
 * (the counter left at 1), the second makes the one trip left, and before
 * the third the counter is set to 9 (the limit stops it again) and the
 * flag to 0 (the IF is skipped). */
static void run_loops(kd_backend backend, kd_exec_mode mode, result *out, uint64_t *event_waits) {
  kd_session *s = session_of(backend, mode);
  kd_tensor_desc i1 = {.dtype = KD_I32, .rank = 1, .shape = {1}}, f4 = {.dtype = KD_F32, .rank = 1, .shape = {4}};
  int32_t three = 3, m1 = -1, one = 1;
  float x0[4] = {1.0f, -2.0f, 0.5f, 3.0f};
  kd_tensor outer, inner, tmp, minus1, x, flag, trips, otrips;
  KDT_OK(kd_tensor_from_host(s, &i1, &three, sizeof three, &outer));
  KDT_OK(kd_tensor_create(s, &i1, &inner));
  KDT_OK(kd_tensor_create(s, &i1, &tmp));
  KDT_OK(kd_tensor_from_host(s, &i1, &m1, sizeof m1, &minus1));
  KDT_OK(kd_tensor_from_host(s, &f4, x0, sizeof x0, &x));
  KDT_OK(kd_tensor_from_host(s, &i1, &one, sizeof one, &flag));
  KDT_OK(kd_tensor_create(s, &i1, &trips));
  KDT_OK(kd_tensor_create(s, &i1, &otrips));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_node lo, li, cond;
  KDT_OK(kd_graph_while_begin(g, "outer", outer, 2, otrips, &lo));
  KDT_OK(kd_graph_op_fill(g, "inner = 4", kd_whole(inner), (int32_t[]){4}, NULL));
  KDT_OK(kd_graph_while_begin(g, "inner", inner, 10, trips, &li));
  KDT_OK(kd_graph_op_add(g, "tmp = inner - 1", kd_whole(tmp), kd_whole(inner), kd_whole(minus1), NULL));
  KDT_OK(kd_graph_op_copy(g, "inner = tmp", kd_whole(inner), kd_whole(tmp), NULL));
  KDT_OK(kd_graph_op_scale(g, "x *= 1.75", kd_whole(x), 1.75, NULL));
  KDT_OK(kd_graph_end(g, li));
  KDT_OK(kd_graph_op_add(g, "tmp = outer - 1", kd_whole(tmp), kd_whole(outer), kd_whole(minus1), NULL));
  KDT_OK(kd_graph_op_copy(g, "outer = tmp", kd_whole(outer), kd_whole(tmp), NULL));
  KDT_OK(kd_graph_end(g, lo));
  KDT_OK(kd_graph_if_begin(g, "if flag", flag, &cond));
  KDT_OK(kd_graph_op_scale(g, "x *= 3", kd_whole(x), 3.0, NULL));
  KDT_OK(kd_graph_end(g, cond));
  kd_session_stats k0, k1;
  for (int run = 0; run < 3; ++run) {
    if (run == 2) {
      int32_t nine = 9, zero = 0;
      KDT_OK(kd_tensor_upload(s, outer, &nine, sizeof nine)); /* the outer limit (2) stops it */
      KDT_OK(kd_tensor_upload(s, flag, &zero, sizeof zero));  /* and the IF is skipped */
    }
    KDT_OK(kd_session_stats_get(s, &k0));
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_session_stats_get(s, &k1));
    if (run == 0) *event_waits = k1.event_waits - k0.event_waits;
    KDT_OK(kd_tensor_download(s, trips, &out->trips[run], sizeof out->trips[run]));
    KDT_OK(kd_tensor_download(s, otrips, &out->counter[run], sizeof out->counter[run]));
    KDT_OK(kd_tensor_download(s, x, out->x[run], sizeof out->x[run]));
  }
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

Test(gpu_loop, builtin_loops_give_the_host_results_in_eager_and_graph_mode, .timeout = 120) {
  result want, got;
  uint64_t host_waits = 0, waits = 0;
  run_loops(KD_BACKEND_HOST, KD_EXEC_EAGER, &want, &host_waits);
  /* HOST against the arithmetic: 2 outer trips (the limit) of 4 inner
   * ones, x scaled by 1.75^8 and the IF's 3; then the trip left; then 2. */
  cr_assert_eq(want.counter[0], 2);
  cr_assert_eq(want.counter[1], 1);
  cr_assert_eq(want.counter[2], 2);
  cr_assert_eq(want.trips[0], 4);
  float f = 1.0f;
  for (int i = 0; i < 8; ++i) f = 1.75f * f;
  cr_assert_eq(want.x[0][0], 3.0f * f, "HOST x[0] = %g", want.x[0][0]);
  kd_exec_mode modes[] = {KD_EXEC_EAGER, KD_EXEC_GRAPH};
  for (int m = 0; m < 2; ++m) {
    run_loops(KD_BACKEND_CUDA, modes[m], &got, &waits);
    for (int r = 0; r < 3; ++r) {
      cr_assert_eq(got.trips[r], want.trips[r], "%s run %d: inner trips %d, HOST %d", m ? "GRAPH" : "EAGER", r,
                   got.trips[r], want.trips[r]);
      cr_assert_eq(got.counter[r], want.counter[r], "%s run %d: outer trips %d, HOST %d", m ? "GRAPH" : "EAGER", r,
                   got.counter[r], want.counter[r]);
      cr_assert(memcmp(got.x[r], want.x[r], sizeof got.x[r]) == 0, "%s run %d: x differs from HOST (%a vs %a)",
                m ? "GRAPH" : "EAGER", r, (double)got.x[r][0], (double)want.x[r][0]);
    }
    /* EAGER reads the condition before each trip and once more to stop,
     * but where the limit stops it: outer 2, inner 2 x 5, the IF 1. GRAPH
     * reads none on the host. */
    if (m == 0) cr_assert_eq(waits, 13, "EAGER: %llu host waits for the conditions", (unsigned long long)waits);
    else cr_assert_eq(waits, 0, "GRAPH: %llu host waits in a submission", (unsigned long long)waits);
  }
}

Test(gpu_loop, rebinding_in_graph_mode_patches_the_loop_in_place, .timeout = 60) {
  kd_session *s = session_of(KD_BACKEND_CUDA, KD_EXEC_GRAPH);
  kd_tensor_desc i1 = {.dtype = KD_I32, .rank = 1, .shape = {1}}, f1 = {.dtype = KD_F32, .rank = 1, .shape = {1}};
  int32_t two = 2, five = 5, m1 = -1;
  float a0 = 1.0f, b0 = 10.0f;
  kd_tensor c1, c2, tmp, minus1, a, b, trips;
  KDT_OK(kd_tensor_from_host(s, &i1, &two, sizeof two, &c1));
  KDT_OK(kd_tensor_from_host(s, &i1, &five, sizeof five, &c2));
  KDT_OK(kd_tensor_create(s, &i1, &tmp));
  KDT_OK(kd_tensor_from_host(s, &i1, &m1, sizeof m1, &minus1));
  KDT_OK(kd_tensor_from_host(s, &f1, &a0, sizeof a0, &a));
  KDT_OK(kd_tensor_from_host(s, &f1, &b0, sizeof b0, &b));
  KDT_OK(kd_tensor_create(s, &i1, &trips));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_node loop;
  KDT_OK(kd_graph_while_begin(g, "countdown", c1, 100, trips, &loop));
  KDT_OK(kd_graph_op_add(g, "tmp = c - 1", kd_whole(tmp), kd_whole(c1), kd_whole(minus1), NULL));
  KDT_OK(kd_graph_op_copy(g, "c = tmp", kd_whole(c1), kd_whole(tmp), NULL));
  KDT_OK(kd_graph_op_scale(g, "a *= 2", kd_whole(a), 2.0, NULL));
  KDT_OK(kd_graph_end(g, loop));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_graph_rebind(g, c1, c2));
  KDT_OK(kd_graph_rebind(g, a, b));
  KDT_OK(kd_graph_submit(g, NULL));
  float got_a, got_b;
  int32_t t;
  KDT_OK(kd_tensor_download(s, a, &got_a, sizeof got_a));
  KDT_OK(kd_tensor_download(s, b, &got_b, sizeof got_b));
  KDT_OK(kd_tensor_download(s, trips, &t, sizeof t));
  cr_assert_eq(got_a, 4.0f, "a = %g after 2 trips", got_a);
  cr_assert_eq(got_b, 320.0f, "b = %g after 5 trips", got_b);
  cr_assert_eq(t, 5);
  kd_session_stats k;
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(k.graph_instantiations, 1, "patched in place: %llu instantiations",
               (unsigned long long)k.graph_instantiations);
  cr_assert_geq(k.graph_updates, 1);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

static const char halve_source[] =
    "extern \"C\" __global__ void halve(float *x, int *go) { *x = 0.5f * *x; *go = *x >= 1.0f; }\n";

typedef struct halve_fn {
  kd_function fn;
} halve_fn;

static kd_status load_halve(kd_raw *raw, void *user) {
  halve_fn *h = user;
  kd_nvrtc_options o;
  kd_nvrtc_options_init(&o);
  kd_module m;
  kd_status st = kd_raw_compile_nvrtc(raw, halve_source, &o, &m);
  if (!st) st = kd_module_function(kd_raw_session(raw), m, "halve", &h->fn);
  return st;
}

/* A user kernel writes the condition: x halves until below 1. The loop's
 * trips and x agree between EAGER and GRAPH, and with the arithmetic. */
Test(gpu_loop, a_user_kernel_that_writes_the_condition_ends_the_loop, .timeout = 60) {
  kd_exec_mode modes[] = {KD_EXEC_EAGER, KD_EXEC_GRAPH};
  for (int m = 0; m < 2; ++m) {
    kd_session *s = session_of(KD_BACKEND_CUDA, modes[m]);
    halve_fn h;
    KDT_OK(kd_with_raw(s, "load", load_halve, &h));
    kd_tensor_desc i1 = {.dtype = KD_I32, .rank = 1, .shape = {1}}, f1 = {.dtype = KD_F32, .rank = 1, .shape = {1}};
    float x0 = 1000.0f;
    int32_t go = 1;
    kd_tensor x, g_, trips;
    KDT_OK(kd_tensor_from_host(s, &f1, &x0, sizeof x0, &x));
    KDT_OK(kd_tensor_from_host(s, &i1, &go, sizeof go, &g_));
    KDT_OK(kd_tensor_create(s, &i1, &trips));
    kd_graph *g;
    KDT_OK(kd_graph_create(s, &g));
    kd_node loop;
    KDT_OK(kd_graph_while_begin(g, "halve", g_, 500, trips, &loop));
    kd_garg args[] = {kd_g_inout(kd_whole(x)), kd_g_out(kd_whole(g_))};
    kd_launch_config one = {{1, 1, 1}, {1, 1, 1}, 0, 0};
    KDT_OK(kd_graph_kernel(g, "halve", h.fn, &one, args, 2, NULL));
    KDT_OK(kd_graph_end(g, loop));
    int32_t t = -1;
    kd_sink *sk;
    KDT_OK(kd_graph_sink(g, "trips", trips, &t, sizeof t, &sk));
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_sink_wait(sk));
    float got;
    KDT_OK(kd_tensor_download(s, x, &got, sizeof got));
    cr_assert_eq(t, 10, "%s: %d trips (1000 halves to below 1 in 10)", m ? "GRAPH" : "EAGER", t);
    cr_assert_eq(got, 1000.0f / 1024.0f, "%s: x = %g", m ? "GRAPH" : "EAGER", got);
    kd_graph_destroy(g);
    kd_session_destroy(s);
  }
}

/* Random graphs with a loop (and nested IFs), EAGER and GRAPH, give the
 * bits of the same graphs with the body written out trip by trip on
 * HOST. */
Test(gpu_loop, random_loops_equal_their_unrolling_on_host, .timeout = 300) {
  kd_session *on[2] = {session_of(KD_BACKEND_CUDA, KD_EXEC_EAGER), session_of(KD_BACKEND_CUDA, KD_EXEC_GRAPH)};
  kd_session *host = session_of(KD_BACKEND_HOST, KD_EXEC_EAGER);
  const char *names[] = {"EAGER", "GRAPH"};
  rg_loop_differential(on, names, 2, host, 0x5EEDull, 60);
  kd_session_destroy(on[0]);
  kd_session_destroy(on[1]);
  kd_session_destroy(host);
}

/* An upload inside a loop's body copies the caller's bytes, read at
 * submit, on every trip; GRAPH points the body's copy at each
 * submission's staging and keeps its one executable graph. */
Test(gpu_loop, an_upload_in_a_body_runs_every_trip_with_the_bytes_of_its_submission, .timeout = 60) {
  kd_exec_mode modes[] = {KD_EXEC_EAGER, KD_EXEC_GRAPH};
  for (int m = 0; m < 2; ++m) {
    kd_session *s = session_of(KD_BACKEND_CUDA, modes[m]);
    kd_tensor_desc i1 = {.dtype = KD_I32, .rank = 1, .shape = {1}}, f4 = {.dtype = KD_F32, .rank = 1, .shape = {4}};
    int32_t three = 3, m1 = -1;
    float zero[4] = {0}, hb[4] = {1, 2, 3, 4}, acc_h[4];
    kd_tensor c, tmp, minus1, u, acc, acc2;
    KDT_OK(kd_tensor_from_host(s, &i1, &three, sizeof three, &c));
    KDT_OK(kd_tensor_create(s, &i1, &tmp));
    KDT_OK(kd_tensor_from_host(s, &i1, &m1, sizeof m1, &minus1));
    KDT_OK(kd_tensor_create(s, &f4, &u));
    KDT_OK(kd_tensor_from_host(s, &f4, zero, sizeof zero, &acc));
    KDT_OK(kd_tensor_create(s, &f4, &acc2));
    kd_graph *g;
    KDT_OK(kd_graph_create(s, &g));
    kd_node loop;
    KDT_OK(kd_graph_while_begin(g, "sum3", c, 10, kd_no_tensor(), &loop));
    KDT_OK(kd_graph_upload(g, "u = hb", u, hb, sizeof hb, NULL));
    KDT_OK(kd_graph_op_add(g, "acc2 = acc + u", kd_whole(acc2), kd_whole(acc), kd_whole(u), NULL));
    KDT_OK(kd_graph_op_copy(g, "acc = acc2", kd_whole(acc), kd_whole(acc2), NULL));
    KDT_OK(kd_graph_op_add(g, "tmp = c - 1", kd_whole(tmp), kd_whole(c), kd_whole(minus1), NULL));
    KDT_OK(kd_graph_op_copy(g, "c = tmp", kd_whole(c), kd_whole(tmp), NULL));
    KDT_OK(kd_graph_end(g, loop));
    float want[4] = {0};
    for (int run = 0; run < 3; ++run) {
      for (int i = 0; i < 4; ++i) hb[i] = (float)(10 * run + i + 1); /* read at submit */
      if (run) KDT_OK(kd_tensor_upload(s, c, &three, sizeof three));
      KDT_OK(kd_graph_submit(g, NULL));
      for (int i = 0; i < 4; ++i) want[i] += 3.0f * hb[i];
      KDT_OK(kd_tensor_download(s, acc, acc_h, sizeof acc_h));
      for (int i = 0; i < 4; ++i)
        cr_assert_eq(acc_h[i], want[i], "%s run %d: acc[%d] = %g, want %g", m ? "GRAPH" : "EAGER", run, i, acc_h[i],
                     want[i]);
    }
    if (m == 1) {
      kd_session_stats k;
      KDT_OK(kd_session_stats_get(s, &k));
      cr_assert_eq(k.graph_instantiations, 1, "GRAPH: %llu instantiations", (unsigned long long)k.graph_instantiations);
    }
    kd_graph_destroy(g);
    kd_session_destroy(s);
  }
}
