/* SPDX-License-Identifier: Apache-2.0 */
/* GPU lane: what kdag reads out of a CUBIN on the CPU (kdag inspect,
 * compile/image_kernels.h) against what the driver says of the loaded
 * kernels: registers (CU_FUNC_ATTRIBUTE_NUM_REGS), static shared memory
 * (SHARED_SIZE_BYTES: the shared section less the 1 KiB ptxas reserves for
 * sm_90 on), and each parameter's offset and size (cuFuncGetParamInfo),
 * over every kernel kdag embeds. Skips without a GPU (fails with
 * KDAG_REQUIRE_GPU=1). */
#include "compile/image_kernels.h"
#include "compile/ptx.h"
#include "cu_foreign.h"
#include "kernels/embedded.h"

static int compare(const char *what, const unsigned char *image, size_t size) {
  kd_image_kernel *ks;
  size_t n;
  KDT_OK(kd_image_kernels("test", image, size, &ks, &n));
  cr_assert_gt(n, 0, "%s: no kernel read", what);
  kd_image_info info = kd_image_inspect(image, size);
  CUmodule mod;
  CU_OK(cuModuleLoadData(&mod, image));
  for (size_t i = 0; i < n; ++i) {
    const kd_image_kernel *k = &ks[i];
    CUfunction fn;
    CU_OK(cuModuleGetFunction(&fn, mod, k->name));
    int regs = -1, shared = -1;
    CU_OK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn));
    CU_OK(cuFuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn));
    cr_assert_eq(k->registers, regs, "%s/%s: %d registers read, the driver says %d", what, k->name, k->registers, regs);
    int64_t reserved = info.sm[0] >= 90 && k->shared_section_bytes >= 1024 ? 1024 : 0;
    cr_assert_eq(k->shared_section_bytes - reserved, shared, "%s/%s: shared section %lld, the driver says %d static",
                 what, k->name, (long long)k->shared_section_bytes, shared);
    size_t count = 0;
    for (;; ++count) {
      size_t offset, psize;
      CUresult r = cu.cuFuncGetParamInfo(fn, count, &offset, &psize);
      if (r == CUDA_ERROR_INVALID_VALUE) break;
      cr_assert_eq(r, CUDA_SUCCESS, "cuFuncGetParamInfo(%s, %zu)", k->name, count);
      cr_assert_lt((int)count, k->param_count, "%s/%s: the driver has more parameters than read", what, k->name);
      cr_assert_eq(k->params[count].offset, offset, "%s/%s: parameter %zu offset", what, k->name, count);
      cr_assert_eq(k->params[count].size, psize, "%s/%s: parameter %zu size", what, k->name, count);
    }
    cr_assert_eq((int)count, k->param_count, "%s/%s: %d parameters read, the driver has %zu",
                 what, k->name, k->param_count, count);
  }
  CU_OK(cuModuleUnload(mod));
  kd_image_kernels_free(ks, n);
  return (int)n;
}

Test(gpu_inspect, cubin_kernels_read_on_the_cpu_match_the_driver) {
  kd_session *s = kdt_gpu_session();
  kd_device_info dev;
  KDT_OK(kd_session_device_info(s, &dev));
  foreign_resolve();
  CUdevice d;
  CUcontext ctx;
  CU_OK(cuInit(0));
  CU_OK(cuDeviceGet(&d, dev.ordinal));
  CU_OK(cuDevicePrimaryCtxRetain(&ctx, d));
  CU_OK(cuCtxPushCurrent(ctx));
  int kernels = compare("test kernels", kd_kernel_test_cubin, kd_kernel_test_cubin_size) +
                compare("add", kd_kernel_add_cubin, kd_kernel_add_cubin_size) +
                compare("built-ins", kd_kernel_builtins_cubin, kd_kernel_builtins_cubin_size);
  fprintf(stderr, "inspect witness: %d kernels, registers, shared memory and parameters as the driver has them\n",
          kernels);
  CUcontext popped;
  CU_OK(cuCtxPopCurrent(&popped));
  CU_OK(cuDevicePrimaryCtxRelease(d));
  kd_session_destroy(s);
}
