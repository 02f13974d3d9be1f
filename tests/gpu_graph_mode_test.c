/* SPDX-License-Identifier: Apache-2.0 */
/* GPU lane: GRAPH mode (the plan as one executable CUDA graph): in-place
 * updates, lifetimes with several launches in flight, sinks, a captured
 * foreign node, faults, AUTO. Its random and per-dtype graphs against
 * EAGER and HOST are tests/gpu_executors_test.c. */
#include <ck_pr.h>
#include <dlfcn.h>
#include <time.h>

#include "kernels/embedded.h"
#include "cublas_node.h"
#include "kdag_test.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static kd_session_stats counters(kd_session *s) {
  kd_session_stats k;
  KDT_OK(kd_session_stats_get(s, &k));
  return k;
}

/* ---- user kernels -------------------------------------------------------- */

typedef struct loaded {
  kd_function spin, trap, add;
} loaded;

static kd_status load(kd_raw *raw, void *user) {
  loaded *l = user;
  kd_session *s = kd_raw_session(raw);
  kd_module m, add;
  kd_status st = kd_raw_load_image(raw, kd_kernel_test_cubin, kd_kernel_test_cubin_size, &m);
  if (!st) st = kd_module_function(s, m, "spin_kernel", &l->spin);
  if (!st) st = kd_module_function(s, m, "trap_kernel", &l->trap);
  if (!st) st = kd_raw_load_image(raw, kd_kernel_add_cubin, kd_kernel_add_cubin_size, &add);
  if (!st) st = kd_module_function(s, add, "add_kernel", &l->add);
  return st;
}

Test(gpu_graph_mode, rebinding_and_new_scalars_patch_the_executable_graph_in_place) {
  kd_session *s = kdt_gpu_session_mode(KD_EXEC_GRAPH, 0);
  loaded l;
  KDT_OK(kd_with_raw(s, "test.load", load, &l));
  float x[1024], y[1024], out[1024];
  kdt_fill_random(x, 1024, 11);
  kdt_fill_random(y, 1024, 12);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {1024}};
  kd_tensor tx, ty, tz, tz2;
  KDT_OK(kd_tensor_from_host(s, &d, x, sizeof x, &tx));
  KDT_OK(kd_tensor_from_host(s, &d, y, sizeof y, &ty));
  KDT_OK(kd_tensor_create(s, &d, &tz));
  KDT_OK(kd_tensor_create(s, &d, &tz2));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_launch_config cfg;
  KDT_OK(kd_launch_config_flat(1024, 256, 0, &cfg));
  kd_garg args[] = {kd_g_out(kd_whole(tz)), kd_g_in(kd_whole(tx)), kd_g_in(kd_whole(ty)), kd_g_value(kd_arg_i32(1024))};
  kd_node add;
  KDT_OK(kd_graph_kernel(g, "z=x+y", l.add, &cfg, args, 4, &add));
  KDT_OK(kd_graph_op_scale(g, "z*=2", kd_whole(tz), 2.0, NULL));
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "z", tz, out, sizeof out, &sink));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sink));
  for (int i = 0; i < 1024; ++i) cr_assert_eq(out[i], 2 * (x[i] + y[i]));
  kd_session_stats k0 = counters(s);
  cr_assert_eq(k0.graph_instantiations, 1);
  /* Unchanged: a plain relaunch, no patch. */
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sink));
  cr_assert_eq(counters(s).graph_updates, 0);
  /* The output rebound and the element count halved: patched in place. */
  KDT_OK(kd_graph_rebind(g, tz, tz2));
  KDT_OK(kd_graph_set_arg(g, add, 3, kd_arg_i32(512)));
  KDT_FAILS(kd_graph_set_arg(g, add, 3, kd_arg_i64(512)), KD_ERR_ARGUMENT_MISMATCH, "argument 3");
  KDT_FAILS(kd_graph_set_arg(g, add, 0, kd_arg_i32(1)), KD_ERR_INVALID_ARGUMENT, "rebind");
  float minus[1024];
  for (int i = 0; i < 1024; ++i) minus[i] = -1.0f;
  KDT_OK(kd_tensor_upload(s, tz2, minus, sizeof minus));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sink));
  kd_session_stats k1 = counters(s);
  cr_assert_eq(k1.graph_instantiations, 1, "no new instantiation after a rebinding");
  cr_assert_eq(k1.graph_updates, 1);
  cr_assert_eq(k1.graph_launches, 3);
  for (int i = 0; i < 512; ++i) cr_assert_eq(out[i], 2 * (x[i] + y[i]), "z2[%d]", i);
  for (int i = 512; i < 1024; ++i) cr_assert_eq(out[i], -2.0f, "z2[%d] is beyond n: only scaled", i);
  float first[1024];
  KDT_OK(kd_tensor_download(s, tz, first, sizeof first)); /* the first binding kept its result */
  for (int i = 0; i < 1024; ++i) cr_assert_eq(first[i], 2 * (x[i] + y[i]));
  /* A topology change re-instantiates. */
  KDT_OK(kd_graph_op_scale(g, "z*=0.5", kd_whole(tz2), 0.5, NULL));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sink));
  cr_assert_eq(counters(s).graph_instantiations, 2);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* Rebindings queue up (once per binding) until the executable graph
 * catches up: ones made before it exists are in what it is built from,
 * several of one binding patch once, and a rebinding undone before the
 * launch patches nothing. */
