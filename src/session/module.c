/* SPDX-License-Identifier: Apache-2.0 */
/* Module handles: loaded code as refcounted session objects. */
#include <ck_pr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "kernels/embedded.h"
#include "session/session_impl.h"

kd_status kd_module_lookup(kd_session *s, kd_module m, kd_module_obj **out, const char *op,
                           const char *what) {
  return kd_handle_get(&s->handles, m.bits, KD_HANDLE_MODULE, (void **)out, op, what);
}

void kd_module_ref(kd_module_obj *o) { ck_pr_inc_32(&o->refs); }

/* Unloading waits for all work in the context, whoever enqueued it (the
 * driver's cuModuleUnload; tools/wait-probe): a release, a reap or a
 * graph's destruction would wait for unrelated kernels. So a module whose
 * last reference goes is listed, and unloaded where a caller asked for a
 * wait (kd_session_release_idle). */
void kd_module_unref(kd_session *s, kd_module_obj *o) {
  bool zero = false;
  ck_pr_dec_32_zero(&o->refs, &zero);
  if (!zero) return;
  if (o->handle) kd_handle_free(&s->handles, o->handle);
  o->handle = 0;
  if (s->unload_now) {
    kd_session_device(s); /* should a host-only call drop the last reference */
    kd_cu_module_unload(&s->dev, &o->cu);
    free(o);
    return;
  }
  o->next_unload = s->unloads;
  s->unloads = o;
  s->unloads_waiting++;
  s->unload_bytes += o->cu.image_bytes;
}

void kd_modules_unload_deferred(kd_session *s) {
  if (!s->unloads) return;
  kd_session_device(s);
  while (s->unloads) {
    kd_module_obj *o = s->unloads;
    s->unloads = o->next_unload;
    kd_cu_module_unload(&s->dev, &o->cu);
    free(o);
  }
  s->unloads_waiting = 0;
  s->unload_bytes = 0;
}

/* Wraps a loaded module in a handle owned by the caller. */
kd_status kd_module_adopt(kd_session *s, const char *op, kd_cu_module *cu, kd_module *out) {
  kd_module_obj *o = calloc(1, sizeof *o);
  kd_status st = o ? kd_handle_alloc(&s->handles, KD_HANDLE_MODULE, o, &o->handle, op)
                   : kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the module", op);
  if (st) { /* loading waited already; the unload is part of this call */
    free(o);
    kd_cu_module_unload(&s->dev, cu);
    return st;
  }
  o->cu = *cu;
  o->refs = 1;
  o->user_refs = 1;
  out->bits = o->handle;
  return KD_OK;
}

kd_status kd_module_function(kd_session *s, kd_module m, const char *name, kd_function *out) {
  static const char *op = "kd_module_function";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_function is NULL", op);
  kd_status st = kd_session_enter(s, op);
  if (st) return st;
  kd_module_obj *o;
  uint32_t index = 0;
  st = kd_module_lookup(s, m, &o, op, "module");
  if (!st) st = kd_session_note(s, kd_cu_module_function(&s->dev, op, &o->cu, name, &index));
  if (!st) {
    out->module = m;
    out->index = index;
  }
  kd_session_leave(s);
  return st;
}

kd_status kd_function_lookup(kd_session *s, kd_function f, kd_module_obj **mod,
                             kd_cu_function **fn, const char *op) {
  kd_status st = kd_module_lookup(s, f.module, mod, op, "function.module");
  if (st) return st;
  if (f.index >= (*mod)->cu.fn_count)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument function has index %u, its module has %zu",
                   op, f.index, (*mod)->cu.fn_count);
  *fn = &(*mod)->cu.fns[f.index];
  return KD_OK;
}

kd_status kd_function_params(kd_session *s, kd_function f, size_t *count, size_t *sizes, size_t cap) {
  static const char *op = "kd_function_params";
  if (!count) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_count is NULL", op);
  kd_status st = kd_session_enter_host(s, op);
  if (st) return st;
  kd_module_obj *mod = NULL;
  kd_cu_function *fn = NULL; /* set by kd_function_lookup on KD_OK */
  st = kd_function_lookup(s, f, &mod, &fn, op);
  if (!st && !fn->params_known)
    st = kd_fail(KD_ERR_DRIVER, "%s: the driver does not report parameters of kernel %s", op, fn->name);
  if (!st) {
    *count = fn->param_count;
    for (size_t i = 0; sizes && i < cap && i < fn->param_count; ++i) sizes[i] = fn->param_sizes[i];
  }
  kd_session_leave(s);
  return st;
}

