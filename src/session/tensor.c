/* SPDX-License-Identifier: Apache-2.0 */
/* Tensors: creation, upload, download, references. */
#include <ck_pr.h>
#include <stdlib.h>
#include <string.h>

#include "base/options.h"
#include "base/status_internal.h"
#include "session/trace.h"
#include "session/session_impl.h"

static const struct { size_t size; const char *name; } g_dtypes[KD_DTYPE_COUNT_] = {
    [KD_F32] = {4, "f32"}, [KD_F64] = {8, "f64"}, [KD_I32] = {4, "i32"},
    [KD_I64] = {8, "i64"}, [KD_U8] = {1, "u8"},   [KD_U32] = {4, "u32"},
    [KD_U64] = {8, "u64"}, [KD_C32] = {8, "c32"}, [KD_C64] = {16, "c64"},
    [KD_F16] = {2, "f16"}, [KD_BF16] = {2, "bf16"}, [KD_I8] = {1, "i8"},
};

size_t kd_dtype_size(kd_dtype d) {
  return (unsigned)d < KD_DTYPE_COUNT_ ? g_dtypes[d].size : 0;
}

const char *kd_dtype_name(kd_dtype d) {
  return (unsigned)d < KD_DTYPE_COUNT_ ? g_dtypes[d].name : "invalid";
}

void kd_tensor_ref(kd_tensor_obj *o) { ck_pr_inc_32(&o->refs); }

void kd_tensor_unref(kd_session *s, kd_tensor_obj *o) {
  bool zero = false;
  ck_pr_dec_32_zero(&o->refs, &zero);
  if (!zero) return;
  if (o->counted_retained) s->counters.bytes_retained -= o->bytes;
  if (o->external) {
    /* The owner's callback runs once the lock is let go. */
    o->next_release = s->releases;
    s->releases = o;
    return;
  }
  if (o->residency == KD_RESIDENCY_DEVICE && s->has_device) {
    kd_session_device(s); /* should a host-only call drop the last reference */
    kd_device_free(&s->dev, o->dptr);
    s->counters.bytes_device -= o->bytes;
  } else {
    free(o->host);
  }
  free(o);
}

static kd_status check_shape(const char *op, kd_dtype dtype, int rank, const int64_t *shape,
                             int64_t *elements, size_t *bytes) {
  size_t esize = kd_dtype_size(dtype);
  if (!esize) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: dtype %d is not a kd_dtype", op, (int)dtype);
  if (rank < 0 || rank > KD_MAX_RANK)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: rank %d is outside [0, %d]", op, rank, KD_MAX_RANK);
  if (rank > 0 && !shape) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: shape is NULL with rank %d", op, rank);
  /* The product of the nonzero dimensions must fit too: a zero-sized
   * tensor's strides (products of the dimensions before each) still do. */
  int64_t n = 1, nonzero = 1;
  for (int i = 0; i < rank; ++i) {
    if (shape[i] < 0)
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: shape[%d] = %lld is negative", op, i,
                     (long long)shape[i]);
    if (shape[i] && nonzero > INT64_MAX / shape[i] / (int64_t)esize)
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: shape overflows at dimension %d", op, i);
    if (shape[i]) nonzero *= shape[i];
    n *= shape[i];
  }
  *elements = n;
  *bytes = (size_t)n * esize;
  return KD_OK;
}

/* A tensor object of a checked shape, its memory not yet set; NULL (the
 * message set) without memory. */
static kd_tensor_obj *obj_new(const char *op, kd_dtype dtype, int rank, const int64_t *shape, int64_t elements,
                              size_t bytes, kd_residency residency) {
  kd_tensor_obj *o = calloc(1, sizeof *o);
  if (!o) {
    kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the tensor", op);
    return NULL;
  }
  o->dtype = dtype;
  o->rank = rank;
  for (int i = 0; i < rank; ++i) o->shape[i] = shape[i];
  o->elements = elements;
  o->bytes = bytes;
  o->residency = residency;
  return o;
}

/* Gives o its handle and the caller's reference; on failure o is as it was,
 * for the caller to free with its memory. */
