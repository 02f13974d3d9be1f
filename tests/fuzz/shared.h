/* SPDX-License-Identifier: Apache-2.0 */
/* What the fuzz targets share (tests/fuzz/shared.c): arguments drawn from
 * their input (numbers, views, launch configurations, kernel arguments, a
 * kernel's signature as PTX), the CUDA session over the null driver, and
 * the check that a message names a call. */
#ifndef KDAG_TESTS_FUZZ_SHARED_H
#define KDAG_TESTS_FUZZ_SHARED_H

#include "kdag/kdag.h"
#include "tests/fuzz/fuzz.h"

/* Mostly small numbers; sometimes ones that overflow what they multiply. */
int64_t kdf_number(kdf_input *in);
/* A view of tensor of the given rank with every offset, shape and stride
 * (all KD_MAX_RANK of them) a kdf_number. */
kd_view kdf_wild_view(kdf_input *in, kd_tensor tensor, int rank);
/* Mostly 1 to 4 blocks and threads a dimension, sometimes 0, past the
 * limits, or past 2^31; rarely dynamic shared memory, of any size. */
kd_launch_config kdf_launch_config(kdf_input *in);
/* A value argument: any kind, some not a value kind or none at all; BYTES
 * point into a static buffer (or are NULL). */
kd_arg kdf_value(kdf_input *in);
/* The bytes a value argument passes. */
size_t kdf_value_size(const kd_arg *a);
/* A kernel signature of up to cap parameters (8, 4 or 1 to 40 bytes):
 * the count, sizes in sizes. */
int kdf_signature(kdf_input *in, uint32_t *sizes, int cap);
/* PTX of an empty kernel "k" with that signature, NUL-terminated in buf. */
void kdf_kernel_ptx(char *buf, size_t cap, int count, const uint32_t *sizes);
/* The process's CUDA session over the null driver (KDAG_NULL_DRIVER), made
 * on first use with the given completion ring (0: the default), and that
 * driver's own interface in *api; NULL (reported) if it cannot be made. */
struct kdag_null_api;
kd_session *kdf_null_session(const char *target, uint32_t ring, struct kdag_null_api *api);
/* Length of the kdag call a message starts with ("kd_graph_op_add: ..."), 0
 * if it starts with none. */
size_t kdf_call_length(const char *msg);

#endif
