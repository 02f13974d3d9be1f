/* SPDX-License-Identifier: Apache-2.0 */
/* DLPack import: a producer's tensor wrapped without a copy, axes reversed
 * (DLPack is row-major, kdag column-major). */
#include <string.h>

#include "base/status_internal.h"
#include "session/dlpack.h"
#include "session/session_impl.h"

static void delete_versioned(void *managed) {
  kd_dl_managed_versioned *m = managed;
  if (m->deleter) m->deleter(m);
}

static void delete_legacy(void *managed) {
  kd_dl_managed *m = managed;
  if (m->deleter) m->deleter(m);
}

/* Each kdag dtype as DLPack names it: both directions read this table. */
static const kd_dl_dtype g_dl_dtypes[KD_DTYPE_COUNT_] = {
    [KD_F32] = {KD_DL_FLOAT, 32, 1},  [KD_F64] = {KD_DL_FLOAT, 64, 1},    [KD_I32] = {KD_DL_INT, 32, 1},
    [KD_I64] = {KD_DL_INT, 64, 1},    [KD_U8] = {KD_DL_UINT, 8, 1},       [KD_U32] = {KD_DL_UINT, 32, 1},
    [KD_U64] = {KD_DL_UINT, 64, 1},   [KD_C32] = {KD_DL_COMPLEX, 64, 1}, [KD_C64] = {KD_DL_COMPLEX, 128, 1},
    [KD_F16] = {KD_DL_FLOAT, 16, 1},  [KD_BF16] = {KD_DL_BFLOAT, 16, 1},  [KD_I8] = {KD_DL_INT, 8, 1}};

/* kdag's dtype of a DLPack element type, or -1. */
static int dtype_of(kd_dl_dtype t) {
  for (int d = 0; d < KD_DTYPE_COUNT_; ++d)
    if (g_dl_dtypes[d].code == t.code && g_dl_dtypes[d].bits == t.bits && g_dl_dtypes[d].lanes == t.lanes) return d;
  return -1;
}

