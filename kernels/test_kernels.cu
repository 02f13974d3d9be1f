// SPDX-License-Identifier: Apache-2.0
// Kernels the tests use to hold the stream and to provoke faults.

// Spins until `ns` nanoseconds of the GPU's global timer have passed.
__device__ __forceinline__ void spin_for(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// Spins for `ns` nanoseconds, then writes 1 to *done. ABI: (unsigned long
// long ns, int *done).
extern "C" __global__ void spin_kernel(unsigned long long ns, int *done) {
  spin_for(ns);
  if (threadIdx.x == 0 && blockIdx.x == 0) *done = 1;
}

// Takes no arguments and does nothing: launch-overhead measurements.
extern "C" __global__ void empty_kernel() {}

// Executes a trap: a sticky device fault. ABI: ().
extern "C" __global__ void trap_kernel() { __trap(); }

// Fills out[0..n) with value. ABI: (int *out, int value, int n).
extern "C" __global__ void fill_i32_kernel(int *out, int value, int n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;  // 64-bit: a 32-bit product wraps past n
  if (i < n) out[i] = value;
}

// Programmatic dependent launch (tests/gpu_pdl_test.c). The wait and the
// trigger exist from sm_90; before it kdag never launches programmatically
// and they are left out.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// Keeps KD_LAUNCH_PDL's contract and lets its dependents start at once: waits,
// triggers, spins `ns`, then writes value to x[0..n) (any grid).
template <typename T> __device__ __forceinline__ void slow_fill(unsigned long long ns, T *x, T value, int n) {
  grid_dependency_wait();
  launch_dependents();
  spin_for(ns);
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    x[i] = value;
}

// Keeps KD_LAUNCH_PDL's contract and lets its dependents start at once: waits,
// triggers, spins `ns`, then writes value to x[0..n). A slow upstream that
// widens every race window after it. ABI: (unsigned long long ns, float *x,
// float value, int n).
extern "C" __global__ void pdl_slow_write(unsigned long long ns, float *x, float value, int n) {
  slow_fill(ns, x, value, n);
}

// Breaks the contract on purpose: reads x[0] before its wait and stores what
// it saw in out[0]. ABI: (const float *x, float *out).
extern "C" __global__ void pdl_early_read(const float *x, float *out) {
  float seen = x[0];
  grid_dependency_wait();
  if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = seen;
}

// Keeps the contract: waits, then out[0] = x[0] + y[0]. ABI: (const float *x,
// const float *y, float *out).
extern "C" __global__ void pdl_read_sum(const float *x, const float *y, float *out) {
  grid_dependency_wait();
  if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = x[0] + y[0];
}

// No wait (does not opt in): y[0] = 2 * x[0]. ABI: (const float *x, float *y).
extern "C" __global__ void plain_double(const float *x, float *y) {
  if (threadIdx.x == 0 && blockIdx.x == 0) y[0] = 2.0f * x[0];
}

// Keeps the contract: y[0] = 2 * x[0] after its wait. ABI: (const float *x,
// float *y).
extern "C" __global__ void pdl_double(const float *x, float *y) {
  grid_dependency_wait();
  if (threadIdx.x == 0 && blockIdx.x == 0) y[0] = 2.0f * x[0];
}

// Keeps KD_LAUNCH_PDL's contract and lets its dependents start at once:
// waits, triggers, spins `ns`, then fills x[0..n) with value. The slow
// upstream of gpu_executors_test's random graphs. ABI: (unsigned long long
// ns, int *x, int value, int n).
extern "C" __global__ void pdl_slow_fill_i32(unsigned long long ns, int *x, int value, int n) {
  slow_fill(ns, x, value, n);
}
