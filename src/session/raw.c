/* SPDX-License-Identifier: Apache-2.0 */
/* The raw scope: the seed's with_raw execution authority. */
#include <ck_pr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/binary.h"
#include "base/options.h"
#include "base/status_internal.h"
#include "session/trace.h"
#include "cuda/cu_status.h"
#include "session/session_impl.h"

/* One per thread: its address names the thread that owns a scope, in a
 * word another thread can load atomically (a pthread_t is opaque). */
static _Thread_local char raw_thread_mark;

int kd_raw_open_here(kd_raw *raw) {
  int active = ck_pr_load_int(&raw->active);
  ck_pr_fence_load();
  return active && ck_pr_load_ptr(&raw->owner) == (void *)&raw_thread_mark;
}

/* The scope must be open and this thread must be the one running its
 * callback. The session lock is then held by kd_with_raw on this thread.
 * Another thread reads only active and owner, as published by kd_with_raw
 * (not op, which a new scope may be writing). */
static kd_status raw_owned(kd_raw *raw, const char *fn) {
  kd_status st = kd_callback_check(fn); /* a foreign callback handed the scope through its user */
  if (st) return st;
  if (!raw) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument raw is NULL", fn);
  if (kd_raw_open_here(raw)) return KD_OK;
  if (!ck_pr_load_int(&raw->active))
    return kd_fail(KD_ERR_SCOPE_ENDED, "%s: the raw scope has ended; kd_raw handles and spans "
                   "are valid only inside the kd_with_raw callback", fn);
  return kd_fail(KD_ERR_BUSY, "%s: the raw scope belongs to another thread", fn);
}

/* Every kd_raw_* call but kd_raw_session starts here: raw_owned, and a
 * fault an earlier call of the scope met is returned (the session refuses
 * work from then on). */
static kd_status raw_check(kd_raw *raw, const char *fn) {
  kd_status st = raw_owned(raw, fn);
  if (st) return st;
  kd_session *s = raw->session;
  if (s->fault)
    return kd_fail(s->fault, "%s: raw scope '%s': the session is unusable after %s: %s", fn, raw->op,
                   kd_session_fault_what(s), s->fault_msg);
  return KD_OK;
}

kd_session *kd_raw_session(kd_raw *raw) { return raw_owned(raw, "kd_raw_session") == KD_OK ? raw->session : NULL; }

kd_status kd_with_raw(kd_session *s, const char *op, kd_raw_fn fn, void *user) {
  static const char *me = "kd_with_raw";
  if (!op || !*op) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument op is NULL or empty", me);
  if (!fn) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: scope '%s': argument fn is NULL", me, op);
  kd_status st = kd_session_enter(s, me);
  if (st) return st;
  if (s->backend != KD_BACKEND_CUDA) {
    kd_session_leave(s);
    return kd_fail(KD_ERR_WRONG_BACKEND, "%s: scope '%s': backend session is not CUDA (%s)", me, op, s->reason);
  }
  if (s->raw.active) {
    kd_session_leave(s);
    return kd_fail(KD_ERR_BUSY, "%s: scope '%s': raw scope '%s' is already open on this session; "
                   "scopes do not nest", me, op, s->raw.op);
  }
  /* The event closing the scope, taken first: creating one cannot then
   * fail after the callback has enqueued work. */
  CUevent done = NULL;
  st = kd_session_note(s, kd_event_acquire(&s->dev, me, &done));
  if (st) {
    kd_session_leave(s);
    return kd_fail_context(st, "%s: scope '%s'", me, op);
  }
  kd_raw *raw = &s->raw;
  raw->session = s;
  raw->scope = kd_stamp_next(&s->stamps);
  ck_pr_store_ptr(&raw->owner, &raw_thread_mark);
  snprintf(raw->op, sizeof raw->op, "%s", op);
  raw->launches = 0;
  ck_pr_fence_store(); /* owner before active, for raw_check on other threads */
  ck_pr_store_int(&raw->active, 1);
  unsigned long mark = kd_fail_mark();
  kd_status user_st = fn(raw, user);
  if (user_st) { /* kd_fail_unexplained writes only when the callback set no message */
    char who[sizeof raw->op + 48];
    snprintf(who, sizeof who, "kd_with_raw: the callback of scope '%s'", raw->op);
    kd_fail_unexplained(user_st, mark, who);
  }
  char *user_msg = user_st ? strdup(kd_last_error()) : NULL;
  ck_pr_store_int(&raw->active, 0);
  /* Close the scope: one event after everything it enqueued keeps the
   * modules and tensors it used alive until the device is done. */
  st = KD_OK;
  if (!raw->held.count) {
    kd_event_release_to_pool(&s->dev, done);
  } else {
    st = kd_completion_submit(s, me, &raw->held, done, "a raw scope");
    if (st) {
      st = kd_fail_context(st, "%s: scope '%s'", me, op);
      /* Could not record the event: make the work complete before the
       * objects it uses can go. */
      s->counters.stream_syncs++;
      kd_stream_wait(&s->dev);
      kd_held_release_all(s, &raw->held);
    }
  }
  raw->scope = 0;
  int destroy = s->destroy_requested;
  kd_session_leave(s);
  if (destroy) kd_session_destroy(s);
  if (user_st) {
    kd_fail(user_st, "%s", user_msg ? user_msg : "raw callback failed");
    free(user_msg);
    return user_st;
  }
  return st;
}