kd_status kd_tensor_from_dlpack(kd_session *s, void *managed, kd_dlpack_kind kind, void *wait_event,
                                kd_tensor *out, kd_view *out_view) {
  static const char *op = "kd_tensor_from_dlpack";
  if (out) out->bits = 0;
  if (out_view) memset(out_view, 0, sizeof *out_view);
  if (!managed || !out || !out_view)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument %s is NULL", op,
                   !managed ? "managed" : !out ? "out_tensor" : "out_view");
  if (kind != KD_DLPACK_VERSIONED && kind != KD_DLPACK_LEGACY)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: kind %d is not a kd_dlpack_kind", op, (int)kind);
  kd_status st = kd_callback_check(op);
  if (st) return st;
  if (!s) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument session is NULL", op);
  const kd_dl_tensor *t;
  uint64_t flags = 0;
  if (kind == KD_DLPACK_VERSIONED) {
    kd_dl_managed_versioned *m = managed;
    if (m->version.major != KD_DL_MAJOR) {
      unsigned major = m->version.major, minor = m->version.minor;
      delete_versioned(m); /* DLPack: a consumer that cannot read it deletes it */
      return kd_fail(KD_ERR_VERSION_MISMATCH, "%s: DLPack %u.%u, kdag reads major version %d (the tensor was "
                     "deleted, as DLPack asks)", op, major, minor, KD_DL_MAJOR);
    }
    t = &m->dl_tensor;
    flags = m->flags;
  } else {
    t = &((kd_dl_managed *)managed)->dl_tensor;
  }
  /* The device: the session's own kind of memory. */
  int cuda = s->backend == KD_BACKEND_CUDA;
  int dev = t->device.device_type;
  if (cuda ? dev != KD_DL_CUDA && dev != KD_DL_CUDA_MANAGED : dev != KD_DL_CPU)
    return kd_fail(KD_ERR_NOT_RESIDENT, "%s: DLPack device type %d on a %s session, which takes %s", op, dev,
                   cuda ? "CUDA" : "HOST", cuda ? "kDLCUDA (2) or kDLCUDAManaged (13)" : "kDLCPU (1)");
  if (cuda && t->device.device_id != s->dev.info.ordinal)
    return kd_fail(KD_ERR_WRONG_DEVICE, "%s: the DLPack tensor is on device %d, the session's is device %d", op,
                   (int)t->device.device_id, s->dev.info.ordinal);
  if (!cuda && wait_event)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: wait_event on a HOST session (nothing runs on a stream)", op);
  int dtype = dtype_of(t->dtype); /* lanes other than 1 match none */
  if (dtype < 0)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: DLPack dtype (code %u, %u bits, %u lanes) has no kdag dtype", op,
                   t->dtype.code, t->dtype.bits, t->dtype.lanes);
  if (t->ndim < 0 || t->ndim > KD_MAX_RANK)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: ndim %d is outside [0, %d]", op, (int)t->ndim, KD_MAX_RANK);
  if (t->ndim > 0 && !t->shape) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: shape is NULL with ndim %d", op, (int)t->ndim);
  /* Reversed axes: kdag dimension i is DLPack dimension ndim-1-i. NULL
   * strides are C-contiguous, which reversed is compact column-major. */
  int r = t->ndim;
  kd_view v;
  memset(&v, 0, sizeof v);
  v.rank = r;
  int64_t compact = 1, last = 0;
  int is_compact = 1, empty = 0;
  for (int i = 0; i < r; ++i) {
    int64_t n = t->shape[r - 1 - i];
    int64_t stride = t->strides ? t->strides[r - 1 - i] : compact;
    if (n < 0) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: shape[%d] = %lld is negative", op, r - 1 - i, (long long)n);
    if (stride < 0)
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: strides[%d] = %lld is negative: kdag views step forward only", op,
                     r - 1 - i, (long long)stride);
    v.shape[i] = n;
    v.strides[i] = stride;
    if (n > 1 && stride != compact) is_compact = 0;
    if (n == 0) empty = 1;
    else if (n > 1 && stride > (INT64_MAX - last) / (n - 1))
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: the strides overflow", op);
    else last += (n - 1) * stride;
    if (n && compact > INT64_MAX / n) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: the shape overflows", op);
    compact *= n ? n : 1;
  }
  kd_external_desc d;
  kd_external_desc_init(&d);
  d.data = (char *)t->data + t->byte_offset;
  d.dtype = (kd_dtype)dtype;
  if (is_compact || empty) { /* the tensor as the producer shaped it */
    d.rank = r;
    for (int i = 0; i < r; ++i) d.shape[i] = v.shape[i];
  } else { /* its elements as one run, the layout a view of it */
    d.rank = 1;
    d.shape[0] = last + 1;
  }
  d.flags = (flags & KD_DL_FLAG_READ_ONLY ? KD_EXTERNAL_READ_ONLY : 0) |
            (dev == KD_DL_CUDA_MANAGED ? KD_EXTERNAL_ALLOW_MANAGED : 0);
  d.release = kind == KD_DLPACK_VERSIONED ? delete_versioned : delete_legacy;
  d.release_user = managed;
  if (!d.data) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: the DLPack tensor's data is NULL", op);
  st = kd_tensor_wrap_op(s, op, "the DLPack tensor's data", &d, out);
  if (st) return st;
  if (wait_event) {
    st = kd_session_enter(s, op);
    if (!st) {
      st = kd_session_note(s, kd_device_wait_event(&s->dev, op, (CUevent)wait_event));
      if (!st) s->counters.stream_event_waits++;
      kd_session_leave(s);
    }
    if (st) {
      /* The deleter must not run: the tensor stays the caller's. */
      char msg[512];
      snprintf(msg, sizeof msg, "%s", kd_last_error());
      kd_session_lock(s);
      kd_tensor_obj *o;
      if (kd_tensor_lookup(s, *out, &o, op, "tensor") == KD_OK) o->release = NULL;
      kd_session_unlock(s);
      kd_tensor_release(s, *out);
      out->bits = 0;
      return kd_fail(st, "%s", msg);
    }
  }
  v.tensor = *out;
  if (is_compact || empty) { /* kd_whole's numbers, spelled out */
    int64_t stride = 1;
    for (int i = 0; i < r; ++i) v.strides[i] = stride, stride *= v.shape[i];
  }
  *out_view = v;
  return KD_OK;
}

/* ---- export ---------------------------------------------------------- */

/* One allocation per export: the DLPack struct first (so its address is
 * the export's), then what its pointers point to. */
typedef struct kd_dl_export {
  union {
    kd_dl_managed_versioned versioned;
    kd_dl_managed legacy;
  } m;
  kd_session *session;     /* NULL once the session is destroyed */
  kd_tensor_obj *obj;      /* holds one reference of the caller's kind */
  struct kd_dl_export *prev, *next; /* the session's live exports */
  int64_t shape[KD_MAX_RANK];
  int64_t strides[KD_MAX_RANK];
} kd_dl_export;

static void export_unlink(kd_session *s, kd_dl_export *e) {
  if (e->prev) e->prev->next = e->next;
  else s->exports = e->next;
  if (e->next) e->next->prev = e->prev;
}

