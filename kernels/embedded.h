/* SPDX-License-Identifier: Apache-2.0 */
/* Kernels built at build time by nvcc and embedded in the binary. Each PTX
 * and source array is NUL-terminated and its _size counts the NUL; CUBIN
 * sizes are the image's. The CUBINs target KDAG_CUDA_ARCH (default sm_90);
 * kd_kernel_arch names it. */
#ifndef KDAG_KERNELS_EMBEDDED_H
#define KDAG_KERNELS_EMBEDDED_H

#include <stddef.h>

#define KD_EMBED(name)                     \
  extern const unsigned char name[];       \
  extern const size_t name##_size;

KD_EMBED(kd_kernel_add_ptx)
KD_EMBED(kd_kernel_add_cubin)
KD_EMBED(kd_kernel_add_cubin_sm80)
KD_EMBED(kd_kernel_add_source)
KD_EMBED(kd_kernel_test_ptx)
KD_EMBED(kd_kernel_test_cubin)
/* kdag-bench's kernels (kernels/bench_kernels.cu). */
KD_EMBED(kd_kernel_bench_ptx)
KD_EMBED(kd_kernel_bench_cubin)
/* The built-in kernels of kernels/builtins.cu (ABI and launch rules there). */
KD_EMBED(kd_kernel_builtins_ptx)
KD_EMBED(kd_kernel_builtins_cubin)
KD_EMBED(kd_kernel_builtins_source) /* includes "strided.h": compile with -I<repo>/kernels */
/* The kernels of GRAPH-mode loops (kernels/loop.cu). */
KD_EMBED(kd_kernel_loop_ptx)
KD_EMBED(kd_kernel_loop_cubin)
#undef KD_EMBED

extern const char kd_kernel_arch[];

#endif