Test(gpu_graph_mode, rebinding_several_times_between_launches_patches_once_and_stays_correct) {
  kd_session *s = kdt_gpu_session_mode(KD_EXEC_EAGER, 0);
  loaded l;
  KDT_OK(kd_with_raw(s, "test.load", load, &l));
  float x[256], x2[256], y[256], out[256];
  kdt_fill_random(x, 256, 21);
  kdt_fill_random(x2, 256, 22);
  kdt_fill_random(y, 256, 23);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {256}};
  kd_tensor tx, tx2, ty, tz;
  KDT_OK(kd_tensor_from_host(s, &d, x, sizeof x, &tx));
  KDT_OK(kd_tensor_from_host(s, &d, x2, sizeof x2, &tx2));
  KDT_OK(kd_tensor_from_host(s, &d, y, sizeof y, &ty));
  KDT_OK(kd_tensor_create(s, &d, &tz));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_launch_config cfg;
  KDT_OK(kd_launch_config_flat(256, 256, 0, &cfg));
  kd_garg args[] = {kd_g_out(kd_whole(tz)), kd_g_in(kd_whole(tx)), kd_g_in(kd_whole(ty)), kd_g_value(kd_arg_i32(256))};
  KDT_OK(kd_graph_kernel(g, "z=x+y", l.add, &cfg, args, 4, NULL));
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "z", tz, out, sizeof out, &sink));
  const float *want[2] = {x, x2};
  int bound = 0; /* which input the graph reads */
#define CHECK_SUM()                                                                          \
  do {                                                                                       \
    KDT_OK(kd_graph_submit(g, NULL));                                                        \
    KDT_OK(kd_sink_wait(sink));                                                              \
    for (int i = 0; i < 256; ++i) cr_assert_eq(out[i], want[bound][i] + y[i], "z[%d]", i); \
  } while (0)
  CHECK_SUM();                             /* EAGER */
  KDT_OK(kd_graph_rebind(g, tx, tx2));     /* queued: no executable graph yet */
  bound = 1;
  CHECK_SUM();
  KDT_OK(kd_graph_set_exec_mode(g, KD_EXEC_GRAPH));
  CHECK_SUM();                             /* built from x2 */
  kd_session_stats k = counters(s);
  cr_assert_eq(k.graph_instantiations, 1);
  cr_assert_eq(k.graph_updates, 0, "a rebinding made before the build needs no patch");
  KDT_OK(kd_graph_rebind(g, tx2, tx));
  KDT_OK(kd_graph_rebind(g, tx, tx2));
  KDT_OK(kd_graph_rebind(g, tx2, tx));     /* three of one binding, net x */
  bound = 0;
  CHECK_SUM();
  k = counters(s);
  cr_assert_eq(k.graph_updates, 1, "three rebindings of one tensor patch once (%llu)",
               (unsigned long long)k.graph_updates);
  KDT_OK(kd_graph_rebind(g, tx, tx2));
  KDT_OK(kd_graph_rebind(g, tx2, tx));     /* undone before the launch */
  CHECK_SUM();
  k = counters(s);
  cr_assert_eq(k.graph_updates, 1, "a rebinding undone before the launch patches nothing");
  cr_assert_eq(k.graph_instantiations, 1);
  cr_assert_eq(k.graph_launches, 3);
