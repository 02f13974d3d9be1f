// The seed's add kernel: out[i] = lhs[i] + rhs[i] for i < n.
// ABI: (float *out, const float *lhs, const float *rhs, int n).
extern "C" __global__ void add_kernel(float *out, const float *lhs, const float *rhs, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = lhs[i] + rhs[i];
}
