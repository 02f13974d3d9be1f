/* SPDX-License-Identifier: Apache-2.0 */
/* examples/jacobi_mpi.c — a Jacobi solver split across MPI ranks, its halo
 * rows exchanged by kdag's collective nodes.
 *
 *   mpiexec -n 4 ./jacobi_mpi [--backend host|cuda] [--n COLS] [--rows ROWS]
 *                             [--iters K] [--check]
 *
 * The Laplace equation on a grid of COLS columns and 4 x ROWS rows, held at
 * 1 along its top edge and 0 along the others, from 0 inside. Each rank
 * owns ROWS rows (weak scaling: the grid grows with the ranks) and one
 * session: a GPU of its node on CUDA (its local rank modulo the GPUs), or
 * the HOST backend. Rank 0 makes the communicator's id and MPI hands it to
 * the others; then everything goes through kdag. One submission is two
 * sweeps, each after a halo exchange:
 *
 *   send_recv: my last row to the rank below, my top halo from the rank above
 *   send_recv: my first row to the rank above, my bottom halo from below
 *   sweep: v = 0.25 ((left + right) + (up + down)), built-in nodes on views
 *
 * kdag orders the exchanges and the sweeps by the rows they read and write;
 * nothing waits until the end, where an all-reduce sums every rank's grid
 * into a checksum. --check also gathers the grid on every rank and rank 0
 * compares it, bit for bit, with the same sweeps done serially in C. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kdag/kdag.h"

#define CHECK(call)                                                                       \
  do {                                                                                    \
    kd_status st_ = (call);                                                               \
    if (st_) {                                                                            \
      fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, kd_last_error());          \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                       \
    }                                                                                     \
  } while (0)

static int rank, ranks;

/* A view of a column-major (cols x rows) grid: w x h elements from (x, y). */
static kd_view grid_view(kd_tensor t, int64_t cols, int64_t x, int64_t y, int64_t w, int64_t h) {
  kd_view v = {.tensor = t, .rank = 2, .offset = y * cols + x, .shape = {w, h}, .strides = {1, cols}};
  return v;
}

/* One row y of the grid: cols contiguous elements. */
static kd_view row(kd_tensor t, int64_t cols, int64_t y) {
  kd_view v = {.tensor = t, .rank = 1, .offset = y * cols, .shape = {cols}, .strides = {1}};
  return v;
}

/* The two exchanges of t's halo rows (rows 0 and n + 1 are halos). */
static void exchange(kd_graph *g, kd_comm *c, kd_tensor t, int64_t cols, int64_t n) {
  int up = rank > 0 ? rank - 1 : KD_NO_PEER, down = rank < ranks - 1 ? rank + 1 : KD_NO_PEER;
  CHECK(kd_graph_send_recv(g, "halo down", c, row(t, cols, n), down, row(t, cols, 0), up, NULL));
  CHECK(kd_graph_send_recv(g, "halo up", c, row(t, cols, 1), up, row(t, cols, n + 1), down, NULL));
}

/* dst's interior = 0.25 ((left + right) + (up + down)) of src's, through
 * two scratch tensors of the interior's shape. */
static void sweep(kd_graph *g, kd_tensor dst, kd_tensor src, kd_tensor a, kd_tensor b, int64_t cols, int64_t n) {
  int64_t w = cols - 2;
  CHECK(kd_graph_op_add(g, "left + right", kd_whole(a), grid_view(src, cols, 0, 1, w, n),
                        grid_view(src, cols, 2, 1, w, n), NULL));
  CHECK(kd_graph_op_add(g, "up + down", kd_whole(b), grid_view(src, cols, 1, 0, w, n),
                        grid_view(src, cols, 1, 2, w, n), NULL));
  CHECK(kd_graph_op_add(g, "sum", grid_view(dst, cols, 1, 1, w, n), kd_whole(a), kd_whole(b), NULL));
  CHECK(kd_graph_op_scale(g, "quarter", grid_view(dst, cols, 1, 1, w, n), 0.25, NULL));
}

/* The serial reference: iters times two sweeps over the whole grid
 * (cols x (rows + 2), halos included), in the same float operations. */