#undef CHECK_SUM
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* A rebound tensor read through views that start inside it: a user
 * kernel's compact view of its last four columns and a built-in copy's
 * strided view of its odd columns; and a rebound tensor written through a
 * one-element view by a kernel whose pointer follows a value argument.
 * The patch keeps each view's offset into the tensor and each pointer in
 * its own parameter, back and forth between two tensors, in place. */
Test(gpu_graph_mode, rebinding_keeps_each_views_offset_into_the_new_tensor) {
  kd_session *s = kdt_gpu_session_mode(KD_EXEC_GRAPH, 0);
  loaded l;
  KDT_OK(kd_with_raw(s, "test.load", load, &l));
  enum { ROWS = 64, COLS = 8 };
  float m[2][ROWS * COLS], y[ROWS * 4], z[ROWS * 4], w[ROWS * 4];
  kdt_fill_random(m[0], ROWS * COLS, 31);
  kdt_fill_random(m[1], ROWS * COLS, 32);
  kdt_fill_random(y, ROWS * 4, 33);
  kd_tensor_desc dm = {.dtype = KD_F32, .rank = 2, .shape = {ROWS, COLS}};
  kd_tensor_desc dv = {.dtype = KD_F32, .rank = 1, .shape = {ROWS * 4}};
  kd_tensor_desc dw = {.dtype = KD_F32, .rank = 2, .shape = {ROWS, 4}};
  kd_tensor tm[2], ty, tz, tw;
  KDT_OK(kd_tensor_from_host(s, &dm, m[0], sizeof m[0], &tm[0]));
  KDT_OK(kd_tensor_from_host(s, &dm, m[1], sizeof m[1], &tm[1]));
  KDT_OK(kd_tensor_from_host(s, &dv, y, sizeof y, &ty));
  KDT_OK(kd_tensor_create(s, &dv, &tz));
  KDT_OK(kd_tensor_create(s, &dw, &tw));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_view last = {.tensor = tm[0], .rank = 1, .offset = ROWS * 4, .shape = {ROWS * 4}, .strides = {1}};
  kd_view odd = {.tensor = tm[0], .rank = 2, .offset = ROWS, .shape = {ROWS, 4}, .strides = {1, 2 * ROWS}};
  kd_launch_config cfg;
  KDT_OK(kd_launch_config_flat(ROWS * 4, 128, 0, &cfg));
  kd_garg args[] = {kd_g_out(kd_whole(tz)), kd_g_in(last), kd_g_in(kd_whole(ty)), kd_g_value(kd_arg_i32(ROWS * 4))};
  KDT_OK(kd_graph_kernel(g, "z=m[:,4:]+y", l.add, &cfg, args, 4, NULL));
  KDT_OK(kd_graph_op_copy(g, "w=m[:,1::2]", kd_whole(tw), odd, NULL));
  int32_t zeros[4] = {0}, f[4], other[4];
  kd_tensor_desc df = {.dtype = KD_I32, .rank = 1, .shape = {4}};
  kd_tensor tf[2];
  KDT_OK(kd_tensor_from_host(s, &df, zeros, sizeof zeros, &tf[0]));
  KDT_OK(kd_tensor_from_host(s, &df, zeros, sizeof zeros, &tf[1]));
  kd_view third = {.tensor = tf[0], .rank = 1, .offset = 2, .shape = {1}, .strides = {1}};
  kd_launch_config one = {{1, 1, 1}, {1, 1, 1}, 0, 0};
  kd_garg spin[] = {kd_g_value(kd_arg_u64(0)), kd_g_out(third)}; /* spins 0 ns, then writes 1 */
  KDT_OK(kd_graph_kernel(g, "f[2]=1", l.spin, &one, spin, 2, NULL));
  kd_sink *sz, *sw, *sf;
  KDT_OK(kd_graph_sink(g, "z", tz, z, sizeof z, &sz));
  KDT_OK(kd_graph_sink(g, "w", tw, w, sizeof w, &sw));
  KDT_OK(kd_graph_sink(g, "f", tf[0], f, sizeof f, &sf));
  for (int round = 0; round < 4; ++round) {
    int b = round % 2; /* which of each pair the graph uses */
    if (round) {
      KDT_OK(kd_graph_rebind(g, tm[!b], tm[b]));
      KDT_OK(kd_graph_rebind(g, tf[!b], tf[b]));
    }
    KDT_OK(kd_tensor_upload(s, tf[0], zeros, sizeof zeros));
    KDT_OK(kd_tensor_upload(s, tf[1], zeros, sizeof zeros));
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_sink_wait(sz));
    KDT_OK(kd_sink_wait(sw));
    KDT_OK(kd_sink_wait(sf));
    for (int i = 0; i < ROWS * 4; ++i) cr_assert_eq(z[i], m[b][ROWS * 4 + i] + y[i], "round %d: z[%d]", round, i);
    for (int c = 0; c < 4; ++c)
      for (int r = 0; r < ROWS; ++r)
        cr_assert_eq(w[c * ROWS + r], m[b][(2 * c + 1) * ROWS + r], "round %d: w[%d,%d]", round, r, c);
    KDT_OK(kd_tensor_download(s, tf[!b], other, sizeof other));
    for (int i = 0; i < 4; ++i) {
      cr_assert_eq(f[i], i == 2, "round %d: f[%d] of the bound tensor", round, i);
      cr_assert_eq(other[i], 0, "round %d: f[%d] of the unbound tensor", round, i);
    }
  }
  kd_session_stats k = counters(s);
  cr_assert_eq(k.graph_instantiations, 1, "every rebinding patched in place");
  cr_assert_eq(k.graph_updates, 3);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* New values queue up like rebindings (once per node): one set before the
 * build is in what the executable graph is built from, several of one node
 * patch that node once, and a value equal to what the node holds patches
 * nothing. */
