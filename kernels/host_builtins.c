/* SPDX-License-Identifier: Apache-2.0 */
/* Host implementations of kernels/builtins.cu; the semantics, including the
 * order of every floating-point operation, must stay identical to the GPU
 * kernels. Floats are never contracted into FMAs: this file is compiled
 * with -ffp-contract=off (kernels/CMakeLists.txt) and the kernels use
 * __fmul_rn/__fadd_rn. Integer arithmetic is done in uint32_t/uint64_t so
 * it wraps without undefined behaviour. */
#include <string.h>

#include "kernels/host.h"

/* Address of the element with linear index i, computed in integers so that
 * negative strides never form an out-of-object pointer on the way. */
static unsigned char *elem(const kd_kview *v, size_t esize, long long i) {
  unsigned long long off = (unsigned long long)kd_kview_offset(v, i) * (unsigned long long)esize;
  return (unsigned char *)(uintptr_t)(v->base + off);
}

/* Whether the view's elements are base[0 .. numel), in linear order: then
 * the element of linear index i is at i, and a loop over plain pointers
 * (which the compiler vectorizes) does the same operations in the same
 * order per element as the strided walk. */
static int compact(const kd_kview *v) {
  long long expect = 1;
  for (int d = 0; d < v->rank; ++d) {
    if (v->shape[d] != 1 && v->strides[d] != expect) return 0;
    expect *= v->shape[d];
  }
  return 1;
}

/* Walks up to three views of one shape row by row: a row is the shape[0]
 * elements of the innermost dimension (strides[0] apart), and the rows
 * come in column-major order, so the walk meets the elements in linear
 * order, as the GPU's index does: no division per element. */
typedef struct kd_rows {
  const kd_kview *v[3];
  int count;
  long long idx[KD_KMAX_RANK];
  long long off[3]; /* each view's offset, in elements, of the row's first element */
} kd_rows;

static void rows_init(kd_rows *r, int count, const kd_kview *a, const kd_kview *b, const kd_kview *c) {
  memset(r, 0, sizeof *r);
  r->count = count;
  r->v[0] = a, r->v[1] = b, r->v[2] = c;
}

/* Moves to the next row; 0 after the last. */
static int rows_next(kd_rows *r) {
  const kd_kview *s = r->v[0];
  for (int d = 1; d < s->rank; ++d) {
    if (++r->idx[d] < s->shape[d]) {
      for (int k = 0; k < r->count; ++k) r->off[k] += r->v[k]->strides[d];
      return 1;
    }
    for (int k = 0; k < r->count; ++k) r->off[k] -= r->v[k]->strides[d] * (s->shape[d] - 1);
    r->idx[d] = 0;
  }
  return 0;
}

static long long row_len(const kd_kview *v) { return v->rank ? v->shape[0] : 1; }
static long long row_step(const kd_kview *v) { return v->rank ? v->strides[0] : 0; }

/* n elements of esize bytes from d, adjacent: 4- and 8-byte ones as typed
 * stores (vectorized), others byte pattern by byte pattern. */
static void fill_run(unsigned char *d, long long n, size_t esize, const unsigned char *bytes) {
  if (esize == 4) {
    uint32_t w;
    memcpy(&w, bytes, 4);
    for (long long i = 0; i < n; ++i) ((uint32_t *)(void *)d)[i] = w;
  } else if (esize == 8) {
    uint64_t w;
    memcpy(&w, bytes, 8);
    for (long long i = 0; i < n; ++i) ((uint64_t *)(void *)d)[i] = w;
  } else {
    for (long long i = 0; i < n; ++i) memcpy(d + i * (long long)esize, bytes, esize);
  }
}

