/* SPDX-License-Identifier: Apache-2.0 */
/* Collective nodes on the GPU through NCCL (kdag/comm.h), one rank per
 * communicator (the machines lent have one GPU): every collective in EAGER
 * and GRAPH mode against its definition (tests/comm_graph.h, which
 * host_comm_test runs on HOST), NCCL captured once into the executable
 * graph and captured again after a rebinding, two sessions of one device
 * each with its own communicator and ordered by a ticket, a peer copy
 * between two sessions ordered against both on the device, and the
 * refusals that need a CUDA session. The runs on several GPUs are the
 * multi-GPU issue's. */
#include <criterion/criterion.h>
#include <string.h>

#include "comm_graph.h"
#include "kdag/kdag.h"
#include "kdag_test.h"
#include "kernels/embedded.h"

/* A communicator of one rank, or the test skipped without NCCL (failed
 * under KDAG_REQUIRE_GPU=1, where NCCL must be found). */
static kd_comm *one_rank(kd_session *s) {
  kd_comm_id id;
  kd_status st = kd_comm_id_create(s, &id);
  if (st == KD_ERR_LIBRARY_MISSING) {
    if (kdt_require_gpu()) cr_assert_fail("KDAG_REQUIRE_GPU=1 but NCCL is missing: %s", kd_last_error());
    cr_skip_test("GPU lane: NCCL could not be loaded (%s)", kd_last_error());
  }
  cr_assert_eq(st, KD_OK, "kd_comm_id_create: %s", kd_last_error());
  kd_comm *c;
  KDT_OK(kd_comm_create(s, &id, 1, 0, &c));
  return c;
}

static void every_collective(kd_exec_mode mode) {
  kd_session *s = kdt_gpu_session_mode(mode, 0);
  kd_comm *c = one_rank(s);
  kdt_comm_graph k;
  kdt_comm_declare(s, c, &k);
  kd_comm_destroy(c); /* the graph keeps it */
  for (int seed = 0; seed < 3; ++seed) {
    kdt_comm_upload(s, &k, seed);
    KDT_OK(kd_graph_submit(k.g, NULL));
    kdt_comm_wait(&k);
    kdt_comm_check(&k, seed, mode == KD_EXEC_GRAPH ? "GRAPH" : "EAGER");
  }
  kd_session_stats st;
  KDT_OK(kd_session_stats_get(s, &st));
  if (mode == KD_EXEC_GRAPH) { /* NCCL captured once, the graph launched three times */
    cr_assert_eq(st.graph_instantiations, 1, "%llu instantiations", (unsigned long long)st.graph_instantiations);
    cr_assert_eq(st.graph_launches, 3, "%llu launches", (unsigned long long)st.graph_launches);
  } else {
    cr_assert_eq(st.graph_launches, 0);
  }
  /* Rebinding x: the collectives that read it are captured again over
   * the new tensor's memory. */
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {KDT_COMM_N}};
  kd_tensor other;
  KDT_OK(kd_tensor_create(s, &d, &other));
  kd_tensor old = k.x;
  k.x = other;
  kdt_comm_upload(s, &k, 7);
  KDT_OK(kd_graph_rebind(k.g, old, other));
  KDT_OK(kd_graph_submit(k.g, NULL));
  kdt_comm_wait(&k);
  kdt_comm_check(&k, 7, "after a rebinding");
  k.x = old;
  KDT_OK(kd_tensor_release(s, other));
  kdt_comm_free(s, &k);
  kd_session_destroy(s);
}

Test(gpu_comm, every_collective_of_one_rank_in_eager_mode) { every_collective(KD_EXEC_EAGER); }

Test(gpu_comm, every_collective_of_one_rank_captured_in_graph_mode) { every_collective(KD_EXEC_GRAPH); }

Test(gpu_comm, two_sessions_of_one_device_each_with_a_communicator_ordered_by_a_ticket) {
  kd_session *a = kdt_gpu_session_mode(KD_EXEC_GRAPH, 0), *b = kdt_gpu_session_mode(KD_EXEC_EAGER, 0);
  kd_comm *ca = one_rank(a), *cb;
  KDT_OK(kd_comm_create_all(&b, 1, &cb)); /* a group of one: NCCL's group initialization */
  kdt_comm_graph ka, kb;
  kdt_comm_declare(a, ca, &ka);
  kdt_comm_declare(b, cb, &kb);
  for (int seed = 0; seed < 2; ++seed) {
    kd_ticket t;
    kdt_comm_upload(a, &ka, seed);
    kdt_comm_upload(b, &kb, seed + 1);
    KDT_OK(kd_graph_submit(ka.g, &t));
    KDT_OK(kd_session_wait_ticket(b, a, t)); /* b's work after a's, on the device */
    KDT_OK(kd_graph_submit(kb.g, NULL));
    kdt_comm_wait(&kb);
    kdt_comm_wait(&ka);
    kdt_comm_check(&ka, seed, "session a");
    kdt_comm_check(&kb, seed + 1, "session b");
  }
  kd_session_stats st;
  KDT_OK(kd_session_stats_get(b, &st));
  cr_assert_geq(st.stream_event_waits, 2);
  kdt_comm_free(a, &ka);
  kdt_comm_free(b, &kb);
  kd_comm_destroy(ca);
  kd_comm_destroy(cb);
  kd_session_destroy(a);
  kd_session_destroy(b);
}

