// SPDX-License-Identifier: Apache-2.0
// Kernels of kdag-bench's suites (bench/): small, deterministic work whose
// outputs nobody checks, sized so one instance does not fill the GPU.

// Fan-out work: thread i runs `iters` dependent multiply-adds from i and
// writes the result to out[i] (i < n). Launched as one block of 128 threads
// with iters = 2048 it keeps one SM busy for a few microseconds, so
// independent instances can overlap. ABI: (float *out, int n, int iters);
// writes out[0..n), reads nothing.
extern "C" __global__ void bench_work_kernel(float *out, int n, int iters) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;  // 64-bit: a 32-bit product wraps past n
  float x = (float)i;
  for (int k = 0; k < iters; ++k) x = x * 0.999f + 0.5f;
  if (i < n) out[i] = x;
}

// One step of a chain: out[i] = 0.5 * in[i] + 1 for i < n.
// ABI: (float *out, const float *in, int n); out and in must not overlap.
extern "C" __global__ void bench_step_kernel(float *out, const float *in, int n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;  // 64-bit: a 32-bit product wraps past n
  if (i < n) out[i] = 0.5f * in[i] + 1.0f;
}

// In place: x[i] += 1 for i < n. ABI: (float *x, int n).
extern "C" __global__ void bench_inc_kernel(float *x, int n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;  // 64-bit: a 32-bit product wraps past n
  if (i < n) x[i] += 1.0f;
}

// One step of a dependent chain (suite pdl): after the grid-dependency wait,
// x[t] = 0.5 * x[t] + 1 for the threads of one block (128 floats), then
// lets its dependents launch (a hint: it is done). Keeps KD_LAUNCH_PDL's
// contract; without a programmatic launch both are no-ops. ABI: (float *x).
extern "C" __global__ void bench_pdl_step(float *x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  x[threadIdx.x] = 0.5f * x[threadIdx.x] + 1.0f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Holds the stream for `ns` nanoseconds of the global timer, so that the
// launches queued behind it run at the GPU's pace, not the host's.
// ABI: (unsigned long long ns).
extern "C" __global__ void bench_spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