void kd_host_fill(size_t esize, kd_kview dst, kd_kpattern value) {
  if (esize == 0 || esize > 16) return;
  unsigned char bytes[16] = {0};
  for (size_t k = 0; k < esize; ++k) bytes[k] = (unsigned char)(value.w[k / 8] >> (8 * (k % 8)));
  long long n = kd_kview_numel(&dst);
  if (compact(&dst)) {
    fill_run((unsigned char *)(uintptr_t)dst.base, n, esize, bytes);
    return;
  }
  if (n == 0) return;
  kd_rows r;
  rows_init(&r, 1, &dst, NULL, NULL);
  long long len = row_len(&dst), step = row_step(&dst) * (long long)esize;
  do {
    unsigned char *d = (unsigned char *)(uintptr_t)dst.base + r.off[0] * (long long)esize;
    if (step == (long long)esize) fill_run(d, len, esize, bytes); /* a row of adjacent elements */
    else
      for (long long j = 0; j < len; ++j) memcpy(d + j * step, bytes, esize);
  } while (rows_next(&r));
}

void kd_host_copy(size_t esize, kd_kview dst, kd_kview src) {
  long long n = kd_kview_numel(&dst);
  if (n > 0 && compact(&dst) && compact(&src)) { /* memmove: dst may be the very same view */
    memmove(elem(&dst, esize, 0), elem(&src, esize, 0), (size_t)n * esize);
    return;
  }
  if (n == 0) return;
  kd_rows r;
  rows_init(&r, 2, &dst, &src, NULL);
  long long len = row_len(&dst), sd = row_step(&dst) * (long long)esize, ss = row_step(&src) * (long long)esize;
  do {
    unsigned char *d = (unsigned char *)(uintptr_t)dst.base + r.off[0] * (long long)esize;
    const unsigned char *from = (const unsigned char *)(uintptr_t)src.base + r.off[1] * (long long)esize;
    if (sd == (long long)esize && ss == (long long)esize) memmove(d, from, (size_t)len * esize); /* a row of adjacent elements */
    else
      for (long long j = 0; j < len; ++j) memcpy(d + j * sd, from + j * ss, esize);
  } while (rows_next(&r));
}

/* One loader/storer and the arithmetic per element type. */
#define KD_HOST_TYPE(name, T)                                                       \
  static void store_##name(const kd_kview *v, long long i, T x) {                   \
    memcpy(elem(v, sizeof(T), i), &x, sizeof(T));                                   \
  }                                                                                 \
  static void add_##name(const kd_kview *out, const kd_kview *a, const kd_kview *b) { \
    long long n = kd_kview_numel(out);                                              \
    if (compact(out) && compact(a) && compact(b)) {                                 \
      T *o = (T *)(uintptr_t)out->base;                                             \
      const T *x = (const T *)(uintptr_t)a->base, *y = (const T *)(uintptr_t)b->base; \
      for (long long i = 0; i < n; ++i) o[i] = (T)(x[i] + y[i]);                    \
      return;                                                                       \
    }                                                                               \
    if (n == 0) return;                                                             \
    kd_rows r;                                                                      \
    rows_init(&r, 3, out, a, b);                                                    \
    long long len = row_len(out), so = row_step(out), sa = row_step(a), sb = row_step(b); \
    do {                                                                            \
      T *o = (T *)(uintptr_t)out->base + r.off[0];                                  \
      const T *x = (const T *)(uintptr_t)a->base + r.off[1];                        \
      const T *y = (const T *)(uintptr_t)b->base + r.off[2];                        \
      if (so == 1 && sa == 1 && sb == 1) /* rows of adjacent elements: vectorized */ \
        for (long long j = 0; j < len; ++j) o[j] = (T)(x[j] + y[j]);                \
      else                                                                          \
        for (long long j = 0; j < len; ++j) o[j * so] = (T)(x[j * sa] + y[j * sb]); \
    } while (rows_next(&r));                                                        \
  }                                                                                 \
  static void sum_##name(const kd_kview *out, const kd_kview *x) {                  \
    /* Partial t adds elements t, t + 256, ... in index order: in blocks of \
     * 256 over a compact view (vectorized), with a running index over     \
     * rows otherwise; the same additions in the same order either way. */ \
    T p[KD_KSUM_THREADS];                                                           \
    for (int t = 0; t < KD_KSUM_THREADS; ++t) p[t] = (T)0;                          \
    long long n = kd_kview_numel(x);                                                \
    if (compact(x)) {                                                               \
      const T *px = (const T *)(uintptr_t)x->base;                                  \
      long long i = 0;                                                              \
      for (; i + KD_KSUM_THREADS <= n; i += KD_KSUM_THREADS)                        \
        for (int t = 0; t < KD_KSUM_THREADS; ++t) p[t] = (T)(p[t] + px[i + t]);     \
      for (int t = 0; i + t < n; ++t) p[t] = (T)(p[t] + px[i + t]);                 \
    } else if (n > 0) {                                                             \
      kd_rows r;                                                                    \
      rows_init(&r, 1, x, NULL, NULL);                                              \
      long long len = row_len(x), sx = row_step(x), i = 0;                          \
      do {                                                                          \
        const T *px = (const T *)(uintptr_t)x->base + r.off[0];                     \
        for (long long j = 0; j < len; ++j, ++i) {                                  \
          int t = (int)(i % KD_KSUM_THREADS);                                       \
          p[t] = (T)(p[t] + px[j * sx]);                                            \
        }                                                                           \
      } while (rows_next(&r));                                                      \
    }                                                                               \
    for (int h = KD_KSUM_THREADS / 2; h > 0; h >>= 1)                               \
      for (int t = 0; t < h; ++t) p[t] = (T)(p[t] + p[t + h]);                      \
    store_##name(out, 0, p[0]);                                                     \
  }