/* ---- loading ---------------------------------------------------------- */

/* The scope's name after the call's (op), which stays first even when the
 * failure came from a call it made (kd_raw_compile_nvrtc's compile). */
static kd_status with_op(kd_raw *raw, const char *op, kd_status st) {
  return st ? kd_fail_context(st, "%s: raw scope '%s'", op, raw->op) : st;
}

/* The bodies of the loading calls below: op names the public call (the
 * one the caller made, also when it loads through another's body), and
 * the caller adds the scope (with_op). */
/* PTX (text of size bytes) or an image, loaded and adopted as a module. */
static kd_status load(kd_raw *raw, const char *op, int ptx, const void *data, size_t size, kd_module *out) {
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_module is NULL", op);
  kd_session *s = raw->session;
  kd_cu_module cu;
  kd_status st = kd_session_note(s, ptx ? kd_cu_module_load_ptx(&s->dev, op, data, size, &cu)
                                        : kd_cu_module_load_image(&s->dev, op, data, size, &cu));
  if (!st) st = kd_module_adopt(s, op, &cu, out);
  return st;
}

static kd_status load_binary(kd_raw *raw, const char *op, const kd_binary *b, kd_module *out) {
  if (!b) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument binary is NULL", op);
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_module is NULL", op);
  switch (b->kind) {
    case KD_BINARY_PTX: return load(raw, op, 1, b->data, b->size, out);
    case KD_BINARY_CUBIN:
    case KD_BINARY_FATBIN: return load(raw, op, 0, b->data, b->size, out);
    case KD_BINARY_LTOIR:
    case KD_BINARY_LIBRARY: break;
  }
  return kd_fail(KD_ERR_INVALID_ARGUMENT,
                 "%s: %s cannot be loaded directly; link it with kd_nvjitlink_link first", op,
                 b->kind == KD_BINARY_LTOIR ? "LTO-IR" : "a device-code library");
}

static kd_status compile_nvrtc(kd_raw *raw, const char *op, const char *source, const kd_nvrtc_options *options,
                               kd_module *out) {
  if (!source) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument source is NULL", op);
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_module is NULL", op); /* before compiling */
  kd_nvrtc_options o;
  kd_nvrtc_options_init(&o);
  if (options) {
    kd_status st = kd_options_check(op, "options->", "kd_nvrtc_options", options->struct_size, sizeof o);
    if (st) return st;
    o = *options;
  }
  char arch[16];
  if (!o.arch) {
    snprintf(arch, sizeof arch, "sm_%d", raw->session->dev.sm);
    o.arch = arch;
  }
  kd_binary *b = NULL;
  kd_status st = kd_nvrtc_compile(source, &o, &b);
  if (!st) st = load_binary(raw, op, b, out);
  kd_binary_destroy(b);
  return st;
}

kd_status kd_raw_load_ptx(kd_raw *raw, const char *ptx, size_t len, kd_module *out) {
  static const char *op = "kd_raw_load_ptx";
  kd_status st = raw_check(raw, op);
  return st ? st : with_op(raw, op, load(raw, op, 1, ptx, len, out));
}

kd_status kd_raw_load_image(kd_raw *raw, const void *image, size_t size, kd_module *out) {
  static const char *op = "kd_raw_load_image";
  kd_status st = raw_check(raw, op);
  return st ? st : with_op(raw, op, load(raw, op, 0, image, size, out));
}

