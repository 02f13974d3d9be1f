/* SPDX-License-Identifier: Apache-2.0 */
/* The HOST executor's machinery (exec/host.c, exec/host_plan.c): large
 * built-ins split across workers give the bits of the unsplit walk, a
 * rebinding never reaches a run in flight, and graphs of many roots run
 * every node exactly once. */
#include <ck_pr.h>
#include <criterion/criterion.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "kdag/kdag.h"
#include "kdag_test.h"
#include "kernels/host.h"

static kd_kview kview(float *p, int rank, const int64_t *shape, const int64_t *strides) {
  kd_kview v = {.base = (unsigned long long)(uintptr_t)p, .rank = rank};
  for (int d = 0; d < rank; ++d) v.shape[d] = shape[d], v.strides[d] = strides[d];
  return v;
}

/* Element-wise built-ins over more elements than KD_HOST_SPLIT_MIN_ELEMS,
 * compact and strided and transposed, against the same built-ins run
 * whole on one thread (kernels/host.h). The split happens only when a
 * worker is idle as the node starts, so the graph is submitted until
 * kd_session_stats.host_splits shows it did (each submission checked). */
Test(host_exec, large_builtins_split_across_workers_give_the_unsplit_bits, .timeout = 120) {
  enum { N = 3 * 65536 + 7, R = 600, C = 701 };
  static float x[N], y[N], z[N], w[2 * N], t[R * C], u[R * C];
  static float rz[N], rw[2 * N], ru[R * C];
  for (int i = 0; i < N; ++i) x[i] = (float)(i % 977) * 0.37f, y[i] = (float)(i % 313) * -0.11f;
  for (int i = 0; i < R * C; ++i) t[i] = (float)(i % 4099) * 0.013f;
  kd_session *s = kdt_host_session();
  kd_tensor_desc d1 = {.dtype = KD_F32, .rank = 1, .shape = {N}}, d2 = {.dtype = KD_F32, .rank = 1, .shape = {2 * N}},
                 dm = {.dtype = KD_F32, .rank = 2, .shape = {R, C}}, dt = {.dtype = KD_F32, .rank = 2, .shape = {C, R}};
  kd_tensor tx, ty, tz, tw, tt, tu;
  KDT_OK(kd_tensor_from_host(s, &d1, x, sizeof x, &tx));
  KDT_OK(kd_tensor_from_host(s, &d1, y, sizeof y, &ty));
  KDT_OK(kd_tensor_create(s, &d1, &tz));
  KDT_OK(kd_tensor_create(s, &d2, &tw));
  KDT_OK(kd_tensor_from_host(s, &dm, t, sizeof t, &tt));
  KDT_OK(kd_tensor_create(s, &dt, &tu));
  kd_view even = {.tensor = tw, .rank = 1, .offset = 0, .shape = {N}, .strides = {2}};
  kd_view odd = {.tensor = tw, .rank = 1, .offset = 1, .shape = {N}, .strides = {2}};
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_add(g, "z = x + y", kd_whole(tz), kd_whole(tx), kd_whole(ty), NULL));
  KDT_OK(kd_graph_op_axpy(g, "z += 1.5 x", kd_whole(tz), kd_whole(tx), 1.5, NULL));
  KDT_OK(kd_graph_op_scale(g, "z *= 0.75", kd_whole(tz), 0.75, NULL));
  KDT_OK(kd_graph_op_copy(g, "w[even] = z", even, kd_whole(tz), NULL));
  KDT_OK(kd_graph_op_fill(g, "w[odd] = -2.5", odd, (float[]){-2.5f}, NULL));
  KDT_OK(kd_graph_op_axpy(g, "w[even] += 2 w[odd]", even, odd, 2.0, NULL));
  KDT_OK(kd_graph_op_transpose(g, "u = t^T", kd_whole(tu), kd_whole(tt), NULL));
  kd_sink *sz, *sw, *su;
  KDT_OK(kd_graph_sink(g, "z", tz, z, sizeof z, &sz));
  KDT_OK(kd_graph_sink(g, "w", tw, w, sizeof w, &sw));
  KDT_OK(kd_graph_sink(g, "u", tu, u, sizeof u, &su));

  /* The reference: the same built-ins, each over its whole views. */
  int64_t n1[1] = {N}, s1[1] = {1}, s2[1] = {2};
  kd_kview vz = kview(rz, 1, n1, s1), vx = kview(x, 1, n1, s1), vy = kview(y, 1, n1, s1);
  kd_kview ve = kview(rw, 1, n1, s2), vo = kview(rw + 1, 1, n1, s2);
  kd_host_add(KD_K_F32, vz, vx, vy);
  kd_host_axpy(KD_K_F32, vz, vx, 1.5);
  kd_host_scale(KD_K_F32, vz, 0.75);
  kd_host_copy(4, ve, vz);
  float minus = -2.5f;
  kd_kpattern pat = {{0, 0}};
  memcpy(&pat.w[0], &minus, 4);
  kd_host_fill(4, vo, pat);
  kd_host_axpy(KD_K_F32, ve, vo, 2.0);
  /* u (C x R) = t^T: u's element (j, i) is t's (i, j), t being R x C,
   * column-major: t read through shape (C, R) and strides (R, 1). */
  int64_t ushape[2] = {C, R}, ustrides[2] = {1, C}, tstrides[2] = {R, 1};
  kd_host_copy(4, kview(ru, 2, ushape, ustrides), kview(t, 2, ushape, tstrides));

  kd_session_stats k0, k;
  KDT_OK(kd_session_stats_get(s, &k0));
  int rounds = 0;
  do {
    memset(z, 0, sizeof z), memset(w, 0, sizeof w), memset(u, 0, sizeof u);
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_sink_wait(sz));
    KDT_OK(kd_sink_wait(sw));
    KDT_OK(kd_sink_wait(su));
    cr_assert(memcmp(z, rz, sizeof z) == 0, "round %d: z differs from the unsplit walk", rounds);
    cr_assert(memcmp(w, rw, sizeof w) == 0, "round %d: w differs from the unsplit walk", rounds);
    cr_assert(memcmp(u, ru, sizeof u) == 0, "round %d: u differs from the unsplit walk", rounds);
    KDT_OK(kd_session_stats_get(s, &k));
  } while (++rounds < 3 || (k.host_splits == k0.host_splits && rounds < 200));
  cr_assert_gt(k.host_splits, k0.host_splits, "no built-in was split in %d submissions", rounds);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* A gate the first node of a run waits at, so the test can act while
 * the run is in flight. */