kd_status kd_module_release(kd_session *s, kd_module m) {
  static const char *op = "kd_module_release";
  kd_status st = kd_session_enter_release(s, op); /* releasing stays possible after a fault */
  if (st) return st;
  kd_module_obj *o;
  st = kd_module_lookup(s, m, &o, op, "module");
  if (!st && o->user_refs == 0)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: the module belongs to the module cache; do not release it", op);
  if (!st && --o->user_refs == 0) {
    kd_handle_free(&s->handles, o->handle);
    o->handle = 0;
    kd_module_unref(s, o);
  }
  kd_session_leave(s);
  return st;
}

kd_status kd_module_retain(kd_session *s, kd_module m) {
  static const char *op = "kd_module_retain";
  kd_status st = kd_session_enter_host(s, op);
  if (st) return st;
  kd_module_obj *o;
  st = kd_module_lookup(s, m, &o, op, "module");
  if (!st && o->user_refs == 0)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: the module belongs to the module cache, which keeps it until the "
                 "session is destroyed; it needs no retain", op);
  if (!st) o->user_refs++;
  kd_session_leave(s);
  return st;
}

static void destroy_one(void *ctx, void *obj, uint64_t handle) {
  (void)handle;
  kd_session *s = ctx;
  kd_module_obj *o = obj;
  if (o->user_refs == 0) return; /* the cache's, freed with the cache */
  kd_handle_free(&s->handles, o->handle);
  o->handle = 0;
  o->refs = 1;
  kd_module_unref(s, o);
}

void kd_module_destroy_all(kd_session *s) { kd_handle_each(&s->handles, KD_HANDLE_MODULE, destroy_one, s); }

/* kdag's own module from its embedded image, else (a GPU the image has no
 * code for) its PTX; *out NULL and the failure in status and error.
 * waits: its kernels wait for their grid dependency where compiled for
 * sm_90 or later (the built-ins: docs/pdl.md). */
static void own_module(kd_session *s, const char *op, const unsigned char *image, size_t image_size,
                       const unsigned char *ptx, size_t ptx_size, int waits, kd_module_obj **out, kd_status *status,
                       char *error, size_t cap) {
  kd_cu_module cu;
  kd_status st = kd_cu_module_load_image(&s->dev, op, image, image_size, &cu);
  if (!st && waits) {
    kd_image_info info = kd_image_inspect(image, image_size);
    cu.grid_wait = info.kind == KD_IMAGE_CUBIN && info.sm_count == 1 && info.sm[0] >= 90;
  }
  if (st == KD_ERR_NO_BINARY_FOR_GPU) st = kd_cu_module_load_ptx(&s->dev, op, (const char *)ptx, ptx_size, &cu);
  kd_module_obj *m = st ? NULL : calloc(1, sizeof *m);
  if (!st && !m) {
    kd_cu_module_unload(&s->dev, &cu);
    st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory", op);
  }
  *out = NULL;
  if (st) {
    *status = kd_session_note(s, st);
    snprintf(error, cap, "%s", kd_last_error());
    return;
  }
  m->cu = cu;
  m->refs = 1; /* the session's, dropped at destroy */
  *out = m;
}

void kd_builtins_load(kd_session *s, const char *op) {
  /* Loaded with the session, not at the first built-in node: loading
   * waits for all work in the context, and declaring a node must not
   * reach the driver. The loop kernels likewise; a driver that cannot
   * load them (no conditional nodes) refuses GRAPH-mode loops alone. */
  own_module(s, op, kd_kernel_builtins_cubin, kd_kernel_builtins_cubin_size, kd_kernel_builtins_ptx,
             kd_kernel_builtins_ptx_size, 1, &s->builtins, &s->builtins_status, s->builtins_error,
             sizeof s->builtins_error);
  kd_fail_keep keep; /* the session works without them: no error of this load is the caller's */
  kd_fail_keep_begin(&keep);
  own_module(s, op, kd_kernel_loop_cubin, kd_kernel_loop_cubin_size, kd_kernel_loop_ptx, kd_kernel_loop_ptx_size, 0,
             &s->loops, &s->loops_status, s->loops_error, sizeof s->loops_error);
  kd_fail_keep_end(&keep);
}

kd_status kd_loops_module(kd_session *s, const char *op, kd_module_obj **out) {
  if (!s->loops)
    return kd_fail(s->loops_status ? s->loops_status : KD_ERR_DRIVER,
                   "%s: kdag's loop kernels did not load when the session was created (GRAPH-mode loops need a CUDA "
                   "12.3+ driver): %s", op, s->loops_error);
  *out = s->loops;
  return KD_OK;
}

kd_status kd_builtins_module(kd_session *s, const char *op, kd_module_obj **out) {
  if (!s->builtins) /* a status kept from the load: never KD_OK */
    return kd_fail(s->builtins_status ? s->builtins_status : KD_ERR_DRIVER,
                   "%s: kdag's built-in kernels did not load when the session was created: %s", op,
                   s->builtins_error);
  if (out) *out = s->builtins;
  return KD_OK;
}
