/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "dx": MathDx device-library kernels as kdag graph nodes against the
 * toolkit's batched libraries, and the MathDx module's cold and warm start.
 * Every batch is 10,000 problems of 32x32 (column-major, one per block).
 *   cublas_gemm_batched     baseline: cublasSgemmStridedBatched /
 *                           cublasDgemmStridedBatched (libcublas.so.13,
 *                           dlopen'd) on the shared GPU's stream
 *   kdag_dx_gemm            the cuBLASDx kernel of examples/dx_kernels.h as
 *                           one kernel node of a GRAPH-mode kdag session
 *                           (module built through the module cache)
 *   cusolver_potrf_batched  baseline: cusolverDnDpotrfBatched (f64, lower;
 *                           libcusolver.so.12, dlopen'd)
 *   kdag_dx_potrf           the cuSOLVERDx potrf node of dx_cholesky (f64)
 *   module_warm             baseline: the cuBLASDx f32 GEMM module from a
 *                           disk cache (a new kd_cubin_cache, so its memory
 *                           level is empty) -> load -> lookup -> one launch
 *                           done
 *   module_cold             the same from a fresh empty cache folder: NVRTC
 *                           compile and nvJitLink link included
 * Axis dtype: 32 = f32, 64 = f64. The GEMM cases run at both; the potrf
 * cases at 64 only, the start cases at 32 only (they skip at the other). items are floating-point
 * operations: items_per_second is FLOP/s (2 n^3 per GEMM, n^3 / 3 per
 * Cholesky). potrf works in place, so both potrf cases first restore A from
 * a pristine device copy in every iteration (a device-to-device copy of the
 * whole batch, the same in both): their times include that copy.
 * Times are per gemm_batch / potrf_batch (distinct metrics, so GEMM and
 * potrf rows never pair); items_per_second rows at dtype=64 do pair across
 * the two (the harness matches by metric name): read only the GEMM-to-cuBLAS
 * and potrf-to-cuSOLVER ratios.
 * Inputs are checked once in setup: products 0 and batch-1 against a host
 * reference (GEMM), factor 0 and batch-1 against a host Cholesky and every
 * info == 0 (potrf); a mismatch fails the case.
 * The warm start is timed in-process: what kdag does once per process (the
 * NVRTC / nvJitLink file identities, the MathDx manifest hash) is already
 * done by then and not in the figure. */
#include <cublas_v2.h>
/* cusolverDn.h declares cusolverDnLoggerForceDisable() without (void). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cusolverDn.h>
#pragma GCC diagnostic pop
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/gpu.h"
#include "bench/kdag_session.h"
#include "bench/suites.h"
#include "base/dynlib.h"
#include "examples/dx_kernels.h"

#define DXB_BATCH 10000
#define DXB_MAT (DX_N * DX_N)
#define DXB_GEMM_FLOPS (2.0 * DX_N * DX_N * DX_N * DXB_BATCH)
#define DXB_POTRF_FLOPS ((double)DX_N * DX_N * DX_N / 3.0 * DXB_BATCH)

typedef struct dx_suite {
  kb_gpu *g;
  kd_mathdx_info mdx; /* holds pointers into itself: never copied */
  int sm;
} dx_suite;

static kb_status dx_init(kb_harness *h, void *user, void **state, char *why, size_t cap) {
  (void)user;
  kb_gpu *g;
  kb_status st = kb_gpu_acquire_described(h, &g, why, cap);
  if (st != KB_OK) return st;
  kb_machine *m = kb_harness_machine(h);
  dx_suite *s = calloc(1, sizeof *s);
  if (!s) return snprintf(why, cap, "out of memory"), KB_FAIL;
  kd_status ks = kd_mathdx_find(&s->mdx);
  if (ks != KD_OK) {
    free(s);
    snprintf(why, cap, "MathDx not available: %s", kd_last_error());
    return ks == KD_ERR_LIBRARY_MISSING ? KB_SKIP : KB_FAIL;
  }
  s->g = g;
  s->sm = m->cc_major * 10 + m->cc_minor;
  *state = s;
  return KB_OK;
}

static void dx_fini(void *state) { free(state); }

static kb_status dx_flush(void *state, char *why, size_t cap) {
  return kb_gpu_flush_l2(((dx_suite *)state)->g, why, cap);
}

/* ---- host data and references ------------------------------------------ */

static double urand(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return (double)(*s >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

/* Random A and B in [-1, 1), as f32 (rounded) or f64, elem bytes each. */
static void gemm_inputs(int f64, void *a, void *b) {
  uint64_t seed = 0x2545F4914F6CDD1Dull;
  for (size_t i = 0; i < (size_t)DXB_MAT * DXB_BATCH; ++i) {
    double x = urand(&seed), y = urand(&seed);
    if (f64) ((double *)a)[i] = x, ((double *)b)[i] = y;
    else ((float *)a)[i] = (float)x, ((float *)b)[i] = (float)y;
  }
}

static double elem(int f64, const void *p, size_t i) {
  return f64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

/* Worst relative error of products 0 and DXB_BATCH-1 of c against A B. */
static double gemm_error(int f64, const void *a, const void *b, const void *c) {
  double worst = 0;
  size_t ps[2] = {0, DXB_BATCH - 1};
  for (int q = 0; q < 2; ++q) {
    size_t at = ps[q] * DXB_MAT;
    for (int j = 0; j < DX_N; ++j)
      for (int i = 0; i < DX_N; ++i) {
        double acc = 0;
        for (int k = 0; k < DX_N; ++k) acc += elem(f64, a, at + k * DX_N + i) * elem(f64, b, at + j * DX_N + k);
        double err = fabs(elem(f64, c, at + j * DX_N + i) - acc) / (1.0 + fabs(acc));
        if (!(err <= worst)) worst = err; /* NaN counts as worst */
      }
  }
  return worst;
}

/* A = B B^T / n + I for random B: symmetric positive definite. */
static double *spd_inputs(void) {
  double *a = malloc(sizeof(double) * DXB_MAT * DXB_BATCH), b[DXB_MAT];
  if (!a) return NULL;
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  for (size_t p = 0; p < DXB_BATCH; ++p) {
    for (int i = 0; i < DXB_MAT; ++i) b[i] = urand(&seed);
    double *m = a + p * DXB_MAT;
    for (int j = 0; j < DX_N; ++j)
      for (int i = 0; i <= j; ++i) {
        double acc = 0;
        for (int k = 0; k < DX_N; ++k) acc += b[k * DX_N + i] * b[k * DX_N + j];
        m[j * DX_N + i] = m[i * DX_N + j] = acc / DX_N + (i == j ? 1.0 : 0.0);
      }
  }
  return a;
}

/* Worst |L - L_ref| / (1 + |L_ref|) over the lower triangles of factors 0
 * and DXB_BATCH-1 (l: the device result, a: the input). */
static double potrf_error(const double *a, const double *l) {
  double worst = 0, ref[DXB_MAT];
  size_t ps[2] = {0, DXB_BATCH - 1};
  for (int q = 0; q < 2; ++q) {
    const double *m = a + ps[q] * DXB_MAT, *got = l + ps[q] * DXB_MAT;
    for (int j = 0; j < DX_N; ++j) {
      double d = m[j * DX_N + j];
      for (int k = 0; k < j; ++k) d -= ref[k * DX_N + j] * ref[k * DX_N + j];
      ref[j * DX_N + j] = sqrt(d);
      for (int i = j + 1; i < DX_N; ++i) {
        double v = m[j * DX_N + i];
        for (int k = 0; k < j; ++k) v -= ref[k * DX_N + i] * ref[k * DX_N + j];
        ref[j * DX_N + i] = v / ref[j * DX_N + j];
      }
    }
    for (int j = 0; j < DX_N; ++j)
      for (int i = j; i < DX_N; ++i) {
        double err = fabs(got[j * DX_N + i] - ref[j * DX_N + i]) / (1.0 + fabs(ref[j * DX_N + i]));
        if (!(err <= worst)) worst = err;
      }
  }
  return worst;
}

/* ---- the toolkit libraries, dlopen'd ----------------------------------- */

typedef struct blas_api {
  __typeof__(cublasCreate_v2) *create;
  __typeof__(cublasDestroy_v2) *destroy;
  __typeof__(cublasSetStream_v2) *set_stream;
  __typeof__(cublasSgemmStridedBatched) *sgemm;
  __typeof__(cublasDgemmStridedBatched) *dgemm;
} blas_api;

typedef struct solver_api {
  __typeof__(cusolverDnCreate) *create;
  __typeof__(cusolverDnDestroy) *destroy;
  __typeof__(cusolverDnSetStream) *set_stream;
  __typeof__(cusolverDnDpotrfBatched) *dpotrf;
} solver_api;

/* Loads soname (loader path, then the toolkit, then pip wheels) and
 * resolves names[i] into fns[i]; the library stays loaded. */
static kb_status load_api(kb_run *run, const char *soname, const char *wheel, const char *const *names,
                          void **fns, size_t n) {
  char tried[1536], found[1024];
  void *h = kd_dynlib_open(NULL, soname, wheel, tried, sizeof tried, found, sizeof found);
  if (!h) return kb_run_skip(run, "%s not found (tried %s): the baseline needs the CUDA toolkit", soname, tried);
  for (size_t i = 0; i < n; ++i)
    if (!(fns[i] = dlsym(h, names[i]))) return kb_run_fail(run, "%s lacks %s", found, names[i]);
  return KB_OK;
}

static kb_status blas_load(kb_run *run, blas_api *api) {
  static const char *const names[] = {"cublasCreate_v2", "cublasDestroy_v2", "cublasSetStream_v2",
                                      "cublasSgemmStridedBatched", "cublasDgemmStridedBatched"};
  void *fns[5];
  kb_status st = load_api(run, "libcublas.so.13", "cublas", names, fns, 5);
  if (st) return st;
  memcpy(&api->create, &fns[0], sizeof fns[0]);
  memcpy(&api->destroy, &fns[1], sizeof fns[1]);
  memcpy(&api->set_stream, &fns[2], sizeof fns[2]);
  memcpy(&api->sgemm, &fns[3], sizeof fns[3]);
  memcpy(&api->dgemm, &fns[4], sizeof fns[4]);
  return KB_OK;
}

static kb_status solver_load(kb_run *run, solver_api *api) {
  static const char *const names[] = {"cusolverDnCreate", "cusolverDnDestroy", "cusolverDnSetStream",
                                      "cusolverDnDpotrfBatched"};
  void *fns[4];
  kb_status st = load_api(run, "libcusolver.so.12", "cusolver", names, fns, 4);
  if (st) return st;
  memcpy(&api->create, &fns[0], sizeof fns[0]);
  memcpy(&api->destroy, &fns[1], sizeof fns[1]);
  memcpy(&api->set_stream, &fns[2], sizeof fns[2]);
  memcpy(&api->dpotrf, &fns[3], sizeof fns[3]);
  return KB_OK;
}

/* ---- cublas_gemm_batched ----------------------------------------------- */

typedef struct blas_case {
  blas_api api;
  cublasHandle_t handle;
  CUdeviceptr a, b, c;
  int f64;
} blas_case;

static kb_status dtype_axis(kb_run *run, int *f64) {
  int64_t bits = kb_run_axis(run, "dtype", 32);
  if (bits != 32 && bits != 64) return kb_run_fail(run, "dtype must be 32 (f32) or 64 (f64), not %lld", (long long)bits);
  *f64 = bits == 64;
  return KB_OK;
}

/* The potrf cases exist in f64 (dx_cholesky's kernel), the start cases in
 * f32 (one module): at the other dtype they skip, saying so. */
static kb_status only_dtype(kb_run *run, int64_t bits, const char *why) {
  int64_t got = kb_run_axis(run, "dtype", bits);
  if (got != bits) return kb_run_not_applicable(run, "runs at dtype=%lld only (%s)", (long long)bits, why);
  return KB_OK;
}

static void blas_teardown(kb_run *run, void *state) {
  (void)run;
  blas_case *b = state;
  if (!b) return;
  kb_gpu *g = ((dx_suite *)kb_run_suite_state(run))->g;
  g->cu->cuStreamSynchronize(g->stream);
  if (b->handle) b->api.destroy(b->handle);
  if (b->a) g->cu->cuMemFree(b->a);
  if (b->b) g->cu->cuMemFree(b->b);
  if (b->c) g->cu->cuMemFree(b->c);
  free(b);
}

static kb_status blas_gemm(kb_run *run, blas_case *b) {
  cublasStatus_t r;
  if (b->f64) {
    const double one = 1, zero = 0;
    r = b->api.dgemm(b->handle, CUBLAS_OP_N, CUBLAS_OP_N, DX_N, DX_N, DX_N, &one, (const double *)b->a, DX_N,
                     DXB_MAT, (const double *)b->b, DX_N, DXB_MAT, &zero, (double *)b->c, DX_N, DXB_MAT, DXB_BATCH);
  } else {
    const float one = 1, zero = 0;
    r = b->api.sgemm(b->handle, CUBLAS_OP_N, CUBLAS_OP_N, DX_N, DX_N, DX_N, &one, (const float *)b->a, DX_N,
                     DXB_MAT, (const float *)b->b, DX_N, DXB_MAT, &zero, (float *)b->c, DX_N, DXB_MAT, DXB_BATCH);
  }
  if (r != CUBLAS_STATUS_SUCCESS)
    return kb_run_fail(run, "cublas%cgemmStridedBatched: cublasStatus_t %d", b->f64 ? 'D' : 'S', (int)r);
  return KB_OK;
}

static kb_status blas_setup(kb_run *run, void **state) {
  dx_suite *s = kb_run_suite_state(run);
  kb_gpu *g = s->g;
  int f64 = 0;
  kb_status st = dtype_axis(run, &f64);
  if (st) return st;
  size_t bytes = (f64 ? 8 : 4) * (size_t)DXB_MAT * DXB_BATCH;
  kb_run_per_iteration(run, 1, "gemm_batch");
  kb_run_throughput(run, DXB_GEMM_FLOPS, 3.0 * (double)bytes);
  blas_case *b = calloc(1, sizeof *b);
  void *ha = malloc(bytes), *hb = malloc(bytes), *hc = malloc(bytes);
  if (!b || !ha || !hb || !hc) {
    free(b), free(ha), free(hb), free(hc);
    return kb_run_fail(run, "out of memory");
  }
  b->f64 = f64;
  gemm_inputs(f64, ha, hb);
  cublasStatus_t br;
  if ((st = blas_load(run, &b->api))) goto fail;
  if ((br = b->api.create(&b->handle)) != CUBLAS_STATUS_SUCCESS) {
    b->handle = NULL;
    st = kb_run_fail(run, "cublasCreate: cublasStatus_t %d", (int)br);
    goto fail;
  }
  if ((br = b->api.set_stream(b->handle, (cudaStream_t)g->stream)) != CUBLAS_STATUS_SUCCESS) {
    st = kb_run_fail(run, "cublasSetStream: cublasStatus_t %d", (int)br);
    goto fail;
  }
  if ((st = kb_gpu_check(run, g->cu->cuMemAlloc(&b->a, bytes), "cuMemAlloc(A)")) ||
      (st = kb_gpu_check(run, g->cu->cuMemAlloc(&b->b, bytes), "cuMemAlloc(B)")) ||
      (st = kb_gpu_check(run, g->cu->cuMemAlloc(&b->c, bytes), "cuMemAlloc(C)")) ||
      (st = kb_gpu_check(run, g->cu->cuMemcpyHtoDAsync(b->a, ha, bytes, g->stream), "cuMemcpyHtoDAsync(A)")) ||
      (st = kb_gpu_check(run, g->cu->cuMemcpyHtoDAsync(b->b, hb, bytes, g->stream), "cuMemcpyHtoDAsync(B)")) ||
      (st = blas_gemm(run, b)) ||
      (st = kb_gpu_check(run, g->cu->cuMemcpyDtoHAsync(hc, b->c, bytes, g->stream), "cuMemcpyDtoHAsync(C)")) ||
      (st = kb_gpu_check(run, g->cu->cuStreamSynchronize(g->stream), "cuStreamSynchronize")))
    goto fail;
  double err = gemm_error(f64, ha, hb, hc), tol = f64 ? 1e-12 : 1e-4;
  if (!(err <= tol)) {
    st = kb_run_fail(run, "cuBLAS result differs from the host reference: worst relative error %.3g > %.0e", err, tol);
    goto fail;
  }
  free(ha), free(hb), free(hc);
  *state = b;
  return KB_OK;
fail:
  free(ha), free(hb), free(hc);
  blas_teardown(run, b);
  return st;
}

static kb_status blas_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  blas_case *b = state;
  kb_gpu *g = ((dx_suite *)kb_run_suite_state(run))->g;
  uint64_t t0 = 0; /* set by the begin call, after its event */
  kb_status st = kb_gpu_batch_begin(g, run, &t0);
  for (uint64_t i = 0; i < iterations && !st; ++i) st = blas_gemm(run, b);
  if (st) return st;
  return kb_gpu_batch_end(g, run, t0, out);
}

/* ---- kdag_dx_gemm and kdag_dx_potrf -------------------------------------- */

typedef struct kdag_case {
  kb_kdag k;
  kd_module module;
  int has_module;
  kd_graph *graph;
} kdag_case;

static void kdag_teardown(kb_run *run, void *state) {
  (void)run;
  kdag_case *c = state;
  if (!c) return;
  kd_graph_destroy(c->graph);
  if (c->has_module) kd_module_release(c->k.session, c->module);
  kb_kdag_close(&c->k); /* also frees the tensors */
  free(c);
}

static kb_status kd_check(kb_run *run, kd_status st, const char *what) {
  return st ? kb_run_fail(run, "%s: %s: %s", what, kd_status_name(st), kd_last_error()) : KB_OK;
}

/* Loads cubin into the case's session and looks up fn. */
static kb_status kdag_module(kb_run *run, kdag_case *c, const kd_binary *cubin, const char *fn_name,
                             kd_function *fn) {
  kb_status st = kd_check(run, dx_load_module(c->k.session, cubin, &c->module), "loading the MathDx module");
  if (st) return st;
  c->has_module = 1;
  return kd_check(run, kd_module_function(c->k.session, c->module, fn_name, fn), fn_name);
}

static kb_status kdag_gemm_setup(kb_run *run, void **state) {
  dx_suite *s = kb_run_suite_state(run);
  int f64 = 0;
  kb_status st = dtype_axis(run, &f64);
  if (st) return st;
  kd_dtype t = f64 ? KD_F64 : KD_F32;
  size_t bytes = (f64 ? 8 : 4) * (size_t)DXB_MAT * DXB_BATCH;
  kb_run_per_iteration(run, 1, "gemm_batch");
  kb_run_throughput(run, DXB_GEMM_FLOPS, 3.0 * (double)bytes);
  kdag_case *c = calloc(1, sizeof *c);
  void *ha = malloc(bytes), *hb = malloc(bytes), *hc = malloc(bytes);
  kd_cubin_cache *cache = NULL;
  kd_binary *cubin = NULL;
  kd_graph *check = NULL;
  if (!c || !ha || !hb || !hc) {
    free(c), free(ha), free(hb), free(hc);
    return kb_run_fail(run, "out of memory");
  }
  gemm_inputs(f64, ha, hb);
  if ((st = kb_kdag_open(run, KD_EXEC_GRAPH, &c->k))) goto fail;
  kd_session *session = c->k.session;
  kd_launch_config cfg;
  kd_function fn;
  kd_tensor ta, tb, tc;
  kd_sink *sink;
  kd_tensor_desc d = {.dtype = t, .rank = 3, .shape = {DX_N, DX_N, DXB_BATCH}};
  /* The default cache folder: a second run reads the module from disk. */
  if ((st = kd_check(run, kd_cubin_cache_create(NULL, &cache), "kd_cubin_cache_create")) ||
      (st = kd_check(run, dx_build_gemm(cache, &s->mdx, t, s->sm, &cubin, NULL), "building the cuBLASDx GEMM")) ||
      (st = kd_check(run, dx_launch_config(cubin, "dx_gemm_launch", DXB_BATCH, &cfg), "dx_gemm_launch")) ||
      (st = kdag_module(run, c, cubin, "dx_gemm_batched", &fn)) ||
      (st = kd_check(run, kd_tensor_from_host(session, &d, ha, bytes, &ta), "kd_tensor_from_host(A)")) ||
      (st = kd_check(run, kd_tensor_from_host(session, &d, hb, bytes, &tb), "kd_tensor_from_host(B)")) ||
      (st = kd_check(run, kd_tensor_create(session, &d, &tc), "kd_tensor_create(C)")))
    goto fail;
  kd_garg args[] = {kd_g_out(kd_whole(tc)), kd_g_in(kd_whole(ta)), kd_g_in(kd_whole(tb)),
                    kd_g_value(kd_arg_i32(DXB_BATCH))};
  /* Checked once, with a sink; the timed graph is the kernel node alone. */
  if ((st = kd_check(run, kd_graph_create(session, &check), "kd_graph_create")) ||
      (st = kd_check(run, kd_graph_kernel(check, "C = A B (cuBLASDx)", fn, &cfg, args, 4, NULL), "kd_graph_kernel")) ||
      (st = kd_check(run, kd_graph_sink(check, "C", tc, hc, bytes, &sink), "kd_graph_sink")) ||
      (st = kd_check(run, kd_graph_submit(check, NULL), "kd_graph_submit")) ||
      (st = kd_check(run, kd_sink_wait(sink), "kd_sink_wait")))
    goto fail;
  double err = gemm_error(f64, ha, hb, hc), tol = f64 ? 1e-12 : 1e-4;
  if (!(err <= tol)) {
    st = kb_run_fail(run, "cuBLASDx result differs from the host reference: worst relative error %.3g > %.0e", err, tol);
    goto fail;
  }
  if ((st = kd_check(run, kd_graph_create(session, &c->graph), "kd_graph_create")) ||
      (st = kd_check(run, kd_graph_kernel(c->graph, "C = A B (cuBLASDx)", fn, &cfg, args, 4, NULL), "kd_graph_kernel")) ||
      (st = kb_kdag_preflight(run, &c->k, c->graph)))
    goto fail;
  kd_graph_destroy(check);
  kd_binary_destroy(cubin);
  kd_cubin_cache_destroy(cache);
  free(ha), free(hb), free(hc);
  *state = c;
  return KB_OK;
fail:
  kd_graph_destroy(check);
  kd_binary_destroy(cubin);
  kd_cubin_cache_destroy(cache);
  free(ha), free(hb), free(hc);
  kdag_teardown(run, c);
  return st;
}

static kb_status kdag_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  kdag_case *c = state;
  uint64_t t0 = 0; /* set by the begin call, after its event */
  kb_status st = kb_kdag_begin(run, &c->k, &t0);
  for (uint64_t i = 0; i < iterations && !st; ++i) st = kd_check(run, kd_graph_submit(c->graph, NULL), "kd_graph_submit");
  if (st) return st;
  return kb_kdag_end(run, &c->k, t0, out);
}

static kb_status potrf_check(kb_run *run, const char *who, const double *a, const double *l, const int *info) {
  int failed = 0;
  for (int p = 0; p < DXB_BATCH; ++p) failed += info[p] != 0;
  if (failed) return kb_run_fail(run, "%s: %d of %d factorizations report info != 0", who, failed, DXB_BATCH);
  double err = potrf_error(a, l);
  if (!(err <= 1e-12))
    return kb_run_fail(run, "%s: factor differs from the host Cholesky: worst relative error %.3g > 1e-12", who, err);
  return KB_OK;
}

static kb_status kdag_potrf_setup(kb_run *run, void **state) {
  dx_suite *s = kb_run_suite_state(run);
  if (only_dtype(run, 64, "dx_cholesky's potrf kernel is f64")) return KB_SKIP;
  if (!*s->mdx.libmathdx_path)
    return kb_run_skip(run, "libmathdx is not installed (the cuSOLVERDx functions come from it): run "
                       "tools/install-mathdx.sh");
  size_t bytes = sizeof(double) * DXB_MAT * DXB_BATCH;
  kb_run_per_iteration(run, 1, "potrf_batch");
  kb_run_throughput(run, DXB_POTRF_FLOPS, 4.0 * (double)bytes); /* restore copy + potrf in place */
  kdag_case *c = calloc(1, sizeof *c);
  double *a = spd_inputs(), *l = malloc(bytes);
  int *info = malloc(sizeof(int) * DXB_BATCH);
  kd_cubin_cache *cache = NULL;
  kd_binary *cubin = NULL;
  kd_graph *check = NULL;
  kb_status st;
  if (!c || !a || !l || !info) {
    free(c), free(a), free(l), free(info);
    return kb_run_fail(run, "out of memory");
  }
  if ((st = kb_kdag_open(run, KD_EXEC_GRAPH, &c->k))) goto fail;
  kd_session *session = c->k.session;
  kd_launch_config cfg;
  kd_function fn;
  kd_tensor t0, ta, ti;
  kd_sink *sl, *si;
  kd_tensor_desc dm = {.dtype = KD_F64, .rank = 3, .shape = {DX_N, DX_N, DXB_BATCH}};
  kd_tensor_desc di = {.dtype = KD_I32, .rank = 1, .shape = {DXB_BATCH}};
  if ((st = kd_check(run, kd_cubin_cache_create(NULL, &cache), "kd_cubin_cache_create")) ||
      (st = kd_check(run, dx_build_cholesky(cache, s->sm, &cubin, NULL), "building the cuSOLVERDx module")) ||
      (st = kd_check(run, dx_launch_config(cubin, "dx_potrf_launch", DXB_BATCH, &cfg), "dx_potrf_launch")) ||
      (st = kdag_module(run, c, cubin, "dx_potrf_batched", &fn)) ||
      (st = kd_check(run, kd_tensor_from_host(session, &dm, a, bytes, &t0), "kd_tensor_from_host(A0)")) ||
      (st = kd_check(run, kd_tensor_create(session, &dm, &ta), "kd_tensor_create(A)")) ||
      (st = kd_check(run, kd_tensor_create(session, &di, &ti), "kd_tensor_create(info)")))
    goto fail;
  kd_garg args[] = {kd_g_inout(kd_whole(ta)), kd_g_out(kd_whole(ti)), kd_g_value(kd_arg_i32(DXB_BATCH))};
  for (int pass = 0; pass < 2; ++pass) {
    kd_graph **gp = pass ? &c->graph : &check;
    if ((st = kd_check(run, kd_graph_create(session, gp), "kd_graph_create")) ||
        (st = kd_check(run, kd_graph_op_copy(*gp, "A = A0", kd_whole(ta), kd_whole(t0), NULL), "kd_graph_op_copy")) ||
        (st = kd_check(run, kd_graph_kernel(*gp, "A = L L^T (cuSOLVERDx potrf)", fn, &cfg, args, 3, NULL),
                       "kd_graph_kernel")))
      goto fail;
    if (pass) break;
    if ((st = kd_check(run, kd_graph_sink(check, "L", ta, l, bytes, &sl), "kd_graph_sink")) ||
        (st = kd_check(run, kd_graph_sink(check, "info", ti, info, sizeof(int) * DXB_BATCH, &si), "kd_graph_sink")) ||
        (st = kd_check(run, kd_graph_submit(check, NULL), "kd_graph_submit")) ||
        (st = kd_check(run, kd_sink_wait(sl), "kd_sink_wait")) || (st = kd_check(run, kd_sink_wait(si), "kd_sink_wait")) ||
        (st = potrf_check(run, "cuSOLVERDx", a, l, info)))
      goto fail;
  }
  if ((st = kb_kdag_preflight(run, &c->k, c->graph))) goto fail;
  kd_graph_destroy(check);
  kd_binary_destroy(cubin);
  kd_cubin_cache_destroy(cache);
  free(a), free(l), free(info);
  *state = c;
  return KB_OK;
fail:
  kd_graph_destroy(check);
  kd_binary_destroy(cubin);
  kd_cubin_cache_destroy(cache);
  free(a), free(l), free(info);
  kdag_teardown(run, c);
  return st;
}

/* ---- cusolver_potrf_batched ---------------------------------------------- */

typedef struct solver_case {
  solver_api api;
  cusolverDnHandle_t handle;
  CUdeviceptr a0, a, ptrs, info;
} solver_case;

static void solver_teardown(kb_run *run, void *state) {
  solver_case *c = state;
  if (!c) return;
  kb_gpu *g = ((dx_suite *)kb_run_suite_state(run))->g;
  g->cu->cuStreamSynchronize(g->stream);
  if (c->handle) c->api.destroy(c->handle);
  CUdeviceptr bufs[4] = {c->a0, c->a, c->ptrs, c->info};
  for (int i = 0; i < 4; ++i)
    if (bufs[i]) g->cu->cuMemFree(bufs[i]);
  free(c);
}

static kb_status solver_potrf(kb_run *run, solver_case *c, kb_gpu *g) {
  size_t bytes = sizeof(double) * DXB_MAT * DXB_BATCH;
  kb_status st = kb_gpu_check(run, g->cu->cuMemcpyDtoDAsync(c->a, c->a0, bytes, g->stream), "cuMemcpyDtoDAsync(A = A0)");
  if (st) return st;
  cusolverStatus_t r = c->api.dpotrf(c->handle, CUBLAS_FILL_MODE_LOWER, DX_N, (double **)c->ptrs, DX_N,
                                     (int *)c->info, DXB_BATCH);
  if (r != CUSOLVER_STATUS_SUCCESS) return kb_run_fail(run, "cusolverDnDpotrfBatched: cusolverStatus_t %d", (int)r);
  return KB_OK;
}

static kb_status solver_setup(kb_run *run, void **state) {
  if (only_dtype(run, 64, "compared with dx_cholesky's f64 potrf")) return KB_SKIP;
  kb_gpu *g = ((dx_suite *)kb_run_suite_state(run))->g;
  size_t bytes = sizeof(double) * DXB_MAT * DXB_BATCH;
  kb_run_per_iteration(run, 1, "potrf_batch");
  kb_run_throughput(run, DXB_POTRF_FLOPS, 4.0 * (double)bytes);
  solver_case *c = calloc(1, sizeof *c);
  double *a = spd_inputs(), *l = malloc(bytes);
  int *info = malloc(sizeof(int) * DXB_BATCH);
  CUdeviceptr *ptrs = malloc(sizeof(CUdeviceptr) * DXB_BATCH);
  kb_status st;
  if (!c || !a || !l || !info || !ptrs) {
    free(c), free(a), free(l), free(info), free(ptrs);
    return kb_run_fail(run, "out of memory");
  }
  cusolverStatus_t sr;
  if ((st = solver_load(run, &c->api))) goto fail;
  if ((sr = c->api.create(&c->handle)) != CUSOLVER_STATUS_SUCCESS) {
    c->handle = NULL;
    st = kb_run_fail(run, "cusolverDnCreate: cusolverStatus_t %d", (int)sr);
    goto fail;
  }
  if ((sr = c->api.set_stream(c->handle, (cudaStream_t)g->stream)) != CUSOLVER_STATUS_SUCCESS) {
    st = kb_run_fail(run, "cusolverDnSetStream: cusolverStatus_t %d", (int)sr);
    goto fail;
  }
  if ((st = kb_gpu_check(run, g->cu->cuMemAlloc(&c->a0, bytes), "cuMemAlloc(A0)")) ||
      (st = kb_gpu_check(run, g->cu->cuMemAlloc(&c->a, bytes), "cuMemAlloc(A)")) ||
      (st = kb_gpu_check(run, g->cu->cuMemAlloc(&c->ptrs, sizeof(CUdeviceptr) * DXB_BATCH), "cuMemAlloc(pointers)")) ||
      (st = kb_gpu_check(run, g->cu->cuMemAlloc(&c->info, sizeof(int) * DXB_BATCH), "cuMemAlloc(info)")))
    goto fail;
  for (int p = 0; p < DXB_BATCH; ++p) ptrs[p] = c->a + (CUdeviceptr)p * DXB_MAT * sizeof(double);
  if ((st = kb_gpu_check(run, g->cu->cuMemcpyHtoDAsync(c->a0, a, bytes, g->stream), "cuMemcpyHtoDAsync(A0)")) ||
      (st = kb_gpu_check(run, g->cu->cuMemcpyHtoDAsync(c->ptrs, ptrs, sizeof(CUdeviceptr) * DXB_BATCH, g->stream),
                         "cuMemcpyHtoDAsync(pointers)")) ||
      (st = solver_potrf(run, c, g)) ||
      (st = kb_gpu_check(run, g->cu->cuMemcpyDtoHAsync(l, c->a, bytes, g->stream), "cuMemcpyDtoHAsync(L)")) ||
      (st = kb_gpu_check(run, g->cu->cuMemcpyDtoHAsync(info, c->info, sizeof(int) * DXB_BATCH, g->stream),
                         "cuMemcpyDtoHAsync(info)")) ||
      (st = kb_gpu_check(run, g->cu->cuStreamSynchronize(g->stream), "cuStreamSynchronize")) ||
      (st = potrf_check(run, "cuSOLVER", a, l, info)))
    goto fail;
  free(a), free(l), free(info), free(ptrs);
  *state = c;
  return KB_OK;
fail:
  free(a), free(l), free(info), free(ptrs);
  solver_teardown(run, c);
  return st;
}

static kb_status solver_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  solver_case *c = state;
  kb_gpu *g = ((dx_suite *)kb_run_suite_state(run))->g;
  uint64_t t0 = 0; /* set by the begin call, after its event */
  kb_status st = kb_gpu_batch_begin(g, run, &t0);
  for (uint64_t i = 0; i < iterations && !st; ++i) st = solver_potrf(run, c, g);
  if (st) return st;
  return kb_gpu_batch_end(g, run, t0, out);
}

/* ---- module_cold and module_warm ------------------------------------------ */

typedef struct start_case {
  kb_kdag k;
  kd_tensor a, b, c;
  char dir[128]; /* module_warm: the populated cache folder */
  int cold;
  /* Where a start's time goes (every batch's, the warm-up's included),
   * printed on stderr at teardown: build (key + cache or compile), load,
   * lookup (function, launch config, spans), launch + synchronize. */
  double phase_ns[4];
  uint64_t phase_n;
  int timing;
} start_case;

static const char *const start_phase[4] = {"build", "load", "lookup", "launch+sync"};

static void start_teardown(kb_run *run, void *state) {
  (void)run;
  start_case *c = state;
  if (!c) return;
  if (c->phase_n) {
    fprintf(stderr, "kdag-bench dx %s: mean per start over %llu:", kb_run_case_name(run),
            (unsigned long long)c->phase_n);
    for (int i = 0; i < 4; ++i) fprintf(stderr, " %s %.3f ms", start_phase[i], c->phase_ns[i] / 1e6 / (double)c->phase_n);
    fputc('\n', stderr);
  }
  if (kb_remove_scratch_dir(c->dir)) fprintf(stderr, "kdag-bench dx: could not remove %s\n", c->dir);
  kb_kdag_close(&c->k);
  free(c);
}

typedef struct start_job {
  start_case *c;
  const kd_binary *cubin;
} start_job;

static kd_status start_launch(kd_raw *raw, void *user) {
  start_job *job = user;
  kd_session *session = kd_raw_session(raw);
  kd_module m;
  kd_function fn;
  kd_launch_config cfg;
  kd_span a, b;
  kd_span_mut c;
  start_case *sc = job->c;
  uint64_t t0 = kb_now_ns();
  kd_status st = kd_raw_load_binary(raw, job->cubin, &m);
  if (st) return st;
  uint64_t t1 = kb_now_ns();
  if ((st = kd_module_function(session, m, "dx_gemm_batched", &fn)) ||
      (st = dx_launch_config(job->cubin, "dx_gemm_launch", 1, &cfg)) ||
      (st = kd_raw_tensor(raw, job->c->a, &a)) || (st = kd_raw_tensor(raw, job->c->b, &b)) ||
      (st = kd_raw_tensor_mut(raw, job->c->c, &c))) {
    kd_module_release(session, m);
    return st;
  }
  kd_arg args[] = {kd_arg_tensor_mut(&c), kd_arg_tensor(&a), kd_arg_tensor(&b), kd_arg_i32(1)};
  /* SAFETY: dx_gemm_batched is (float *c, const float *a, const float *b,
   * int batches), in this order (the f32 build); the grid is 1 block and
   * batches is 1, so it touches product 0 only, and each of the three
   * tensors holds a 32x32 f32 matrix; block and shared bytes are the
   * kernel's own (dx_gemm_launch, from cuBLASDx); c is this scope's only,
   * exclusive borrow and aliases neither input; a and b were uploaded in
   * setup; kd_raw_synchronize below waits before the module is released. */
  uint64_t t2 = kb_now_ns();
  st = kd_raw_launch(raw, fn, &cfg, args, 4);
  if (st == KD_OK) st = kd_raw_synchronize(raw);
  if (sc->timing) {
    sc->phase_ns[1] += (double)(t1 - t0);
    sc->phase_ns[2] += (double)(t2 - t1);
    sc->phase_ns[3] += (double)(kb_now_ns() - t2);
  }
  kd_status rel = kd_module_release(session, m);
  return st ? st : rel;
}

/* Build (from the cache folder dir) -> load -> lookup -> one launch done. */
static kb_status start_once(kb_run *run, start_case *c, const char *dir, kd_build_origin want) {
  dx_suite *s = kb_run_suite_state(run);
  kd_cubin_cache *cache = NULL;
  kd_binary *cubin = NULL;
  kd_build_report rep;
  kb_status st;
  uint64_t t0 = kb_now_ns();
  if ((st = kd_check(run, kd_cubin_cache_create(dir, &cache), "kd_cubin_cache_create")) ||
      (st = kd_check(run, dx_build_gemm(cache, &s->mdx, KD_F32, s->sm, &cubin, &rep), "building the cuBLASDx GEMM"))) {
    kd_cubin_cache_destroy(cache);
    return st;
  }
  kd_cubin_cache_destroy(cache);
  if (c->timing) c->phase_ns[0] += (double)(kb_now_ns() - t0);
  if (rep.origin != want) {
    kd_binary_destroy(cubin);
    return kb_run_fail(run, "the module came from %s, expected %s", rep.origin == KD_BUILD_DISK ? "the disk cache" :
                       rep.origin == KD_BUILD_MEMORY ? "memory" : "a compile", want == KD_BUILD_DISK ? "the disk cache" : "a compile");
  }
  start_job job = {c, cubin};
  st = kd_check(run, kd_with_raw(c->k.session, "bench.dx_start", start_launch, &job), "load and first launch");
  kd_binary_destroy(cubin);
  if (c->timing && !st) c->phase_n++;
  return st;
}

static kb_status start_setup(kb_run *run, void **state) {
  if (only_dtype(run, 32, "the f32 cuBLASDx GEMM module")) return KB_SKIP;
  kb_run_per_iteration(run, 1, "module");
  kb_run_max_batch(run, 1);
  start_case *c = calloc(1, sizeof *c);
  if (!c) return kb_run_fail(run, "out of memory");
  c->cold = *(const int *)kb_run_user(run);
  kb_status st = kb_kdag_open(run, KD_EXEC_EAGER, &c->k);
  if (st) {
    free(c);
    return st;
  }
  float host[DXB_MAT];
  for (int i = 0; i < DXB_MAT; ++i) host[i] = (float)(i % 7) - 3.0f;
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 2, .shape = {DX_N, DX_N}};
  if ((st = kd_check(run, kd_tensor_from_host(c->k.session, &d, host, sizeof host, &c->a), "kd_tensor_from_host(A)")) ||
      (st = kd_check(run, kd_tensor_from_host(c->k.session, &d, host, sizeof host, &c->b), "kd_tensor_from_host(B)")) ||
      (st = kd_check(run, kd_tensor_create(c->k.session, &d, &c->c), "kd_tensor_create(C)")))
    goto fail;
  if (!c->cold) { /* one cold start fills the folder the samples read */
    snprintf(c->dir, sizeof c->dir, "/tmp/kdag-bench-dx-warm-XXXXXX");
    if (!mkdtemp(c->dir)) {
      c->dir[0] = '\0';
      st = kb_run_fail(run, "mkdtemp: cannot create a cache folder under /tmp");
      goto fail;
    }
    if ((st = start_once(run, c, c->dir, KD_BUILD_COMPILED))) goto fail;
  }
  *state = c;
  return KB_OK;
fail:
  start_teardown(run, c);
  return st;
}