typedef struct gate {
  int open;
  int reached;
} gate;

static void wait_at_gate(void *user) {
  gate *gt = user;
  ck_pr_store_int(&gt->reached, 1);
  struct timespec ts = {0, 1000000};
  for (int i = 0; i < 10000 && !ck_pr_load_int(&gt->open); ++i) nanosleep(&ts, NULL);
}

/* The run holds the task table it started with: rebinding a tensor while
 * it waits gives the next submission a table of its own, and the first
 * run still writes the old tensor. */
Test(host_exec, a_rebinding_while_a_run_holds_the_table_leaves_that_run_alone, .timeout = 60) {
  kd_session *s = kdt_host_session();
  enum { N = 64 };
  float a0[N], b0[N], a[N], b[N];
  for (int i = 0; i < N; ++i) a0[i] = (float)i, b0[i] = 100.0f + (float)i;
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {N}};
  kd_tensor ta, tb;
  KDT_OK(kd_tensor_from_host(s, &d, a0, sizeof a0, &ta));
  KDT_OK(kd_tensor_from_host(s, &d, b0, sizeof b0, &tb));
  gate gt = {0, 0};
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_garg acc = kd_g_inout(kd_whole(ta));
  KDT_OK(kd_graph_host(g, "gate", wait_at_gate, &gt, &acc, 1, NULL));
  KDT_OK(kd_graph_op_scale(g, "a *= 2", kd_whole(ta), 2.0, NULL));
  kd_session_stats k0, k;
  KDT_OK(kd_session_stats_get(s, &k0));
  KDT_OK(kd_graph_submit(g, NULL));
  while (!ck_pr_load_int(&gt.reached)) sched_yield();
  KDT_OK(kd_graph_rebind(g, ta, tb));
  KDT_OK(kd_graph_submit(g, NULL)); /* queued behind the first: b *= 2 */
  ck_pr_store_int(&gt.open, 1);
  KDT_OK(kd_tensor_download(s, ta, a, sizeof a));
  KDT_OK(kd_tensor_download(s, tb, b, sizeof b));
  for (int i = 0; i < N; ++i) {
    cr_assert_eq(a[i], 2.0f * a0[i], "a[%d] = %g: the first run scales a once", i, a[i]);
    cr_assert_eq(b[i], 2.0f * b0[i], "b[%d] = %g: the second run scales b once", i, b[i]);
  }
  /* Nothing in flight now: a rebinding back is applied to the table in
   * place, and the graph was planned once throughout. */
  KDT_OK(kd_graph_rebind(g, tb, ta));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_tensor_download(s, ta, a, sizeof a));
  KDT_OK(kd_tensor_download(s, tb, b, sizeof b));
  for (int i = 0; i < N; ++i) {
    cr_assert_eq(a[i], 4.0f * a0[i], "a[%d] = %g after the third run", i, a[i]);
    cr_assert_eq(b[i], 2.0f * b0[i], "b[%d] = %g: untouched by the third run", i, b[i]);
  }
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(k.plans_built - k0.plans_built, 1, "three submissions, two rebindings: one plan");
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

