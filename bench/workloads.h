/* SPDX-License-Identifier: Apache-2.0 */
/* bench/workloads.h — pipelines written as a user would write them, over
 * kdag's public API, shared by kdag-bench's workloads suites and the host
 * lane's tests (which run them on HOST and on the null driver with the
 * host stand-ins below).
 *
 *   jacobi         2D 5-point Jacobi of built-in nodes over shifted views:
 *                  per sweep y[interior] = ((up + down) + left + right) / 4
 *                  as add, axpy, axpy, scale; then x and y swap
 *   jacobi_kernel  the same sweep as one user kernel (NVRTC) per sweep
 *   cg             conjugate gradient on the 2D Poisson matrix (5-point,
 *                  zero boundary), matrix-free: 7 user kernels per
 *                  iteration (apply, two dot products into one-element
 *                  tensors, alpha, the x and r update, beta, the new p)
 *   image          a batch of integer images, per image a blur, a
 *                  gradient, a threshold and a histogram of the blurred
 *                  pixels on edges (4 user kernels; the images are
 *                  independent chains)
 *   cholesky       a batch of 32 x 32 f64 systems: copy A and b from the
 *                  originals (built-in copies), cuSOLVERDx Cholesky, then
 *                  the two triangular solves (MathDx, examples/dx_kernels.h;
 *                  where MathDx is installed)
 *
 * Every kernel's arithmetic is fixed (--fmad=false, sums in a stated
 * order), and so is its host twin's: the results are bit-exact against the
 * host reference on every backend; the Cholesky is held to its residual
 * ||A x - b|| / ||b|| instead. */
#ifndef KDAG_BENCH_WORKLOADS_H
#define KDAG_BENCH_WORKLOADS_H

#include <stddef.h>
#include <stdint.h>

#include "kdag/kdag.h"
#include "kernels/strided.h"

typedef enum kb_wl_kind {
  KB_WL_JACOBI = 1,
  KB_WL_JACOBI_KERNEL = 2,
  KB_WL_CG = 3,
  KB_WL_IMAGE = 4,
  KB_WL_CHOLESKY = 5
} kb_wl_kind;

typedef struct kb_wl_spec {
  kb_wl_kind kind;
  int64_t n;      /* grid side (jacobi, cg), image side (image), 32 (cholesky) */
  int iters;      /* iterations (sweeps, CG iterations, passes) per graph */
  int batch;      /* images (image), systems (cholesky); 0 elsewhere */
} kb_wl_spec;

/* The user kernels of a workload: CUDA C source for NVRTC, compiled with
 * KB_WL_FMAD; NULL for jacobi (built-ins only) and cholesky (built by
 * kb_wl_cholesky_module). */
const char *kb_wl_source(kb_wl_kind kind);
/* The Cholesky module (MathDx: libmathdx, NVRTC, nvJitLink; through the
 * default module cache) for sm, and the launch configs of its two kernels
 * over `batch` systems: 0, 1 without MathDx (why says so), -1. */
int kb_wl_cholesky_module(int sm, int batch, kd_binary **out, kd_launch_config *potrf, kd_launch_config *potrs,
                          char *why, size_t cap);
#define KB_WL_FMAD "--fmad=false"

/* One kernel launch of an iteration, as the workload declares it: the
 * baselines launch the same kernels with the same configs. */
typedef struct kb_wl_launch_cfg {
  uint32_t grid[3], block[3];
} kb_wl_launch_cfg;
kb_wl_launch_cfg kb_wl_config(const kb_wl_spec *spec, const char *kernel, int64_t elements);

/* Nodes a graph of spec->iters iterations holds. */
int64_t kb_wl_nodes(const kb_wl_spec *spec);
/* Every function below that can fail returns 0, or -1 with a message in
 * why (kdag's own, kd_last_error, after the call that failed). */
int kb_wl_spec_check(const kb_wl_spec *spec, char *why, size_t cap);

/* A workload on a session: its tensors (initialised), its module, and its
 * graph of spec.iters iterations (no transfers: kb_wl_check downloads). */
typedef struct kb_wl {
  kb_wl_spec spec;
  kd_session *s;
  kd_graph *g;
  kd_tensor t[8];
  int tensors;
  kd_module m;
  kd_function fn[8];
  kd_launch_config dx[2]; /* cholesky: potrf's and potrs's */
  int has_module;
  int submitted;  /* submissions kb_wl_check accounts for */
} kb_wl;

/* Creates the tensors with their first contents (uploads), compiles and
 * loads the kernels (a raw scope: CUDA sessions; on HOST only jacobi
 * runs), and declares the graph; on failure nothing is left. Returns 1
 * (why says which) when the workload cannot run here: cholesky on a HOST
 * session or without MathDx. */
int kb_wl_create(kd_session *s, const kb_wl_spec *spec, kb_wl *out, char *why, size_t cap);
/* Declares spec.iters iterations into g (the workload's tensors and
 * kernels): kb_wl_create's graph, or another graph of the session. */
int kb_wl_declare(kb_wl *w, kd_graph *g, char *why, size_t cap);
void kb_wl_destroy(kb_wl *w);

/* Downloads the result tensors (a wait) and compares them with the host
 * reference after w->submitted submissions of the graph: *max_err is the
 * worst kb_wl_compare over the result buffers. */
int kb_wl_check(kb_wl *w, double *max_err, char *why, size_t cap);

/* Results within this of the reference pass the bench's checks (the
 * arithmetic is meant to be bit-exact; a difference is reported). */
#define KB_WL_TOLERANCE 1e-5

/* The first contents of a workload's tensors and their reference after k
 * iterations, on the host (the same arithmetic as the kernels): buffers of
 * kb_wl_buffer_bytes each, in the order kb_wl_create makes the tensors. */
int kb_wl_buffers(const kb_wl_spec *spec);
size_t kb_wl_buffer_bytes(const kb_wl_spec *spec, int i);
void kb_wl_init(const kb_wl_spec *spec, void **buffers);
/* What `submissions` submissions of the graph compute, from buffers. */
void kb_wl_run(const kb_wl_spec *spec, void **buffers, int64_t submissions);
/* The reference after `submissions` submissions: buffers owned by a
 * one-entry cache (kept for the next call with the same spec and count,
 * replaced by another's; a large grid's reference takes seconds), NULL
 * without memory. Not thread-safe. */
void *const *kb_wl_reference(const kb_wl_spec *spec, int64_t submissions);
/* Buffer i as computed (got) against the reference buffers (want): the
 * largest absolute difference over the reference's largest magnitude; for
 * integer buffers 1 when any element differs; 0 when bit-exact. Cholesky:
 * the worst residual ||A x - b|| / ||b|| of x, and 1 for a failed
 * factorization. */
double kb_wl_compare(const kb_wl_spec *spec, int i, const void *got, void *const *want);
/* The buffers kb_wl_check compares (the rest are scratch): a bit mask. */
unsigned kb_wl_results(const kb_wl_spec *spec);

/* The host twins of the user kernels, for a driver that runs them on the
 * host (the null driver's kdag_null_emulate): register(name, count, sizes,
 * fn) is called for each. Built-in kernels' twins too (kd_add_f32,
 * kd_axpy_f32, kd_scale_f32), for jacobi. */
typedef void kb_wl_host_kernel(void *const *params);
typedef int kb_wl_register_fn(const char *name, uint32_t count, const uint32_t *sizes, kb_wl_host_kernel *fn);
int kb_wl_register_host_kernels(kb_wl_kind kind, kb_wl_register_fn *reg);

#endif /* KDAG_BENCH_WORKLOADS_H */
