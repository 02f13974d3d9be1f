/* SPDX-License-Identifier: Apache-2.0 */
/* examples/dx_cholesky.c — batched Cholesky (cuSOLVERDx potrf) followed by
 * a triangular-solve node (two cuSOLVERDx trsm), one kdag graph with sinks,
 * checked on the host through the residual ||A x - b|| / ||b||.
 *
 * libmathdx generates the three cuSOLVERDx device functions as LTO-IR (its
 * output is cached on disk too); NVRTC compiles the two kernels that call
 * them, and nvJitLink links everything with cuSOLVERDx's fatbin into one
 * CUBIN. The block size is libmathdx's suggestion for potrf. Without a GPU
 * it builds the module and says so; without MathDx it says how to get it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/dx_kernels.h"

#define BATCH 10000
#define MAT (DX_N * DX_N)

#define CHECK(call)                                                                        \
  do {                                                                                     \
    kd_status st_ = (call);                                                                \
    if (st_) {                                                                             \
      fprintf(stderr, "%s failed: %s: %s\n", #call, kd_status_name(st_), kd_last_error()); \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

static double urand(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return (double)(*s >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

int main(void) {
  kd_mathdx_info mdx;
  kd_status st = kd_mathdx_find(&mdx);
  if (st == KD_ERR_LIBRARY_MISSING || (!st && !*mdx.libmathdx_path)) {
    printf("MathDx not installed (libmathdx is needed), nothing to do: %s\n",
           st ? kd_last_error() : "no libmathdx.so.0; run tools/install-mathdx.sh");
    return dx_require_gpu() ? 1 : 0;
  }
  CHECK(st);
  kd_cubin_cache *cache;
  CHECK(kd_cubin_cache_create(NULL, &cache));
  kd_session *s;
  CHECK(kd_session_create(NULL, &s));
  int on_gpu = kd_session_backend(s) == KD_BACKEND_CUDA, sm = 90;
  if (on_gpu) {
    kd_device_info info;
    CHECK(kd_session_device_info(s, &info));
    sm = info.cc_major * 10 + info.cc_minor;
  }
  printf("kdag dx_cholesky: MathDx %s, libmathdx %s\n", mdx.headers_version, mdx.libmathdx_version);
  kd_binary *cubin;
  kd_build_report rep;
  CHECK(dx_build_cholesky(cache, sm, &cubin, &rep));
  kd_launch_config cf = {{0}, {0}, 0, 0}, cs = {{0}, {0}, 0, 0};
  CHECK(dx_launch_config(cubin, "dx_potrf_launch", BATCH, &cf));
  CHECK(dx_launch_config(cubin, "dx_potrs_launch", BATCH, &cs));
  printf("module %s (NVRTC %.0f ms, nvJitLink %.0f ms, total %.1f ms); potrf block %u, %u bytes shared; "
         "solve %u bytes shared\n",
         rep.origin == KD_BUILD_COMPILED ? "compiled and linked" : rep.origin == KD_BUILD_DISK ? "loaded from the disk cache" : "from memory",
         rep.compile_ms, rep.link_ms, rep.total_ms, cf.block[0], cf.shared_bytes, cs.shared_bytes);
  if (!on_gpu) {
    printf("kernels built, not run: %s\n", kd_session_backend_reason(s));
    kd_binary_destroy(cubin);
    kd_session_destroy(s);
    kd_cubin_cache_destroy(cache);
    return dx_require_gpu();
  }

  /* Symmetric, diagonally dominant, so positive definite. */
  double *a = malloc(8 * MAT * BATCH), *b = malloc(8 * DX_N * BATCH), *x = malloc(8 * DX_N * BATCH);
  int *info = malloc(sizeof(int) * BATCH);
  if (!a || !b || !x || !info) return fprintf(stderr, "out of memory\n"), 1;
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  for (size_t p = 0; p < BATCH; ++p) {
    double *m = a + p * MAT;
    for (int j = 0; j < DX_N; ++j) {
      for (int i = 0; i < j; ++i) m[j * DX_N + i] = m[i * DX_N + j] = 0.5 * urand(&seed);
      m[j * DX_N + j] = DX_N;
    }
    for (int i = 0; i < DX_N; ++i) b[p * DX_N + i] = urand(&seed);
  }
  kd_module mod;
  kd_function potrf, potrs;
  CHECK(dx_load_module(s, cubin, &mod));
  CHECK(kd_module_function(s, mod, "dx_potrf_batched", &potrf));
  CHECK(kd_module_function(s, mod, "dx_potrs_batched", &potrs));
  kd_tensor_desc dm = {.dtype = KD_F64, .rank = 3, .shape = {DX_N, DX_N, BATCH}};
  kd_tensor_desc dv = {.dtype = KD_F64, .rank = 2, .shape = {DX_N, BATCH}};
  kd_tensor_desc di = {.dtype = KD_I32, .rank = 1, .shape = {BATCH}};
  kd_tensor ta, tx, ti;
  CHECK(kd_tensor_from_host(s, &dm, a, 8 * MAT * BATCH, &ta));
  CHECK(kd_tensor_from_host(s, &dv, b, 8 * DX_N * BATCH, &tx)); /* b, solved in place into x */
  CHECK(kd_tensor_create(s, &di, &ti));
  kd_graph *g;
  kd_sink *sx, *si;
  CHECK(kd_graph_create(s, &g));
  kd_garg fargs[] = {kd_g_inout(kd_whole(ta)), kd_g_out(kd_whole(ti)), kd_g_value(kd_arg_i32(BATCH))};
  CHECK(kd_graph_kernel(g, "A = L L^T (cuSOLVERDx potrf)", potrf, &cf, fargs, 3, NULL));
  kd_garg sargs[] = {kd_g_inout(kd_whole(tx)), kd_g_in(kd_whole(ta)), kd_g_value(kd_arg_i32(BATCH))};
  /* Reads the factor: kdag orders it after potrf (read-after-write on A). */
  CHECK(kd_graph_kernel(g, "x = L^-T L^-1 b (cuSOLVERDx trsm)", potrs, &cs, sargs, 3, NULL));
  CHECK(kd_graph_sink(g, "x to host", tx, x, 8 * DX_N * BATCH, &sx));
  CHECK(kd_graph_sink(g, "info to host", ti, info, sizeof(int) * BATCH, &si));
  CHECK(kd_graph_submit(g, NULL));
  CHECK(kd_sink_wait(sx));
  CHECK(kd_sink_wait(si));

  int failed = 0;
  for (size_t p = 0; p < BATCH; ++p) failed += info[p] != 0;
  double worst = dx_residual(a, b, x, BATCH);
  int ok = failed == 0 && worst <= 1e-12;
  printf("%d systems, %d factorizations failed, worst ||A x - b|| / ||b|| = %.3g (tolerance 1e-12): %s\n",
         BATCH, failed, worst, ok ? "matches the host reference" : "MISMATCH");
  kd_graph_destroy(g);
  kd_tensor_release(s, ta);
  kd_tensor_release(s, tx);
  kd_tensor_release(s, ti);
  kd_module_release(s, mod);
  kd_binary_destroy(cubin);
  free(a), free(b), free(x), free(info);
  kd_session_destroy(s);
  kd_cubin_cache_destroy(cache);
  return ok ? 0 : 1;
}
