/* SPDX-License-Identifier: Apache-2.0 */
/* CUDA driver results as kdag statuses, converted where each call is made. */
#include "base/status_internal.h"
#include "cuda/cu_status.h"
#include "cuda/driver.h"

int kd_cu_is_sticky(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    /* cuda.h: "the process must be terminated and relaunched" */
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_MPS_CLIENT_TERMINATED:
    case CUDA_ERROR_EXTERNAL_DEVICE:
      return 1;
    default:
      return 0;
  }
}

kd_status kd_status_from_cu(CUresult r) {
  if (r == CUDA_SUCCESS) return KD_OK;
  if (kd_cu_is_sticky(r)) return KD_ERR_DEVICE_FAULT;
  switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY: return KD_ERR_OUT_OF_MEMORY;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: return KD_ERR_NO_BINARY_FOR_GPU;
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: return KD_ERR_UNSUPPORTED_PTX;
    case CUDA_ERROR_NOT_FOUND: return KD_ERR_NOT_FOUND;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE: return KD_ERR_NO_DEVICE;
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_NOT_INITIALIZED: return KD_ERR_DRIVER_MISSING;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return KD_ERR_LAUNCH_CONFIG;
    default: return KD_ERR_DRIVER;
  }
}

kd_status kd_fail_cu(CUresult r, const char *op, const char *call) {
  const char *name = NULL, *text = NULL;
  kd_cu_error_strings(r, &name, &text);
  return kd_fail(kd_status_from_cu(r), "%s: %s failed: %s (%s)", op, call, name,
                 text);
}