static kd_status obj_publish(kd_session *s, kd_tensor_obj *o, const char *op, kd_tensor *out) {
  kd_status st = kd_handle_alloc(&s->handles, KD_HANDLE_TENSOR, o, &o->handle, op);
  if (st) return st;
  o->refs = 1;
  o->user_refs = 1;
  out->bits = o->handle;
  return KD_OK;
}

kd_status kd_tensor_new(kd_session *s, const char *op, kd_dtype dtype, int rank,
                        const int64_t *shape, kd_residency residency, kd_tensor *out) {
  int64_t elements = 0;
  size_t bytes = 0;
  kd_status st = check_shape(op, dtype, rank, shape, &elements, &bytes);
  if (st) return st;
  if (residency != KD_RESIDENCY_DEVICE && residency != KD_RESIDENCY_HOST)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: residency %d is not a kd_residency", op, (int)residency);
  kd_tensor_obj *o = obj_new(op, dtype, rank, shape, elements, bytes, residency);
  if (!o) return KD_ERR_OUT_OF_MEMORY;
  /* An empty tensor has no element to leave undefined: reading it is
   * defined, and no write (every one is empty) could ever make it so. */
  o->initialized = elements == 0;
  int on_gpu = residency == KD_RESIDENCY_DEVICE && s->has_device;
  if (on_gpu) {
    st = kd_session_note(s, kd_device_alloc(&s->dev, op, bytes, &o->dptr));
    if (!st && (s->opts.flags & KD_SESSION_POISON_ALLOCATIONS))
      st = kd_session_note(s, kd_device_poison(&s->dev, op, o->dptr, bytes));
    if (st) {
      if (o->dptr) kd_device_free(&s->dev, o->dptr);
      free(o);
      return st;
    }
  } else {
    /* 64-byte alignment suits vector loads in host kernels. */
    size_t rounded = (bytes + 63) & ~(size_t)63;
    o->host = aligned_alloc(64, rounded ? rounded : 64);
    if (!o->host) {
      free(o);
      return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no host memory for %zu bytes", op, bytes);
    }
    if (s->opts.flags & KD_SESSION_POISON_ALLOCATIONS) {
      if (bytes % 4 == 0)
        for (size_t i = 0; i < bytes / 4; ++i) ((uint32_t *)o->host)[i] = 0x7FA5A5A5u;
      else
        memset(o->host, 0xA5, bytes);
    }
  }
  st = obj_publish(s, o, op, out);
  if (st) {
    if (on_gpu) kd_device_free(&s->dev, o->dptr);
    else free(o->host);
    free(o);
    return st;
  }
  if (on_gpu) s->counters.bytes_device += bytes;
  return KD_OK;
}

void kd_tensor_releases_run(kd_tensor_obj *list) {
  while (list) {
    kd_tensor_obj *o = list;
    list = o->next_release;
    if (o->release) {
      const char *was = kd_callback_enter(kd_release_callback_name);
      o->release(o->release_user);
      kd_callback_leave(was);
    }
    free(o);
  }
}

void kd_external_desc_init(kd_external_desc *d) {
  if (!d) return;
  memset(d, 0, sizeof *d);
  d->struct_size = sizeof *d;
}

kd_status kd_tensor_wrap(kd_session *s, const kd_external_desc *d, kd_tensor *out) {
  return kd_tensor_wrap_op(s, "kd_tensor_wrap", "desc->data", d, out);
}