KD_HOST_TYPE(f32, float)
KD_HOST_TYPE(f64, double)
KD_HOST_TYPE(i32, uint32_t)
KD_HOST_TYPE(i64, uint64_t)
KD_HOST_TYPE(u8, uint8_t)
#undef KD_HOST_TYPE

#define KD_HOST_FLOAT(name, T)                                                      \
  static void axpy_##name(const kd_kview *y, const kd_kview *x, double alpha) {     \
    const T a = (T)alpha;                                                           \
    long long n = kd_kview_numel(y);                                                \
    if (compact(y) && compact(x)) {                                                 \
      T *py = (T *)(uintptr_t)y->base;                                              \
      const T *px = (const T *)(uintptr_t)x->base;                                  \
      for (long long i = 0; i < n; ++i) {                                           \
        T prod = a * px[i];                                                         \
        py[i] = prod + py[i];                                                       \
      }                                                                             \
      return;                                                                       \
    }                                                                               \
    if (n == 0) return;                                                             \
    kd_rows r;                                                                      \
    rows_init(&r, 2, y, x, NULL);                                                   \
    long long len = row_len(y), sy = row_step(y), sx = row_step(x);                 \
    do {                                                                            \
      T *py = (T *)(uintptr_t)y->base + r.off[0];                                   \
      const T *px = (const T *)(uintptr_t)x->base + r.off[1];                       \
      if (sy == 1 && sx == 1)                                                       \
        for (long long j = 0; j < len; ++j) {                                       \
          T prod = a * px[j];                                                       \
          py[j] = prod + py[j];                                                     \
        }                                                                           \
      else                                                                          \
        for (long long j = 0; j < len; ++j) {                                       \
          T prod = a * px[j * sx]; /* rounded to T before the add */                \
          py[j * sy] = prod + py[j * sy];                                           \
        }                                                                           \
    } while (rows_next(&r));                                                        \
  }                                                                                 \
  static void scale_##name(const kd_kview *y, double alpha) {                       \
    const T a = (T)alpha;                                                           \
    long long n = kd_kview_numel(y);                                                \
    if (compact(y)) {                                                               \
      T *py = (T *)(uintptr_t)y->base;                                              \
      for (long long i = 0; i < n; ++i) py[i] = a * py[i];                          \
      return;                                                                       \
    }                                                                               \
    if (n == 0) return;                                                             \
    kd_rows r;                                                                      \
    rows_init(&r, 1, y, NULL, NULL);                                                \
    long long len = row_len(y), sy = row_step(y);                                   \
    do {                                                                            \
      T *py = (T *)(uintptr_t)y->base + r.off[0];                                   \
      if (sy == 1)                                                                  \
        for (long long j = 0; j < len; ++j) py[j] = a * py[j];                      \
      else                                                                          \
        for (long long j = 0; j < len; ++j) py[j * sy] = a * py[j * sy];            \
    } while (rows_next(&r));                                                        \
  }