static kb_status start_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  start_case *c = state;
  double ns = 0;
  for (uint64_t i = 0; i < iterations; ++i) {
    char dir[128] = "/tmp/kdag-bench-dx-cold-XXXXXX";
    if (c->cold && !mkdtemp(dir)) return kb_run_fail(run, "mkdtemp: cannot create a cache folder under /tmp");
    uint64_t t0 = kb_now_ns();
    c->timing = 1;
    kb_status st = start_once(run, c, c->cold ? dir : c->dir, c->cold ? KD_BUILD_COMPILED : KD_BUILD_DISK);
    c->timing = 0;
    ns += (double)(kb_now_ns() - t0);
    if (c->cold && kb_remove_scratch_dir(dir) && !st) st = kb_run_fail(run, "could not remove %s", dir);
    if (st) return st;
  }
  out->host_ns = ns;
  out->gpu_ns = -1;
  return KB_OK;
}

int kb_register_dx_suite(kb_harness *h) {
  kb_suite_desc sd = {.name = "dx",
                      .description = "MathDx (cuBLASDx GEMM, cuSOLVERDx potrf) kernel nodes vs cuBLAS / cuSOLVER "
                                     "batched, 10,000 of 32x32; the MathDx module's cold and warm start",
                      .needs_gpu = 1, .init = dx_init, .fini = dx_fini, .flush = dx_flush};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static const int64_t dtypes[] = {32, 64};
  static int cold = 1, warm = 0;
  if (kb_suite_axis(s, "dtype", dtypes, 2)) return -1;
  kb_case_desc cases[] = {
      {.name = "cublas_gemm_batched", .baseline = 1, .setup = blas_setup, .batch = blas_batch, .teardown = blas_teardown,
       .description = "cublas{S,D}gemmStridedBatched, C = A B (items: FLOP)"},
      {.name = "kdag_dx_gemm", .setup = kdag_gemm_setup, .batch = kdag_batch, .teardown = kdag_teardown,
       .description = "cuBLASDx kernel node, kdag GRAPH session (items: FLOP)"},
      {.name = "cusolver_potrf_batched", .baseline = 1, .setup = solver_setup, .batch = solver_batch,
       .teardown = solver_teardown, .description = "A = A0 (d2d), cusolverDnDpotrfBatched f64 (items: FLOP)"},
      {.name = "kdag_dx_potrf", .setup = kdag_potrf_setup, .batch = kdag_batch, .teardown = kdag_teardown,
       .description = "A = A0 (copy node), cuSOLVERDx potrf node f64, kdag GRAPH session (items: FLOP)"},
      {.name = "module_warm", .baseline = 1, .setup = start_setup, .batch = start_batch, .teardown = start_teardown,
       .user = &warm, .description = "GEMM module from the disk cache -> load -> lookup -> first launch done"},
      {.name = "module_cold", .setup = start_setup, .batch = start_batch, .teardown = start_teardown, .user = &cold,
       .description = "GEMM module compiled (NVRTC) and linked (nvJitLink) -> load -> lookup -> first launch done"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    if (kb_case_add(s, &cases[i])) return -1;
  return 0;
}