kd_status kd_tensor_wrap_op(kd_session *s, const char *op, const char *what, const kd_external_desc *d,
                            kd_tensor *out) {
  if (out) out->bits = 0;
  if (!d || !out)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument %s is NULL", op, d ? "out_tensor" : "desc");
  kd_status st = kd_options_check(op, "desc->", "kd_external_desc", d->struct_size, sizeof *d);
  if (st) return st;
  if (!d->data) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: desc->data is NULL", op);
  if (d->flags & ~(uint32_t)(KD_EXTERNAL_READ_ONLY | KD_EXTERNAL_ALLOW_MANAGED))
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: desc->flags 0x%x has unknown bits", op, d->flags);
  int64_t elements;
  size_t bytes;
  st = check_shape(op, d->dtype, d->rank, d->shape, &elements, &bytes);
  if (st) return st;
  /* Compact column-major only: a tensor is compact, strided layouts are
   * views of one. */
  int64_t stride = 1;
  int given = 0;
  for (int i = 0; i < d->rank; ++i) given |= d->strides[i] != 0;
  for (int i = 0; given && i < d->rank; ++i) {
    if (d->strides[i] != stride && d->shape[i] > 1)
      return kd_fail(KD_ERR_NOT_COMPACT, "%s: desc->strides[%d] is %lld, compact column-major needs %lld: wrap "
                     "the whole extent as a tensor and take a kd_view of it", op, i, (long long)d->strides[i],
                     (long long)stride);
    stride *= d->shape[i];
  }
  size_t esize = kd_dtype_size(d->dtype);
  uintptr_t addr = (uintptr_t)d->data;
  if (addr % esize)
    return kd_fail(KD_ERR_MISALIGNED, "%s: %s %p is not aligned to its %zu-byte %s elements", op, what, d->data,
                   esize, kd_dtype_name(d->dtype));
  st = kd_session_enter(s, op);
  if (st) return st;
  if (s->has_device)
    st = kd_session_note(s, kd_device_pointer_check(&s->dev, op, what, (CUdeviceptr)addr, bytes,
                                                    (d->flags & KD_EXTERNAL_ALLOW_MANAGED) != 0));
  kd_tensor_obj *o = NULL;
  if (!st && !(o = obj_new(op, d->dtype, d->rank, d->shape, elements, bytes, KD_RESIDENCY_DEVICE)))
    st = KD_ERR_OUT_OF_MEMORY;
  if (!st) {
    if (s->has_device) o->dptr = (CUdeviceptr)addr;
    else o->host = d->data;
    o->initialized = 1; /* the owner's data */
    o->external = 1;
    o->read_only = (d->flags & KD_EXTERNAL_READ_ONLY) != 0;
    o->release = d->release;
    o->release_user = d->release_user;
    st = obj_publish(s, o, op, out);
    if (st) free(o);
  }
  kd_session_leave(s);
  return st;
}

/* kd_tensor_create, its errors naming op (the public function called). */
static kd_status create(kd_session *s, const char *op, const kd_tensor_desc *desc, kd_tensor *out) {
  if (out) out->bits = 0; /* before anything is checked, as the header says */
  if (!desc || !out)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument %s is NULL", op, desc ? "out_tensor" : "desc");
  kd_status st = kd_session_enter(s, op);
  if (st) return st;
  st = kd_tensor_new(s, op, desc->dtype, desc->rank, desc->shape, desc->residency, out);
  kd_session_leave(s);
  return st;
}

kd_status kd_tensor_create(kd_session *s, const kd_tensor_desc *desc, kd_tensor *out) {
  return create(s, "kd_tensor_create", desc, out);
}

/* Resolves the tensor of an upload or download; the host buffer must match
 * its size exactly. */
static kd_status transfer_target(kd_session *s, const char *op, kd_tensor t, size_t bytes,
                                 kd_tensor_obj **o) {
  kd_status st = kd_tensor_lookup(s, t, o, op, "tensor");
  if (!st && bytes != (*o)->bytes)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument bytes is %zu, the %s tensor holds %zu",
                 op, bytes, kd_dtype_name((*o)->dtype), (*o)->bytes);
  return st;
}

/* kd_tensor_upload, its errors naming op. */
static kd_status upload(kd_session *s, const char *op, kd_tensor t, const void *host, size_t bytes, int fresh) {
  if (!host) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument host is NULL", op);
  kd_status st = kd_session_enter(s, op);
  if (st) return st;
  kd_tensor_obj *o;
  st = transfer_target(s, op, t, bytes, &o);
  if (!st && o->read_only)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: the tensor is read-only (wrapped with KD_EXTERNAL_READ_ONLY)", op);
  if (!st) st = s->ops->upload(s, op, o, host, fresh);
  if (!st) {
    o->initialized = 1;
    s->counters.uploads++;
  }
  kd_session_leave(s);
  return st;
}

kd_status kd_tensor_upload(kd_session *s, kd_tensor t, const void *host, size_t bytes) {
  return upload(s, "kd_tensor_upload", t, host, bytes, 0);
}

