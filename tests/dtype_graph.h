/* SPDX-License-Identifier: Apache-2.0 */
/* One graph of built-in kernels per dtype, for differential tests: every
 * element size through fill (strided), copy and transpose, and add, sum,
 * axpy and scale where the dtype takes them; the results land in one byte
 * buffer per session, to be compared bit for bit (the built-ins promise
 * their host twins' exact operation order). */
#ifndef KDAG_TESTS_DTYPE_GRAPH_H
#define KDAG_TESTS_DTYPE_GRAPH_H

#include "kdag_test.h"
#include "kernels/strided.h"

enum { DG_ROWS = 6, DG_COLS = 5, DG_N = DG_ROWS * DG_COLS };
/* x, y, z (6x5) and w (5x6), then the one-element sum; 16 bytes each at most. */
#define DG_BYTES ((4 * DG_N + 1) * 16)

static const kd_dtype dg_dtypes[] = {KD_F32, KD_F64, KD_I32, KD_I64, KD_U8, KD_U32, KD_U64, KD_C32, KD_C64,
                                     KD_F16, KD_BF16, KD_I8};

static inline int dg_float(kd_dtype t) { return t == KD_F32 || t == KD_F64 || t == KD_F16 || t == KD_BF16; }
static inline int dg_arith(kd_dtype t) {
  return dg_float(t) || t == KD_I32 || t == KD_I64 || t == KD_U8 || t == KD_U32 || t == KD_U64;
}

/* Element i of a deterministic input for dtype t: floats and complex parts
 * in [-1, 1), signed integers in [-1000, 1000), unsigned ones any value. */
static inline void dg_value(kd_dtype t, uint64_t seed, size_t i, unsigned char *dst) {
  uint64_t r = seed ^ (0x9E3779B97F4A7C15ull * (i + 1));
  r ^= r >> 29, r *= 0xBF58476D1CE4E5B9ull, r ^= r >> 32;
  double u = (double)(r >> 11) * 0x1p-53 * 2.0 - 1.0, v = (double)((r * 31) >> 11) * 0x1p-53 * 2.0 - 1.0;
  switch (t) {
    case KD_F32: { float f = (float)u; memcpy(dst, &f, 4); break; }
    case KD_F64: memcpy(dst, &u, 8); break;
    case KD_C32: { float f[2] = {(float)u, (float)v}; memcpy(dst, f, 8); break; }
    case KD_C64: { double d[2] = {u, v}; memcpy(dst, d, 16); break; }
    case KD_F16: { unsigned short h = kd_kf32_to_f16((float)u); memcpy(dst, &h, 2); break; }
    case KD_BF16: { unsigned short h = kd_kf32_to_bf16((float)u); memcpy(dst, &h, 2); break; }
    case KD_I32: { int32_t x = (int32_t)(r % 2000) - 1000; memcpy(dst, &x, 4); break; }
    case KD_I64: { int64_t x = (int64_t)(r % 2000) - 1000; memcpy(dst, &x, 8); break; }
    default: memcpy(dst, &r, kd_dtype_size(t)); break; /* U8, U32, U64, I8: low bytes */
  }
}

/* Builds, submits and sinks the dtype's graph on s; out gets the results
 * (DG_BYTES, the unused tail zeroed). Returns the number of nodes. */
static inline uint32_t dg_run(kd_session *s, kd_dtype t, unsigned char *out) {
  size_t e = kd_dtype_size(t);
  static unsigned char xin[DG_N * 16], yin[DG_N * 16];
  for (size_t i = 0; i < DG_N; ++i) {
    dg_value(t, 1, i, xin + i * e);
    dg_value(t, 2, i, yin + i * e);
  }
  kd_tensor_desc d = {.dtype = t, .rank = 2, .shape = {DG_ROWS, DG_COLS}};
  kd_tensor x, y, z, w, o;
  KDT_OK(kd_tensor_from_host(s, &d, xin, DG_N * e, &x));
  KDT_OK(kd_tensor_from_host(s, &d, yin, DG_N * e, &y));
  KDT_OK(kd_tensor_create(s, &d, &z));
  kd_tensor_desc dw = {.dtype = t, .rank = 2, .shape = {DG_COLS, DG_ROWS}}, d1 = {.dtype = t, .rank = 1, .shape = {1}};
  KDT_OK(kd_tensor_create(s, &dw, &w));
  KDT_OK(kd_tensor_create(s, &d1, &o));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  unsigned char pattern[16];
  dg_value(t, 3, 0, pattern);
  kd_view even_cols = {.tensor = x, .rank = 2, .offset = 0, .shape = {DG_ROWS, 3}, .strides = {1, 2 * DG_ROWS}};
  kd_view odd_rows = {.tensor = y, .rank = 2, .offset = 1, .shape = {3, DG_COLS}, .strides = {2, DG_ROWS}};
  kd_view z_top = {.tensor = z, .rank = 2, .offset = 0, .shape = {3, DG_COLS}, .strides = {1, DG_ROWS}};
  KDT_OK(kd_graph_op_fill(g, "x[:, 0::2] = p", even_cols, pattern, NULL));
  KDT_OK(kd_graph_op_copy(g, "z = x", kd_whole(z), kd_whole(x), NULL));
  KDT_OK(kd_graph_op_copy(g, "z[0:3] = y[1::2]", z_top, odd_rows, NULL));
  if (dg_arith(t)) {
    KDT_OK(kd_graph_op_add(g, "y = z + x", kd_whole(y), kd_whole(z), kd_whole(x), NULL));
    KDT_OK(kd_graph_op_sum(g, "o = sum y", kd_whole(o), kd_whole(y), NULL));
  } else {
    KDT_OK(kd_graph_op_fill(g, "o = p", kd_whole(o), pattern, NULL));
  }
  if (dg_float(t)) {
    KDT_OK(kd_graph_op_axpy(g, "y += 0.375 x", kd_whole(y), kd_whole(x), 0.375, NULL));
    KDT_OK(kd_graph_op_scale(g, "z *= -1.5", kd_whole(z), -1.5, NULL));
  }
  KDT_OK(kd_graph_op_transpose(g, "w = z^T", kd_whole(w), kd_whole(z), NULL));
  memset(out, 0, DG_BYTES);
  kd_tensor ts[5] = {x, y, z, w, o};
  kd_sink *sinks[5];
  size_t at = 0;
  for (int i = 0; i < 5; ++i) {
    size_t bytes = (i == 4 ? 1 : DG_N) * e;
    KDT_OK(kd_graph_sink(g, "out", ts[i], out + at, bytes, &sinks[i]));
    at += bytes;
  }
  kd_graph_stats st;
  KDT_OK(kd_graph_stats_get(g, &st));
  KDT_OK(kd_graph_submit(g, NULL));
  for (int i = 0; i < 5; ++i) KDT_OK(kd_tensor_release(s, ts[i])); /* in flight: kept alive */
  for (int i = 0; i < 5; ++i) KDT_OK(kd_sink_wait(sinks[i]));
  kd_graph_destroy(g);
  return st.nodes;
}

#endif