KD_HOST_FLOAT(f32, float)
KD_HOST_FLOAT(f64, double)
#undef KD_HOST_FLOAT

/* 16-bit floats: widened exactly, computed in float as above, rounded
 * once to the 16-bit type (kernels/strided.h has both conversions). Every
 * view is walked row by row (a compact one is one row per innermost
 * extent, adjacent elements). */
#define KD_HOST_HALF(name, TO_F32, FROM_F32)                                        \
  static void store_##name(const kd_kview *v, long long i, float f) {               \
    unsigned short b = FROM_F32(f);                                                 \
    memcpy(elem(v, 2, i), &b, 2);                                                   \
  }                                                                                 \
  static void add_##name(const kd_kview *out, const kd_kview *a, const kd_kview *b) { \
    if (kd_kview_numel(out) == 0) return;                                           \
    kd_rows r;                                                                      \
    rows_init(&r, 3, out, a, b);                                                    \
    long long len = row_len(out), so = row_step(out), sa = row_step(a), sb = row_step(b); \
    do {                                                                            \
      unsigned short *o = (unsigned short *)(uintptr_t)out->base + r.off[0];        \
      const unsigned short *x = (const unsigned short *)(uintptr_t)a->base + r.off[1]; \
      const unsigned short *y = (const unsigned short *)(uintptr_t)b->base + r.off[2]; \
      for (long long j = 0; j < len; ++j) o[j * so] = FROM_F32(TO_F32(x[j * sa]) + TO_F32(y[j * sb])); \
    } while (rows_next(&r));                                                        \
  }                                                                                 \
  static void sum_##name(const kd_kview *out, const kd_kview *x) {                  \
    float p[KD_KSUM_THREADS];                                                       \
    for (int t = 0; t < KD_KSUM_THREADS; ++t) p[t] = 0.0f;                          \
    if (kd_kview_numel(x) > 0) {                                                    \
      kd_rows r;                                                                    \
      rows_init(&r, 1, x, NULL, NULL);                                              \
      long long len = row_len(x), sx = row_step(x), i = 0;                          \
      do {                                                                          \
        const unsigned short *px = (const unsigned short *)(uintptr_t)x->base + r.off[0]; \
        for (long long j = 0; j < len; ++j, ++i) p[i % KD_KSUM_THREADS] += TO_F32(px[j * sx]); \
      } while (rows_next(&r));                                                      \
    }                                                                               \
    for (int h = KD_KSUM_THREADS / 2; h > 0; h >>= 1)                               \
      for (int t = 0; t < h; ++t) p[t] = p[t] + p[t + h];                           \
    store_##name(out, 0, p[0]);                                                     \
  }                                                                                 \
  static void axpy_##name(const kd_kview *y, const kd_kview *x, double alpha) {     \
    const float a = (float)alpha;                                                   \
    if (kd_kview_numel(y) == 0) return;                                             \
    kd_rows r;                                                                      \
    rows_init(&r, 2, y, x, NULL);                                                   \
    long long len = row_len(y), sy = row_step(y), sx = row_step(x);                 \
    do {                                                                            \
      unsigned short *py = (unsigned short *)(uintptr_t)y->base + r.off[0];         \
      const unsigned short *px = (const unsigned short *)(uintptr_t)x->base + r.off[1]; \
      for (long long j = 0; j < len; ++j) {                                         \
        float prod = a * TO_F32(px[j * sx]);                                        \
        py[j * sy] = FROM_F32(prod + TO_F32(py[j * sy]));                           \
      }                                                                             \
    } while (rows_next(&r));                                                        \
  }                                                                                 \
  static void scale_##name(const kd_kview *y, double alpha) {                       \
    const float a = (float)alpha;                                                   \
    if (kd_kview_numel(y) == 0) return;                                             \
    kd_rows r;                                                                      \
    rows_init(&r, 1, y, NULL, NULL);                                                \
    long long len = row_len(y), sy = row_step(y);                                   \
    do {                                                                            \
      unsigned short *py = (unsigned short *)(uintptr_t)y->base + r.off[0];         \
      for (long long j = 0; j < len; ++j) py[j * sy] = FROM_F32(a * TO_F32(py[j * sy])); \
    } while (rows_next(&r));                                                        \
  }
