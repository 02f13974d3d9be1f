/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: loaded modules, their functions' ABI, and kernel launch. */
#ifndef KDAG_CUDA_MODULE_H
#define KDAG_CUDA_MODULE_H

#include "cuda/device.h"
#include "compile/ptx.h"
#include "kdag/raw.h"

/* What kdag knows of a kernel's grid-dependency wait (KD_LAUNCH_PDL). */
typedef enum kd_grid_wait {
  KD_GRID_WAIT_UNKNOWN = -1, /* loaded from an image: the flag is taken at its word */
  KD_GRID_WAIT_NONE = 0,     /* PTX for sm_90 or later without griddepcontrol.wait: the flag is refused */
  KD_GRID_WAIT_YES = 1,      /* its PTX has the wait (or a .func of its module has) */
  KD_GRID_WAIT_PRE_SM90 = 2  /* PTX for a target before sm_90, which has no wait: launched plainly */
} kd_grid_wait;

typedef struct kd_cu_function {
  char *name;
  CUfunction fn;
  uint32_t param_count;
  uint32_t *param_sizes;   /* param_count entries */
  int params_known;        /* 0: neither driver nor PTX could tell */
  int max_threads;         /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK */
  int static_smem;         /* CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES */
  int dyn_smem_limit;      /* current CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
  kd_grid_wait grid_wait;  /* KD_LAUNCH_PDL's wait, as far as kdag can tell */
} kd_cu_function;

typedef struct kd_cu_module {
  CUmodule mod;
  size_t image_bytes;      /* what was loaded: the PTX text or the image */
  int has_ptx;
  kd_ptx_info ptx;         /* when loaded from PTX: the .entry signatures */
  int grid_wait;           /* an image whose every kernel waits (kdag's built-ins for sm_90+): the
                              functions' grid_wait is KD_GRID_WAIT_YES rather than unknown */
  kd_cu_function *fns;
  size_t fn_count, fn_cap;
} kd_cu_module;

kd_status kd_cu_module_load_ptx(kd_device *d, const char *op, const char *ptx,
                                size_t len, kd_cu_module *out);
kd_status kd_cu_module_load_image(kd_device *d, const char *op, const void *image,
                                  size_t size, kd_cu_module *out);
/* Looks up (or finds already looked up) a kernel; *index into fns. */
kd_status kd_cu_module_function(kd_device *d, const char *op, kd_cu_module *m,
                                const char *name, uint32_t *index);
/* Loading and unloading wait for all work in the context, whoever
 * enqueued it (tools/wait-probe): each call is counted in
 * d->context_waits, and the engine makes them only where a caller asked
 * for a wait (session/module.c). */
void kd_cu_module_unload(kd_device *d, kd_cu_module *m);

/* Checks a config against the function and the device, raising the
 * function's dynamic shared-memory limit when the request needs it and the
 * device allows it. Errors: KD_ERR_LAUNCH_CONFIG naming the field. */
kd_status kd_cu_check_config(kd_device *d, const char *op, kd_cu_function *f,
                             const kd_launch_config *c);

/* Config checks that need no function (shared by every launch path). */
kd_status kd_launch_config_check_dims(const char *op, const kd_launch_config *c);

/* programmatic: launched with programmatic stream serialization (the
 * caller has checked d->pdl and that the kernel before it on the stream
 * is one it may overlap with). */
kd_status kd_cu_launch(kd_device *d, const char *op, kd_cu_function *f,
                       const kd_launch_config *c, void **params, int programmatic);

#endif
