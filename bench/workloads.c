/* SPDX-License-Identifier: Apache-2.0 */
/* Pipelines written as a user would write them (bench/workloads.h). */
#include "bench/workloads.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/dx_kernels.h"
#include "kernels/host.h"

/* ---- the user kernels ----------------------------------------------------- */

/* Each kernel waits for its grid dependency before it touches memory, so
 * kdag may launch it programmatically (KD_LAUNCH_PDL, docs/pdl.md); before
 * sm_90, and without a programmatic launch, the wait does nothing. */
#define KB_WL_PDL_WAIT                                                            \
  "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n"                         \
  "#define PDL_WAIT() asm volatile(\"griddepcontrol.wait;\" ::: \"memory\")\n" \
  "#else\n"                                                                     \
  "#define PDL_WAIT()\n"                                                        \
  "#endif\n"

static const char jacobi_source[] =
    KB_WL_PDL_WAIT
    "extern \"C\" __global__ void jacobi_step(float *out, const float *in, int n) { PDL_WAIT();\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x + 1, j = blockIdx.y * blockDim.y + threadIdx.y + 1;\n"
    "  if (i >= n - 1 || j >= n - 1) return;\n"
    "  long long c = (long long)j * n + i;\n"
    "  out[c] = 0.25f * ((in[c - 1] + in[c + 1]) + (in[c - n] + in[c + n]));\n"
    "}\n";

static const char cg_source[] =
    KB_WL_PDL_WAIT
    "extern \"C\" __global__ void poisson_apply(float *ap, const float *p, int n) { PDL_WAIT();\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y;\n"
    "  if (i >= n || j >= n) return;\n"
    "  long long c = (long long)j * n + i;\n"
    "  float v = 4.0f * p[c];\n"
    "  if (i > 0) v -= p[c - 1];\n"
    "  if (i < n - 1) v -= p[c + 1];\n"
    "  if (j > 0) v -= p[c - n];\n"
    "  if (j < n - 1) v -= p[c + n];\n"
    "  ap[c] = v;\n"
    "}\n"
    /* One block of 256: slot t sums a[i] b[i] for i = t, t + 256, ... in
     * order, then a fixed tree. */
    "extern \"C\" __global__ void dot(float *out, const float *a, const float *b, int len) { PDL_WAIT();\n"
    "  __shared__ float s[256];\n"
    "  int t = threadIdx.x;\n"
    "  float v = 0.0f;\n"
    "  for (int i = t; i < len; i += 256) v += a[i] * b[i];\n"
    "  s[t] = v;\n"
    "  __syncthreads();\n"
    "  for (int h = 128; h > 0; h >>= 1) {\n"
    "    if (t < h) s[t] += s[t + h];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (t == 0) *out = s[0];\n"
    "}\n"
    "extern \"C\" __global__ void cg_alpha(float *alpha, const float *rr, const float *pap) { PDL_WAIT(); *alpha = *rr / *pap; }\n"
    "extern \"C\" __global__ void cg_update(float *x, float *r, const float *p, const float *ap, const float *alpha,\n"
    "                                       int len) { PDL_WAIT();\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= len) return;\n"
    "  float a = *alpha;\n"
    "  x[i] = x[i] + a * p[i];\n"
    "  r[i] = r[i] - a * ap[i];\n"
    "}\n"
    "extern \"C\" __global__ void cg_beta(float *beta, float *rr, const float *rrn) { PDL_WAIT();\n"
    "  *beta = *rrn / *rr;\n"
    "  *rr = *rrn;\n"
    "}\n"
    "extern \"C\" __global__ void cg_direction(float *p, const float *r, const float *beta, int len) { PDL_WAIT();\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < len) p[i] = r[i] + *beta * p[i];\n"
    "}\n";

static const char image_source[] =
    KB_WL_PDL_WAIT
    "__device__ int at(const int *img, int w, int h, int x, int y) {\n"
    "  x = x < 0 ? 0 : x >= w ? w - 1 : x;\n"
    "  y = y < 0 ? 0 : y >= h ? h - 1 : y;\n"
    "  return img[(long long)y * w + x];\n"
    "}\n"
    "extern \"C\" __global__ void blur3(int *out, const int *in, int w, int h) { PDL_WAIT();\n"
    "  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;\n"
    "  if (x >= w || y >= h) return;\n"
    "  int v = 0;\n"
    "  for (int dy = -1; dy <= 1; ++dy)\n"
    "    for (int dx = -1; dx <= 1; ++dx) v += at(in, w, h, x + dx, y + dy);\n"
    "  out[(long long)y * w + x] = v;\n"
    "}\n"
    "extern \"C\" __global__ void gradient(int *out, const int *in, int w, int h) { PDL_WAIT();\n"
    "  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;\n"
    "  if (x >= w || y >= h) return;\n"
    "  int gx = at(in, w, h, x + 1, y) - at(in, w, h, x - 1, y), gy = at(in, w, h, x, y + 1) - at(in, w, h, x, y - 1);\n"
    "  out[(long long)y * w + x] = (gx < 0 ? -gx : gx) + (gy < 0 ? -gy : gy);\n"
    "}\n"
    "extern \"C\" __global__ void threshold(int *mask, const int *grad, int t, int len) { PDL_WAIT();\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < len) mask[i] = grad[i] > t;\n"
    "}\n"
    /* One block: counts in shared memory, then written out whole. */
    "extern \"C\" __global__ void histogram(int *hist, const int *img, const int *mask, int len, int bins, int shift) { PDL_WAIT();\n"
    "  __shared__ int c[256];\n"
    "  for (int b = threadIdx.x; b < bins; b += blockDim.x) c[b] = 0;\n"
    "  __syncthreads();\n"
    "  for (int i = threadIdx.x; i < len; i += blockDim.x)\n"
    "    if (mask[i]) atomicAdd(&c[img[i] >> shift], 1);\n"
    "  __syncthreads();\n"
    "  for (int b = threadIdx.x; b < bins; b += blockDim.x) hist[b] = c[b];\n"
    "}\n";

