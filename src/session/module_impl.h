/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: modules as session objects, kdag's built-in kernels and the
 * deferred unloads (session/module.c). Fields are guarded by the session
 * lock; refs are atomic. */
#ifndef KDAG_SESSION_MODULE_IMPL_H
#define KDAG_SESSION_MODULE_IMPL_H

#include "cuda/module.h"
#include "kdag/raw.h"

typedef struct kd_session kd_session;

typedef struct kd_module_obj {
  uint32_t refs;
  uint32_t user_refs;
  uint64_t handle;
  kd_cu_module cu;
  uint64_t held_by_scope;
  struct kd_module_obj *next_unload; /* on the session's deferred unloads (session/module.c) */
} kd_module_obj;

void kd_module_ref(kd_module_obj *o);
/* Drops a reference; the last lists the module for unloading
 * (kd_modules_unload_deferred), as unloading waits for the context. */
void kd_module_unref(kd_session *s, kd_module_obj *o);
kd_status kd_module_lookup(kd_session *s, kd_module m, kd_module_obj **out, const char *op,
                           const char *what);
kd_status kd_module_adopt(kd_session *s, const char *op, kd_cu_module *cu, kd_module *out);
kd_status kd_function_lookup(kd_session *s, kd_function f, kd_module_obj **mod,
                             kd_cu_function **fn, const char *op);
size_t kd_arg_size(const kd_arg *a);
/* Loads kdag's built-in kernels (kd_session_create): a failure is kept
 * for the first built-in node to report. */
void kd_builtins_load(kd_session *s, const char *op);
/* The built-ins' module, or the load's failure naming op. */
kd_status kd_builtins_module(kd_session *s, const char *op, kd_module_obj **out);
/* The loop kernels (kernels/loop.cu), or the error of their load. */
kd_status kd_loops_module(kd_session *s, const char *op, kd_module_obj **out);
void kd_modules_unload_deferred(kd_session *s);
/* Frees whatever the caller never released (session teardown). */
void kd_module_destroy_all(kd_session *s);

#endif