kd_status kd_raw_load_binary(kd_raw *raw, const kd_binary *b, kd_module *out) {
  static const char *op = "kd_raw_load_binary";
  kd_status st = raw_check(raw, op);
  return st ? st : with_op(raw, op, load_binary(raw, op, b, out));
}

kd_status kd_raw_compile_nvrtc(kd_raw *raw, const char *source, const kd_nvrtc_options *options,
                               kd_module *out) {
  static const char *op = "kd_raw_compile_nvrtc";
  kd_status st = raw_check(raw, op);
  return st ? st : with_op(raw, op, compile_nvrtc(raw, op, source, options, out));
}

static kd_status cached_module(kd_raw *raw, const char *op, const char *key, kd_module_build_fn build, void *user,
                               kd_module *out) {
  kd_status st;
  if (!key || !*key || !build || !out)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument %s is NULL%s", op,
                   !key || !*key ? "key" : !build ? "build" : "out_module", !key || !*key ? " or empty" : "");
  kd_session *s = raw->session;
  size_t len = strlen(key);
  ck_ht_hash_t h;
  ck_ht_entry_t e;
  if (len > 0xffff) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: key is longer than 65535 bytes", op);
  ck_ht_hash(&h, &s->module_cache, key, (uint16_t)len);
  ck_ht_entry_key_set(&e, key, (uint16_t)len);
  if (ck_ht_get_spmc(&s->module_cache, h, &e)) {
    kd_module_obj *o = ck_ht_entry_value(&e);
    out->bits = o->handle;
    return KD_OK;
  }
  kd_module m = {0};
  unsigned long mark = kd_fail_mark();
  st = kd_fail_unexplained(build(raw, user, &m), mark, "the build callback");
  if (st) return kd_fail_context(st, "%s: building module '%s'", op, key);
  kd_module_obj *o;
  st = kd_module_lookup(s, m, &o, op, "module built for the cache");
  if (st) return st;
  if (o->user_refs != 1) /* 0 is the cache's; more, references the caller kept (kd_module_retain) */
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: build for '%s' returned a module that is %s; it must return a "
                   "fresh module, with the one reference the cache then owns", op, key,
                   o->user_refs ? "retained more than once" : "already cached");
  char *owned = strdup(key);
  if (owned) ck_ht_entry_set(&e, h, owned, (uint16_t)len, o);
  if (!owned || !ck_ht_put_spmc(&s->module_cache, h, &e)) {
    free(owned);
    kd_module_release(s, m); /* the caller never saw it: do not leak it */
    ck_ht_entry_key_set(&e, key, (uint16_t)len);
    if (ck_ht_get_spmc(&s->module_cache, h, &e)) /* put refuses a key that is there */
      return kd_fail(KD_ERR_BUSY, "%s: the build for '%s' cached a module under its own key (a nested "
                     "kd_raw_cached_module of the same key); the outer build's module was released", op, key);
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: could not insert '%s' into the cache", op, key);
  }
  /* The cache now holds the caller's reference: user_refs 0 marks it. */
  o->user_refs = 0;
  *out = m;
  return KD_OK;
}

kd_status kd_raw_cached_module(kd_raw *raw, const char *key, kd_module_build_fn build, void *user,
                               kd_module *out) {
  static const char *op = "kd_raw_cached_module";
  kd_status st = raw_check(raw, op);
  return st ? st : with_op(raw, op, cached_module(raw, op, key, build, user, out));
}

/* ---- borrows ---------------------------------------------------------- */