#define IMAGE_THRESHOLD 200
#define IMAGE_BINS 64
#define IMAGE_SHIFT 6 /* a blur sums 9 pixels of 0..255: at most 2295, bin 35 */

const char *kb_wl_source(kb_wl_kind kind) {
  switch (kind) {
  case KB_WL_JACOBI_KERNEL: return jacobi_source;
  case KB_WL_CG: return cg_source;
  case KB_WL_IMAGE: return image_source;
  default: return NULL;
  }
}

static uint32_t blocks(int64_t n, uint32_t per) { return (uint32_t)((n + per - 1) / per); }

kb_wl_launch_cfg kb_wl_config(const kb_wl_spec *spec, const char *kernel, int64_t elements) {
  kb_wl_launch_cfg c = {{1, 1, 1}, {1, 1, 1}};
  int64_t n = spec->n;
  if (!strcmp(kernel, "jacobi_step")) {
    c.block[0] = 32, c.block[1] = 8;
    c.grid[0] = blocks(n - 2, 32), c.grid[1] = blocks(n - 2, 8);
  } else if (!strcmp(kernel, "poisson_apply") || !strcmp(kernel, "blur3") || !strcmp(kernel, "gradient")) {
    c.block[0] = 32, c.block[1] = 8;
    c.grid[0] = blocks(n, 32), c.grid[1] = blocks(n, 8);
  } else if (!strcmp(kernel, "dot")) {
    c.block[0] = 256;
  } else if (!strcmp(kernel, "histogram")) {
    c.block[0] = 1024;
  } else if (!strcmp(kernel, "cg_alpha") || !strcmp(kernel, "cg_beta")) {
    /* one thread */
  } else { /* cg_update, cg_direction, threshold: one thread an element */
    c.block[0] = 256;
    c.grid[0] = blocks(elements, 256);
  }
  return c;
}

int64_t kb_wl_nodes(const kb_wl_spec *spec) {
  switch (spec->kind) {
  case KB_WL_JACOBI: return 4 * (int64_t)spec->iters;
  case KB_WL_JACOBI_KERNEL: return spec->iters;
  case KB_WL_CG: return 7 * (int64_t)spec->iters;
  case KB_WL_IMAGE: return 4 * (int64_t)spec->iters * spec->batch;
  case KB_WL_CHOLESKY: return 4 * (int64_t)spec->iters;
  }
  return 0;
}

static int fail(char *why, size_t cap, const char *what) {
  snprintf(why, cap, "%s: %s", what, kd_last_error());
  return -1;
}

int kb_wl_spec_check(const kb_wl_spec *spec, char *why, size_t cap) {
  if (spec->kind < KB_WL_JACOBI || spec->kind > KB_WL_CHOLESKY)
    return snprintf(why, cap, "workload kind %d is not one of 1..5", (int)spec->kind), -1;
  if (spec->kind == KB_WL_CHOLESKY && (spec->n != DX_N || spec->batch < 1))
    return snprintf(why, cap, "cholesky: n = %lld must be %d and batch at least 1", (long long)spec->n, DX_N), -1;
  if (spec->n < 3 || spec->n > 65536) return snprintf(why, cap, "n = %lld: 3..65536", (long long)spec->n), -1;
  if (spec->iters < 1) return snprintf(why, cap, "iters = %d: at least 1", spec->iters), -1;
  if (spec->kind == KB_WL_IMAGE && (spec->batch < 1 || spec->batch > 64))
    return snprintf(why, cap, "batch = %d: 1..64", spec->batch), -1;
  return 0;
}

/* ---- host twins of the kernels ---------------------------------------------
 * The same arithmetic in the same order as the CUDA source above. */

static void host_jacobi_step(float *out, const float *in, int n) {
  for (int j = 1; j < n - 1; ++j)
    for (int i = 1; i < n - 1; ++i) {
      int64_t c = (int64_t)j * n + i;
      out[c] = 0.25f * ((in[c - 1] + in[c + 1]) + (in[c - n] + in[c + n]));
    }
}

static void host_poisson_apply(float *ap, const float *p, int n) {
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) {
      int64_t c = (int64_t)j * n + i;
      float v = 4.0f * p[c];
      if (i > 0) v -= p[c - 1];
      if (i < n - 1) v -= p[c + 1];
      if (j > 0) v -= p[c - n];
      if (j < n - 1) v -= p[c + n];
      ap[c] = v;
    }
}

static void host_dot(float *out, const float *a, const float *b, int len) {
  float s[256];
  for (int t = 0; t < 256; ++t) {
    float v = 0.0f;
    for (int i = t; i < len; i += 256) {
      float prod = a[i] * b[i]; /* rounded, then added: --fmad=false */
      v += prod;
    }
    s[t] = v;
  }
  for (int h = 128; h > 0; h >>= 1)
    for (int t = 0; t < h; ++t) s[t] += s[t + h];
  *out = s[0];
}

static void host_cg_alpha(float *alpha, const float *rr, const float *pap) { *alpha = *rr / *pap; }

static void host_cg_update(float *x, float *r, const float *p, const float *ap, const float *alpha, int len) {
  float a = *alpha;
  for (int i = 0; i < len; ++i) {
    float ax = a * p[i], ar = a * ap[i];
    x[i] = x[i] + ax;
    r[i] = r[i] - ar;
  }
}

static void host_cg_beta(float *beta, float *rr, const float *rrn) {
  *beta = *rrn / *rr;
  *rr = *rrn;
}

static void host_cg_direction(float *p, const float *r, const float *beta, int len) {
  for (int i = 0; i < len; ++i) {
    float bp = *beta * p[i];
    p[i] = r[i] + bp;
  }
}