Test(gpu_graph_mode, new_values_patch_their_node_once_and_stay_correct) {
  kd_session *s = kdt_gpu_session_mode(KD_EXEC_EAGER, 0);
  loaded l;
  KDT_OK(kd_with_raw(s, "test.load", load, &l));
  enum { N = 256 };
  float x[N], y[N], out[2][N];
  kdt_fill_random(x, N, 31);
  kdt_fill_random(y, N, 32);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {N}};
  kd_tensor tx, ty, tz[2];
  KDT_OK(kd_tensor_from_host(s, &d, x, sizeof x, &tx));
  KDT_OK(kd_tensor_from_host(s, &d, y, sizeof y, &ty));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_launch_config cfg;
  KDT_OK(kd_launch_config_flat(N, 256, 0, &cfg));
  kd_node add[2];
  kd_sink *sink[2];
  float minus = -1.0f;
  for (int i = 0; i < 2; ++i) {
    KDT_OK(kd_tensor_create(s, &d, &tz[i]));
    KDT_OK(kd_graph_op_fill(g, "z=-1", kd_whole(tz[i]), &minus, NULL));
    kd_garg args[] = {kd_g_out(kd_whole(tz[i])), kd_g_in(kd_whole(tx)), kd_g_in(kd_whole(ty)),
                      kd_g_value(kd_arg_i32(N))};
    KDT_OK(kd_graph_kernel(g, "z=x+y", l.add, &cfg, args, 4, &add[i]));
    KDT_OK(kd_graph_sink(g, "z", tz[i], out[i], sizeof out[i], &sink[i]));
  }
  int n[2] = {N, N}; /* the elements each kernel adds; the rest stay -1 */