static kd_status borrow_body(kd_raw *raw, const char *op, const kd_view *view, kd_tensor t, int mut,
                             kd_span *out) {
  kd_status st;
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_span is NULL", op);
  memset(out, 0, sizeof *out);
  kd_session *s = raw->session;
  kd_tensor_obj *o;
  st = kd_tensor_lookup(s, view ? view->tensor : t, &o, op, view ? "view->tensor" : "tensor");
  if (st) return st;
  if (o->residency != KD_RESIDENCY_DEVICE)
    return kd_fail(KD_ERR_NOT_RESIDENT, "%s: the tensor lives in host memory, not on the device; upload it into "
                   "a device tensor first", op);
  int64_t offset = 0, elements = o->elements;
  if (view) {
    kd_extent e;
    st = kd_view_extent(op, view, o->elements, &e);
    if (st) return st;
    elements = e.elements;
    if (!e.compact)
      return kd_fail(KD_ERR_NOT_COMPACT, "%s: the view is strided; raw kernels take compact column-major views "
                     "only: canonicalize it on the device first", op);
    offset = view->offset;
  }
  if (mut && o->read_only)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: the tensor is read-only (wrapped with KD_EXTERNAL_READ_ONLY): no "
                   "mutable borrow", op);
  if (!mut && !o->initialized)
    return kd_fail(KD_ERR_UNINITIALIZED, "%s: the tensor was never written (no upload, no launch writing it); "
                   "reading it would read garbage", op);
  st = mut ? kd_borrow_exclusive(&o->borrow, raw->scope, op, "the tensor")
           : kd_borrow_shared(&o->borrow, raw->scope, op, "the tensor");
  if (st) return st;
  size_t esize = kd_dtype_size(o->dtype);
  out->device_ptr = o->dptr + (CUdeviceptr)((size_t)offset * esize);
  out->bytes = (size_t)elements * esize;
  out->elements = elements;
  out->dtype = o->dtype;
  out->tensor.bits = o->handle;
  out->scope_ = raw->scope | (mut ? (1ull << 63) : 0);
  return KD_OK;
}

/* kd_raw_tensor and the like; view NULL: the whole of t. */
static kd_status borrow(kd_raw *raw, const char *op, const kd_view *view, kd_tensor t, int mut, kd_span *out) {
  kd_status st = raw_check(raw, op);
  return st ? st : with_op(raw, op, borrow_body(raw, op, view, t, mut, out));
}

kd_status kd_raw_tensor(kd_raw *raw, kd_tensor t, kd_span *out) {
  return borrow(raw, "kd_raw_tensor", NULL, t, 0, out);
}

kd_status kd_raw_tensor_mut(kd_raw *raw, kd_tensor t, kd_span_mut *out) {
  return borrow(raw, "kd_raw_tensor_mut", NULL, t, 1, out ? &out->span : NULL);
}

