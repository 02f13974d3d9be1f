/* SPDX-License-Identifier: Apache-2.0 */
/* Host lane: the host implementations of the built-in kernels against naive
 * reference loops, and the embedded builtins PTX/CUBIN/source. */
#include <math.h>
#include <stdint.h>

#include "cuda/module.h"
#include "compile/ptx.h"
#include "kdag_test.h"
#include "kernels/embedded.h"
#include "kernels/host.h"

_Static_assert(sizeof(kd_kview) == 144, "kd_kview is the 144-byte kernel parameter");
_Static_assert(sizeof(kd_kpattern) == 16, "kd_kpattern is the 16-byte kernel parameter");

/* A view of host memory p; strides NULL means compact column-major. */
static kd_kview kview(void *p, int rank, const long long *shape, const long long *strides) {
  kd_kview v;
  memset(&v, 0, sizeof v);
  v.base = (unsigned long long)(uintptr_t)p;
  v.rank = rank;
  long long s = 1;
  for (int d = 0; d < rank; ++d) {
    v.shape[d] = shape[d];
    v.strides[d] = strides ? strides[d] : s;
    s *= shape[d];
  }
  return v;
}

static kd_kview kvec(void *p, long long n) { return kview(p, 1, &n, NULL); }

/* ---- kd_kview helpers ---- */

Test(host_kernels, view_numel_and_offset_are_column_major) {
  long long shape[] = {3, 4, 5}, strides[] = {2, 7, 100};
  kd_kview v = kview(NULL, 3, shape, strides);
  cr_assert_eq(kd_kview_numel(&v), 60);
  for (long long k = 0; k < 5; ++k)
    for (long long j = 0; j < 4; ++j)
      for (long long i = 0; i < 3; ++i) {
        long long lin = i + 3 * j + 12 * k;
        cr_assert_eq(kd_kview_offset(&v, lin), 2 * i + 7 * j + 100 * k, "(%lld,%lld,%lld)", i, j, k);
      }
  kd_kview r0 = kview(NULL, 0, NULL, NULL);
  cr_assert_eq(kd_kview_numel(&r0), 1);
  cr_assert_eq(kd_kview_offset(&r0, 0), 0);
  long long zero[] = {4, 0};
  kd_kview empty = kview(NULL, 2, zero, NULL);
  cr_assert_eq(kd_kview_numel(&empty), 0);
  /* An empty view whose other dimensions multiply past 2^63 (the CUDA
   * fuzz target's find: undefined in signed arithmetic, which the
   * sanitized build of this test reports). */
  long long wide[] = {1ll << 40, 1ll << 40, 0}, ones[] = {1, 1, 1};
  kd_kview wide_empty = kview(NULL, 3, wide, ones);
  cr_assert_eq(kd_kview_numel(&wide_empty), 0);
}

/* ---- fill ---- */

Test(host_kernels, fill_every_esize_writes_only_the_view_low_bytes_first) {
  /* Byte k of the pattern (memory order) is k + 1. */
  kd_kpattern pat = {{0x0807060504030201ull, 0x100f0e0d0c0b0a09ull}};
  const size_t sizes[] = {1, 2, 4, 8, 16};
  for (size_t s = 0; s < 5; ++s) {
    size_t es = sizes[s];
    unsigned char buf[16 * 9];
    memset(buf, 0xEE, sizeof buf);
    /* Elements 1, 3, 5, 7 of a 9-element buffer. */
    long long shape = 4, stride = 2;
    kd_host_fill(es, kview(buf + es, 1, &shape, &stride), pat);
    for (size_t e = 0; e < 9; ++e) {
      int in_view = e % 2 == 1 && e <= 7;
      for (size_t k = 0; k < es; ++k) {
        unsigned char want = in_view ? (unsigned char)(k + 1) : 0xEE;
        cr_assert_eq(buf[e * es + k], want, "esize %zu element %zu byte %zu: %#x want %#x", es, e, k,
                     buf[e * es + k], want);
      }
    }
    for (size_t k = 9 * es; k < sizeof buf; ++k) cr_assert_eq(buf[k], 0xEE, "esize %zu wrote past the end", es);
  }
}

Test(host_kernels, fill_f32_value_and_rank0) {
  float x[5] = {0};
  float one = 1.5f;
  kd_kpattern pat = {{0, 0}};
  memcpy(&pat.w[0], &one, sizeof one);
  kd_host_fill(4, kvec(x, 4), pat);
  for (int i = 0; i < 4; ++i) cr_assert_eq(x[i], 1.5f);
  cr_assert_eq(x[4], 0.0f);
  double d = 0;
  double v = -2.25;
  memcpy(&pat.w[0], &v, sizeof v);
  kd_host_fill(8, kview(&d, 0, NULL, NULL), pat);
  cr_assert_eq(d, -2.25);
}

/* ---- copy ---- */

/* A 6x5 column-major matrix, m[i + 6*j] = 100*i + j. */
static void matrix65(int32_t *m) {
  for (int j = 0; j < 5; ++j)
    for (int i = 0; i < 6; ++i) m[i + 6 * j] = 100 * i + j;
}