static int pixel(const int32_t *img, int w, int h, int x, int y) {
  x = x < 0 ? 0 : x >= w ? w - 1 : x;
  y = y < 0 ? 0 : y >= h ? h - 1 : y;
  return img[(int64_t)y * w + x];
}

static void host_blur3(int32_t *out, const int32_t *in, int w, int h) {
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      int v = 0;
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) v += pixel(in, w, h, x + dx, y + dy);
      out[(int64_t)y * w + x] = v;
    }
}

static void host_gradient(int32_t *out, const int32_t *in, int w, int h) {
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      int gx = pixel(in, w, h, x + 1, y) - pixel(in, w, h, x - 1, y);
      int gy = pixel(in, w, h, x, y + 1) - pixel(in, w, h, x, y - 1);
      out[(int64_t)y * w + x] = (gx < 0 ? -gx : gx) + (gy < 0 ? -gy : gy);
    }
}

static void host_threshold(int32_t *mask, const int32_t *grad, int t, int len) {
  for (int i = 0; i < len; ++i) mask[i] = grad[i] > t;
}

static void host_histogram(int32_t *hist, const int32_t *img, const int32_t *mask, int len, int bins, int shift) {
  memset(hist, 0, (size_t)bins * sizeof *hist);
  for (int i = 0; i < len; ++i)
    if (mask[i]) hist[img[i] >> shift]++;
}

/* Cholesky of each 32 x 32 column-major matrix in place (L in the lower
 * triangle), as dx_potrf_batched; info 0, or the failing column + 1. */
static void host_potrf(double *a, int32_t *info, int batches) {
  for (int p = 0; p < batches; ++p) {
    double *m = a + (size_t)p * DX_N * DX_N;
    info[p] = 0;
    for (int j = 0; j < DX_N && !info[p]; ++j) {
      double d = m[j * DX_N + j];
      for (int k = 0; k < j; ++k) d -= m[k * DX_N + j] * m[k * DX_N + j];
      if (!(d > 0)) {
        info[p] = j + 1;
        break;
      }
      d = sqrt(d);
      m[j * DX_N + j] = d;
      for (int i = j + 1; i < DX_N; ++i) {
        double v = m[j * DX_N + i];
        for (int k = 0; k < j; ++k) v -= m[k * DX_N + i] * m[k * DX_N + j];
        m[j * DX_N + i] = v / d;
      }
    }
  }
}

/* L L^T x = b in place of b, as dx_potrs_batched. */
static void host_potrs(double *x, const double *l, int batches) {
  for (int p = 0; p < batches; ++p) {
    const double *m = l + (size_t)p * DX_N * DX_N;
    double *v = x + (size_t)p * DX_N;
    for (int i = 0; i < DX_N; ++i) { /* L y = b */
      for (int k = 0; k < i; ++k) v[i] -= m[k * DX_N + i] * v[k];
      v[i] /= m[i * DX_N + i];
    }
    for (int i = DX_N - 1; i >= 0; --i) { /* L^T x = y */
      for (int k = i + 1; k < DX_N; ++k) v[i] -= m[i * DX_N + k] * v[k];
      v[i] /= m[i * DX_N + i];
    }
  }
}

/* The same, called with a launch's parameters (each points at its bytes;
 * a device pointer is a host address on a driver that runs them so). */
#define P(T, i) (*(T *)params[i])
static void emu_jacobi_step(void *const *params) { host_jacobi_step(P(float *, 0), P(const float *, 1), P(int, 2)); }
static void emu_poisson_apply(void *const *params) {
  host_poisson_apply(P(float *, 0), P(const float *, 1), P(int, 2));
}
static void emu_dot(void *const *params) {
  host_dot(P(float *, 0), P(const float *, 1), P(const float *, 2), P(int, 3));
}
static void emu_cg_alpha(void *const *params) {
  host_cg_alpha(P(float *, 0), P(const float *, 1), P(const float *, 2));
}
static void emu_cg_update(void *const *params) {
  host_cg_update(P(float *, 0), P(float *, 1), P(const float *, 2), P(const float *, 3), P(const float *, 4),
                 P(int, 5));
}
static void emu_cg_beta(void *const *params) { host_cg_beta(P(float *, 0), P(float *, 1), P(const float *, 2)); }
static void emu_cg_direction(void *const *params) {
  host_cg_direction(P(float *, 0), P(const float *, 1), P(const float *, 2), P(int, 3));
}
static void emu_blur3(void *const *params) {
  host_blur3(P(int32_t *, 0), P(const int32_t *, 1), P(int, 2), P(int, 3));
}
static void emu_gradient(void *const *params) {
  host_gradient(P(int32_t *, 0), P(const int32_t *, 1), P(int, 2), P(int, 3));
}
static void emu_threshold(void *const *params) {
  host_threshold(P(int32_t *, 0), P(const int32_t *, 1), P(int, 2), P(int, 3));
}
static void emu_histogram(void *const *params) {
  host_histogram(P(int32_t *, 0), P(const int32_t *, 1), P(const int32_t *, 2), P(int, 3), P(int, 4), P(int, 5));
}
/* kdag's built-in kernels (kernels/builtins.cu ABI): views by value. */
static void emu_add_f32(void *const *params) {
  kd_host_add(KD_K_F32, P(kd_kview, 0), P(kd_kview, 1), P(kd_kview, 2));
}
static void emu_axpy_f32(void *const *params) { kd_host_axpy(KD_K_F32, P(kd_kview, 0), P(kd_kview, 1), P(double, 2)); }
static void emu_scale_f32(void *const *params) { kd_host_scale(KD_K_F32, P(kd_kview, 0), P(double, 1)); }
static void emu_copy_e8(void *const *params) { kd_host_copy(8, P(kd_kview, 0), P(kd_kview, 1)); }
static void emu_potrf(void *const *params) { host_potrf(P(double *, 0), P(int32_t *, 1), P(int, 2)); }
static void emu_potrs(void *const *params) { host_potrs(P(double *, 0), P(const double *, 1), P(int, 2)); }
#undef P

