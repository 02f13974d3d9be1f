// SPDX-License-Identifier: Apache-2.0
// Kernels the tests use to hold the stream and to provoke faults.

// Spins until `ns` nanoseconds of the GPU's global timer have passed, then
// writes 1 to *done. ABI: (unsigned long long ns, int *done).
extern "C" __global__ void spin_kernel(unsigned long long ns, int *done) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
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