Test(host_kernels, copy_even_and_odd_columns_of_a_6x5_matrix) {
  int32_t m[30];
  matrix65(m);
  int32_t even[6 * 3], odd[6 * 2];
  memset(even, 0, sizeof even);
  memset(odd, 0, sizeof odd);
  long long se[] = {6, 3}, so[] = {6, 2}, st[] = {1, 12};
  kd_host_copy(4, kview(even, 2, se, NULL), kview(m, 2, se, st));
  kd_host_copy(4, kview(odd, 2, so, NULL), kview(m + 6, 2, so, st));
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 6; ++i) cr_assert_eq(even[i + 6 * c], 100 * i + 2 * c, "even (%d,%d)", i, c);
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 6; ++i) cr_assert_eq(odd[i + 6 * c], 100 * i + 2 * c + 1, "odd (%d,%d)", i, c);
  /* And back: scatter the even columns into a zeroed matrix. */
  int32_t back[30];
  memset(back, 0, sizeof back);
  kd_host_copy(4, kview(back, 2, se, st), kview(even, 2, se, NULL));
  for (int j = 0; j < 5; ++j)
    for (int i = 0; i < 6; ++i) cr_assert_eq(back[i + 6 * j], j % 2 ? 0 : m[i + 6 * j], "scatter (%d,%d)", i, j);
}

Test(host_kernels, copy_transposes_through_permuted_strides) {
  int32_t m[30];
  matrix65(m);
  int32_t t[30];
  memset(t, 0xff, sizeof t);
  long long shape[] = {5, 6}, strides[] = {6, 1}; /* m seen as its transpose */
  kd_host_copy(4, kview(t, 2, shape, NULL), kview(m, 2, shape, strides));
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 5; ++j) cr_assert_eq(t[j + 5 * i], m[i + 6 * j], "t(%d,%d)", j, i);
}

Test(host_kernels, copy_canonicalizes_a_strided_3d_view_every_esize) {
  const size_t sizes[] = {1, 2, 4, 8, 16};
  /* A 4x5x6 compact array of esize-byte elements; element e's bytes are
   * (e*16 + k) & 0xff so every element differs in every esize. */
  enum { N = 4 * 5 * 6 };
  for (size_t s = 0; s < 5; ++s) {
    size_t es = sizes[s];
    unsigned char src[N * 16], dst[2 * 3 * 3 * 16 + 16];
    for (size_t e = 0; e < N; ++e)
      for (size_t k = 0; k < es; ++k) src[e * es + k] = (unsigned char)((e * 16 + k) & 0xff);
    memset(dst, 0xAB, sizeof dst);
    /* Start at (1,1,0); every 2nd in dim 0, every 1st in dim 1, every 2nd in dim 2. */
    long long shape[] = {2, 3, 3}, strides[] = {2, 4, 40};
    size_t start = 1 + 4 * 1;
    kd_host_copy(es, kview(dst, 3, shape, NULL), kview(src + start * es, 3, shape, strides));
    for (int c = 0; c < 3; ++c)
      for (int b = 0; b < 3; ++b)
        for (int a = 0; a < 2; ++a) {
          size_t from = (size_t)((1 + 2 * a) + 4 * (1 + b) + 20 * (2 * c));
          size_t to = (size_t)(a + 2 * b + 6 * c);
          cr_assert(memcmp(dst + to * es, src + from * es, es) == 0, "esize %zu (%d,%d,%d)", es, a, b, c);
        }
    for (size_t k = 18 * es; k < sizeof dst; ++k) cr_assert_eq(dst[k], 0xAB, "esize %zu wrote past the end", es);
  }
}

Test(host_kernels, copy_negative_stride_reverses_and_rank0_copies_one) {
  double x[5] = {1, 2, 3, 4, 5}, y[5] = {0};
  long long n = 5, st = -1;
  kd_host_copy(8, kvec(y, 5), kview(x + 4, 1, &n, &st));
  for (int i = 0; i < 5; ++i) cr_assert_eq(y[i], 5.0 - i);
  double a = 7.0, b = 0;
  kd_host_copy(8, kview(&b, 0, NULL, NULL), kview(&a, 0, NULL, NULL));
  cr_assert_eq(b, 7.0);
}

/* ---- add / axpy / scale ---- */

Test(host_kernels, add_f32_f64_with_a_strided_input) {
  float af[8], bf[16], of[8];
  double ad[8], bd[16], od[8];
  for (int i = 0; i < 8; ++i) {
    af[i] = 0.25f * (float)i;
    ad[i] = 0.125 * i;
  }
  for (int i = 0; i < 16; ++i) {
    bf[i] = (float)(i * i);
    bd[i] = -1.0 * i;
  }
  long long n = 8, two = 2;
  kd_host_add(KD_K_F32, kvec(of, 8), kvec(af, 8), kview(bf + 1, 1, &n, &two));
  kd_host_add(KD_K_F64, kvec(od, 8), kvec(ad, 8), kview(bd, 1, &n, &two));
  for (int i = 0; i < 8; ++i) {
    cr_assert_eq(of[i], af[i] + bf[1 + 2 * i], "f32 %d: %g", i, (double)of[i]);
    cr_assert_eq(od[i], ad[i] + bd[2 * i], "f64 %d: %g", i, od[i]);
  }
  /* In place: out is the same view as a. */
  kd_host_add(KD_K_F64, kvec(ad, 8), kvec(ad, 8), kvec(ad, 8));
  for (int i = 0; i < 8; ++i) cr_assert_eq(ad[i], 0.25 * i);
}

