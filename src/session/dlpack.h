/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: the DLPack ABI, declared here from the DLPack specification
 * (dlpack.h 1.x: DLManagedTensorVersioned, and the legacy DLManagedTensor)
 * under kdag's own names, so a user's dlpack.h never clashes with kdag's
 * headers. The layout is the ABI: the static asserts pin it for LP64. */
#ifndef KDAG_SESSION_DLPACK_H
#define KDAG_SESSION_DLPACK_H

#include <stddef.h>
#include <stdint.h>

enum { KD_DL_CPU = 1, KD_DL_CUDA = 2, KD_DL_CUDA_HOST = 3, KD_DL_CUDA_MANAGED = 13 }; /* DLDeviceType */
enum { KD_DL_INT = 0, KD_DL_UINT = 1, KD_DL_FLOAT = 2, KD_DL_OPAQUE = 3, KD_DL_BFLOAT = 4, KD_DL_COMPLEX = 5,
       KD_DL_BOOL = 6 }; /* DLDataTypeCode */
/* DLManagedTensorVersioned.flags */
#define KD_DL_FLAG_READ_ONLY (UINT64_C(1) << 0)
#define KD_DL_FLAG_IS_COPIED (UINT64_C(1) << 1)
#define KD_DL_FLAG_IS_SUBBYTE_TYPE_PADDED (UINT64_C(1) << 2)
#define KD_DL_MAJOR 1 /* the major version kdag reads */
#define KD_DL_MINOR 1 /* the minor version kdag writes */

typedef struct kd_dl_device { int32_t device_type; int32_t device_id; } kd_dl_device;
typedef struct kd_dl_dtype { uint8_t code; uint8_t bits; uint16_t lanes; } kd_dl_dtype;
typedef struct kd_dl_tensor {
  void *data;
  kd_dl_device device;
  int32_t ndim;
  kd_dl_dtype dtype;
  int64_t *shape;
  int64_t *strides; /* elements; NULL: C-contiguous (row-major) */
  uint64_t byte_offset;
} kd_dl_tensor;
typedef struct kd_dl_managed {
  kd_dl_tensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct kd_dl_managed *self);
} kd_dl_managed;
typedef struct kd_dl_version { uint32_t major; uint32_t minor; } kd_dl_version;
typedef struct kd_dl_managed_versioned {
  kd_dl_version version;
  void *manager_ctx;
  void (*deleter)(struct kd_dl_managed_versioned *self);
  uint64_t flags;
  kd_dl_tensor dl_tensor;
} kd_dl_managed_versioned;

_Static_assert(sizeof(kd_dl_device) == 8 && sizeof(kd_dl_dtype) == 4, "DLDevice, DLDataType");
_Static_assert(sizeof(kd_dl_tensor) == 48 && offsetof(kd_dl_tensor, ndim) == 16 &&
                   offsetof(kd_dl_tensor, dtype) == 20 && offsetof(kd_dl_tensor, shape) == 24 &&
                   offsetof(kd_dl_tensor, byte_offset) == 40,
               "DLTensor");
_Static_assert(sizeof(kd_dl_managed) == 64 && offsetof(kd_dl_managed, deleter) == 56, "DLManagedTensor");
_Static_assert(sizeof(kd_dl_managed_versioned) == 80 && offsetof(kd_dl_managed_versioned, flags) == 24 &&
                   offsetof(kd_dl_managed_versioned, dl_tensor) == 32,
               "DLManagedTensorVersioned");

#endif