int kb_wl_register_host_kernels(kb_wl_kind kind, kb_wl_register_fn *reg) {
  enum { PTR = 8, INT = 4, VIEW = sizeof(kd_kview), DBL = 8 };
  static const struct {
    kb_wl_kind kind;
    const char *name;
    uint32_t count, sizes[6];
    kb_wl_host_kernel *fn;
  } k[] = {
      {KB_WL_JACOBI, "kd_add_f32", 3, {VIEW, VIEW, VIEW}, emu_add_f32},
      {KB_WL_JACOBI, "kd_axpy_f32", 3, {VIEW, VIEW, DBL}, emu_axpy_f32},
      {KB_WL_JACOBI, "kd_scale_f32", 2, {VIEW, DBL}, emu_scale_f32},
      {KB_WL_JACOBI_KERNEL, "jacobi_step", 3, {PTR, PTR, INT}, emu_jacobi_step},
      {KB_WL_CG, "poisson_apply", 3, {PTR, PTR, INT}, emu_poisson_apply},
      {KB_WL_CG, "dot", 4, {PTR, PTR, PTR, INT}, emu_dot},
      {KB_WL_CG, "cg_alpha", 3, {PTR, PTR, PTR}, emu_cg_alpha},
      {KB_WL_CG, "cg_update", 6, {PTR, PTR, PTR, PTR, PTR, INT}, emu_cg_update},
      {KB_WL_CG, "cg_beta", 3, {PTR, PTR, PTR}, emu_cg_beta},
      {KB_WL_CG, "cg_direction", 4, {PTR, PTR, PTR, INT}, emu_cg_direction},
      {KB_WL_IMAGE, "blur3", 4, {PTR, PTR, INT, INT}, emu_blur3},
      {KB_WL_IMAGE, "gradient", 4, {PTR, PTR, INT, INT}, emu_gradient},
      {KB_WL_IMAGE, "threshold", 4, {PTR, PTR, INT, INT}, emu_threshold},
      {KB_WL_IMAGE, "histogram", 6, {PTR, PTR, PTR, INT, INT, INT}, emu_histogram},
      {KB_WL_CHOLESKY, "kd_copy_e8", 2, {VIEW, VIEW}, emu_copy_e8},
      {KB_WL_CHOLESKY, "dx_potrf_batched", 3, {PTR, PTR, INT}, emu_potrf},
      {KB_WL_CHOLESKY, "dx_potrs_batched", 3, {PTR, PTR, INT}, emu_potrs},
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i)
    if (k[i].kind == kind && !reg(k[i].name, k[i].count, k[i].sizes, k[i].fn)) return -1;
  return 0;
}

/* ---- the host reference ------------------------------------------------------ */

/* Tensors, in kb_wl_create's order: jacobi x, y; cg x, r, p, ap (n*n) and
 * the scalars rr, pap, rrn, alpha, beta (one tensor of 5); image the
 * images, blurred, gradients, masks (w*h*batch) and histograms. */
enum { SC_RR, SC_PAP, SC_RRN, SC_ALPHA, SC_BETA, SC_COUNT };

/* Cholesky: the originals A0 (32 x 32 x batch f64), the factored A, the
 * right-hand sides b0 (32 x batch), the solutions x, and info (batch). */
enum { CH_A0, CH_A, CH_B0, CH_X, CH_INFO, CH_COUNT };

int kb_wl_buffers(const kb_wl_spec *spec) {
  return spec->kind == KB_WL_CG ? 5 : spec->kind == KB_WL_IMAGE ? 5 : spec->kind == KB_WL_CHOLESKY ? CH_COUNT : 2;
}

size_t kb_wl_buffer_bytes(const kb_wl_spec *spec, int i) {
  size_t plane = (size_t)spec->n * (size_t)spec->n * 4;
  if (spec->kind == KB_WL_CHOLESKY) {
    size_t b = (size_t)spec->batch;
    return i == CH_INFO ? b * 4 : i <= CH_A ? b * DX_N * DX_N * 8 : b * DX_N * 8;
  }
  if (spec->kind == KB_WL_CG && i == 4) return SC_COUNT * sizeof(float);
  if (spec->kind == KB_WL_IMAGE) return i == 4 ? (size_t)IMAGE_BINS * spec->batch * 4 : plane * (size_t)spec->batch;
  return plane;
}

unsigned kb_wl_results(const kb_wl_spec *spec) {
  switch (spec->kind) {
  case KB_WL_CG: return 1u << 0 | 1u << 1 | 1u << 4; /* x, r, the scalars */
  case KB_WL_IMAGE: return 1u << 1 | 1u << 2 | 1u << 3 | 1u << 4;
  case KB_WL_CHOLESKY: return 1u << CH_X | 1u << CH_INFO;
  default: return 3; /* both grids */
  }
}

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