Test(host_kernels, add_integers_wrap) {
  int32_t a32[3] = {INT32_MAX, INT32_MIN, 5}, b32[3] = {1, -1, -7}, o32[3];
  int64_t a64[3] = {INT64_MAX, INT64_MIN, 5}, b64[3] = {2, -3, -7}, o64[3];
  kd_host_add(KD_K_I32, kvec(o32, 3), kvec(a32, 3), kvec(b32, 3));
  kd_host_add(KD_K_I64, kvec(o64, 3), kvec(a64, 3), kvec(b64, 3));
  cr_assert_eq(o32[0], INT32_MIN);
  cr_assert_eq(o32[1], INT32_MAX);
  cr_assert_eq(o32[2], -2);
  cr_assert_eq(o64[0], INT64_MIN + 1);
  cr_assert_eq(o64[1], INT64_MAX - 2);
  cr_assert_eq(o64[2], -2);
  int32_t r = 0, x = 40, y = 2;
  kd_host_add(KD_K_I32, kview(&r, 0, NULL, NULL), kview(&x, 0, NULL, NULL), kview(&y, 0, NULL, NULL));
  cr_assert_eq(r, 42);
}

Test(host_kernels, axpy_and_scale_f32_f64) {
  float xf[6], yf[6], y0f[6];
  double xd[6], yd[6], y0d[6];
  kdt_fill_random(xf, 6, 3);
  kdt_fill_random(y0f, 6, 4);
  for (int i = 0; i < 6; ++i) {
    yf[i] = y0f[i];
    xd[i] = (double)xf[i] * 3.0;
    yd[i] = y0d[i] = (double)y0f[i] / 7.0;
  }
  const double alpha = 0.1; /* not a float: f32 must use (float)alpha */
  kd_host_axpy(KD_K_F32, kvec(yf, 6), kvec(xf, 6), alpha);
  kd_host_axpy(KD_K_F64, kvec(yd, 6), kvec(xd, 6), alpha);
  for (int i = 0; i < 6; ++i) {
    float pf = 0.1f * xf[i];
    cr_assert_eq(yf[i], pf + y0f[i], "f32 axpy %d: %.9g want %.9g", i, (double)yf[i], (double)(pf + y0f[i]));
    double pd = 0.1 * xd[i];
    cr_assert_eq(yd[i], pd + y0d[i], "f64 axpy %d", i);
  }
  /* Exact values, strided y. */
  float ys[6] = {1, 100, 2, 100, 3, 100}, xs[3] = {4, 5, 6};
  long long n = 3, two = 2;
  kd_host_axpy(KD_K_F32, kview(ys, 1, &n, &two), kvec(xs, 3), -0.5);
  cr_assert_eq(ys[0], -1.0f);
  cr_assert_eq(ys[2], -0.5f);
  cr_assert_eq(ys[4], 0.0f);
  cr_assert_eq(ys[1], 100.0f);
  cr_assert_eq(ys[3], 100.0f);

  kd_host_scale(KD_K_F32, kview(ys, 1, &n, &two), 4.0);
  cr_assert_eq(ys[0], -4.0f);
  cr_assert_eq(ys[2], -2.0f);
  cr_assert_eq(ys[1], 100.0f);
  double sd[4] = {1, 2, 3, 4};
  kd_host_scale(KD_K_F64, kvec(sd, 4), 1.0 / 3.0);
  for (int i = 0; i < 4; ++i) cr_assert_eq(sd[i], (1.0 / 3.0) * (i + 1), "f64 scale %d", i);
  float sf[3] = {3, 5, 7};
  kd_host_scale(KD_K_F32, kvec(sf, 3), alpha);
  for (int i = 0; i < 3; ++i) cr_assert_eq(sf[i], 0.1f * (float)(2 * i + 3), "f32 scale %d", i);
  float r0 = 2;
  kd_host_scale(KD_K_F32, kview(&r0, 0, NULL, NULL), -3.0);
  cr_assert_eq(r0, -6.0f);
}

/* ---- sum ---- */

/* The documented order, written out independently of the implementation:
 * 256 partials p[t] = x[t] + x[t+256] + ... left to right, then the tree. */
static float documented_sum_f32(const float *x, size_t n) {
  float p[256];
  for (int t = 0; t < 256; ++t) {
    p[t] = 0.0f;
    for (size_t i = (size_t)t; i < n; i += 256) p[t] += x[i];
  }
  for (int h = 128; h >= 1; h /= 2)
    for (int t = 0; t < h; ++t) p[t] += p[t + h];
  return p[0];
}

Test(host_kernels, sum_f32_matches_double_and_the_documented_order) {
  const size_t counts[] = {0, 1, 5, 255, 256, 257, 1000, 10007};
  static float x[10007];
  kdt_fill_random(x, 10007, 11);
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; ++c) {
    size_t n = counts[c];
    double ref = 0;
    for (size_t i = 0; i < n; ++i) ref += x[i];
    float out = -99.0f;
    kd_host_sum(KD_K_F32, kview(&out, 0, NULL, NULL), kvec(x, (long long)n));
    cr_assert(fabs((double)out - ref) <= 1e-5 * fabs(ref) + 1e-6, "n %zu: %.9g vs %.9g", n, (double)out, ref);
    float doc = documented_sum_f32(x, n);
    cr_assert(memcmp(&out, &doc, sizeof out) == 0, "n %zu: %.9g not bit-identical to the documented order %.9g", n,
              (double)out, (double)doc);
  }
  /* Every third element, as a strided view. */
  long long n = 3335, three = 3;
  double ref = 0;
  for (long long i = 0; i < n; ++i) ref += x[3 * i];
  float out = 0;
  kd_host_sum(KD_K_F32, kvec(&out, 1), kview(x, 1, &n, &three));
  cr_assert(fabs((double)out - ref) <= 1e-5 * fabs(ref), "strided: %.9g vs %.9g", (double)out, ref);
}