/* The consumer's deleter. It may come from any thread, and from kdag's
 * own release callbacks (kdag importing its own export): those hold no
 * lock, so it takes the session's. From a callback that runs under a
 * kdag lock it cannot: the reference then stays until kd_session_destroy
 * (the header forbids that). After kd_session_destroy only the struct is
 * left to free. */
static void export_done(kd_dl_export *e) {
  kd_session *s = e->session;
  if (s && kd_callback_lock_free()) {
    kd_session_lock(s);
    if (e->session) { /* not cut loose meanwhile */
      export_unlink(s, e);
      kd_tensor_drop_user_ref(s, e->obj);
      free(e);
      e = NULL;
    }
    kd_session_leave(s);
    if (!e) return;
  }
  if (!s) free(e);
}

void kd_dl_exports_orphan(kd_session *s) {
  for (kd_dl_export *e = s->exports; e; e = e->next) e->session = NULL;
  s->exports = NULL;
}
static void export_delete_versioned(kd_dl_managed_versioned *self) { export_done((kd_dl_export *)self); }
static void export_delete_legacy(kd_dl_managed *self) { export_done((kd_dl_export *)self); }

kd_status kd_tensor_to_dlpack(kd_session *s, kd_tensor t, kd_dlpack_kind kind, void **out_event, void **out_managed) {
  static const char *op = "kd_tensor_to_dlpack";
  if (!out_managed) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_managed is NULL", op);
  if (kind != KD_DLPACK_VERSIONED && kind != KD_DLPACK_LEGACY)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: kind %d is not a kd_dlpack_kind", op, (int)kind);
  kd_status st = kd_session_enter(s, op);
  if (st) return st;
  kd_tensor_obj *o = NULL;
  kd_dl_export *e = NULL;
  CUevent event = NULL;
  st = kd_tensor_lookup(s, t, &o, op, "tensor");
  if (!st && !s->has_device && out_event)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: out_event on a HOST session (the export waits instead)", op);
  if (!st && o->residency != KD_RESIDENCY_DEVICE && s->has_device)
    st = kd_fail(KD_ERR_NOT_RESIDENT, "%s: the tensor lives in host memory, not on the device", op);
  if (!st && !o->initialized)
    st = kd_fail(KD_ERR_UNINITIALIZED, "%s: the tensor was never written (no upload, no launch writing it)", op);
  if (!st && !(e = calloc(1, sizeof *e))) st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the export", op);
  if (!st && s->has_device && out_event) st = kd_session_note(s, kd_device_event_export(&s->dev, op, &event));
  if (!st && !s->has_device) { /* HOST: the submissions before it may still write it */
    kd_completion_drain(s);
    kd_session_waited(s);
  }
  if (st) {
    free(e);
    kd_session_leave(s);
    return st;
  }
  o->user_refs++; /* the export's reference, released by its deleter */
  e->session = s;
  e->obj = o;
  e->next = s->exports;
  if (s->exports) s->exports->prev = e;
  s->exports = e;
  kd_dl_tensor *d = kind == KD_DLPACK_VERSIONED ? &e->m.versioned.dl_tensor : &e->m.legacy.dl_tensor;
  d->data = s->has_device ? (void *)(uintptr_t)o->dptr : o->host;
  d->device.device_type = s->has_device ? KD_DL_CUDA : KD_DL_CPU;
  d->device.device_id = s->has_device ? s->dev.info.ordinal : 0;
  d->ndim = o->rank;
  d->dtype = g_dl_dtypes[o->dtype];
  /* Reversed: DLPack dimension i is kdag dimension rank-1-i. */
  int64_t stride = 1;
  for (int i = 0; i < o->rank; ++i) {
    e->shape[o->rank - 1 - i] = o->shape[i];
    e->strides[o->rank - 1 - i] = stride;
    stride *= o->shape[i];
  }
  d->shape = e->shape;
  d->strides = e->strides;
  if (kind == KD_DLPACK_VERSIONED) {
    e->m.versioned.version = (kd_dl_version){KD_DL_MAJOR, KD_DL_MINOR};
    e->m.versioned.manager_ctx = e;
    e->m.versioned.deleter = export_delete_versioned;
    e->m.versioned.flags = o->read_only ? KD_DL_FLAG_READ_ONLY : 0;
  } else {
    e->m.legacy.manager_ctx = e;
    e->m.legacy.deleter = export_delete_legacy;
  }
  if (out_event) *out_event = event;
  *out_managed = e;
  kd_session_leave(s);
  return KD_OK;
}
