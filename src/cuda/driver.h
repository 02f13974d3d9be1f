/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: the dlopen'd CUDA driver. kdag never links libcuda; it loads
 * libcuda.so.1 (or $KDAG_CUDA_DRIVER_PATH) once per process and resolves the
 * symbols of driver_symbols.h through cuGetProcAddress. */
#ifndef KDAG_CUDA_DRIVER_H
#define KDAG_CUDA_DRIVER_H

#include <cuda.h>

#include "kdag/status.h"

typedef struct kd_cu_table {
#define KD_CU_SYMBOL(name) __typeof__(name) *name;
#define KD_CU_SYMBOL_OPTIONAL(name) __typeof__(name) *name;
#include "cuda/driver_symbols.h"
#undef KD_CU_SYMBOL
#undef KD_CU_SYMBOL_OPTIONAL
  int driver_version;  /* cuDriverGetVersion */
  char path[512];      /* the library that was loaded */
} kd_cu_table;

/* Loads and initialises the driver (cuInit) on first call; later calls
 * return the same table or the same failure (with its message re-set on the
 * calling thread). op names the kdag operation for the message.
 * Errors: KD_ERR_DRIVER_MISSING (no library, too old, toolkit stub),
 * KD_ERR_NO_DEVICE (cuInit says there is none), KD_ERR_DRIVER. */
kd_status kd_driver_load(const char *op, const kd_cu_table **out);

/* Name and text of a result even when the driver is not loaded. */
void kd_cu_error_strings(CUresult r, const char **name, const char **text);

/* Highest PTX ISA (x10) a driver of this version accepts; 0 if unknown. */
int kd_driver_max_ptx_isa(int driver_version);

#endif