Test(host_kernels, sum_f64_of_a_3d_view) {
  double x[4 * 5 * 6];
  for (int i = 0; i < 120; ++i) x[i] = i; /* exact in double */
  long long shape[] = {2, 5, 3}, strides[] = {2, 4, 40};
  double out = -1;
  kd_host_sum(KD_K_F64, kview(&out, 0, NULL, NULL), kview(x + 1, 3, shape, strides));
  double ref = 0;
  for (int c = 0; c < 3; ++c)
    for (int b = 0; b < 5; ++b)
      for (int a = 0; a < 2; ++a) ref += x[1 + 2 * a + 4 * b + 40 * c];
  cr_assert_eq(out, ref, "%g vs %g", out, ref);
}

Test(host_kernels, integer_sums_are_exact_and_wrap) {
  enum { N = 1000 };
  static int32_t a[N];
  static int64_t b[N];
  for (int i = 0; i < N; ++i) {
    a[i] = INT32_MAX - i;
    b[i] = INT64_MAX - i;
  }
  int32_t s32 = 0;
  int64_t s64 = 0;
  kd_host_sum(KD_K_I32, kview(&s32, 0, NULL, NULL), kvec(a, N));
  kd_host_sum(KD_K_I64, kview(&s64, 0, NULL, NULL), kvec(b, N));
  /* Closed forms modulo 2^32 / 2^64: N*MAX - N(N-1)/2. */
  uint32_t w32 = (uint32_t)N * (uint32_t)INT32_MAX - (uint32_t)(N * (N - 1) / 2);
  uint64_t w64 = (uint64_t)N * (uint64_t)INT64_MAX - (uint64_t)(N * (N - 1) / 2);
  uint32_t g32;
  uint64_t g64;
  memcpy(&g32, &s32, 4);
  memcpy(&g64, &s64, 8);
  cr_assert_eq(g32, w32, "i32 sum %#x want %#x", g32, w32);
  cr_assert_eq(g64, w64, "i64 sum %#llx want %#llx", (unsigned long long)g64, (unsigned long long)w64);
  /* Small exact sum, no wrap: 1 + ... + 300 with negatives interleaved. */
  static int32_t c[600];
  for (int i = 0; i < 300; ++i) {
    c[2 * i] = i + 1;
    c[2 * i + 1] = -(i % 7);
  }
  long long want = 0;
  for (int i = 0; i < 600; ++i) want += c[i];
  kd_host_sum(KD_K_I32, kvec(&s32, 1), kvec(c, 600));
  cr_assert_eq(s32, (int32_t)want);
  int64_t one = -5;
  kd_host_sum(KD_K_I64, kview(&s64, 0, NULL, NULL), kview(&one, 0, NULL, NULL));
  cr_assert_eq(s64, -5);
}

/* ---- the embedded kernels ---- */

static const struct {
  const char *name;
  unsigned params[3];
} kBuiltins[] = {
    {"kd_fill_e1", {144, 16}},   {"kd_fill_e2", {144, 16}},   {"kd_fill_e4", {144, 16}},
    {"kd_fill_e8", {144, 16}},   {"kd_fill_e16", {144, 16}},  {"kd_copy_e1", {144, 144}},
    {"kd_copy_e2", {144, 144}},  {"kd_copy_e4", {144, 144}},  {"kd_copy_e8", {144, 144}},
    {"kd_copy_e16", {144, 144}}, {"kd_add_f32", {144, 144, 144}}, {"kd_add_f64", {144, 144, 144}},
    {"kd_add_i32", {144, 144, 144}}, {"kd_add_i64", {144, 144, 144}}, {"kd_axpy_f32", {144, 144, 8}},
    {"kd_axpy_f64", {144, 144, 8}},  {"kd_scale_f32", {144, 8}},  {"kd_scale_f64", {144, 8}},
    {"kd_sum_f32", {144, 144}},  {"kd_sum_f64", {144, 144}},  {"kd_sum_i32", {144, 144}},
    {"kd_sum_i64", {144, 144}},
    {"kd_add_f16", {144, 144, 144}}, {"kd_add_bf16", {144, 144, 144}}, {"kd_axpy_f16", {144, 144, 8}},
    {"kd_axpy_bf16", {144, 144, 8}}, {"kd_scale_f16", {144, 8}}, {"kd_scale_bf16", {144, 8}},
    {"kd_sum_f16", {144, 144}},  {"kd_sum_bf16", {144, 144}},
    {"kd_add_u8", {144, 144, 144}}, {"kd_sum_u8", {144, 144}},
};
#define KBUILTIN_COUNT (sizeof kBuiltins / sizeof kBuiltins[0])

/* Every built-in is an .entry of ptx with the expected parameter sizes. */
static void check_entries(const char *what, const char *ptx) {
  kd_ptx_info info;
  KDT_OK(kd_ptx_parse("host_kernels", ptx, &info));
  cr_assert_eq(info.entry_count, KBUILTIN_COUNT, "%s: %zu entries, want %zu", what, info.entry_count,
               (size_t)KBUILTIN_COUNT);
  for (size_t k = 0; k < KBUILTIN_COUNT; ++k) {
    char needle[64];
    snprintf(needle, sizeof needle, ".entry %s(", kBuiltins[k].name);
    cr_assert(strstr(ptx, needle), "%s lacks %s", what, needle);
    const kd_ptx_entry *e = kd_ptx_find(&info, kBuiltins[k].name);
    cr_assert_not_null(e, "%s: parser misses %s", what, kBuiltins[k].name);
    unsigned want = kBuiltins[k].params[2] ? 3 : 2;
    cr_assert_eq(e->param_count, want, "%s %s: %u params", what, kBuiltins[k].name, e->param_count);
    for (unsigned p = 0; p < want; ++p)
      cr_assert_eq(e->param_sizes[p], kBuiltins[k].params[p], "%s %s param %u: %u bytes", what, kBuiltins[k].name,
                   p, e->param_sizes[p]);
  }
  kd_ptx_info_free(&info);
}