void kb_wl_init(const kb_wl_spec *spec, void **b) {
  int64_t n = spec->n, plane = n * n;
  uint64_t seed = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
  if (spec->kind == KB_WL_JACOBI || spec->kind == KB_WL_JACOBI_KERNEL) {
    float *x = b[0], *y = b[1];
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < n; ++i) {
        int edge = i == 0 || j == 0 || i == n - 1 || j == n - 1;
        /* a hot left edge, a cold rest of the boundary, noise inside */
        x[j * n + i] = edge ? (j == 0 ? 1.0f : 0.0f) : (float)(next(&seed) >> 40) / (float)(1 << 24);
      }
    memcpy(y, x, (size_t)plane * sizeof *y);
  } else if (spec->kind == KB_WL_CG) {
    float *x = b[0], *r = b[1], *p = b[2], *ap = b[3], *sc = b[4];
    for (int64_t i = 0; i < plane; ++i) {
      x[i] = 0.0f;
      r[i] = p[i] = (float)(next(&seed) >> 40) / (float)(1 << 24) - 0.5f;
      ap[i] = 0.0f;
    }
    memset(sc, 0, SC_COUNT * sizeof *sc);
    host_dot(&sc[SC_RR], r, r, (int)plane);
  } else if (spec->kind == KB_WL_IMAGE) {
    int32_t *img = b[0];
    for (int64_t i = 0; i < plane * spec->batch; ++i) img[i] = (int32_t)(next(&seed) >> 56);
    for (int k = 1; k < 5; ++k) memset(b[k], 0, kb_wl_buffer_bytes(spec, k));
  } else { /* symmetric, diagonally dominant: positive definite */
    double *a0 = b[CH_A0], *b0 = b[CH_B0];
    for (int p = 0; p < spec->batch; ++p) {
      double *m = a0 + (size_t)p * DX_N * DX_N;
      for (int j = 0; j < DX_N; ++j) {
        for (int i = 0; i < j; ++i) m[j * DX_N + i] = m[i * DX_N + j] = (double)(next(&seed) >> 11) / 0x1p53 - 0.5;
        m[j * DX_N + j] = DX_N;
      }
      for (int i = 0; i < DX_N; ++i) b0[p * DX_N + i] = (double)(next(&seed) >> 11) / 0x1p53 * 2 - 1;
    }
    memcpy(b[CH_A], a0, kb_wl_buffer_bytes(spec, CH_A));
    memcpy(b[CH_X], b0, kb_wl_buffer_bytes(spec, CH_X));
    memset(b[CH_INFO], 0, kb_wl_buffer_bytes(spec, CH_INFO));
  }
}

static void jacobi_builtin_sweep(float *out, const float *in, int64_t n) {
  for (int64_t j = 1; j < n - 1; ++j)
    for (int64_t i = 1; i < n - 1; ++i) {
      int64_t c = j * n + i;
      float v = in[c - 1] + in[c + 1]; /* add(up, down) */
      v = v + in[c - n];               /* axpy(left, 1): 1 * x is exact */
      v = v + in[c + n];               /* axpy(right, 1) */
      out[c] = 0.25f * v;              /* scale */
    }
}

void kb_wl_run(const kb_wl_spec *spec, void **b, int64_t submissions) {
  int n = (int)spec->n, plane = n * n;
  for (int64_t s = 0; s < submissions; ++s)
    for (int it = 0; it < spec->iters; ++it) {
      switch (spec->kind) {
      case KB_WL_JACOBI:
        jacobi_builtin_sweep(b[1 - it % 2], b[it % 2], n);
        break;
      case KB_WL_JACOBI_KERNEL:
        host_jacobi_step(b[1 - it % 2], b[it % 2], n);
        break;
      case KB_WL_CG: {
        float *x = b[0], *r = b[1], *p = b[2], *ap = b[3], *sc = b[4];
        host_poisson_apply(ap, p, n);
        host_dot(&sc[SC_PAP], p, ap, plane);
        host_cg_alpha(&sc[SC_ALPHA], &sc[SC_RR], &sc[SC_PAP]);
        host_cg_update(x, r, p, ap, &sc[SC_ALPHA], plane);
        host_dot(&sc[SC_RRN], r, r, plane);
        host_cg_beta(&sc[SC_BETA], &sc[SC_RR], &sc[SC_RRN]);
        host_cg_direction(p, r, &sc[SC_BETA], plane);
        break;
      }
      case KB_WL_IMAGE:
        for (int k = 0; k < spec->batch; ++k) {
          int32_t *img = (int32_t *)b[0] + (int64_t)k * plane, *blur = (int32_t *)b[1] + (int64_t)k * plane;
          int32_t *grad = (int32_t *)b[2] + (int64_t)k * plane, *mask = (int32_t *)b[3] + (int64_t)k * plane;
          host_blur3(blur, img, n, n);
          host_gradient(grad, blur, n, n);
          host_threshold(mask, grad, IMAGE_THRESHOLD, plane);
          host_histogram((int32_t *)b[4] + k * IMAGE_BINS, blur, mask, plane, IMAGE_BINS, IMAGE_SHIFT);
        }
        break;
      case KB_WL_CHOLESKY:
        memcpy(b[CH_A], b[CH_A0], kb_wl_buffer_bytes(spec, CH_A));
        memcpy(b[CH_X], b[CH_B0], kb_wl_buffer_bytes(spec, CH_X));
        host_potrf(b[CH_A], b[CH_INFO], spec->batch);
        host_potrs(b[CH_X], b[CH_A], spec->batch);
        break;
      }
    }
}

static struct {
  kb_wl_spec spec;
  int64_t submissions;
  void *buffers[8];
} g_reference;

void *const *kb_wl_reference(const kb_wl_spec *spec, int64_t submissions) {
  if (g_reference.buffers[0] && !memcmp(&g_reference.spec, spec, sizeof *spec) &&
      g_reference.submissions == submissions)
    return g_reference.buffers;
  for (int i = 0; i < 8; ++i) free(g_reference.buffers[i]);
  memset(&g_reference, 0, sizeof g_reference);
  int count = kb_wl_buffers(spec);
  for (int i = 0; i < count; ++i)
    if (!(g_reference.buffers[i] = malloc(kb_wl_buffer_bytes(spec, i)))) {
      for (int k = 0; k < i; ++k) free(g_reference.buffers[k]);
      memset(&g_reference, 0, sizeof g_reference);
      return NULL;
    }
  kb_wl_init(spec, g_reference.buffers);
  kb_wl_run(spec, g_reference.buffers, submissions);
  g_reference.spec = *spec;
  g_reference.submissions = submissions;
  return g_reference.buffers;
}

/* ---- on a session ----------------------------------------------------------- */

typedef struct compile_job {
  kb_wl *w;
  const char *const *names;
  int count;
} compile_job;

