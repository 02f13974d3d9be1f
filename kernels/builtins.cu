// SPDX-License-Identifier: Apache-2.0
// Built-in kernels of kdag's task graph. kernels/host_builtins.c implements
// each with the same semantics; the two must change together.
//
// Every view argument is a kd_kview passed by value (kernels/strided.h).
// All views of one call have identical shapes (the launcher guarantees it),
// except kd_sum_*'s out, of which only element 0 is written. n = numel of
// the first view; n == 0 is a no-op (sum: writes 0).
//
// Launch rules:
//  - fill, copy, add, axpy, scale: any grid and block (all three dimensions
//    are folded into one grid-stride loop over n).
//  - sum: one block of KD_KSUM_THREADS = 256 threads, grid 1x1x1, block
//    256x1x1, no dynamic shared memory (what kdag launches). The result is
//    deterministic and bit-exact with the host implementation for any block
//    shape: KD_KSUM_THREADS slots fix the order of the additions (slot j sums
//    elements j, j+256, j+512, ... in index order, then a fixed tree adds
//    s[j] += s[j+h] for h = 128, 64, ..., 1); each thread takes the slots
//    t, t + threads, ... (one each in kdag's launch), and blocks other than
//    the first return at once. No shape traps: a trap would poison the
//    device's context for every session of the process.
//
// Overlap: dst/out/y may be the very same view as an input (each element is
// read before it is written by the same thread); partially overlapping views
// give undefined results.
//
// Integers are added in unsigned arithmetic (wrapping, no UB); floats are
// IEEE with no contraction: axpy rounds the product and then the sum
// (__fmul_rn/__fadd_rn), as the host code does.
//
// ABI (every kd_kview is 144 bytes, kd_kpattern 16):
//   kd_fill_e{1,2,4,8,16}(kd_kview dst, kd_kpattern value)
//   kd_copy_e{1,2,4,8,16}(kd_kview dst, kd_kview src)
//   kd_add_{f32,f64,i32,i64,u8}(kd_kview out, kd_kview a, kd_kview b)
//   (u32 and u64 run as i32 and i64: the same wrapping bits)
//   kd_axpy_{f32,f64}(kd_kview y, kd_kview x, double alpha)
//   kd_scale_{f32,f64}(kd_kview y, double alpha)
//   kd_sum_{f32,f64,i32,i64,u8}(kd_kview out, kd_kview x)
//   kd_{add,axpy,scale,sum}_{f16,bf16}: as the f32 ones, computing in f32
//   between exact widening and one rounding to the 16-bit type (strided.h);
//   sum keeps its 256 partial sums in f32.
#include "strided.h"

