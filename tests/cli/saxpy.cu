// SPDX-License-Identifier: Apache-2.0
// A kernel of a user's own, for kdag-bench --kernel (ctest host_bench_user_kernel).
extern "C" __global__ void saxpy(float *y, const float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
