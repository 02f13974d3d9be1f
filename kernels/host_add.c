/* SPDX-License-Identifier: Apache-2.0 */
/* Host implementation of kernels/add.cu, the reference tests compare with. */
#include "kernels/host.h"

void kd_host_add_f32(float *out, const float *lhs, const float *rhs, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = lhs[i] + rhs[i];
}
