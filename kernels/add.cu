// SPDX-License-Identifier: Apache-2.0
// The seed's add kernel: out[i] = lhs[i] + rhs[i] for i < n.
// ABI: (float *out, const float *lhs, const float *rhs, int n).
extern "C" __global__ void add_kernel(float *out, const float *lhs, const float *rhs, int n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;  // 64-bit: a 32-bit product wraps past n
  if (i < n) out[i] = lhs[i] + rhs[i];
}