#define CHECK_BOTH()                                                                              \
  do {                                                                                            \
    KDT_OK(kd_graph_submit(g, NULL));                                                             \
    for (int w = 0; w < 2; ++w) {                                                                 \
      KDT_OK(kd_sink_wait(sink[w]));                                                              \
      for (int i = 0; i < N; ++i)                                                                 \
        cr_assert_eq(out[w][i], i < n[w] ? x[i] + y[i] : -1.0f, "z%d[%d] with n = %d", w, i, n[w]); \
    }                                                                                             \
  } while (0)
  CHECK_BOTH(); /* EAGER */
  KDT_OK(kd_graph_set_arg(g, add[0], 3, kd_arg_i32(128))); /* queued: no executable graph yet */
  n[0] = 128;
  KDT_OK(kd_graph_set_exec_mode(g, KD_EXEC_GRAPH));
  CHECK_BOTH(); /* built with 128 */
  kd_session_stats k = counters(s);
  cr_assert_eq(k.graph_instantiations, 1);
  cr_assert_eq(k.graph_updates, 0, "a value set before the build needs no patch");
  KDT_OK(kd_graph_set_arg(g, add[1], 3, kd_arg_i32(64)));
  KDT_OK(kd_graph_set_arg(g, add[1], 3, kd_arg_i32(32)));
  KDT_OK(kd_graph_set_arg(g, add[1], 3, kd_arg_i32(64))); /* three of one node, net 64 */
  n[1] = 64;
  CHECK_BOTH();
  k = counters(s);
  cr_assert_eq(k.graph_updates, 1, "three values of one node patch once (%llu)", (unsigned long long)k.graph_updates);
  KDT_OK(kd_graph_set_arg(g, add[0], 3, kd_arg_i32(128))); /* what it holds already */
  CHECK_BOTH();
  k = counters(s);
  cr_assert_eq(k.graph_updates, 1, "a value equal to the node's patches nothing");
  cr_assert_eq(k.graph_instantiations, 1);
  cr_assert_eq(k.graph_launches, 3);
#undef CHECK_BOTH
  kd_graph_destroy(g);
  for (int i = 0; i < 2; ++i) KDT_OK(kd_tensor_release(s, tz[i]));
  KDT_OK(kd_tensor_release(s, tx));
  KDT_OK(kd_tensor_release(s, ty));
  kd_session_destroy(s);
}

Test(gpu_graph_mode, launches_in_flight_keep_their_own_uploads_and_tensors) {
  kd_session *s = kdt_gpu_session_mode(KD_EXEC_GRAPH, 0);
  loaded l;
  KDT_OK(kd_with_raw(s, "test.load", load, &l));
  enum { N = 4096, LAUNCHES = 8 };
  static float host[N], got[N];
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {N}};
  kd_tensor_desc df = {.dtype = KD_I32, .rank = 1, .shape = {1}};
  kd_tensor a, acc, flag;
  KDT_OK(kd_tensor_create(s, &d, &a));
  KDT_OK(kd_tensor_create(s, &d, &acc));
  KDT_OK(kd_tensor_create(s, &df, &flag));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  float zero = 0;
  KDT_OK(kd_graph_op_fill(g, "acc=0", kd_whole(acc), &zero, NULL));
  KDT_OK(kd_graph_submit(g, NULL)); /* acc = 0, then the pipeline below */
  kd_graph_destroy(g);
  KDT_OK(kd_graph_create(s, &g));
  kd_launch_config one = {{1, 1, 1}, {1, 1, 1}, 0, 0};
  kd_garg spin[] = {kd_g_value(kd_arg_u64(20ull * 1000 * 1000)), kd_g_out(kd_whole(flag))};
  KDT_OK(kd_graph_kernel(g, "spin", l.spin, &one, spin, 2, NULL));
  KDT_OK(kd_graph_upload(g, "a<-host", a, host, sizeof host, NULL));
  KDT_OK(kd_graph_op_axpy(g, "acc+=a", kd_whole(acc), kd_whole(a), 1.0, NULL));
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "acc", acc, got, sizeof got, &sink));
  double t0 = now_ms();
  for (int launch = 0; launch < LAUNCHES; ++launch) {
    for (int i = 0; i < N; ++i) host[i] = (float)(launch * 1000 + i % 7); /* read at submit */
    KDT_OK(kd_graph_submit(g, NULL));
    if (launch == 0) {
      KDT_OK(kd_tensor_release(s, a));
      KDT_OK(kd_tensor_release(s, acc));
      KDT_OK(kd_tensor_release(s, flag));
    }
  }
  double t1 = now_ms();
  uint32_t pending;
  KDT_OK(kd_session_reap(s, &pending));
  cr_assert_gt(pending, 0, "the spins keep launches in flight");
  memset(host, 0xFF, sizeof host); /* the caller's memory is no longer read */
  KDT_OK(kd_sink_wait(sink));
  for (int i = 0; i < N; ++i) {
    float want = 0;
    for (int launch = 0; launch < LAUNCHES; ++launch) want += (float)(launch * 1000 + i % 7);
    cr_assert_eq(got[i], want, "acc[%d] = %g, want %g", i, got[i], want);
  }
  kd_session_stats k = counters(s);
  fprintf(stderr, "graph in flight: %d launches submitted in %.3f ms behind 20 ms spins each; %llu instantiation\n",
          LAUNCHES, t1 - t0, (unsigned long long)k.graph_instantiations);
  cr_assert_eq(k.graph_instantiations, 2, "one for the fill graph, one for the pipeline");
  cr_assert_eq(k.stream_syncs + k.device_syncs, 0);
  kd_graph_destroy(g);
  for (int i = 0; i < 100000 && pending; ++i) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
    KDT_OK(kd_session_reap(s, &pending));
  }
  cr_assert_eq(pending, 0);
  k = counters(s);
  cr_assert_eq(k.bytes_device, 0, "every tensor went back to the pool (%llu bytes)", (unsigned long long)k.bytes_device);
  kd_session_destroy(s);
}

