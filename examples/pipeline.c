/* SPDX-License-Identifier: Apache-2.0 */
/* examples/pipeline.c — a small pipeline as a kdag task graph, submitted
 * repeatedly.
 *
 * Per submission: upload x, y = 2x + 1, z = x + y, scale the even entries of
 * z (a strided view) by 0.5, sum z, and sink z and the sum back to the host.
 * The order comes from the declared accesses; the host waits only in
 * kd_sink_wait. Runs on the GPU (EAGER) or, without one, on the HOST
 * backend's thread pool: same graph, same results. */
#include <stdio.h>
#include <string.h>

#include "kdag/kdag.h"

#define N 1024

#define CHECK(call)                                                              \
  do {                                                                           \
    kd_status st_ = (call);                                                      \
    if (st_) {                                                                   \
      fprintf(stderr, "%s failed: %s: %s\n", #call, kd_status_name(st_), kd_last_error()); \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

int main(void) {
  kd_session *s;
  CHECK(kd_session_create(NULL, &s));
  printf("kdag pipeline: %s backend (%s)\n", kd_session_backend(s) == KD_BACKEND_CUDA ? "CUDA" : "HOST",
         kd_session_backend_reason(s));

  kd_tensor_desc vec = {.dtype = KD_F32, .rank = 1, .shape = {N}};
  kd_tensor_desc scalar = {.dtype = KD_F32, .rank = 0};
  kd_tensor x, y, z, total;
  CHECK(kd_tensor_create(s, &vec, &x));
  CHECK(kd_tensor_create(s, &vec, &y));
  CHECK(kd_tensor_create(s, &vec, &z));
  CHECK(kd_tensor_create(s, &scalar, &total));

  static float host_x[N], host_z[N];
  float host_total = 0;
  kd_graph *g;
  kd_sink *z_sink, *total_sink;
  kd_view even = {.tensor = z, .rank = 1, .offset = 0, .shape = {N / 2}, .strides = {2}};
  CHECK(kd_graph_create(s, &g));
  CHECK(kd_graph_upload(g, "x", x, host_x, sizeof host_x, NULL));   /* host_x read at each submit */
  CHECK(kd_graph_op_fill(g, "y = 1", kd_whole(y), (float[]){1.0f}, NULL));
  CHECK(kd_graph_op_axpy(g, "y += 2x", kd_whole(y), kd_whole(x), 2.0, NULL));
  CHECK(kd_graph_op_add(g, "z = x + y", kd_whole(z), kd_whole(x), kd_whole(y), NULL));
  CHECK(kd_graph_op_scale(g, "z[0::2] *= 0.5", even, 0.5, NULL));        /* a strided view */
  CHECK(kd_graph_op_sum(g, "total = sum(z)", kd_whole(total), kd_whole(z), NULL));
  CHECK(kd_graph_sink(g, "z to host", z, host_z, sizeof host_z, &z_sink));
  CHECK(kd_graph_sink(g, "total to host", total, &host_total, sizeof host_total, &total_sink));
  /* Every handle can go now: the graph holds what it uses. */
  kd_tensor_release(s, x);
  kd_tensor_release(s, y);
  kd_tensor_release(s, z);
  kd_tensor_release(s, total);

  FILE *dot = fopen("pipeline.dot", "w");
  if (dot) {
    kd_graph_write_dot(g, dot); /* why each node waits for which: `dot -Tpng pipeline.dot` */
    fclose(dot);
  }

  int bad = 0;
  for (int round = 1; round <= 3; ++round) {
    for (int i = 0; i < N; ++i) host_x[i] = (float)(i % 7) * 0.25f * (float)round;
    CHECK(kd_graph_submit(g, NULL));
    CHECK(kd_sink_wait(z_sink));
    CHECK(kd_sink_wait(total_sink));
    double want_total = 0;
    for (int i = 0; i < N; ++i) {
      float want = host_x[i] + (2.0f * host_x[i] + 1.0f);
      if (i % 2 == 0) want *= 0.5f;
      bad |= host_z[i] != want;
      want_total += want;
    }
    bad |= (host_total - want_total) * (host_total - want_total) > 1e-6 * want_total * want_total;
    printf("round %d: z[0..3] = %g %g %g %g, sum = %g (want %g)\n", round, host_z[0], host_z[1], host_z[2],
           host_z[3], host_total, want_total);
  }
  kd_session_stats k;
  kd_session_stats_get(s, &k);
  printf("%llu submissions, %llu kernel launches, %llu stream syncs, %llu device syncs\n",
         (unsigned long long)k.submissions, (unsigned long long)k.launches, (unsigned long long)k.stream_syncs,
         (unsigned long long)k.device_syncs);
  printf("%s\n", bad ? "MISMATCH against the host computation" : "matches the host computation");
  kd_graph_destroy(g);
  kd_session_destroy(s);
  return bad;
}
