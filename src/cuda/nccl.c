/* SPDX-License-Identifier: Apache-2.0 */
/* NCCL, loaded at run time: kdag links no NCCL, so a program that uses no
 * communicator runs where NCCL is absent. */
#include "cuda/nccl.h"

#include "base/dynlib.h"
#include "base/status_internal.h"

static kd_nccl_api g_nccl;
/* In the order of kd_nccl_api's fields. */
static const char *const g_nccl_names[] = {
    "ncclGetVersion", "ncclGetErrorString", "ncclGetLastError", "ncclGetUniqueId", "ncclCommInitRank",
    "ncclCommDestroy", "ncclCommAbort", "ncclCommGetAsyncError", "ncclAllReduce", "ncclReduceScatter",
    "ncclAllGather", "ncclBroadcast", "ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd",
};
_Static_assert(sizeof g_nccl == sizeof g_nccl_names / sizeof g_nccl_names[0] * sizeof(void (*)(void)),
               "one function pointer per NCCL symbol");

static kd_dynlib_lib g_nccl_lib = {
    .what = "NCCL",
    .env = "KDAG_NCCL_PATH",
    .soname = "libnccl.so.2",
    .wheel = "nccl",
    .hint = "Install NCCL (libnccl2, or pip's nvidia-nccl-cu13 with KDAG_PYTHON_SITE set) or point "
            "KDAG_NCCL_PATH at libnccl.so.2",
    .names = g_nccl_names,
    .fns = &g_nccl,
    .count = sizeof g_nccl_names / sizeof g_nccl_names[0],
    KD_DYNLIB_INIT,
};

kd_status kd_nccl_load(const char *op, const kd_nccl_api **out) {
  kd_status st = kd_dynlib_load(&g_nccl_lib, op);
  if (!st) *out = &g_nccl;
  return st;
}

kd_status kd_nccl_fail(const kd_nccl_api *api, kd_nccl_comm comm, kd_nccl_result r, const char *op,
                       const char *what) {
  const char *text = api->GetErrorString ? api->GetErrorString(r) : NULL;
  const char *last = api->GetLastError ? api->GetLastError(comm) : NULL;
  return kd_fail(KD_ERR_COMM_FAILED, "%s: %s: NCCL %s (%d)%s%s", op, what, text ? text : "error", r,
                 last && *last ? ": " : "", last && *last ? last : "");
}
