/* SPDX-License-Identifier: Apache-2.0 */
/* fault-probe: what a sticky device fault leaves usable in one process.
 *
 * Each route runs in its own forked child (CUDA is never initialised in
 * the parent): fault the primary context with a kernel (a trap or an
 * illegal address), then try to get a working context back in the same
 * process, and print every driver result on the way. kdag's fault
 * recovery (cuda/device.c) follows what this shows on the real GPU.
 *
 *   cc -std=c11 -O2 -I$CUDA/include tools/fault-probe.c -L$CUDA/lib64/stubs -lcuda -o fault-probe
 *   ./fault-probe            (needs a GPU; prints one block per route)
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *ptx =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry trap_k() { trap; ret; }\n"
    ".visible .entry bad_k() { .reg .b64 %a; .reg .b32 %v; mov.u64 %a, 8; ld.global.u32 %v, [%a];\n"
    "  st.global.u32 [%a], %v; ret; }\n"
    ".visible .entry ok_k(.param .u64 p) { .reg .b64 %a; .reg .b32 %v; ld.param.u64 %a, [p];\n"
    "  mov.u32 %v, 42; st.global.u32 [%a], %v; ret; }\n";

static int step(const char *what, CUresult r) {
  const char *name = "?";
  cuGetErrorName(r, &name);
  printf("  %-44s %s\n", what, name);
  fflush(stdout);
  return r == CUDA_SUCCESS;
}

/* Loads the module in the current context and runs ok_k: 1 when it wrote 42. */
static int works(const char *where) {
  CUmodule m;
  CUfunction f;
  CUdeviceptr p;
  unsigned v = 0;
  char what[96];
  snprintf(what, sizeof what, "%s: cuModuleLoadData", where);
  if (!step(what, cuModuleLoadData(&m, ptx))) return 0;
  snprintf(what, sizeof what, "%s: cuMemAlloc", where);
  if (!step(what, cuModuleGetFunction(&f, m, "ok_k")) || !step(what, cuMemAlloc(&p, 4))) return 0;
  void *args[] = {&p};
  snprintf(what, sizeof what, "%s: launch ok_k + cuCtxSynchronize", where);
  if (!step(what, cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL)) || !step(what, cuCtxSynchronize()))
    return 0;
  snprintf(what, sizeof what, "%s: cuMemcpyDtoH", where);
  if (!step(what, cuMemcpyDtoH(&v, p, 4))) return 0;
  cuMemFree(p);
  cuModuleUnload(m);
  printf("  %-44s %s\n", where, v == 42 ? "WORKS" : "wrong value");
  return v == 42;
}

typedef enum { R_PRIMARY_RESET, R_RESET_KEEP_RETAIN, R_NEW_CONTEXT, R_RESET_THEN_NEW_CONTEXT } route;

static int probe(const char *kernel, route how, int clean) {
  CUdevice dev;
  CUcontext ctx, fresh;
  CUmodule m;
  CUfunction f;
  CUstream s;
  if (!step("cuInit", cuInit(0)) || !step("cuDeviceGet", cuDeviceGet(&dev, 0)) ||
      !step("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&ctx, dev)) ||
      !step("cuCtxSetCurrent", cuCtxSetCurrent(ctx)) || !works("before the fault") ||
      !step("cuModuleLoadData", cuModuleLoadData(&m, ptx)) ||
      !step("cuModuleGetFunction", cuModuleGetFunction(&f, m, kernel)) ||
      !step("cuStreamCreate", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)))
    return 1;
  step("launch the faulting kernel", cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  step("cuStreamSynchronize (the fault)", cuStreamSynchronize(s));
  if (clean) {
    step("cuStreamDestroy", cuStreamDestroy(s));
    step("cuModuleUnload", cuModuleUnload(m));
  }
  step("cuCtxSetCurrent(NULL)", cuCtxSetCurrent(NULL));
  if (how != R_RESET_KEEP_RETAIN && how != R_NEW_CONTEXT) step("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease(dev));
  if (how != R_NEW_CONTEXT) step("cuDevicePrimaryCtxReset", cuDevicePrimaryCtxReset(dev));
  unsigned flags = 0;
  int active = -1;
  step("cuDevicePrimaryCtxGetState", cuDevicePrimaryCtxGetState(dev, &flags, &active));
  printf("  %-44s %d\n", "primary context active", active);
  if (how == R_NEW_CONTEXT || how == R_RESET_THEN_NEW_CONTEXT) {
    CUctxCreateParams none;
    memset(&none, 0, sizeof none);
    if (!step("cuCtxCreate (a new, non-primary context)", cuCtxCreate(&fresh, &none, 0, dev))) return 1;
    return works("new context") ? 0 : 1;
  }
  if (!step("cuDevicePrimaryCtxRetain (again)", cuDevicePrimaryCtxRetain(&ctx, dev)) ||
      !step("cuCtxSetCurrent", cuCtxSetCurrent(ctx)))
    return 1;
  return works("primary context after the reset") ? 0 : 1;
}

int main(void) {
  static const struct { const char *kernel; route how; int clean; const char *name; } routes[] = {
      {"trap_k", R_PRIMARY_RESET, 1, "trap; clean teardown; release; reset; retain"},
      {"trap_k", R_PRIMARY_RESET, 0, "trap; objects left; release; reset; retain"},
      {"trap_k", R_RESET_KEEP_RETAIN, 1, "trap; reset while still retained; retain"},
      {"bad_k", R_PRIMARY_RESET, 1, "illegal address; clean teardown; release; reset; retain"},
      {"trap_k", R_NEW_CONTEXT, 1, "trap; cuCtxCreate without reset"},
      {"trap_k", R_RESET_THEN_NEW_CONTEXT, 1, "trap; release; reset; cuCtxCreate"},
  };
  int failed = 0;
  for (size_t i = 0; i < sizeof routes / sizeof routes[0]; ++i) {
    printf("route %zu: %s\n", i + 1, routes[i].name);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(probe(routes[i].kernel, routes[i].how, routes[i].clean));
    int status = 0;
    waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    printf("route %zu: %s\n\n", i + 1, ok ? "RECOVERED" : "NOT RECOVERED");
    failed += !ok;
  }
  return 0;
}
