/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: NCCL, loaded at run time like NVRTC (base/dynlib.h). kdag is
 * built without NCCL's headers: the few types and values it passes are
 * declared here as NCCL's ABI defines them (nccl.h, 2.x). */
#ifndef KDAG_CUDA_NCCL_H
#define KDAG_CUDA_NCCL_H

#include <cuda.h>

#include "kdag/status.h"
#include "kdag/tensor.h"

typedef struct kd_nccl_comm_ *kd_nccl_comm;           /* ncclComm_t */
typedef struct { char internal[128]; } kd_nccl_id;    /* ncclUniqueId */
typedef int kd_nccl_result;                           /* ncclResult_t: 0 success, 7 in progress */

/* ncclDataType_t and ncclRedOp_t values. */
enum { KD_NCCL_INT8 = 0, KD_NCCL_UINT8 = 1, KD_NCCL_INT32 = 2, KD_NCCL_UINT32 = 3, KD_NCCL_INT64 = 4,
       KD_NCCL_UINT64 = 5, KD_NCCL_FLOAT16 = 6, KD_NCCL_FLOAT32 = 7, KD_NCCL_FLOAT64 = 8, KD_NCCL_BFLOAT16 = 9 };

typedef struct kd_nccl_api {
  kd_nccl_result (*GetVersion)(int *version);
  const char *(*GetErrorString)(kd_nccl_result r);
  const char *(*GetLastError)(kd_nccl_comm comm);
  kd_nccl_result (*GetUniqueId)(kd_nccl_id *id);
  kd_nccl_result (*CommInitRank)(kd_nccl_comm *comm, int nranks, kd_nccl_id id, int rank);
  kd_nccl_result (*CommDestroy)(kd_nccl_comm comm);
  kd_nccl_result (*CommAbort)(kd_nccl_comm comm);
  kd_nccl_result (*CommGetAsyncError)(kd_nccl_comm comm, kd_nccl_result *err);
  kd_nccl_result (*AllReduce)(const void *send, void *recv, size_t count, int dtype, int op, kd_nccl_comm comm,
                              CUstream stream);
  kd_nccl_result (*ReduceScatter)(const void *send, void *recv, size_t recvcount, int dtype, int op,
                                  kd_nccl_comm comm, CUstream stream);
  kd_nccl_result (*AllGather)(const void *send, void *recv, size_t sendcount, int dtype, kd_nccl_comm comm,
                              CUstream stream);
  kd_nccl_result (*Broadcast)(const void *send, void *recv, size_t count, int dtype, int root, kd_nccl_comm comm,
                              CUstream stream);
  kd_nccl_result (*Send)(const void *send, size_t count, int dtype, int peer, kd_nccl_comm comm, CUstream stream);
  kd_nccl_result (*Recv)(void *recv, size_t count, int dtype, int peer, kd_nccl_comm comm, CUstream stream);
  kd_nccl_result (*GroupStart)(void);
  kd_nccl_result (*GroupEnd)(void);
} kd_nccl_api;

/* NCCL's functions, loaded once per process (KDAG_NCCL_PATH, libnccl.so.2,
 * the nvidia-nccl wheel); errors name op. */
kd_status kd_nccl_load(const char *op, const kd_nccl_api **out);
/* A failed NCCL call as KD_ERR_COMM_FAILED: "op: what: NCCL's error
 * string (code): its last error". */
kd_status kd_nccl_fail(const kd_nccl_api *api, kd_nccl_comm comm, kd_nccl_result r, const char *op,
                       const char *what);

#endif