Test(host_kernels, embedded_ptx_has_every_builtin_entry) {
  const char *ptx = (const char *)kd_kernel_builtins_ptx;
  cr_assert_eq(ptx[kd_kernel_builtins_ptx_size - 1], '\0');
  KDT_OK(kd_ptx_check_text("host_kernels", ptx, kd_kernel_builtins_ptx_size));
  check_entries("embedded PTX", ptx);
  kd_image_info img = kd_image_inspect(kd_kernel_builtins_cubin, kd_kernel_builtins_cubin_size);
  cr_assert_eq(img.kind, KD_IMAGE_CUBIN);
  cr_assert_eq(img.sm[0], atoi(kd_kernel_arch + 3), "CUBIN is sm_%d, kd_kernel_arch %s", img.sm[0], kd_kernel_arch);
}

Test(host_kernels, nvrtc_compiles_the_builtins_source) {
  /* builtins.cu includes "strided.h"; find <repo>/kernels from this file's
   * absolute path (CMake compiles sources by absolute path). */
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", __FILE__);
  char *cut = strstr(dir, "/tests/host_kernels_test.c");
  cr_assert_not_null(cut, "__FILE__ is %s", __FILE__);
  snprintf(cut, sizeof dir - (size_t)(cut - dir), "/kernels");
  const char *inc[] = {dir};
  kd_nvrtc_options o = {.struct_size = sizeof(kd_nvrtc_options), .arch = "compute_90", .include_paths = inc, .include_path_count = 1,
                        .program_name = "builtins.cu"};
  kd_binary *b = NULL;
  KDT_OK(kd_nvrtc_compile((const char *)kd_kernel_builtins_source, &o, &b));
  cr_assert_eq(kd_binary_kind_of(b), KD_BINARY_PTX);
  check_entries("NVRTC PTX", kd_binary_data(b));
  kd_binary_destroy(b);
}

/* The device-independent part of a launch's checks (a node's config is
 * checked against its function when it is added; these limits hold on
 * every GPU kdag targets): each axis, and the threads of a block. */
Test(host_kernels, launch_config_limits_are_checked_before_any_device) {
  kd_launch_config ok = {{1, 1, 1}, {256, 1, 1}, 0, 0};
  KDT_OK(kd_launch_config_check_dims("op", &ok));
  struct {
    kd_launch_config c;
    const char *needle;
  } bad[] = {
      {{{0, 1, 1}, {256, 1, 1}, 0, 0}, "grid.x is 0"},
      {{{1, 1, 1}, {256, 0, 1}, 0, 0}, "block.y is 0"},
      {{{1, 1, 1}, {2048, 1, 1}, 0, 0}, "block.x = 2048 exceeds 1024"},
      {{{1, 1, 1}, {1, 1, 65}, 0, 0}, "block.z = 65 exceeds 64"},
      {{{1, 70000, 1}, {256, 1, 1}, 0, 0}, "grid.y = 70000 exceeds 65535"},
      {{{0x80000000u, 1, 1}, {256, 1, 1}, 0, 0}, "grid.x = 2147483648 exceeds 2147483647"},
      {{{1, 1, 1}, {64, 32, 1}, 0, 0}, "2048 threads per block, at most 1024"},
      {{{1, 1, 1}, {64, 1, 1}, 0, 0x6}, "config flags 0x6 has unknown bits"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    KDT_FAILS(kd_launch_config_check_dims("op", &bad[i].c), KD_ERR_LAUNCH_CONFIG, bad[i].needle);
    cr_assert(strncmp(kd_last_error(), "op: ", 4) == 0, "names the operation: %s", kd_last_error());
  }
}

/* The built-in kernels never trap: a trap is a sticky fault that poisons
 * the device's context for every session of the process, so no launch
 * shape, however wrong, may cause one (the sum kernel handles any shape). */
Test(host_kernels, builtin_kernels_contain_no_trap) {
  const char *ptx = (const char *)kd_kernel_builtins_ptx;
  cr_assert_gt(kd_kernel_builtins_ptx_size, 1000);
  cr_assert_null(strstr(ptx, "trap;"), "the built-in PTX has a trap instruction");
  cr_assert_not_null(strstr(ptx, ".entry kd_sum_f32"), "the scan looked at the built-in module");
}

/* ---- the 16-bit float conversions the f16 and bf16 built-ins share ------ */

static float f32_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Against the compiler's own binary16 (_Float16: round to nearest, ties to
 * even): every 16-bit pattern widened, and every 251st of the 2^32 f32
 * patterns narrowed, NaNs compared as NaNs. */