static kd_status compile(kd_raw *raw, void *user) {
  compile_job *j = user;
  const char *opts[] = {KB_WL_FMAD};
  kd_nvrtc_options o = {.struct_size = sizeof(kd_nvrtc_options), .extra_flags = opts, .extra_flag_count = 1, .program_name = "workload.cu"};
  kd_status st = kd_raw_compile_nvrtc(raw, kb_wl_source(j->w->spec.kind), &o, &j->w->m);
  if (st) return st;
  j->w->has_module = 1;
  for (int i = 0; i < j->count && !st; ++i) st = kd_module_function(kd_raw_session(raw), j->w->m, j->names[i], &j->w->fn[i]);
  return st;
}

int kb_wl_cholesky_module(int sm, int batch, kd_binary **out, kd_launch_config *potrf, kd_launch_config *potrs,
                          char *why, size_t cap) {
  *out = NULL;
  kd_mathdx_info mdx;
  kd_status st = kd_mathdx_find(&mdx);
  if (st == KD_ERR_LIBRARY_MISSING || (!st && !*mdx.libmathdx_path))
    return snprintf(why, cap, "MathDx is not installed (tools/install-mathdx.sh): %s",
                    st ? kd_last_error() : "no libmathdx.so.0"), 1;
  kd_cubin_cache *cache = NULL;
  kd_build_report rep;
  if (!st) st = kd_cubin_cache_create(NULL, &cache);
  if (!st) st = dx_build_cholesky(cache, sm, out, &rep);
  if (!st) st = dx_launch_config(*out, "dx_potrf_launch", (uint32_t)batch, potrf);
  if (!st) st = dx_launch_config(*out, "dx_potrs_launch", (uint32_t)batch, potrs);
  kd_cubin_cache_destroy(cache);
  if (!st) return 0;
  kd_binary_destroy(*out);
  *out = NULL;
  return fail(why, cap, "building the Cholesky module");
}

static const char *const cg_kernels[] = {"poisson_apply", "dot", "cg_alpha", "cg_update", "cg_beta", "cg_direction"};
static const char *const image_kernels[] = {"blur3", "gradient", "threshold", "histogram"};
static const char *const jacobi_kernels[] = {"jacobi_step"};
enum { K_APPLY, K_DOT, K_ALPHA, K_UPDATE, K_BETA, K_DIRECTION };
enum { K_BLUR, K_GRADIENT, K_THRESHOLD, K_HISTOGRAM };

/* Builds the Cholesky module for the session's GPU and loads it: 0, 1
 * without MathDx, -1. */
static int cholesky_module(kb_wl *w, char *why, size_t cap) {
  kd_device_info info;
  if (kd_session_device_info(w->s, &info)) return fail(why, cap, "the Cholesky workload needs a CUDA session");
  kd_binary *cubin;
  int rc = kb_wl_cholesky_module(info.cc_major * 10 + info.cc_minor, w->spec.batch, &cubin, &w->dx[0], &w->dx[1],
                                 why, cap);
  if (rc) return rc;
  if (dx_load_module(w->s, cubin, &w->m)) rc = fail(why, cap, "loading the Cholesky module");
  else w->has_module = 1;
  if (!rc && (kd_module_function(w->s, w->m, "dx_potrf_batched", &w->fn[0]) ||
              kd_module_function(w->s, w->m, "dx_potrs_batched", &w->fn[1])))
    rc = fail(why, cap, "kd_module_function");
  kd_binary_destroy(cubin);
  return rc;
}

void kb_wl_destroy(kb_wl *w) {
  if (!w->s) return;
  kd_graph_destroy(w->g);
  for (int i = 0; i < w->tensors; ++i) kd_tensor_release(w->s, w->t[i]);
  if (w->has_module) kd_module_release(w->s, w->m);
  memset(w, 0, sizeof *w);
}

int kb_wl_create(kd_session *s, const kb_wl_spec *spec, kb_wl *w, char *why, size_t cap) {
  memset(w, 0, sizeof *w);
  if (kb_wl_spec_check(spec, why, cap)) return -1;
  if (spec->kind == KB_WL_CHOLESKY && kd_session_backend(s) != KD_BACKEND_CUDA)
    return snprintf(why, cap, "the Cholesky workload needs a CUDA session"), 1;
  w->spec = *spec;
  w->s = s;
  int count = kb_wl_buffers(spec);
  void *host[8] = {0};
  int rc = 0;
  for (int i = 0; i < count && !rc; ++i) rc = !(host[i] = malloc(kb_wl_buffer_bytes(spec, i)));
  if (rc) {
    snprintf(why, cap, "out of memory");
  } else {
    kb_wl_init(spec, host);
    int64_t n = spec->n;
    for (int i = 0; i < count && !rc; ++i) {
      kd_tensor_desc d = {.dtype = spec->kind == KB_WL_IMAGE ? KD_I32 : KD_F32, .rank = 2, .shape = {n, n}};
      if (spec->kind == KB_WL_CG && i == 4) d = (kd_tensor_desc){.dtype = KD_F32, .rank = 1, .shape = {SC_COUNT}};
      if (spec->kind == KB_WL_IMAGE) {
        d.rank = 3, d.shape[2] = spec->batch;
        if (i == 4) d = (kd_tensor_desc){.dtype = KD_I32, .rank = 2, .shape = {IMAGE_BINS, spec->batch}};
      }
      if (spec->kind == KB_WL_CHOLESKY) {
        static const kd_tensor_desc ch[] = {{.dtype = KD_F64, .rank = 3, .shape = {DX_N, DX_N}},
                                            {.dtype = KD_F64, .rank = 3, .shape = {DX_N, DX_N}},
                                            {.dtype = KD_F64, .rank = 2, .shape = {DX_N}},
                                            {.dtype = KD_F64, .rank = 2, .shape = {DX_N}},
                                            {.dtype = KD_I32, .rank = 1}};
        d = ch[i];
        d.shape[d.rank - 1] = spec->batch;
      }
      if (kd_tensor_from_host(s, &d, host[i], kb_wl_buffer_bytes(spec, i), &w->t[i]))
        rc = fail(why, cap, "kd_tensor_from_host");
      else w->tensors++;
    }
  }
  for (int i = 0; i < count; ++i) free(host[i]);
  if (!rc && spec->kind == KB_WL_CHOLESKY) rc = cholesky_module(w, why, cap);
  if (!rc && kb_wl_source(spec->kind)) {
    compile_job j = {w, spec->kind == KB_WL_CG ? cg_kernels : spec->kind == KB_WL_IMAGE ? image_kernels : jacobi_kernels,
                     spec->kind == KB_WL_CG ? 6 : spec->kind == KB_WL_IMAGE ? 4 : 1};
    if (kd_with_raw(s, "kb_wl_create", compile, &j)) rc = fail(why, cap, "compiling the kernels");
  }
  if (!rc && kd_graph_create(s, &w->g)) rc = fail(why, cap, "kd_graph_create");
  if (!rc) rc = kb_wl_declare(w, w->g, why, cap);
  if (rc) kb_wl_destroy(w);
  return rc;
}