KD_HOST_HALF(f16, kd_kf16_to_f32, kd_kf32_to_f16)
KD_HOST_HALF(bf16, kd_kbf16_to_f32, kd_kf32_to_bf16)
#undef KD_HOST_HALF

void kd_host_add(kd_kdtype t, kd_kview out, kd_kview a, kd_kview b) {
  switch (t) {
    case KD_K_F32: add_f32(&out, &a, &b); break;
    case KD_K_F64: add_f64(&out, &a, &b); break;
    case KD_K_I32: add_i32(&out, &a, &b); break;
    case KD_K_I64: add_i64(&out, &a, &b); break;
    case KD_K_U8: add_u8(&out, &a, &b); break;
    case KD_K_F16: add_f16(&out, &a, &b); break;
    case KD_K_BF16: add_bf16(&out, &a, &b); break;
  }
}

void kd_host_axpy(kd_kdtype t, kd_kview y, kd_kview x, double alpha) {
  switch (t) {
    case KD_K_F32: axpy_f32(&y, &x, alpha); break;
    case KD_K_F64: axpy_f64(&y, &x, alpha); break;
    case KD_K_F16: axpy_f16(&y, &x, alpha); break;
    case KD_K_BF16: axpy_bf16(&y, &x, alpha); break;
    default: break;
  }
}

void kd_host_scale(kd_kdtype t, kd_kview y, double alpha) {
  switch (t) {
    case KD_K_F32: scale_f32(&y, alpha); break;
    case KD_K_F64: scale_f64(&y, alpha); break;
    case KD_K_F16: scale_f16(&y, alpha); break;
    case KD_K_BF16: scale_bf16(&y, alpha); break;
    default: break;
  }
}

void kd_host_sum(kd_kdtype t, kd_kview out, kd_kview x) {
  switch (t) {
    case KD_K_F32: sum_f32(&out, &x); break;
    case KD_K_F64: sum_f64(&out, &x); break;
    case KD_K_I32: sum_i32(&out, &x); break;
    case KD_K_I64: sum_i64(&out, &x); break;
    case KD_K_U8: sum_u8(&out, &x); break;
    case KD_K_F16: sum_f16(&out, &x); break;
    case KD_K_BF16: sum_bf16(&out, &x); break;
  }
}

int kd_host_split_dim(const kd_kview *v, long long parts) {
  int longest = -1;
  for (int d = v->rank - 1; d >= 0; --d) {
    if (v->shape[d] >= parts) return d;
    if (longest < 0 || v->shape[d] > v->shape[longest]) longest = d;
  }
  return longest;
}

void kd_host_narrow(kd_kview *v, size_t esize, int dim, long long lo, long long hi) {
  /* In unsigned integers, as elem() computes addresses: a negative stride
   * wraps to the right address. */
  v->base += (unsigned long long)(lo * v->strides[dim]) * (unsigned long long)esize;
  v->shape[dim] = hi - lo;
}
