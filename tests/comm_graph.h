/* SPDX-License-Identifier: Apache-2.0 */
/* A graph of every collective on a communicator of one rank, between
 * kdag's own nodes that produce and consume their data: what
 * host_comm_test runs on HOST and gpu_comm_test on the GPU (NCCL, EAGER
 * and GRAPH), compared element for element. */
#ifndef KDAG_TESTS_COMM_GRAPH_H
#define KDAG_TESTS_COMM_GRAPH_H

#include <stdlib.h>

#include "kdag/kdag.h"
#include "kdag_test.h"

#define KDT_COMM_N 100000 /* 400 KB: past HOST's slot and mailbox */
#define KDT_COMM_OUTS 6

typedef struct kdt_comm_graph {
  kd_graph *g;
  kd_tensor x, x2, t[KDT_COMM_OUTS];
  kd_sink *sinks[KDT_COMM_OUTS];
  float *out[KDT_COMM_OUTS];
} kdt_comm_graph;

static inline void kdt_comm_upload(kd_session *s, kdt_comm_graph *k, int seed) {
  float *x = malloc(sizeof(float) * KDT_COMM_N);
  cr_assert(x);
  for (int i = 0; i < KDT_COMM_N; ++i) x[i] = (float)((i * 37 + seed * 11) % 1001) * 0.125f - 60.0f;
  KDT_OK(kd_tensor_upload(s, k->x, x, sizeof(float) * KDT_COMM_N));
  free(x);
}

/* x starts as kdt_comm_upload's of seed 0. Outputs: 0 sum (x + x2
 * after an all-reduce of x), 1 in-place max of a copy of x, 2
 * reduce-scatter, 3 all-gather, 4 broadcast of a fill, 5 a send to self
 * of x's tail. */
static inline void kdt_comm_declare(kd_session *s, kd_comm *c, kdt_comm_graph *k) {
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {KDT_COMM_N}};
  KDT_OK(kd_tensor_create(s, &d, &k->x));
  KDT_OK(kd_tensor_create(s, &d, &k->x2));
  kdt_comm_upload(s, k, 0);
  for (int i = 0; i < KDT_COMM_OUTS; ++i) {
    KDT_OK(kd_tensor_create(s, &d, &k->t[i]));
    k->out[i] = malloc(sizeof(float) * KDT_COMM_N);
    cr_assert(k->out[i]);
  }
  KDT_OK(kd_graph_create(s, &k->g));
  kd_graph *g = k->g;
  KDT_OK(kd_graph_all_reduce(g, "sum", c, kd_whole(k->x2), kd_whole(k->x), KD_REDUCE_SUM, NULL));
  KDT_OK(kd_graph_op_add(g, "x + x2", kd_whole(k->t[0]), kd_whole(k->x), kd_whole(k->x2), NULL));
  KDT_OK(kd_graph_op_copy(g, "copy", kd_whole(k->t[1]), kd_whole(k->x), NULL));
  KDT_OK(kd_graph_all_reduce(g, "max", c, kd_whole(k->t[1]), kd_whole(k->t[1]), KD_REDUCE_MAX, NULL));
  KDT_OK(kd_graph_reduce_scatter(g, "rs", c, kd_whole(k->t[2]), kd_whole(k->x), KD_REDUCE_SUM, NULL));
  KDT_OK(kd_graph_all_gather(g, "ag", c, kd_whole(k->t[3]), kd_whole(k->x), NULL));
  KDT_OK(kd_graph_op_fill(g, "fill", kd_whole(k->t[4]), &(float){3.5f}, NULL));
  KDT_OK(kd_graph_broadcast(g, "bc", c, kd_whole(k->t[4]), 0, NULL));
  KDT_OK(kd_graph_op_fill(g, "clear", kd_whole(k->t[5]), &(float){-1.0f}, NULL));
  kd_view tail = {.tensor = k->x, .rank = 1, .offset = 1000, .shape = {KDT_COMM_N - 1000}, .strides = {1}};
  kd_view head = {.tensor = k->t[5], .rank = 1, .offset = 0, .shape = {KDT_COMM_N - 1000}, .strides = {1}};
  KDT_OK(kd_graph_send_recv(g, "self", c, tail, 0, head, 0, NULL));
  for (int i = 0; i < KDT_COMM_OUTS; ++i)
    KDT_OK(kd_graph_sink(g, "out", k->t[i], k->out[i], sizeof(float) * KDT_COMM_N, &k->sinks[i]));
}

static inline void kdt_comm_wait(kdt_comm_graph *k) {
  for (int i = 0; i < KDT_COMM_OUTS; ++i) KDT_OK(kd_sink_wait(k->sinks[i]));
}

/* What one rank computes from x (kdt_comm_upload's of seed). */
static inline void kdt_comm_check(const kdt_comm_graph *k, int seed, const char *where) {
  for (int i = 0; i < KDT_COMM_N; ++i) {
    float x = (float)((i * 37 + seed * 11) % 1001) * 0.125f - 60.0f;
    float want[KDT_COMM_OUTS] = {x + x, x, x, x, 3.5f, i < KDT_COMM_N - 1000 ? (float)(((i + 1000) * 37 + seed * 11) % 1001) * 0.125f - 60.0f : -1.0f};
    for (int o = 0; o < KDT_COMM_OUTS; ++o)
      cr_assert_eq(k->out[o][i], want[o], "%s: output %d [%d] = %g, want %g", where, o, i, k->out[o][i], want[o]);
  }
}

static inline void kdt_comm_free(kd_session *s, kdt_comm_graph *k) {
  kd_graph_destroy(k->g);
  KDT_OK(kd_tensor_release(s, k->x));
  KDT_OK(kd_tensor_release(s, k->x2));
  for (int i = 0; i < KDT_COMM_OUTS; ++i) {
    KDT_OK(kd_tensor_release(s, k->t[i]));
    free(k->out[i]);
  }
}

#endif