Test(gpu_comm, refusals_on_a_cuda_session) {
  kd_session *s = kdt_gpu_session(), *h = kdt_host_session();
  kd_comm *c = one_rank(s);
  kd_comm_id host_id;
  KDT_OK(kd_comm_id_create(h, &host_id));
  kd_session *mixed[2] = {s, h};
  kd_comm *cs[2];
  KDT_FAILS(kd_comm_create_all(mixed, 2, cs), KD_ERR_WRONG_BACKEND, "sessions[1] is of another backend");
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {8}};
  kd_tensor x, hx;
  KDT_OK(kd_tensor_create(s, &d, &x));
  KDT_OK(kd_tensor_create(h, &d, &hx));
  float z[8] = {0};
  KDT_OK(kd_tensor_upload(s, x, z, sizeof z));
  KDT_FAILS(kd_graph_all_reduce(g, "n", c, kd_whole(x), kd_whole(hx), KD_REDUCE_SUM, NULL), KD_ERR_WRONG_SESSION,
            "argument src");
  KDT_FAILS(kd_graph_send_recv(g, "n", c, kd_whole(x), 1, kd_whole(x), KD_NO_PEER, NULL), KD_ERR_INVALID_ARGUMENT,
            "send_to is 1, not a rank of the communicator's 1");
  KDT_OK(kd_tensor_release(s, x));
  KDT_OK(kd_tensor_release(h, hx));
  kd_graph_destroy(g);
  kd_comm_destroy(c);
  kd_session_destroy(s);
  kd_session_destroy(h);
}

/* ---- copies between sessions (kd_graph_copy_peer) --------------------------- */

static kd_status load_slow_write(kd_raw *raw, void *user) {
  kd_module m;
  kd_status st = kd_raw_load_image(raw, kd_kernel_test_cubin, kd_kernel_test_cubin_size, &m);
  if (!st) st = kd_module_function(kd_raw_session(raw), m, "pdl_slow_write", (kd_function *)user);
  return st;
}

#define PEER_N 4096

/* A graph of one slow write: spins ns on the device, then x[...] = value. */
static kd_graph *slow_write(kd_session *s, kd_function fn, kd_tensor x, unsigned long long ns, float value) {
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_launch_config cfg = {{16, 1, 1}, {256, 1, 1}, 0, 0};
  kd_garg args[] = {kd_g_value(kd_arg_u64(ns)), kd_g_out(kd_whole(x)), kd_g_value(kd_arg_f32(value)),
                    kd_g_value(kd_arg_i32(PEER_N))};
  KDT_OK(kd_graph_kernel(g, "slow write", fn, &cfg, args, 4, NULL));
  return g;
}

static void peer_copy_on_one_device(kd_exec_mode mode) {
  kd_session *a = kdt_gpu_session_mode(KD_EXEC_EAGER, 0), *b = kdt_gpu_session_mode(mode, 0);
  kd_function fa, fb;
  KDT_OK(kd_with_raw(a, "load", load_slow_write, &fa));
  KDT_OK(kd_with_raw(b, "load", load_slow_write, &fb));
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {PEER_N}};
  kd_tensor x, y;
  KDT_OK(kd_tensor_create(a, &d, &x));
  KDT_OK(kd_tensor_create(b, &d, &y));
  /* a: x = 1 after 20 ms, then x = 2 after 1 ms. b: y = -1 after 20 ms,
   * then y = a's x. Ordered on the device alone, b's copy comes after the
   * first write and before the second: without b waiting for a's first,
   * y would be stale; without a's second waiting for b, y would be 2. */
  kd_graph *first = slow_write(a, fa, x, 20ull * 1000 * 1000, 1.0f), *second = slow_write(a, fa, x, 1000000ull, 2.0f);
  kd_graph *g = slow_write(b, fb, y, 20ull * 1000 * 1000, -1.0f);
  KDT_OK(kd_graph_copy_peer(g, "y = a.x", kd_whole(y), a, kd_whole(x), NULL));
  float *got = malloc(sizeof(float) * PEER_N), *xs = malloc(sizeof(float) * PEER_N);
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "y", y, got, sizeof(float) * PEER_N, &sink));
  for (int round = 0; round < 2; ++round) {
    kd_session_stats a0, b0, a1, b1;
    KDT_OK(kd_session_stats_get(a, &a0));
    KDT_OK(kd_session_stats_get(b, &b0));
    KDT_OK(kd_graph_submit(first, NULL));
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_graph_submit(second, NULL));
    KDT_OK(kd_sink_wait(sink));
    for (int i = 0; i < PEER_N; ++i) cr_assert_eq(got[i], 1.0f, "round %d: y[%d] = %g, want 1", round, i, got[i]);
    KDT_OK(kd_tensor_download(a, x, xs, sizeof(float) * PEER_N));
    cr_assert_eq(xs[0], 2.0f);
    KDT_OK(kd_session_stats_get(a, &a1));
    KDT_OK(kd_session_stats_get(b, &b1));
    cr_assert_eq(b1.stream_event_waits - b0.stream_event_waits, 1, "b waited once for a, on the device");
    cr_assert_eq(a1.stream_event_waits - a0.stream_event_waits, 1, "a waited once for b, on the device");
    cr_assert_eq(a1.event_waits - a0.event_waits, 1, "a's one host wait is its download");
  }
  free(got);
  free(xs);
  kd_graph_destroy(g);
  kd_graph_destroy(first);
  kd_graph_destroy(second);
  KDT_OK(kd_tensor_release(a, x));
  KDT_OK(kd_tensor_release(b, y));
  kd_session_destroy(b);
  kd_session_destroy(a);
}

Test(gpu_comm, a_peer_copy_between_sessions_of_one_device_waits_on_the_device_eager) {
  peer_copy_on_one_device(KD_EXEC_EAGER);
}

Test(gpu_comm, a_peer_copy_between_sessions_of_one_device_waits_on_the_device_graph) {
  peer_copy_on_one_device(KD_EXEC_GRAPH);
}