Test(gpu_graph_mode, sink_of_earlier_launch_waits_alone_behind_a_spinning_graph) {
  kd_session *s = kdt_gpu_session_mode(KD_EXEC_GRAPH, 0);
  loaded l;
  KDT_OK(kd_with_raw(s, "test.load", load, &l));
  int32_t v[256], got[256];
  for (int i = 0; i < 256; ++i) v[i] = i;
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {256}};
  kd_tensor_desc df = {.dtype = KD_I32, .rank = 1, .shape = {1}};
  kd_tensor a, b, flag;
  KDT_OK(kd_tensor_from_host(s, &d, v, sizeof v, &a));
  KDT_OK(kd_tensor_create(s, &d, &b));
  KDT_OK(kd_tensor_create(s, &df, &flag));
  kd_graph *early, *late;
  kd_sink *sink;
  KDT_OK(kd_graph_create(s, &early));
  KDT_OK(kd_graph_op_add(early, "b=a+a", kd_whole(b), kd_whole(a), kd_whole(a), NULL));
  KDT_OK(kd_graph_sink(early, "b", b, got, sizeof got, &sink));
  KDT_OK(kd_graph_submit(early, NULL)); /* warms staging and instantiates */
  KDT_OK(kd_sink_wait(sink));
  KDT_OK(kd_graph_submit(early, NULL));
  KDT_OK(kd_graph_create(s, &late));
  kd_launch_config one = {{1, 1, 1}, {1, 1, 1}, 0, 0};
  kd_garg args[] = {kd_g_value(kd_arg_u64(200ull * 1000 * 1000)), kd_g_out(kd_whole(flag))};
  KDT_OK(kd_graph_kernel(late, "spin", l.spin, &one, args, 2, NULL));
  kd_ticket spin_ticket;
  double t0 = now_ms();
  KDT_OK(kd_graph_submit(late, &spin_ticket)); /* builds and instantiates: still no wait */
  double t1 = now_ms();
  KDT_OK(kd_sink_wait(sink));
  double t2 = now_ms();
  int done = 1;
  KDT_OK(kd_ticket_done(s, spin_ticket, &done));
  fprintf(stderr, "graph sink witness: submit (with instantiation) %.3f ms, sink wait %.3f ms, spin done=%d\n",
          t1 - t0, t2 - t1, done);
  cr_assert_eq(done, 0, "the spinning graph is still running");
  cr_assert_lt(t2 - t1, 10.0, "the earlier sink took %.1f ms behind a 200 ms kernel", t2 - t1);
  cr_assert_lt(t2 - t0, 50.0, "submit and the earlier sink took %.1f ms behind a 200 ms kernel", t2 - t0);
  for (int i = 0; i < 256; ++i) cr_assert_eq(got[i], 2 * i);
  kd_session_stats k = counters(s);
  cr_assert_eq(k.stream_syncs + k.device_syncs, 0);
  cr_assert_eq(k.graph_launches, 3);
  kd_graph_destroy(late);
  kd_graph_destroy(early);
  kd_session_destroy(s);
}

/* ---- a foreign node captured into the graph: cuBLAS saxpy ---------------- */