Test(host_kernels, f16_conversions_match_the_compilers_binary16) {
#ifndef __FLT16_MAX__
  cr_skip("this compiler has no _Float16 on this target (the GCC builds compare with it)");
#else
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 c;
    uint16_t b = (uint16_t)h;
    memcpy(&c, &b, 2);
    float want = (float)c, got = kd_kf16_to_f32(b);
    if (want != want) cr_assert(got != got, "f16 %04x: NaN widened to %a", h, (double)got);
    else cr_assert(memcmp(&want, &got, 4) == 0, "f16 %04x: %a, not %a", h, (double)got, (double)want);
  }
  for (uint64_t u = 0; u < (1ull << 32); u += 251) {
    float f = f32_of((uint32_t)u);
    _Float16 c = (_Float16)f;
    uint16_t want, got = kd_kf32_to_f16(f);
    memcpy(&want, &c, 2);
    if (f != f) cr_assert((got & 0x7c00) == 0x7c00 && (got & 0x3ff), "f32 %08x: NaN narrowed to %04x", (unsigned)u, got);
    else cr_assert_eq(got, want, "f32 %08x (%a): %04x, not %04x", (unsigned)u, (double)f, got, want);
  }
#endif
  /* The edges by name: the largest half, the tie to infinity, the smallest
   * subnormal, the tie to zero below it, and a tie that rounds up to even. */
  cr_assert_eq(kd_kf32_to_f16(65504.0f), 0x7bff);
  cr_assert_eq(kd_kf32_to_f16(65520.0f), 0x7c00);
  cr_assert_eq(kd_kf32_to_f16(0x1p-24f), 0x0001);
  cr_assert_eq(kd_kf32_to_f16(0x1p-25f), 0x0000);
  cr_assert_eq(kd_kf32_to_f16(0x1.8p-24f), 0x0002);
  cr_assert_eq(kd_kf32_to_f16(-1.0f), 0xbc00);
}

/* bfloat16 is the upper half of an f32, rounded to nearest, ties to even. */
Test(host_kernels, bf16_conversions_round_to_nearest_even) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = kd_kbf16_to_f32((uint16_t)b);
    uint32_t u;
    memcpy(&u, &f, 4);
    cr_assert_eq(u, b << 16);
    if (f == f) cr_assert_eq(kd_kf32_to_bf16(f), b, "bf16 %04x does not come back", b);
  }
  cr_assert_eq(kd_kf32_to_bf16(1.0f), 0x3f80);
  cr_assert_eq(kd_kf32_to_bf16(f32_of(0x3f808000u)), 0x3f80, "a tie stays on the even 0x3f80");
  cr_assert_eq(kd_kf32_to_bf16(f32_of(0x3f818000u)), 0x3f82, "a tie goes up to the even 0x3f82");
  cr_assert_eq(kd_kf32_to_bf16(f32_of(0x3f808001u)), 0x3f81, "above the tie: up");
  cr_assert_eq(kd_kf32_to_bf16(f32_of(0x7f7fffffu)), 0x7f80, "the largest f32 rounds to infinity");
  cr_assert_eq(kd_kf32_to_bf16(f32_of(0x7fc00001u)) & 0x7fc0, 0x7fc0, "a NaN stays a quiet NaN");
}

/* f16 and bf16 built-ins compute in f32, then round once: y = 2.5 + 1/3
 * on HOST against the same steps written out. */
Test(host_kernels, f16_and_bf16_builtins_compute_in_f32) {
  kd_session *s = kdt_host_session();
  for (int k = 0; k < 2; ++k) {
    kd_dtype t = k ? KD_BF16 : KD_F16;
    uint16_t (*to)(float) = k ? kd_kf32_to_bf16 : kd_kf32_to_f16;
    float (*from)(uint16_t) = k ? kd_kbf16_to_f32 : kd_kf16_to_f32;
    enum { N = 300 };
    uint16_t x[N], y[N], out[N], total;
    for (int i = 0; i < N; ++i) x[i] = to(1.0f / 3.0f + (float)i / 64.0f), y[i] = to(2.5f - (float)i / 128.0f);
    kd_tensor_desc d = {.dtype = t, .rank = 1, .shape = {N}}, one = {.dtype = t, .rank = 1, .shape = {1}};
    kd_tensor tx, ty, tz, ts;
    KDT_OK(kd_tensor_from_host(s, &d, x, sizeof x, &tx));
    KDT_OK(kd_tensor_from_host(s, &d, y, sizeof y, &ty));
    KDT_OK(kd_tensor_create(s, &d, &tz));
    KDT_OK(kd_tensor_create(s, &one, &ts));
    kd_graph *g;
    kd_sink *zs, *ss;
    KDT_OK(kd_graph_create(s, &g));
    KDT_OK(kd_graph_op_add(g, "z = x + y", kd_whole(tz), kd_whole(tx), kd_whole(ty), NULL));
    KDT_OK(kd_graph_op_axpy(g, "z += 0.75 x", kd_whole(tz), kd_whole(tx), 0.75, NULL));
    KDT_OK(kd_graph_op_scale(g, "z *= -3", kd_whole(tz), -3.0, NULL));
    KDT_OK(kd_graph_op_sum(g, "s = sum z", kd_whole(ts), kd_whole(tz), NULL));
    KDT_OK(kd_graph_sink(g, "z", tz, out, sizeof out, &zs));
    KDT_OK(kd_graph_sink(g, "s", ts, &total, sizeof total, &ss));
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_sink_wait(zs));
    KDT_OK(kd_sink_wait(ss));
    float p[256] = {0};
    for (int i = 0; i < N; ++i) {
      volatile float z = from(x[i]) + from(y[i]); /* volatile: each step rounded to f32, as written */
      uint16_t zb = to(z);
      volatile float prod = 0.75f * from(x[i]);
      zb = to(prod + from(zb));
      zb = to(-3.0f * from(zb));
      cr_assert_eq(out[i], zb, "%s z[%d]: %04x, not %04x", kd_dtype_name(t), i, out[i], zb);
      p[i % 256] += from(zb);
    }
    for (int h = 128; h > 0; h >>= 1)
      for (int j = 0; j < h; ++j) p[j] += p[j + h];
    cr_assert_eq(total, to(p[0]), "%s sum: %04x, not %04x", kd_dtype_name(t), total, to(p[0]));
    kd_graph_destroy(g);
    kd_tensor_release(s, tx), kd_tensor_release(s, ty), kd_tensor_release(s, tz), kd_tensor_release(s, ts);
  }
  kd_session_destroy(s);
}

