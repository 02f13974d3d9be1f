/* SPDX-License-Identifier: Apache-2.0 */
/* examples/dx_gemm.c — 10,000 products of 32x32 matrices (f32 and f64)
 * through a cuBLASDx kernel node in a kdag graph, checked on the host.
 *
 * The kernel (examples/dx_kernels.h) includes <cublasdx.hpp>; NVRTC
 * compiles it with -dlto and nvJitLink links it into an sm_XX CUBIN, both on
 * the CPU, through the module cache (a warm start reads the CUBIN from disk:
 * $KDAG_CACHE_DIR, else ~/.cache/kdag). Its block size and shared memory
 * come from cuBLASDx, read out of the CUBIN. Without a GPU it still builds
 * both kernels and says so; without MathDx it says how to install it. */
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

/* One precision: build, run as a graph node, compare with the host. */
static int run(kd_session *s, kd_cubin_cache *cache, const kd_mathdx_info *mdx, int sm, kd_dtype t) {
  const char *name = t == KD_F64 ? "f64" : "f32";
  size_t es = t == KD_F64 ? 8 : 4, bytes = es * MAT * BATCH;
  kd_binary *cubin;
  kd_build_report rep;
  CHECK(dx_build_gemm(cache, mdx, t, sm, &cubin, &rep));
  kd_launch_config cfg = {{0}, {0}, 0, 0};
  CHECK(dx_launch_config(cubin, "dx_gemm_launch", BATCH, &cfg));
  printf("%s: cuBLASDx kernel %s (NVRTC %.0f ms, nvJitLink %.0f ms, total %.1f ms), block %ux%ux%u, "
         "%u bytes of shared memory\n", name,
         rep.origin == KD_BUILD_COMPILED ? "compiled and linked" : rep.origin == KD_BUILD_DISK ? "loaded from the disk cache" : "from memory",
         rep.compile_ms, rep.link_ms, rep.total_ms, cfg.block[0], cfg.block[1], cfg.block[2], cfg.shared_bytes);
  if (kd_session_backend(s) != KD_BACKEND_CUDA) {
    kd_binary_destroy(cubin);
    return 0;
  }
  double *a = malloc(8 * MAT * BATCH), *b = malloc(8 * MAT * BATCH), *want = malloc(8 * MAT * BATCH);
  void *ha = malloc(bytes), *hb = malloc(bytes), *hc = malloc(bytes);
  if (!a || !b || !want || !ha || !hb || !hc) return fprintf(stderr, "out of memory\n"), 1;
  uint64_t seed = 0x2545F4914F6CDD1Dull;
  for (size_t i = 0; i < (size_t)MAT * BATCH; ++i) {
    a[i] = urand(&seed);
    b[i] = urand(&seed);
    if (t == KD_F32) a[i] = (float)a[i], b[i] = (float)b[i];
    if (t == KD_F32) ((float *)ha)[i] = (float)a[i], ((float *)hb)[i] = (float)b[i];
    else ((double *)ha)[i] = a[i], ((double *)hb)[i] = b[i];
  }
  for (size_t p = 0; p < BATCH; ++p) /* column-major C = A B */
    for (int j = 0; j < DX_N; ++j)
      for (int i = 0; i < DX_N; ++i) {
        double acc = 0;
        for (int k = 0; k < DX_N; ++k) acc += a[p * MAT + k * DX_N + i] * b[p * MAT + j * DX_N + k];
        want[p * MAT + j * DX_N + i] = acc;
      }
  kd_module mod;
  kd_function fn;
  CHECK(dx_load_module(s, cubin, &mod));
  CHECK(kd_module_function(s, mod, "dx_gemm_batched", &fn));
  kd_tensor_desc d = {.dtype = t, .rank = 3, .shape = {DX_N, DX_N, BATCH}};
  kd_tensor ta, tb, tc;
  CHECK(kd_tensor_from_host(s, &d, ha, bytes, &ta));
  CHECK(kd_tensor_from_host(s, &d, hb, bytes, &tb));
  CHECK(kd_tensor_create(s, &d, &tc));
  kd_graph *g;
  kd_sink *sink;
  CHECK(kd_graph_create(s, &g));
  kd_garg args[] = {kd_g_out(kd_whole(tc)), kd_g_in(kd_whole(ta)), kd_g_in(kd_whole(tb)),
                    kd_g_value(kd_arg_i32(BATCH))};
  /* The node's ABI is checked against the kernel (cuFuncGetParamInfo):
   * (T *c, const T *a, const T *b, int batches); one block per product. */
  CHECK(kd_graph_kernel(g, "C = A B (cuBLASDx)", fn, &cfg, args, 4, NULL));
  CHECK(kd_graph_sink(g, "C to host", tc, hc, bytes, &sink));
  CHECK(kd_graph_submit(g, NULL));
  CHECK(kd_sink_wait(sink));
  double worst = 0;
  for (size_t i = 0; i < (size_t)MAT * BATCH; ++i) {
    double got = t == KD_F32 ? ((float *)hc)[i] : ((double *)hc)[i];
    double err = fabs(got - want[i]) / (1.0 + fabs(want[i]));
    if (err > worst) worst = err;
  }
  double tol = t == KD_F32 ? 1e-4 : 1e-12;
  printf("%s: %d products, worst relative error %.3g (tolerance %.0e): %s\n", name, BATCH, worst, tol,
         worst <= tol ? "matches the host reference" : "MISMATCH");
  kd_graph_destroy(g);
  kd_tensor_release(s, ta);
  kd_tensor_release(s, tb);
  kd_tensor_release(s, tc);
  kd_module_release(s, mod);
  kd_binary_destroy(cubin);
  free(a), free(b), free(want), free(ha), free(hb), free(hc);
  return worst <= tol ? 0 : 1;
}

int main(void) {
  kd_mathdx_info mdx;
  kd_status st = kd_mathdx_find(&mdx);
  if (st == KD_ERR_LIBRARY_MISSING) {
    printf("MathDx not installed, nothing to do: %s\n", kd_last_error());
    return dx_require_gpu() ? 1 : 0;
  }
  CHECK(st);
  printf("kdag dx_gemm: MathDx %s (%s)\n", mdx.headers_version, mdx.include_dir);
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
  int bad = run(s, cache, &mdx, sm, KD_F32) || run(s, cache, &mdx, sm, KD_F64);
  if (!on_gpu && !bad) {
    printf("kernels built, not run: %s\n", kd_session_backend_reason(s));
    bad = dx_require_gpu();
  }
  kd_session_destroy(s);
  kd_cubin_cache_destroy(cache);
  return bad;
}