kd_status kd_tensor_from_host(kd_session *s, const kd_tensor_desc *desc, const void *host,
                              size_t bytes, kd_tensor *out) {
  static const char *op = "kd_tensor_from_host";
  if (out) out->bits = 0; /* as on every failure */
  if (!host) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument host is NULL", op); /* before creating */
  kd_status st = create(s, op, desc, out);
  if (st) return st;
  st = upload(s, op, *out, host, bytes, 1);
  if (st) {
    char *msg = strdup(kd_last_error());
    kd_tensor_release(s, *out);
    kd_fail(st, "%s", msg ? msg : "kd_tensor_from_host: upload failed");
    free(msg);
    out->bits = 0;
  }
  return st;
}

kd_status kd_tensor_download(kd_session *s, kd_tensor t, void *host, size_t bytes) {
  static const char *op = "kd_tensor_download";
  if (!host) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument host is NULL", op);
  kd_status st = kd_session_enter(s, op);
  if (st) return st;
  kd_tensor_obj *o;
  st = transfer_target(s, op, t, bytes, &o);
  if (!st && !o->initialized)
    st = kd_fail(KD_ERR_UNINITIALIZED,
                 "%s: the tensor was never written (no upload, no launch writing it)", op);
  if (!st) {
    uint64_t t0 = kd_wait_begin(s, op);
    st = s->ops->download(s, op, o, host);
    kd_wait_end(s, op, t0);
  }
  if (!st) {
    s->counters.downloads++;
    kd_session_waited(s);
  }
  kd_session_leave(s);
  return st;
}

kd_status kd_tensor_retain(kd_session *s, kd_tensor t) {
  static const char *op = "kd_tensor_retain";
  kd_status st = kd_session_enter_host(s, op);
  if (st) return st;
  kd_tensor_obj *o;
  st = kd_tensor_lookup(s, t, &o, op, "tensor");
  if (!st) o->user_refs++;
  kd_session_leave(s);
  return st;
}

/* Drops the caller's last hold: the handle dies now, the memory when the
 * last in-flight user completes. */
static void release_user_hold(kd_session *s, kd_tensor_obj *o) {
  kd_handle_free(&s->handles, o->handle);
  o->handle = 0;
  if (ck_pr_load_32(&o->refs) > 1) {
    o->counted_retained = 1;
    s->counters.bytes_retained += o->bytes;
  }
  kd_tensor_unref(s, o);
}

void kd_tensor_drop_user_ref(kd_session *s, kd_tensor_obj *o) {
  if (--o->user_refs == 0) release_user_hold(s, o);
}

kd_status kd_tensor_release(kd_session *s, kd_tensor t) {
  static const char *op = "kd_tensor_release";
  kd_status st = kd_session_enter_release(s, op); /* releasing stays possible after a fault */
  if (st) return st;
  kd_tensor_obj *o;
  st = kd_tensor_lookup(s, t, &o, op, "tensor");
  if (!st && --o->user_refs == 0) release_user_hold(s, o);
  kd_session_leave(s);
  return st;
}

kd_status kd_tensor_info(kd_session *s, kd_tensor t, kd_tensor_desc *out) {
  static const char *op = "kd_tensor_info";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_desc is NULL", op);
  kd_status st = kd_session_enter_host(s, op);
  if (st) return st;
  kd_tensor_obj *o;
  st = kd_tensor_lookup(s, t, &o, op, "tensor");
  if (!st) {
    memset(out, 0, sizeof *out);
    out->dtype = o->dtype;
    out->rank = o->rank;
    int64_t stride = 1;
    for (int i = 0; i < o->rank; ++i) {
      out->shape[i] = o->shape[i];
      out->strides[i] = stride;
      stride *= o->shape[i];
    }
    out->residency = o->residency;
    out->bytes = o->bytes;
  }
  kd_session_leave(s);
  return st;
}

static void destroy_one(void *ctx, void *obj, uint64_t handle) {
  (void)handle;
  kd_session *s = ctx;
  kd_tensor_obj *o = obj;
  o->user_refs = 1;
  release_user_hold(s, o);
}

void kd_tensor_destroy_all(kd_session *s) { kd_handle_each(&s->handles, KD_HANDLE_TENSOR, destroy_one, s); }