static kd_view grid_view(kd_tensor t, int64_t n, int64_t i0, int64_t j0) {
  kd_view v = {.tensor = t, .rank = 2, .offset = i0 + j0 * n, .shape = {n - 2, n - 2}, .strides = {1, n}};
  return v;
}

/* Element k of a rank-1 tensor: a compact view. */
static kd_view element(kd_tensor t, int64_t k) {
  kd_view v = {.tensor = t, .rank = 1, .offset = k, .shape = {1}, .strides = {1}};
  return v;
}

/* Image k of a (w, h, batch) tensor, or histogram k of a (bins, batch) one. */
static kd_view slice(kd_tensor t, int64_t len, int64_t k) {
  kd_view v = {.tensor = t, .rank = 1, .offset = k * len, .shape = {len}, .strides = {1}};
  return v;
}

static kd_status kernel(kd_graph *g, const char *name, kb_wl *w, int fn, const char *kname, int64_t elements,
                        const kd_garg *args, size_t n) {
  kb_wl_launch_cfg c = kb_wl_config(&w->spec, kname, elements);
  kd_launch_config cfg = {{c.grid[0], c.grid[1], c.grid[2]}, {c.block[0], c.block[1], c.block[2]}, 0, KD_LAUNCH_PDL};
  return kd_graph_kernel(g, name, w->fn[fn], &cfg, args, n, NULL);
}