Test(gpu_graph_mode, foreign_cublas_node_is_captured_and_keeps_its_resource) {
  kd_session *s = kdt_gpu_session_mode(KD_EXEC_GRAPH, 0);
  blas b;
  blas_open(&b);
  enum { N = 4096 };
  static float x[N], y[N], out[N];
  kdt_fill_random(x, N, 5);
  kdt_fill_random(y, N, 6);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {N}};
  kd_tensor tx, ty, ty2;
  KDT_OK(kd_tensor_from_host(s, &d, x, sizeof x, &tx));
  KDT_OK(kd_tensor_from_host(s, &d, y, sizeof y, &ty));
  KDT_OK(kd_tensor_from_host(s, &d, y, sizeof y, &ty2));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_garg acc[] = {kd_g_inout(kd_whole(ty)), kd_g_in(kd_whole(tx))};
  KDT_OK(kd_graph_foreign(g, "cublasSaxpy", saxpy_node, &b, acc, 2, 1 << 20, &b, release_blas, NULL));
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "y", ty, out, sizeof out, &sink));
  KDT_OK(kd_graph_submit(g, NULL)); /* captured once */
  KDT_OK(kd_graph_submit(g, NULL)); /* relaunched: the callback is not called again */
  KDT_OK(kd_sink_wait(sink));
  cr_assert_eq(b.calls, 1, "the callback ran %d times; the capture is relaunched", b.calls);
  for (int i = 0; i < N; ++i) cr_assert_float_eq(out[i], 4.0f * x[i] + y[i], 1e-5f, "y[%d]", i);
  /* Rebinding y moves the node's spans: captured again, patched in place. */
  KDT_OK(kd_graph_rebind(g, ty, ty2));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sink));
  cr_assert_eq(b.calls, 2);
  for (int i = 0; i < N; ++i) cr_assert_float_eq(out[i], 2.0f * x[i] + y[i], 1e-5f, "y2[%d]", i);
  kd_session_stats k = counters(s);
  cr_assert_eq(k.graph_instantiations, 1);
  cr_assert_eq(k.graph_updates, 1);
  KDT_OK(kd_tensor_release(s, tx));
  KDT_OK(kd_tensor_release(s, ty));
  KDT_OK(kd_tensor_release(s, ty2));
  cr_assert_eq(ck_pr_load_int(&b.released), 0, "the graph and its executable graph hold the resource");
  kd_graph_destroy(g);
  uint32_t pending = 1;
  for (int i = 0; i < 100000 && pending; ++i) KDT_OK(kd_session_reap(s, &pending));
  cr_assert_eq(ck_pr_load_int(&b.released), 1, "released once the executable graph and its launches are gone");
  kd_session_destroy(s);
  dlclose(b.lib);
}

/* A callback that waits on its stream cannot be captured. */
typedef int (*cu_stream_sync_fn)(void *);
static kd_status syncing_node(const kd_foreign_call *call, void *user) {
  cu_stream_sync_fn sync = (cu_stream_sync_fn)user;
  (void)sync(call->stream); /* legal eagerly; invalidates a capture */
  return KD_OK;
}

Test(gpu_graph_mode, an_uncapturable_node_fails_graph_mode_by_name_and_auto_runs_it_eagerly) {
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  kd_session *s = kdt_gpu_session_mode(KD_EXEC_GRAPH, 0);
  cr_assert(cuda != NULL);
  cu_stream_sync_fn sync = (cu_stream_sync_fn)dlsym(cuda, "cuStreamSynchronize");
  cr_assert(sync != NULL);
  int32_t v[64], got[64];
  for (int i = 0; i < 64; ++i) v[i] = i;
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {64}};
  kd_tensor a, b;
  KDT_OK(kd_tensor_from_host(s, &d, v, sizeof v, &a));
  KDT_OK(kd_tensor_create(s, &d, &b));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_garg acc[] = {kd_g_in(kd_whole(a))};
  KDT_OK(kd_graph_op_add(g, "b=a+a", kd_whole(b), kd_whole(a), kd_whole(a), NULL));
  KDT_OK(kd_graph_foreign(g, "syncs", syncing_node, (void *)sync, acc, 1, 0, NULL, NULL, NULL));
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "b", b, got, sizeof got, &sink));
  KDT_FAILS(kd_graph_submit(g, NULL), KD_ERR_DRIVER, "node 'syncs'");
  KDT_FAILS(kd_sink_wait(sink), KD_ERR_INVALID_ARGUMENT, "no submission"); /* nothing was enqueued */
  KDT_OK(kd_graph_set_exec_mode(g, KD_EXEC_EAGER)); /* the eager path stays usable */
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sink));
  for (int i = 0; i < 64; ++i) cr_assert_eq(got[i], 2 * i);
  KDT_OK(kd_graph_set_exec_mode(g, KD_EXEC_AUTO)); /* graph_after 2: this plan has run once */
  for (int i = 0; i < 3; ++i) KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sink));
  kd_session_stats k = counters(s);
  cr_assert_eq(k.graph_launches, 0, "AUTO fell back to EAGER");
  cr_assert_eq(k.submissions, 4);
  kd_graph_destroy(g);
  kd_session_destroy(s);
  dlclose(cuda);
}

