/* SPDX-License-Identifier: Apache-2.0 */
/* examples/first.c — the README's first program: y = 2x + y, then the sum
 * of y, as a graph of built-in nodes. Runs on the GPU, or on the HOST
 * backend where there is none. */
#include <stdio.h>
#include <kdag/kdag.h>

#define CHECK(call) do { kd_status st_ = (call); if (st_) { \
    fprintf(stderr, "%s: %s\n", kd_status_name(st_), kd_last_error()); return 1; } } while (0)

int main(void) {
  enum { N = 1000 };
  float x[N], y[N], total = 0;
  for (int i = 0; i < N; ++i) x[i] = (float)i, y[i] = 1;

  kd_session *s;
  CHECK(kd_session_create(NULL, &s)); /* CUDA if a GPU is usable, else HOST */
  kd_tensor_desc vec = {.dtype = KD_F32, .rank = 1, .shape = {N}};
  kd_tensor_desc one = {.dtype = KD_F32, .rank = 1, .shape = {1}};
  kd_tensor tx, ty, tsum;
  CHECK(kd_tensor_from_host(s, &vec, x, sizeof x, &tx));
  CHECK(kd_tensor_from_host(s, &vec, y, sizeof y, &ty));
  CHECK(kd_tensor_create(s, &one, &tsum));

  kd_graph *g;
  kd_sink *sink;
  CHECK(kd_graph_create(s, &g));
  CHECK(kd_graph_op_axpy(g, "y += 2x", kd_whole(ty), kd_whole(tx), 2.0, NULL));
  CHECK(kd_graph_op_sum(g, "sum = sum(y)", kd_whole(tsum), kd_whole(ty), NULL));
  CHECK(kd_graph_sink(g, "sum to host", tsum, &total, sizeof total, &sink));
  CHECK(kd_graph_submit(g, NULL)); /* returns at once: the order is inferred */
  CHECK(kd_sink_wait(sink));       /* the only host wait */

  printf("%s backend: sum = %.0f (expected %d)\n",
         kd_session_backend(s) == KD_BACKEND_CUDA ? "CUDA" : "HOST", total, N * (N - 1) + N);
  kd_graph_destroy(g);
  kd_tensor_release(s, tx), kd_tensor_release(s, ty), kd_tensor_release(s, tsum);
  kd_session_destroy(s);
  return 0;
}
