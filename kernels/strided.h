/* SPDX-License-Identifier: Apache-2.0 */
/* Strided views shared by the built-in kernels (kernels/builtins.cu) and
 * their host implementations (kernels/host_builtins.c).
 *
 * Usable from C11, from nvcc and from NVRTC: it includes no header, because
 * NVRTC has no C library headers; everything here is built-in types.
 *
 * A kd_kview is passed BY VALUE to every kernel and host function (144
 * bytes; the PTX parameter is `.param .align 8 .b8 name[144]`). Element
 * (i0, i1, ..., i{rank-1}) lives at byte address
 *   base + esize * (i0*strides[0] + i1*strides[1] + ...)
 * Strides are in elements and may be zero or negative. Linear indices are
 * column-major: dimension 0 varies fastest. Rank 0 is one element at base.
 * Every element address must be aligned to the element size (8 bytes for
 * 16-byte elements). */
#ifndef KDAG_KERNELS_STRIDED_H
#define KDAG_KERNELS_STRIDED_H

#define KD_KMAX_RANK 8

/* Threads of the one block every kd_sum_* kernel is launched with. */
#define KD_KSUM_THREADS 256

#if defined(__CUDACC__)
#define KD_KHD __host__ __device__ __forceinline__
#else
#define KD_KHD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kd_kview {
  /* Address of the view's first element (the tensor's offset already
   * applied): a device pointer on the GPU, a host pointer cast through
   * uintptr_t on the host. */
  unsigned long long base;
  int rank; /* 0..KD_KMAX_RANK; 0 means one element */
  long long shape[KD_KMAX_RANK];   /* entries [rank, KD_KMAX_RANK) are ignored */
  long long strides[KD_KMAX_RANK]; /* in elements, column-major (see above) */
} kd_kview;

/* A fill value as raw bits, low bytes first: byte k of the element (in
 * memory order) is bits 8*(k%8)..8*(k%8)+7 of w[k/8]. Only the first esize
 * bytes are used; on a little-endian machine (x86-64, aarch64, every GPU)
 * this is exactly the in-memory image of w. */
typedef struct kd_kpattern {
  unsigned long long w[2];
} kd_kpattern;

/* Arithmetic element types of the add/axpy/scale/sum kernels. Integers are
 * two's complement and wrap modulo 2^32 / 2^64 (never undefined). */
/* I32 and I64 serve u32 and u64 too (the same bits, wrapping alike); U8
 * wraps modulo 2^8. F16 and BF16 compute in f32: each element is widened exactly, the
 * operation rounds in f32 as for KD_K_F32, and the result is rounded to
 * the 16-bit type to nearest, ties to even (kd_kf32_to_f16, _to_bf16). */
typedef enum kd_kdtype {
  KD_K_F32 = 0, KD_K_F64 = 1, KD_K_I32 = 2, KD_K_I64 = 3, KD_K_F16 = 4, KD_K_BF16 = 5, KD_K_U8 = 6
} kd_kdtype;

/* The 16-bit float conversions, written out in integer arithmetic so the
 * GPU kernels and their host twins share one definition, bit for bit,
 * from the IEEE 754 binary16 layout (1 sign, 5 exponent, 10 fraction bits,
 * bias 15) and bfloat16's (the upper half of a binary32). A NaN stays a
 * NaN, made quiet, keeping its upper payload bits. */
KD_KHD unsigned kd_kf32_bits(float f) {
  union { float f; unsigned u; } v;
  v.f = f;
  return v.u;
}
KD_KHD float kd_kf32_from_bits(unsigned u) {
  union { float f; unsigned u; } v;
  v.u = u;
  return v.f;
}
KD_KHD unsigned short kd_kf32_to_f16(float f) {
  unsigned x = kd_kf32_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) /* infinity, NaN */
    return (unsigned short)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u); /* 65520 and up round to infinity */
  if (ax < 0x38800000u) { /* below 2^-14: a subnormal, round(|f| * 2^24) */
    unsigned e = ax >> 23;
    if (e < 102u) return (unsigned short)sign; /* below 2^-25: 0 */
    unsigned m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - e; /* 14..24 */
    unsigned r = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (r & 1u))) ++r; /* 0x400 is the smallest normal: right */
    return (unsigned short)(sign | r);
  }
  unsigned r = (ax - 0x38000000u) >> 13, rest = ax & 0x1fffu; /* exponent rebiased by 127 - 15 */
  if (rest > 0x1000u || (rest == 0x1000u && (r & 1u))) ++r; /* a carry moves into the exponent */
  return (unsigned short)(sign | r);
}
KD_KHD float kd_kf16_to_f32(unsigned short h) {
  unsigned sign = ((unsigned)h & 0x8000u) << 16, e = ((unsigned)h >> 10) & 0x1fu, m = (unsigned)h & 0x3ffu;
  if (e == 0u) { /* zero or subnormal: m * 2^-24, exact in f32 */
    float v = (float)m * 5.9604644775390625e-8f;
    return kd_kf32_from_bits(kd_kf32_bits(v) | sign);
  }
  if (e == 31u) return kd_kf32_from_bits(sign | 0x7f800000u | (m << 13));
  return kd_kf32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}
KD_KHD unsigned short kd_kf32_to_bf16(float f) {
  unsigned x = kd_kf32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u); /* NaN, quiet */
  unsigned r = x >> 16, rest = x & 0xffffu;
  if (rest > 0x8000u || (rest == 0x8000u && (r & 1u))) ++r; /* the largest finite rounds up to infinity */
  return (unsigned short)r;
}
KD_KHD float kd_kbf16_to_f32(unsigned short b) { return kd_kf32_from_bits((unsigned)b << 16); }

/* Number of elements: the product of shape[0..rank); 1 for rank 0. In
 * unsigned arithmetic: an empty view's other dimensions may multiply past
 * 2^63 (kdag bounds the count of non-empty views only), and a wrapped
 * product times its zero is still exactly 0, where a signed one would be
 * undefined (found by tests/fuzz/fuzz_cuda.c). */
KD_KHD long long kd_kview_numel(const kd_kview *v) {
  unsigned long long n = 1;
  for (int d = 0; d < KD_KMAX_RANK; ++d) {
    if (d >= v->rank) break;
    n *= (unsigned long long)v->shape[d];
  }
  return (long long)n;
}

/* Element offset (in elements, relative to base) of the element whose
 * column-major linear index is `linear`, 0 <= linear < numel. The loop runs
 * over the fixed KD_KMAX_RANK bound so that, unrolled, every shape/stride
 * index is a constant and the view stays in kernel parameter space. The last
 * dimension takes the remaining quotient, so rank 1 needs no division. */
KD_KHD long long kd_kview_offset(const kd_kview *v, long long linear) {
  long long off = 0;
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int d = 0; d < KD_KMAX_RANK; ++d) {
    if (d >= v->rank) break;
    if (d == v->rank - 1) {
      off += linear * v->strides[d];
    } else {
      long long i = linear % v->shape[d];
      linear /= v->shape[d];
      off += i * v->strides[d];
    }
  }
  return off;
}

#ifdef __cplusplus
}
#endif

#undef KD_KHD
#endif /* KDAG_KERNELS_STRIDED_H */
