/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: tensors as session objects (session/tensor.c). Fields are
 * guarded by the session lock; refs are atomic. */
#ifndef KDAG_SESSION_TENSOR_IMPL_H
#define KDAG_SESSION_TENSOR_IMPL_H

#include "base/handle.h"
#include "cuda/device.h"
#include "kdag/tensor.h"
#include "session/borrow.h"

typedef struct kd_session kd_session;

/* Reference counts (ck_pr atomics) count the caller's hold (while its handle
 * is live) plus one per in-flight completion that retains the object. */
typedef struct kd_tensor_obj {
  uint32_t refs;
  uint32_t user_refs;
  uint64_t handle;          /* 0 once the caller released it */
  kd_dtype dtype;
  int rank;
  int64_t shape[KD_MAX_RANK];
  int64_t elements;
  size_t bytes;
  kd_residency residency;
  CUdeviceptr dptr;         /* CUDA session, device residency */
  void *host;               /* host residency, or any tensor of a HOST session */
  int initialized;          /* written by an upload, a submission or a mutable launch argument;
                               an empty tensor is from its creation */
  int counted_retained;     /* bytes are in counters.bytes_retained */
  kd_borrow borrow;
  uint64_t held_by_scope;   /* raw scope that already retains it */
  /* Memory another library owns (kd_tensor_wrap): kdag never frees it,
   * and once the last reference goes, release(release_user) runs after
   * the session lock is let go (kd_tensor_releases_run). */
  int external;
  int read_only;            /* KD_EXTERNAL_READ_ONLY: no node, borrow or upload writes it */
  kd_release_fn release;
  void *release_user;
  struct kd_tensor_obj *next_release; /* in the session's list of releases to run */
} kd_tensor_obj;

kd_status kd_tensor_new(kd_session *s, const char *op, kd_dtype dtype, int rank,
                        const int64_t *shape, kd_residency residency, kd_tensor *out);
void kd_tensor_ref(kd_tensor_obj *o);
/* Drops a reference; the last frees the memory (device memory in stream
 * order). */
void kd_tensor_unref(kd_session *s, kd_tensor_obj *o);
/* Frees whatever the caller never released (session teardown). */
void kd_tensor_destroy_all(kd_session *s);
/* Drops one reference of the caller's kind (kd_tensor_release's work),
 * with the session locked by the caller. */
void kd_tensor_drop_user_ref(kd_session *s, kd_tensor_obj *o);
/* Cuts the session's live DLPack exports loose (kd_session_destroy, before
 * any release callback can run their deleters): a later deleter frees
 * its struct alone. */
void kd_dl_exports_orphan(kd_session *s);
/* kd_tensor_wrap, its errors naming op and what (the memory's name). */
kd_status kd_tensor_wrap_op(kd_session *s, const char *op, const char *what, const kd_external_desc *d,
                            kd_tensor *out);
/* Runs the release callbacks of external tensors whose last reference
 * went (a list taken from the session under its lock), without the lock,
 * each as a callback that must not call kdag, and frees the objects. */
void kd_tensor_releases_run(kd_tensor_obj *list);

#endif
