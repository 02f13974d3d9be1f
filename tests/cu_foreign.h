/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA driver as the GPU tests call it themselves, beside kdag, as
 * another library would: resolved from libcuda.so.1 at run time as kdag
 * does (linked against it, a test binary would not even start on the host
 * lane, where GPU tests must skip). For tests only. */
#ifndef KDAG_TESTS_CU_FOREIGN_H
#define KDAG_TESTS_CU_FOREIGN_H

#include <cuda.h>
#include <dlfcn.h>

#include "kdag_test.h"

/* The calls. The name is the base
 * name cuGetProcAddress wants; the member's type is that of the versioned
 * function cuda.h maps it to (cuMemAlloc -> cuMemAlloc_v2). Only calls
 * whose CUDA 13 entry point has that type: not cuCtxSynchronize, whose
 * 13.0 version takes a context. */
#define FOREIGN_CALLS(X)                                                                                \
  X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxPushCurrent) \
  X(cuCtxPopCurrent) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)    \
  X(cuStreamWaitEvent) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel)   \
  X(cuMemAlloc) X(cuMemFree) X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuMemAllocHost) X(cuMemFreeHost)   \
  X(cuMemAllocManaged) X(cuMemsetD32Async) X(cuMemcpyDtoH) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)         \
  X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery) X(cuFuncGetAttribute)            \
  X(cuFuncGetParamInfo)

static struct {
#define FOREIGN_MEMBER(name) __typeof__(name) *name;
  FOREIGN_CALLS(FOREIGN_MEMBER)
#undef FOREIGN_MEMBER
} cu;

static void foreign_resolve(void) {
  if (cu.cuInit) return;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  cr_assert(lib, "libcuda.so.1: %s", dlerror());
  CUresult (*get_proc)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
      (CUresult(*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))dlsym(
          lib, "cuGetProcAddress_v2");
  cr_assert(get_proc, "libcuda.so.1 has no cuGetProcAddress_v2");
#define FOREIGN_RESOLVE(name)                                                                             \
  do {                                                                                                  \
    CUdriverProcAddressQueryResult found;                                                               \
    cr_assert_eq(get_proc(#name, (void **)&cu.name, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found),  \
                 CUDA_SUCCESS, "cuGetProcAddress(%s)", #name);                                          \
  } while (0);
  FOREIGN_CALLS(FOREIGN_RESOLVE)
#undef FOREIGN_RESOLVE
}

#define CU_OK(call)                                                            \
  do {                                                                         \
    CUresult cu_r_ = cu.call;                                                  \
    cr_assert_eq(cu_r_, CUDA_SUCCESS, "%s -> CUresult %d", #call, (int)cu_r_); \
  } while (0)

#endif