Test(gpu_graph_mode, auto_switches_to_graph_after_graph_after_submissions) {
  kd_session *s = kdt_gpu_session_mode(KD_EXEC_AUTO, 0); /* graph_after defaults to 2 */
  float v[64], got[64];
  for (int i = 0; i < 64; ++i) v[i] = (float)i;
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {64}};
  kd_tensor a;
  KDT_OK(kd_tensor_from_host(s, &d, v, sizeof v, &a));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_scale(g, "a*=3", kd_whole(a), 3.0, NULL));
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "a", a, got, sizeof got, &sink));
  uint64_t want_launches[] = {0, 0, 1, 2, 3};
  for (int i = 0; i < 5; ++i) {
    KDT_OK(kd_graph_submit(g, NULL));
    cr_assert_eq(counters(s).graph_launches, want_launches[i], "after submission %d", i + 1);
  }
  KDT_OK(kd_sink_wait(sink));
  for (int i = 0; i < 64; ++i) cr_assert_eq(got[i], 243.0f * (float)i, "a[%d] = %g", i, got[i]); /* 3^5, exact */
  cr_assert_eq(counters(s).graph_instantiations, 1);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* Ten nodes, node6 a trap: the fault tests. */
static kd_graph *trap_graph(kd_session *s, const loaded *l, kd_tensor t) {
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_launch_config one = {{1, 1, 1}, {1, 1, 1}, 0, 0};
  for (int i = 0; i < 10; ++i) {
    char name[16];
    snprintf(name, sizeof name, "node%d", i);
    if (i == 6) KDT_OK(kd_graph_kernel(g, name, l->trap, &one, NULL, 0, NULL));
    else KDT_OK(kd_graph_op_fill(g, name, kd_whole(t), &i, NULL));
  }
  return g;
}

Test(gpu_graph_mode, a_fault_inside_a_graph_launch_is_reported_for_that_launch) {
  kd_session *s = kdt_gpu_session_mode(KD_EXEC_GRAPH, 0);
  loaded l;
  KDT_OK(kd_with_raw(s, "test.load", load, &l));
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {16}};
  kd_tensor t;
  KDT_OK(kd_tensor_create(s, &d, &t));
  int32_t host[16];
  kd_graph *g = trap_graph(s, &l, t);
  kd_ticket ticket;
  KDT_OK(kd_graph_submit(g, &ticket)); /* the launch is enqueued; it faults later */
  kd_status st = KD_OK;
  uint32_t pending = 1;
  for (int i = 0; i < 10000 && st == KD_OK && pending; ++i) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
    st = kd_session_reap(s, &pending);
  }
  char want[64];
  snprintf(want, sizeof want, "ticket %llu (a CUDA graph launch)", (unsigned long long)ticket.seq);
  cr_assert_eq(st, KD_ERR_DEVICE_FAULT, "%s", kd_last_error());
  cr_assert(strstr(kd_last_error(), want) != NULL, "the fault names the launch: %s", kd_last_error());
  KDT_FAILS(kd_tensor_download(s, t, host, sizeof host), KD_ERR_DEVICE_FAULT, "unusable after a device fault");
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

Test(gpu_graph_mode, debug_nodes_runs_graph_mode_eagerly_to_name_the_faulting_node) {
  kd_session *s = kdt_gpu_session_mode(KD_EXEC_GRAPH, KD_SESSION_DEBUG_NODES);
  loaded l;
  KDT_OK(kd_with_raw(s, "test.load", load, &l));
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {16}};
  kd_tensor t;
  KDT_OK(kd_tensor_create(s, &d, &t));
  kd_graph *g = trap_graph(s, &l, t);
  KDT_FAILS(kd_graph_submit(g, NULL), KD_ERR_DEVICE_FAULT, "node 'node6' (#6)");
  cr_assert_eq(counters(s).graph_launches, 0);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}