int kb_wl_declare(kb_wl *w, kd_graph *g, char *why, size_t cap) {
  const kb_wl_spec *spec = &w->spec;
  int64_t n = spec->n, plane = n * n;
  kd_status st = KD_OK;
  for (int it = 0; it < spec->iters && !st; ++it) {
    switch (spec->kind) {
    case KB_WL_JACOBI: {
      kd_tensor a = w->t[it % 2], b = w->t[1 - it % 2];
      kd_view in = grid_view(b, n, 1, 1);
      st = kd_graph_op_add(g, "up+down", in, grid_view(a, n, 0, 1), grid_view(a, n, 2, 1), NULL);
      if (!st) st = kd_graph_op_axpy(g, "+left", in, grid_view(a, n, 1, 0), 1.0, NULL);
      if (!st) st = kd_graph_op_axpy(g, "+right", in, grid_view(a, n, 1, 2), 1.0, NULL);
      if (!st) st = kd_graph_op_scale(g, "/4", in, 0.25, NULL);
      break;
    }
    case KB_WL_JACOBI_KERNEL: {
      kd_garg args[] = {kd_g_out(kd_whole(w->t[1 - it % 2])), kd_g_in(kd_whole(w->t[it % 2])),
                        kd_g_value(kd_arg_i32((int32_t)n))};
      st = kernel(g, "sweep", w, 0, "jacobi_step", plane, args, 3);
      break;
    }
    case KB_WL_CG: {
      kd_tensor x = w->t[0], r = w->t[1], p = w->t[2], ap = w->t[3], sc = w->t[4];
      kd_view all[4] = {kd_whole(x), kd_whole(r), kd_whole(p), kd_whole(ap)};
      kd_garg apply[] = {kd_g_out(all[3]), kd_g_in(all[2]), kd_g_value(kd_arg_i32((int32_t)n))};
      kd_garg pap[] = {kd_g_out(element(sc, SC_PAP)), kd_g_in(all[2]), kd_g_in(all[3]),
                       kd_g_value(kd_arg_i32((int32_t)plane))};
      kd_garg alpha[] = {kd_g_out(element(sc, SC_ALPHA)), kd_g_in(element(sc, SC_RR)), kd_g_in(element(sc, SC_PAP))};
      kd_garg update[] = {kd_g_inout(all[0]), kd_g_inout(all[1]), kd_g_in(all[2]), kd_g_in(all[3]),
                          kd_g_in(element(sc, SC_ALPHA)), kd_g_value(kd_arg_i32((int32_t)plane))};
      kd_garg rrn[] = {kd_g_out(element(sc, SC_RRN)), kd_g_in(all[1]), kd_g_in(all[1]),
                       kd_g_value(kd_arg_i32((int32_t)plane))};
      kd_garg beta[] = {kd_g_out(element(sc, SC_BETA)), kd_g_inout(element(sc, SC_RR)), kd_g_in(element(sc, SC_RRN))};
      kd_garg dir[] = {kd_g_inout(all[2]), kd_g_in(all[1]), kd_g_in(element(sc, SC_BETA)),
                       kd_g_value(kd_arg_i32((int32_t)plane))};
      st = kernel(g, "Ap", w, K_APPLY, "poisson_apply", plane, apply, 3);
      if (!st) st = kernel(g, "pAp", w, K_DOT, "dot", plane, pap, 4);
      if (!st) st = kernel(g, "alpha", w, K_ALPHA, "cg_alpha", 1, alpha, 3);
      if (!st) st = kernel(g, "x,r", w, K_UPDATE, "cg_update", plane, update, 6);
      if (!st) st = kernel(g, "rr", w, K_DOT, "dot", plane, rrn, 4);
      if (!st) st = kernel(g, "beta", w, K_BETA, "cg_beta", 1, beta, 3);
      if (!st) st = kernel(g, "p", w, K_DIRECTION, "cg_direction", plane, dir, 4);
      break;
    }
    case KB_WL_IMAGE:
      for (int k = 0; k < spec->batch && !st; ++k) {
        kd_view img = slice(w->t[0], plane, k), blur = slice(w->t[1], plane, k), grad = slice(w->t[2], plane, k);
        kd_view mask = slice(w->t[3], plane, k), hist = slice(w->t[4], IMAGE_BINS, k);
        kd_arg side = kd_arg_i32((int32_t)n), len = kd_arg_i32((int32_t)plane);
        kd_garg b3[] = {kd_g_out(blur), kd_g_in(img), kd_g_value(side), kd_g_value(side)};
        kd_garg gr[] = {kd_g_out(grad), kd_g_in(blur), kd_g_value(side), kd_g_value(side)};
        kd_garg th[] = {kd_g_out(mask), kd_g_in(grad), kd_g_value(kd_arg_i32(IMAGE_THRESHOLD)), kd_g_value(len)};
        kd_garg hi[] = {kd_g_out(hist), kd_g_in(blur), kd_g_in(mask), kd_g_value(len),
                        kd_g_value(kd_arg_i32(IMAGE_BINS)), kd_g_value(kd_arg_i32(IMAGE_SHIFT))};
        st = kernel(g, "blur", w, K_BLUR, "blur3", plane, b3, 4);
        if (!st) st = kernel(g, "gradient", w, K_GRADIENT, "gradient", plane, gr, 4);
        if (!st) st = kernel(g, "threshold", w, K_THRESHOLD, "threshold", plane, th, 4);
        if (!st) st = kernel(g, "histogram", w, K_HISTOGRAM, "histogram", plane, hi, 6);
      }
      break;
    case KB_WL_CHOLESKY: {
      kd_tensor a0 = w->t[CH_A0], a = w->t[CH_A], b0 = w->t[CH_B0], x = w->t[CH_X], info = w->t[CH_INFO];
      kd_garg potrf[] = {kd_g_inout(kd_whole(a)), kd_g_out(kd_whole(info)), kd_g_value(kd_arg_i32(spec->batch))};
      kd_garg potrs[] = {kd_g_inout(kd_whole(x)), kd_g_in(kd_whole(a)), kd_g_value(kd_arg_i32(spec->batch))};
      st = kd_graph_op_copy(g, "A = A0", kd_whole(a), kd_whole(a0), NULL);
      if (!st) st = kd_graph_op_copy(g, "x = b0", kd_whole(x), kd_whole(b0), NULL);
      if (!st) st = kd_graph_kernel(g, "A = L L^T (cuSOLVERDx)", w->fn[0], &w->dx[0], potrf, 3, NULL);
      if (!st) st = kd_graph_kernel(g, "x = A^-1 x (cuSOLVERDx)", w->fn[1], &w->dx[1], potrs, 3, NULL);
      break;
    }
    }
  }
  return st ? fail(why, cap, "declaring the graph") : 0;
}

double kb_wl_compare(const kb_wl_spec *spec, int i, const void *got, void *const *want) {
  size_t n = kb_wl_buffer_bytes(spec, i) / 4;
  if (spec->kind == KB_WL_CHOLESKY) {
    if (i == CH_X) return dx_residual(want[CH_A0], want[CH_B0], got, (size_t)spec->batch);
    for (int p = 0; p < spec->batch; ++p)
      if (((const int32_t *)got)[p]) return 1; /* a factorization failed */
    return 0;
  }
  double worst = 0, scale = 0;
  for (size_t e = 0; e < n; ++e) {
    if (spec->kind == KB_WL_IMAGE) {
      if (((const int32_t *)got)[e] != ((const int32_t *)want[i])[e]) return 1;
      continue;
    }
    double a = ((const float *)got)[e], b = ((const float *)want[i])[e];
    double d = a > b ? a - b : b - a;
    if (d != d) return 1e300; /* NaN where the reference has none, or the other way */
    worst = d > worst ? d : worst;
    scale = (b < 0 ? -b : b) > scale ? (b < 0 ? -b : b) : scale;
  }
  return scale > 0 ? worst / scale : worst;
}

int kb_wl_check(kb_wl *w, double *max_err, char *why, size_t cap) {
  const kb_wl_spec *spec = &w->spec;
  int count = kb_wl_buffers(spec), rc = 0;
  void *got[8] = {0};
  void *const *want = kb_wl_reference(spec, w->submitted);
  for (int i = 0; i < count && !rc; ++i) rc = !(got[i] = malloc(kb_wl_buffer_bytes(spec, i)));
  if (rc || !want) {
    snprintf(why, cap, "out of memory");
    rc = -1;
  }
  double worst = 0;
  unsigned results = kb_wl_results(spec);
  for (int i = 0; i < count && !rc; ++i) {
    if (!(results >> i & 1)) continue;
    size_t bytes = kb_wl_buffer_bytes(spec, i);
    if (kd_tensor_download(w->s, w->t[i], got[i], bytes)) {
      rc = fail(why, cap, "kd_tensor_download");
      break;
    }
    double e = kb_wl_compare(spec, i, got[i], want);
    worst = e > worst ? e : worst;
  }
  *max_err = worst;
  for (int i = 0; i < count; ++i) free(got[i]);
  return rc;
}

