/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: a CUDA driver result as a kd_status with a message, at the
 * call site (the CUDA layer and the executors that call the driver). */
#ifndef KDAG_CUDA_CU_STATUS_H
#define KDAG_CUDA_CU_STATUS_H

#include <cuda.h>

#include "kdag/status.h"

/* The kdag code a driver result stands for (CUDA_SUCCESS -> KD_OK). */
kd_status kd_status_from_cu(CUresult result);

/* 1 for results that poison the context (illegal address, trap, ...). */
int kd_cu_is_sticky(CUresult result);

/* "<op>: <call> failed: CUDA_ERROR_X (driver text)" with the mapped code.
 * Use at the call site: kd_fail_cu(r, "kd_tensor_create", "cuMemAllocFromPoolAsync"). */
kd_status kd_fail_cu(CUresult result, const char *op, const char *call);

#endif