/* A NULL view is refused after the scope is checked, so the error names it. */
static kd_status borrow_view(kd_raw *raw, const char *op, const kd_view *v, int mut, kd_span *out) {
  kd_status st = raw_check(raw, op);
  if (st) return st;
  if (!v) return with_op(raw, op, kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument view is NULL", op));
  return with_op(raw, op, borrow_body(raw, op, v, v->tensor, mut, out));
}

kd_status kd_raw_view(kd_raw *raw, const kd_view *v, kd_span *out) { return borrow_view(raw, "kd_raw_view", v, 0, out); }

kd_status kd_raw_view_mut(kd_raw *raw, const kd_view *v, kd_span_mut *out) {
  return borrow_view(raw, "kd_raw_view_mut", v, 1, out ? &out->span : NULL);
}

kd_status kd_raw_alloc_output(kd_raw *raw, kd_dtype dtype, int rank, const int64_t *shape,
                              kd_tensor *out) {
  static const char *op = "kd_raw_alloc_output";
  if (out) out->bits = 0; /* before anything is checked, like kd_tensor_create */
  kd_status st = raw_check(raw, op);
  if (st) return st;
  if (!out) return with_op(raw, op, kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_tensor is NULL", op));
  return with_op(raw, op, kd_tensor_new(raw->session, op, dtype, rank, shape, KD_RESIDENCY_DEVICE, out));
}

/* ---- launch ----------------------------------------------------------- */

kd_status kd_launch_config_flat(uint64_t n, uint32_t block, uint32_t shared_bytes,
                                kd_launch_config *out) {
  static const char *op = "kd_launch_config_flat";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_config is NULL", op);
  if (block == 0 || block > 1024)
    return kd_fail(KD_ERR_LAUNCH_CONFIG, "%s: block %u must be in [1, 1024]", op, block);
  if (n == 0) return kd_fail(KD_ERR_LAUNCH_CONFIG, "%s: n is 0; there is nothing to launch", op);
  uint64_t blocks = n / block + (n % block != 0); /* n + block - 1 could wrap */
  if (blocks > 0x7fffffffull)
    return kd_fail(KD_ERR_LAUNCH_CONFIG, "%s: n = %llu needs %llu blocks of %u, more than 2^31-1",
                   op, (unsigned long long)n, (unsigned long long)blocks, block);
  out->grid[0] = (uint32_t)blocks;
  out->grid[1] = out->grid[2] = 1;
  out->block[0] = block;
  out->block[1] = out->block[2] = 1;
  out->shared_bytes = shared_bytes;
  out->flags = 0;
  return KD_OK;
}

size_t kd_arg_size(const kd_arg *a) {
  switch (a->kind) {
    case KD_ARG_TENSOR:
    case KD_ARG_TENSOR_MUT: return sizeof(CUdeviceptr);
    case KD_ARG_I32:
    case KD_ARG_U32:
    case KD_ARG_F32: return 4;
    case KD_ARG_I64:
    case KD_ARG_U64:
    case KD_ARG_F64: return 8;
    case KD_ARG_BYTES: return a->v.bytes.size;
  }
  return 0;
}

static const char *arg_kind_name(kd_arg_kind k) {
  static const char *names[] = {"tensor", "tensor_mut", "i32", "i64", "u32", "u64", "f32", "f64", "bytes"};
  return (unsigned)k <= KD_ARG_BYTES ? names[k] : "invalid";
}

/* Checks a span against the scope and its tensor; resolves the tensor. */
static kd_status check_span(kd_raw *raw, const char *op, size_t i, const kd_arg *a,
                            kd_tensor_obj **out) {
  kd_session *s = raw->session;
  int mut = a->kind == KD_ARG_TENSOR_MUT;
  uint64_t scope = a->v.span.scope_ & ~(1ull << 63);
  int span_mut = (a->v.span.scope_ >> 63) != 0;
  if (scope != raw->scope)
    return kd_fail(KD_ERR_SCOPE_ENDED, "%s: args[%zu] (%s) is a span from %s; spans are valid "
                   "only in the scope that borrowed them", op, i, arg_kind_name(a->kind),
                   scope ? "an ended raw scope, or another session's" : "no borrow (zeroed or forged)");
  if (mut && !span_mut)
    return kd_fail(KD_ERR_BORROW_CONFLICT, "%s: args[%zu] is tensor_mut but its span is a "
                   "read-only borrow (use kd_raw_tensor_mut)", op, i);
  char what[32];
  snprintf(what, sizeof what, "args[%zu].tensor", i);
  kd_status st = kd_tensor_lookup(s, a->v.span.tensor, out, op, what);
  if (st) return st;
  kd_tensor_obj *o = *out;
  /* The span's tensor must be one this scope borrowed, the way it is used:
   * a span whose fields were pointed at another tensor is refused. */
  if (o->residency != KD_RESIDENCY_DEVICE || o->borrow.scope != raw->scope ||
      (mut && !o->borrow.exclusive) || (!mut && !o->borrow.exclusive && !o->borrow.shared))
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: args[%zu]: the span's tensor was not borrowed "
                   "%sin this scope (span fields altered?)", op, i, mut ? "mutably " : "");
  size_t esize = kd_dtype_size(o->dtype);
  if (a->v.span.device_ptr < o->dptr || a->v.span.bytes > o->bytes ||
      a->v.span.device_ptr - o->dptr > o->bytes - a->v.span.bytes || a->v.span.dtype != o->dtype ||
      (size_t)a->v.span.elements * esize != a->v.span.bytes)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: args[%zu]: span fields were altered (pointer, "
                   "size or dtype no longer match the borrowed tensor)", op, i);
  /* A read of a mutable borrow: the borrow itself checked nothing (the
   * kernel may be about to write it), so check here, as kd_raw_tensor does. */
  if (!mut && !o->initialized)
    return kd_fail(KD_ERR_UNINITIALIZED, "%s: args[%zu] reads a tensor that was never written (no upload, no "
                   "earlier launch writing it); the kernel would read garbage", op, i);
  return KD_OK;
}

#define KD_MAX_ARGS 128

kd_status kd_raw_launch(kd_raw *raw, kd_function fn, const kd_launch_config *config,
                        const kd_arg *args, size_t n) {
  static const char *op = "kd_raw_launch";
  kd_status st = raw_check(raw, op);
  if (st) return st;
  if (!config) return with_op(raw, op, kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument config is NULL", op));
  if (n && !args)
    return with_op(raw, op, kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: args is NULL with %zu arguments", op, n));
  if (n > KD_MAX_ARGS)
    return with_op(raw, op, kd_fail(KD_ERR_ARGUMENT_MISMATCH, "%s: %zu arguments, at most %d", op, n, KD_MAX_ARGS));
  kd_session *s = raw->session;
  kd_module_obj *mod;
  kd_cu_function *f;
  st = kd_function_lookup(s, fn, &mod, &f, op);
  if (!st) st = kd_session_note(s, kd_cu_check_config(&s->dev, op, f, config));
  if (!st && f->params_known && f->param_count != n)
    st = kd_fail(KD_ERR_ARGUMENT_MISMATCH, "%s: kernel %s takes %u parameters, %zu arguments given",
                 op, f->name, f->param_count, n);
  kd_tensor_obj *tensors[KD_MAX_ARGS] = {0};
  void *params[KD_MAX_ARGS];
  for (size_t i = 0; !st && i < n; ++i) {
    const kd_arg *a = &args[i];
    if ((unsigned)a->kind > KD_ARG_BYTES) {
      st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: args[%zu] has invalid kind %d", op, i, (int)a->kind);
      break;
    }
    size_t size = kd_arg_size(a);
    if (f->params_known && size != f->param_sizes[i]) {
      st = kd_fail(KD_ERR_ARGUMENT_MISMATCH, "%s: kernel %s parameter %zu is %u bytes, args[%zu] "
                   "(%s) is %zu bytes", op, f->name, i, f->param_sizes[i], i,
                   arg_kind_name(a->kind), size);
      break;
    }
    if (a->kind == KD_ARG_BYTES && (!a->v.bytes.data || !a->v.bytes.size)) {
      st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: args[%zu] (bytes) is NULL or empty", op, i);
      break;
    }
    if (a->kind == KD_ARG_TENSOR || a->kind == KD_ARG_TENSOR_MUT) {
      st = check_span(raw, op, i, a, &tensors[i]);
      /* One tensor twice in a launch, one of them written, is aliasing. */
      for (size_t j = 0; !st && j < i; ++j)
        if (tensors[j] == tensors[i] && (a->kind == KD_ARG_TENSOR_MUT || args[j].kind == KD_ARG_TENSOR_MUT))
          st = kd_fail(KD_ERR_BORROW_CONFLICT, "%s: args[%zu] and args[%zu] are the same tensor "
                       "and one of them is written", op, j, i);
      params[i] = (void *)&a->v.span.device_ptr;
    } else if (a->kind == KD_ARG_BYTES) {
      params[i] = (void *)a->v.bytes.data;
    } else {
      params[i] = (void *)&a->v; /* every scalar sits at the union's start */
    }
  }
  /* Retain before enqueueing so a failed retain leaves nothing in flight. */
  if (!st) st = kd_held_module_once(&raw->held, mod, raw->scope, op);
  for (size_t i = 0; !st && i < n; ++i)
    if (tensors[i]) st = kd_held_tensor_once(&raw->held, tensors[i], raw->scope, op);
  if (!st) st = kd_session_note(s, kd_cu_launch(&s->dev, op, f, config, n ? params : NULL, 0));
  if (st) return with_op(raw, op, st);
  for (size_t i = 0; i < n; ++i)
    if (tensors[i] && args[i].kind == KD_ARG_TENSOR_MUT) tensors[i]->initialized = 1;
  raw->launches++;
  s->counters.launches++;
  return KD_OK;
}

kd_status kd_raw_synchronize(kd_raw *raw) {
  static const char *op = "kd_raw_synchronize";
  kd_status st = raw_check(raw, op);
  if (st) return st;
  kd_session *s = raw->session;
  s->counters.stream_syncs++;
  uint64_t t0 = kd_wait_begin(s, op);
  CUresult r = kd_stream_wait(&s->dev);
  kd_wait_end(s, op, t0);
  if (r != CUDA_SUCCESS) return with_op(raw, op, kd_session_note(s, kd_fail_cu(r, op, "cuStreamSynchronize")));
  /* The whole stream is idle: every earlier completion has fired. */
  kd_completion_retire_before(s, s->next_seq);
  kd_session_waited(s);
  return KD_OK;
}

kd_status kd_raw_stream(kd_raw *raw, void **out) {
  static const char *op = "kd_raw_stream";
  kd_status st = raw_check(raw, op);
  if (st) return st;
  if (!out) return with_op(raw, op, kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_cu_stream is NULL", op));
  *out = (void *)raw->session->dev.stream;
  return KD_OK;
}
