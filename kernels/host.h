/* SPDX-License-Identifier: Apache-2.0 */
/* Host implementations of the built-in kernels (the HOST backend's code and
 * the reference tests compare with). */
#ifndef KDAG_KERNELS_HOST_H
#define KDAG_KERNELS_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/strided.h"

/* out[i] = lhs[i] + rhs[i]; out may alias neither input. */
void kd_host_add_f32(float *out, const float *lhs, const float *rhs, int64_t n);

/* The host twins of kernels/builtins.cu, with the same semantics (see the
 * comment at the top of that file). Views carry host addresses in base
 * ((unsigned long long)(uintptr_t)ptr). All views of one call have the same
 * shape, except sum's out, of which only element 0 is written. An output may
 * be the very same view as an input; partially overlapping views give
 * undefined results. Elements are moved with memcpy, so no alignment is
 * needed on the host. An unknown kd_kdtype does nothing. */

/* Every element of dst = the first esize bytes of value (esize 1..16; the
 * GPU has kernels for 1, 2, 4, 8, 16). */
void kd_host_fill(size_t esize, kd_kview dst, kd_kpattern value);
/* dst[i] = src[i] for every linear index i: strided to strided copy, also
 * canonicalize (compact dst) and transpose (src with permuted shape and
 * strides). Any esize. */
void kd_host_copy(size_t esize, kd_kview dst, kd_kview src);
/* out = a + b (integers wrap). */
void kd_host_add(kd_kdtype t, kd_kview out, kd_kview a, kd_kview b);
/* y = alpha*x + y, F32/F64 only; f32 computes (float)alpha * x, rounds it,
 * then adds y in float (never fused). */
void kd_host_axpy(kd_kdtype t, kd_kview y, kd_kview x, double alpha);
/* y = alpha * y, F32/F64 only (f32: (float)alpha * y in float). */
void kd_host_scale(kd_kdtype t, kd_kview y, double alpha);
/* out element 0 = sum of all x, in the GPU kernel's order: KD_KSUM_THREADS
 * (256) partial sums, partial t adding elements t, t+256, ... in index
 * order, then the fixed tree p[t] += p[t+h] for h = 128, ..., 1; so float
 * results are bit-identical to kd_sum_f32/f64. Integers wrap. */
void kd_host_sum(kd_kdtype t, kd_kview out, kd_kview x);

/* Splitting an element-wise built-in (fill, copy, add, axpy, scale) across
 * threads: each thread runs it on the same slice of every view. Each
 * element still gets the same operations, so the results are the same. */
/* The dimension to slice v along into parts: the outermost with at least
 * parts indices (so slices of a compact view stay compact), else the
 * longest; -1 when v has no dimension. */
int kd_host_split_dim(const kd_kview *v, long long parts);
/* Narrows v to indices [lo, hi) of dimension dim; esize: bytes per
 * element (base is a byte address). */
void kd_host_narrow(kd_kview *v, size_t esize, int dim, long long lo, long long hi);

#endif