static void host_op(int op, kd_kview o, kd_kview a, kd_kview b) {
  if (op == 0) kd_host_add(KD_K_F32, o, a, b);
  else if (op == 1) kd_host_axpy(KD_K_F32, o, a, 1.5);
  else if (op == 2) kd_host_scale(KD_K_F32, o, 0.75);
  else if (op == 3) kd_host_copy(4, o, a);
  else {
    kd_kpattern v = {{0, 0}};
    float f = -2.5f;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    v.w[0] = bits;
    kd_host_fill(4, o, v);
  }
}

/* The host built-ins walk strided views row by row and compact ones with
 * plain pointers (kernels/host_builtins.c): against the element walk of
 * kd_kview_offset, on random views (rank 0 to 3, gaps, zero and negative
 * strides of an input, offsets), add, axpy, scale, copy and fill give the same bits and
 * touch nothing else, whole or cut into slices along kd_host_split_dim. */
Test(host_kernels, row_walk_and_compact_paths_match_the_element_walk) {
  enum { M = 1 << 14 };
  static float A[M], B[M], O[M], R[M];
  uint64_t s = 0x9E3779B97F4A7C15ull;
#define RND() (s ^= s << 13, s ^= s >> 7, s ^= s << 17, (unsigned)s)
  int checked = 0;
  for (int t = 0; t < 5000; ++t) {
    for (int i = 0; i < M; ++i) {
      A[i] = (float)(RND() % 1000) * 0.37f;
      B[i] = (float)(RND() % 1000) * 0.11f;
      O[i] = R[i] = (float)(RND() % 100);
    }
    kd_kview o = {0}, a = {0}, b = {0};
    int rank = (int)(RND() % 4), gaps = (int)(RND() % 2);
    o.rank = a.rank = b.rank = rank;
    long long so = 1, sa = 1, sb = 1;
    for (int d = 0; d < rank; ++d) {
      long long n = 1 + RND() % 6;
      o.shape[d] = a.shape[d] = b.shape[d] = n;
      o.strides[d] = so * (gaps ? 1 + RND() % 2 : 1);
      so = o.strides[d] * n;
      a.strides[d] = RND() % 4 == 0 ? 0 : sa;
      sa = (a.strides[d] ? a.strides[d] : 1) * n + (gaps ? 3 : 0);
      b.strides[d] = sb * (gaps ? 1 + RND() % 3 : 1);
      sb = b.strides[d] * n;
    }
    long long at = RND() % 64;
    o.base = (unsigned long long)(uintptr_t)(O + at);
    a.base = (unsigned long long)(uintptr_t)(A + RND() % 64);
    b.base = (unsigned long long)(uintptr_t)(B + RND() % 64);
    for (int d = 0; d < rank; ++d) /* b walks some dimensions backwards */
      if (RND() % 4 == 0) {
        b.base += (unsigned long long)((b.shape[d] - 1) * b.strides[d]) * 4;
        b.strides[d] = -b.strides[d];
      }
    int op = (int)(RND() % 5);
    float *ro = R + at;
    for (long long i = 0, n = kd_kview_numel(&o); i < n; ++i) {
      float *p = ro + kd_kview_offset(&o, i);
      float x = ((float *)(uintptr_t)a.base)[kd_kview_offset(&a, i)];
      float y = ((float *)(uintptr_t)b.base)[kd_kview_offset(&b, i)];
      if (op == 0) *p = x + y;
      else if (op == 1) {
        float prod = 1.5f * x;
        *p = prod + *p;
      } else if (op == 2) *p = 0.75f * *p;
      else if (op == 3) *p = x;
      else *p = -2.5f;
    }
    /* Also in slices, as the HOST executor splits a large built-in
     * across its workers: the same slice of every view, any order. */
    int slices = 1 + (int)(RND() % 4);
    int dim = kd_host_split_dim(&o, slices);
    long long extent = dim < 0 ? 1 : o.shape[dim];
    for (int k = slices - 1; k >= 0; --k) {
      kd_kview so_ = o, sa_ = a, sb_ = b;
      if (dim >= 0) {
        long long lo = extent * k / slices, hi = extent * (k + 1) / slices;
        kd_host_narrow(&so_, 4, dim, lo, hi);
        kd_host_narrow(&sa_, 4, dim, lo, hi);
        kd_host_narrow(&sb_, 4, dim, lo, hi);
      } else if (k) {
        continue; /* rank 0: one element, one slice */
      }
      host_op(op, so_, sa_, sb_);
    }
    cr_assert(memcmp(O, R, sizeof O) == 0, "view %d: op %d, rank %d, gaps %d, %d slices: the walks differ", t, op,
              rank, gaps, slices);
    checked++;
  }
#undef RND
  cr_assert_eq(checked, 5000);
}