namespace {

// The element of each size moved by fill and copy: plain bits.
template <int E> struct Bits;
template <> struct Bits<1> { typedef unsigned char T; };
template <> struct Bits<2> { typedef unsigned short T; };
template <> struct Bits<4> { typedef unsigned int T; };
template <> struct Bits<8> { typedef unsigned long long T; };
struct Bits16 { unsigned long long lo, hi; };  // 8-byte aligned
template <> struct Bits<16> { typedef Bits16 T; };

// The low E bytes of a pattern as an element (little-endian device).
template <int E> __device__ __forceinline__ typename Bits<E>::T pattern_value(const kd_kpattern &p) {
  return (typename Bits<E>::T)p.w[0];
}
template <> __device__ __forceinline__ Bits16 pattern_value<16>(const kd_kpattern &p) {
  Bits16 b;
  b.lo = p.w[0];
  b.hi = p.w[1];
  return b;
}

template <typename T> __device__ __forceinline__ T *at(const kd_kview &v, long long linear) {
  return reinterpret_cast<T *>(v.base + (unsigned long long)(kd_kview_offset(&v, linear) * (long long)sizeof(T)));
}

// One index per thread of the whole launch, folded over all dimensions.
__device__ __forceinline__ long long thread_index() {
  unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  unsigned long long in_block = ((unsigned long long)threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  return (long long)(block * ((unsigned long long)blockDim.x * blockDim.y * blockDim.z) + in_block);
}

__device__ __forceinline__ long long thread_count() {
  return (long long)((unsigned long long)gridDim.x * gridDim.y * gridDim.z *
                     ((unsigned long long)blockDim.x * blockDim.y * blockDim.z));
}

// Programmatic dependent launch (docs/pdl.md): every built-in waits for the
// kernels it depends on before its first global read or write, so kdag may
// launch it programmatically (the wait is a no-op without such a launch).
// No early trigger: dependents start as this grid's blocks exit, and do not
// take SM room from it while it still has blocks to run.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

#define KD_GRID_STRIDE(i, n) for (long long i = thread_index(), i##_step = thread_count(); i < (n); i += i##_step)

template <int E> __device__ __forceinline__ void fill(const kd_kview &dst, const kd_kpattern &value) {
  typedef typename Bits<E>::T T;
  const T v = pattern_value<E>(value);
  const long long n = kd_kview_numel(&dst);
  KD_GRID_STRIDE(i, n) *at<T>(dst, i) = v;
}

template <int E> __device__ __forceinline__ void copy(const kd_kview &dst, const kd_kview &src) {
  typedef typename Bits<E>::T T;
  const long long n = kd_kview_numel(&dst);
  KD_GRID_STRIDE(i, n) *at<T>(dst, i) = *at<const T>(src, i);
}

// Arithmetic per element type: integers wrap through their unsigned type.
__device__ __forceinline__ float add_op(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_op(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ unsigned int add_op(unsigned int a, unsigned int b) { return a + b; }
__device__ __forceinline__ unsigned long long add_op(unsigned long long a, unsigned long long b) { return a + b; }
__device__ __forceinline__ unsigned char add_op(unsigned char a, unsigned char b) { return (unsigned char)(a + b); }

template <typename T> __device__ __forceinline__ void add(const kd_kview &out, const kd_kview &a, const kd_kview &b) {
  const long long n = kd_kview_numel(&out);
  KD_GRID_STRIDE(i, n) *at<T>(out, i) = add_op(*at<const T>(a, i), *at<const T>(b, i));
}

__device__ __forceinline__ float mul_op(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_op(double a, double b) { return __dmul_rn(a, b); }

// y = alpha*x + y: the product is rounded, then the sum (never an FMA).
template <typename T> __device__ __forceinline__ void axpy(const kd_kview &y, const kd_kview &x, double alpha) {
  const T a = (T)alpha;
  const long long n = kd_kview_numel(&y);
  KD_GRID_STRIDE(i, n) {
    T *yi = at<T>(y, i);
    *yi = add_op(mul_op(a, *at<const T>(x, i)), *yi);
  }
}

template <typename T> __device__ __forceinline__ void scale(const kd_kview &y, double alpha) {
  const T a = (T)alpha;
  const long long n = kd_kview_numel(&y);
  KD_GRID_STRIDE(i, n) {
    T *yi = at<T>(y, i);
    *yi = mul_op(a, *yi);
  }
}

// Deterministic one-block sum; see the launch rules above.
template <typename T> __device__ __forceinline__ void sum(const kd_kview &out, const kd_kview &x) {
  __shared__ T s[KD_KSUM_THREADS];
  if (blockIdx.x | blockIdx.y | blockIdx.z) return; // a whole block leaves: no barrier is split
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const long long n = kd_kview_numel(&x);
  for (unsigned j = t; j < KD_KSUM_THREADS; j += threads) {
    T acc = (T)0;
    for (long long i = j; i < n; i += KD_KSUM_THREADS) acc = add_op(acc, *at<const T>(x, i));
    s[j] = acc;
  }
  __syncthreads();
#pragma unroll
  for (unsigned h = KD_KSUM_THREADS / 2; h > 0; h >>= 1) {
    for (unsigned j = t; j < h; j += threads) s[j] = add_op(s[j], s[j + h]);
    __syncthreads();
  }
  if (t == 0) *reinterpret_cast<T *>(out.base) = s[0];
}

// 16-bit floats: stored as bits, computed in f32 (kernels/strided.h).
struct F16 {
  typedef unsigned short Bits;
  static __device__ __forceinline__ float load(Bits b) { return kd_kf16_to_f32(b); }
  static __device__ __forceinline__ Bits store(float f) { return kd_kf32_to_f16(f); }
};
struct BF16 {
  typedef unsigned short Bits;
  static __device__ __forceinline__ float load(Bits b) { return kd_kbf16_to_f32(b); }
  static __device__ __forceinline__ Bits store(float f) { return kd_kf32_to_bf16(f); }
};

template <typename S> __device__ __forceinline__ void add16(const kd_kview &out, const kd_kview &a, const kd_kview &b) {
  typedef typename S::Bits B;
  const long long n = kd_kview_numel(&out);
  KD_GRID_STRIDE(i, n) *at<B>(out, i) = S::store(__fadd_rn(S::load(*at<const B>(a, i)), S::load(*at<const B>(b, i))));
}

template <typename S> __device__ __forceinline__ void axpy16(const kd_kview &y, const kd_kview &x, double alpha) {
  typedef typename S::Bits B;
  const float a = (float)alpha;
  const long long n = kd_kview_numel(&y);
  KD_GRID_STRIDE(i, n) {
    B *yi = at<B>(y, i);
    *yi = S::store(__fadd_rn(__fmul_rn(a, S::load(*at<const B>(x, i))), S::load(*yi)));
  }
}

template <typename S> __device__ __forceinline__ void scale16(const kd_kview &y, double alpha) {
  typedef typename S::Bits B;
  const float a = (float)alpha;
  const long long n = kd_kview_numel(&y);
  KD_GRID_STRIDE(i, n) {
    B *yi = at<B>(y, i);
    *yi = S::store(__fmul_rn(a, S::load(*yi)));
  }
}

// sum's fixed order, with f32 partial sums.
template <typename S> __device__ __forceinline__ void sum16(const kd_kview &out, const kd_kview &x) {
  typedef typename S::Bits B;
  __shared__ float s[KD_KSUM_THREADS];
  if (blockIdx.x | blockIdx.y | blockIdx.z) return;
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const long long n = kd_kview_numel(&x);
  for (unsigned j = t; j < KD_KSUM_THREADS; j += threads) {
    float acc = 0.0f;
    for (long long i = j; i < n; i += KD_KSUM_THREADS) acc = __fadd_rn(acc, S::load(*at<const B>(x, i)));
    s[j] = acc;
  }
  __syncthreads();
#pragma unroll
  for (unsigned h = KD_KSUM_THREADS / 2; h > 0; h >>= 1) {
    for (unsigned j = t; j < h; j += threads) s[j] = __fadd_rn(s[j], s[j + h]);
    __syncthreads();
  }
  if (t == 0) *reinterpret_cast<B *>(out.base) = S::store(s[0]);
}

}  // namespace

#define KD_FILL_COPY(E)                                                                                                     \
  extern "C" __global__ void kd_fill_e##E(kd_kview dst, kd_kpattern value) { grid_dependency_wait(); fill<E>(dst, value); } \
  extern "C" __global__ void kd_copy_e##E(kd_kview dst, kd_kview src) { grid_dependency_wait(); copy<E>(dst, src); }
KD_FILL_COPY(1)
KD_FILL_COPY(2)
KD_FILL_COPY(4)
KD_FILL_COPY(8)
KD_FILL_COPY(16)

#define KD_ARITH(name, T)                                                                                                       \
  extern "C" __global__ void kd_add_##name(kd_kview out, kd_kview a, kd_kview b) { grid_dependency_wait(); add<T>(out, a, b); } \
  extern "C" __global__ void kd_sum_##name(kd_kview out, kd_kview x) { grid_dependency_wait(); sum<T>(out, x); }
KD_ARITH(f32, float)
KD_ARITH(f64, double)
KD_ARITH(i32, unsigned int)
KD_ARITH(i64, unsigned long long)
KD_ARITH(u8, unsigned char)

#define KD_FLOAT(name, T)                                                                                                           \
  extern "C" __global__ void kd_axpy_##name(kd_kview y, kd_kview x, double alpha) { grid_dependency_wait(); axpy<T>(y, x, alpha); } \
  extern "C" __global__ void kd_scale_##name(kd_kview y, double alpha) { grid_dependency_wait(); scale<T>(y, alpha); }
KD_FLOAT(f32, float)
KD_FLOAT(f64, double)

#define KD_HALF(name, S)                                                                                                              \
  extern "C" __global__ void kd_add_##name(kd_kview out, kd_kview a, kd_kview b) { grid_dependency_wait(); add16<S>(out, a, b); }     \
  extern "C" __global__ void kd_sum_##name(kd_kview out, kd_kview x) { grid_dependency_wait(); sum16<S>(out, x); }                    \
  extern "C" __global__ void kd_axpy_##name(kd_kview y, kd_kview x, double alpha) { grid_dependency_wait(); axpy16<S>(y, x, alpha); } \
  extern "C" __global__ void kd_scale_##name(kd_kview y, double alpha) { grid_dependency_wait(); scale16<S>(y, alpha); }
KD_HALF(f16, F16)
KD_HALF(bf16, BF16)