static void count(void *user) { ck_pr_inc_32(user); }

/* Many roots (handed out by dispensers in batches), chains behind some of
 * them and a fan-out: every node runs once per submission, and a later
 * node of a chain after the one before it. */
Test(host_exec, many_roots_chains_and_fan_outs_run_every_node_once, .timeout = 60) {
  enum { ROOTS = 5000, CHAINS = 300, FAN = 2000 };
  static uint32_t hits[ROOTS + FAN];
  kd_session *s = kdt_host_session();
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {CHAINS}};
  kd_tensor tc;
  KDT_OK(kd_tensor_create(s, &d, &tc));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  for (int i = 0; i < ROOTS; ++i) KDT_OK(kd_graph_host(g, "root", count, &hits[i], NULL, 0, NULL));
  /* Chains: element c of tc filled with 1, then doubled 3 times: 8. */
  for (int c = 0; c < CHAINS; ++c) {
    kd_view e = {.tensor = tc, .rank = 1, .offset = c, .shape = {1}, .strides = {1}};
    KDT_OK(kd_graph_op_fill(g, "fill", e, (float[]){1.0f}, NULL));
    for (int k = 0; k < 3; ++k) KDT_OK(kd_graph_op_scale(g, "double", e, 2.0, NULL));
  }
  /* A fan-out: every node reads tc once all the chains wrote it. */
  kd_garg in = kd_g_in(kd_whole(tc));
  for (int i = 0; i < FAN; ++i) KDT_OK(kd_graph_host(g, "reader", count, &hits[ROOTS + i], &in, 1, NULL));
  float got[CHAINS];
  kd_sink *sk;
  KDT_OK(kd_graph_sink(g, "c", tc, got, sizeof got, &sk));
  for (int round = 1; round <= 5; ++round) {
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_sink_wait(sk));
    KDT_OK(kd_tensor_download(s, tc, got, sizeof got)); /* waits for the whole run, roots included */
    for (int i = 0; i < ROOTS + FAN; ++i)
      cr_assert_eq(ck_pr_load_32(&hits[i]), (uint32_t)round, "node %d ran %u times in %d submissions", i,
                   hits[i], round);
    for (int c = 0; c < CHAINS; ++c) cr_assert_eq(got[c], 8.0f, "chain %d: %g", c, got[c]);
  }
  kd_graph_destroy(g);
  kd_session_destroy(s);
}