/* sum (f32: in blocks of 256 over compact views, with a running index
 * over rows otherwise) and the 16-bit add, axpy, scale and sum (always
 * row by row) against the element walk of kd_kview_offset, on random
 * views with gaps, zero and negative strides. */
Test(host_kernels, sum_and_16_bit_row_walks_match_the_element_walk) {
  enum { M = 1 << 13 };
  static float A[M];
  static uint16_t H[M], G[M], HO[M], HR[M];
  uint64_t s = 0x2545F4914F6CDD1Dull;
#define RND() (s ^= s << 13, s ^= s >> 7, s ^= s << 17, (unsigned)s)
  int checked = 0;
  for (int t = 0; t < 3000; ++t) {
    for (int i = 0; i < M; ++i) {
      A[i] = (float)(RND() % 2000) * 0.0137f - 9.0f;
      H[i] = kd_kf32_to_bf16((float)(RND() % 500) * 0.07f);
      G[i] = kd_kf32_to_bf16((float)(RND() % 300) * -0.05f);
      HO[i] = HR[i] = kd_kf32_to_bf16((float)(RND() % 50));
    }
    kd_kview x = {0}, h = {0}, g = {0}, o = {0};
    int rank = (int)(RND() % 4), gaps = (int)(RND() % 2);
    x.rank = h.rank = g.rank = o.rank = rank;
    long long sx = 1, so = 1;
    for (int d = 0; d < rank; ++d) {
      long long n = 1 + RND() % (d == 0 ? 300 : 5);
      x.shape[d] = h.shape[d] = g.shape[d] = o.shape[d] = n;
      x.strides[d] = RND() % 5 == 0 ? 0 : sx * (gaps ? 1 + RND() % 2 : 1);
      h.strides[d] = g.strides[d] = x.strides[d];
      sx = (x.strides[d] ? x.strides[d] : sx) * n;
      o.strides[d] = so * (gaps ? 1 + RND() % 2 : 1);
      so = o.strides[d] * n;
    }
    if (sx > M / 2 || so > M / 2) continue; /* too large for the buffers: skip this shape */
    x.base = (unsigned long long)(uintptr_t)(A + M / 2);
    h.base = (unsigned long long)(uintptr_t)(H + M / 2);
    g.base = (unsigned long long)(uintptr_t)(G + M / 2);
    o.base = (unsigned long long)(uintptr_t)(HO + 8);
    for (int d = 0; d < rank; ++d)
      if (RND() % 3 == 0) { /* walk this dimension backwards: the base is at its last index */
        long long back = (x.shape[d] - 1) * x.strides[d];
        x.base += (unsigned long long)(back * 4);
        h.base += (unsigned long long)(back * 2);
        g.base += (unsigned long long)(back * 2);
        x.strides[d] = -x.strides[d];
        h.strides[d] = g.strides[d] = x.strides[d];
      }
    long long n = kd_kview_numel(&x);
    /* sum f32 */
    float p[256] = {0}, got = -1;
    for (long long i = 0; i < n; ++i) p[i % 256] += ((float *)(uintptr_t)x.base)[kd_kview_offset(&x, i)];
    for (int hh = 128; hh > 0; hh >>= 1)
      for (int j = 0; j < hh; ++j) p[j] += p[j + hh];
    kd_kview one = {.base = (unsigned long long)(uintptr_t)&got, .rank = 0};
    kd_host_sum(KD_K_F32, one, x);
    cr_assert(memcmp(&got, &p[0], 4) == 0, "view %d: sum %a, want %a", t, (double)got, (double)p[0]);
    /* bf16 add, axpy, scale, sum */
    int op = (int)(RND() % 4);
    uint16_t *ro = HR + 8;
    float q[256] = {0};
    for (long long i = 0; i < n; ++i) {
      float a = kd_kbf16_to_f32(((uint16_t *)(uintptr_t)h.base)[kd_kview_offset(&h, i)]);
      float b = kd_kbf16_to_f32(((uint16_t *)(uintptr_t)g.base)[kd_kview_offset(&g, i)]);
      uint16_t *out = ro + kd_kview_offset(&o, i);
      if (op == 0) *out = kd_kf32_to_bf16(a + b);
      else if (op == 1) {
        float prod = 0.5f * a;
        *out = kd_kf32_to_bf16(prod + kd_kbf16_to_f32(*out));
      } else if (op == 2) *out = kd_kf32_to_bf16(-1.5f * kd_kbf16_to_f32(*out));
      else q[i % 256] += a;
    }
    kd_kview hs = h;
    if (op == 0) kd_host_add(KD_K_BF16, o, h, g);
    else if (op == 1) kd_host_axpy(KD_K_BF16, o, h, 0.5);
    else if (op == 2) kd_host_scale(KD_K_BF16, o, -1.5);
    else {
      for (int hh = 128; hh > 0; hh >>= 1)
        for (int j = 0; j < hh; ++j) q[j] += q[j + hh];
      uint16_t want = kd_kf32_to_bf16(q[0]), have = 0;
      kd_kview out1 = {.base = (unsigned long long)(uintptr_t)&have, .rank = 0};
      kd_host_sum(KD_K_BF16, out1, hs);
      cr_assert_eq(have, want, "view %d: bf16 sum %04x, want %04x", t, have, want);
    }
    cr_assert(memcmp(HO, HR, sizeof HO) == 0, "view %d: bf16 op %d, rank %d, gaps %d: the walks differ", t, op, rank,
              gaps);
    checked++;
  }
#undef RND
  cr_assert_gt(checked, 2000, "only %d of 3000 random views fitted the buffers", checked);
}