static float *reference(int64_t cols, int64_t rows, int iters) {
  size_t len = (size_t)cols * (size_t)(rows + 2);
  float *u = calloc(len, sizeof *u), *v = calloc(len, sizeof *v);
  if (!u || !v) return NULL;
  for (int64_t x = 0; x < cols; ++x) u[x] = v[x] = 1.0f; /* the top edge */
  for (int it = 0; it < 2 * iters; ++it) {
    float *s = it % 2 ? v : u, *d = it % 2 ? u : v;
    for (int64_t y = 1; y <= rows; ++y)
      for (int64_t x = 1; x < cols - 1; ++x) {
        float lr = s[y * cols + x - 1] + s[y * cols + x + 1], ud = s[(y - 1) * cols + x] + s[(y + 1) * cols + x];
        d[y * cols + x] = (lr + ud) * 0.25f;
      }
  }
  free(v);
  return u;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int64_t cols = 256, n = 64;
  int iters = 100, check = 0;
  kd_backend backend = KD_BACKEND_AUTO;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
      ++i;
      backend = !strcmp(argv[i], "host") ? KD_BACKEND_HOST : KD_BACKEND_CUDA;
    } else if (!strcmp(argv[i], "--n") && i + 1 < argc) {
      cols = atoll(argv[++i]);
    } else if (!strcmp(argv[i], "--rows") && i + 1 < argc) {
      n = atoll(argv[++i]);
    } else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
      iters = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--check")) {
      check = 1;
    } else {
      if (!rank) fprintf(stderr, "usage: %s [--backend host|cuda] [--n COLS] [--rows ROWS] [--iters K] [--check]\n",
                         argv[0]);
      MPI_Finalize();
      return 2;
    }
  }
  if (cols < 3 || n < 1 || iters < 1) {
    if (!rank) fprintf(stderr, "need --n >= 3, --rows >= 1, --iters >= 1\n");
    MPI_Finalize();
    return 2;
  }

  /* One session per rank: a GPU of this node, by local rank. */
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = backend;
  MPI_Comm node;
  int local = 0, devices = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  if (backend != KD_BACKEND_HOST && kd_device_count(&devices) == KD_OK && devices > 0) o.device_ordinal = local % devices;
  kd_session *s;
  CHECK(kd_session_create(&o, &s));
  int on_gpu = kd_session_backend(s) == KD_BACKEND_CUDA;

  /* The communicator: rank 0's id, handed over by MPI. */
  kd_comm_id id;
  if (!rank) CHECK(kd_comm_id_create(s, &id));
  MPI_Bcast(id.bytes, KD_COMM_ID_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD);
  kd_comm *c;
  CHECK(kd_comm_create(s, &id, ranks, rank, &c));

  /* u and v: cols x (n + 2), the halos included; the top edge is rank 0's
   * top halo, which no exchange writes. */
  size_t len = (size_t)cols * (size_t)(n + 2);
  float *init = calloc(len, sizeof *init);
  if (!init) MPI_Abort(MPI_COMM_WORLD, 1);
  if (!rank)
    for (int64_t x = 0; x < cols; ++x) init[x] = 1.0f;
  kd_tensor_desc gd = {.dtype = KD_F32, .rank = 2, .shape = {cols, n + 2}};
  kd_tensor_desc sd = {.dtype = KD_F32, .rank = 2, .shape = {cols - 2, n}};
  kd_tensor_desc one = {.dtype = KD_F32, .rank = 1, .shape = {1}};
  kd_tensor u, v, a, b, local_sum, total;
  CHECK(kd_tensor_from_host(s, &gd, init, len * sizeof(float), &u));
  CHECK(kd_tensor_from_host(s, &gd, init, len * sizeof(float), &v));
  CHECK(kd_tensor_create(s, &sd, &a));
  CHECK(kd_tensor_create(s, &sd, &b));
  CHECK(kd_tensor_create(s, &one, &local_sum));
  CHECK(kd_tensor_create(s, &one, &total));
  free(init);

  /* One iteration: exchange, sweep u -> v, exchange, sweep v -> u. */
  kd_graph *step;
  CHECK(kd_graph_create(s, &step));
  exchange(step, c, u, cols, n);
  sweep(step, v, u, a, b, cols, n);
  exchange(step, c, v, cols, n);
  sweep(step, u, v, a, b, cols, n);

  /* The end: the sum of every rank's interior, and (--check) the grid. */
  kd_graph *report;
  float checksum = 0;
  kd_sink *sum_sink, *grid_sink = NULL;
  kd_tensor whole = {0};
  float *gathered = NULL;
  CHECK(kd_graph_create(s, &report));
  CHECK(kd_graph_op_sum(report, "local sum", kd_whole(local_sum), grid_view(u, cols, 0, 1, cols, n), NULL));
  CHECK(kd_graph_all_reduce(report, "checksum", c, kd_whole(total), kd_whole(local_sum), KD_REDUCE_SUM, NULL));
  CHECK(kd_graph_sink(report, "checksum", total, &checksum, sizeof checksum, &sum_sink));
  if (check) {
    kd_tensor_desc wd = {.dtype = KD_F32, .rank = 1, .shape = {cols * n * ranks}};
    size_t bytes = (size_t)(cols * n * ranks) * sizeof(float);
    gathered = malloc(bytes);
    if (!gathered) MPI_Abort(MPI_COMM_WORLD, 1);
    CHECK(kd_tensor_create(s, &wd, &whole));
    kd_view interior = {.tensor = u, .rank = 1, .offset = cols, .shape = {cols * n}, .strides = {1}};
    CHECK(kd_graph_all_gather(report, "grid", c, kd_whole(whole), interior, NULL));
    CHECK(kd_graph_sink(report, "grid", whole, gathered, bytes, &grid_sink));
  }

  MPI_Barrier(MPI_COMM_WORLD);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int it = 0; it < iters; ++it) CHECK(kd_graph_submit(step, NULL));
  CHECK(kd_graph_submit(report, NULL));
  CHECK(kd_sink_wait(sum_sink)); /* the one wait */
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3 / iters;
  double slowest = 0;
  MPI_Reduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (!rank)
    printf("%d rank(s) on %s, %lld x %lld grid, %d iterations: %.1f us per iteration, checksum %.6g\n", ranks,
           on_gpu ? "CUDA" : "HOST", (long long)cols, (long long)(n * ranks), iters, slowest, checksum);

  int bad = 0;
  if (check) {
    CHECK(kd_sink_wait(grid_sink));
    if (!rank) {
      float *want = reference(cols, n * ranks, iters);
      if (!want) MPI_Abort(MPI_COMM_WORLD, 1);
      for (int64_t i = 0; i < cols * n * ranks; ++i) bad += gathered[i] != want[cols + i];
      printf("check against the serial sweeps: %s (%d of %lld elements differ)\n", bad ? "FAILED" : "exact", bad,
             (long long)(cols * n * ranks));
      free(want);
    }
  }
  kd_graph_destroy(step);
  kd_graph_destroy(report);
  kd_tensor tensors[] = {u, v, a, b, local_sum, total};
  for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; ++i) CHECK(kd_tensor_release(s, tensors[i]));
  if (check) CHECK(kd_tensor_release(s, whole));
  free(gathered);
  kd_comm_destroy(c);
  kd_session_destroy(s);
  MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return bad ? 1 : 0;
}
