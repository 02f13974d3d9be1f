/* SPDX-License-Identifier: Apache-2.0 */
/* What both CUDA executors and the HOST executor resolve a node into:
 * a kernel or built-in node's launch against the graph's current
 * bindings, a foreign node's spans, and the callbacks' marked calls.
 * Shared here so that no executor calls another's helpers. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/status_internal.h"
#include "exec/exec.h"

kd_kview kd_access_kview(const kd_gaccess *a, uint64_t base, size_t esize) {
  kd_kview v;
  memset(&v, 0, sizeof v);
  v.base = base + (uint64_t)kd_access_offset(a) * esize;
  v.rank = a->rank;
  for (int i = 0; i < a->rank; ++i) {
    v.shape[i] = kd_access_shape(a)[i];
    v.strides[i] = kd_access_strides(a)[i];
  }
  return v;
}

kd_kdtype kd_kdtype_of(kd_dtype d) {
  switch (d) {
    case KD_F64: return KD_K_F64;
    case KD_I32: case KD_U32: return KD_K_I32;
    case KD_I64: case KD_U64: return KD_K_I64;
    case KD_U8: return KD_K_U8;
    case KD_F16: return KD_K_F16;
    case KD_BF16: return KD_K_BF16;
    default: return KD_K_F32;
  }
}

static const char *dtype_suffix(kd_dtype d) {
  switch (d) {
    case KD_F32: return "f32";
    case KD_F64: return "f64";
    case KD_I32: case KD_U32: return "i32"; /* the same wrapping bits */
    case KD_I64: case KD_U64: return "i64";
    case KD_U8: return "u8";
    case KD_F16: return "f16";
    case KD_BF16: return "bf16";
    default: return "?";
  }
}

/* Built-in kernels: one function per op and element type (fill and copy
 * per element size), grid-stride loops over the view's elements. */
static kd_status resolve_builtin(kd_graph *g, const char *op, kd_gnode *node, kd_node_launch *L) {
  kd_session *s = g->session;
  kd_module_obj *m = NULL; /* set on KD_OK */
  kd_status st = kd_builtins_module(s, op, &m);
  if (st) return st;
  for (uint32_t k = 0; k < node->access_count && k < 3; ++k) {
    kd_gaccess *a = &g->accesses[node->first_access + k];
    kd_tensor_obj *o = g->bindings[a->binding].obj;
    L->v[k] = kd_access_kview(a, o->dptr, kd_dtype_size(o->dtype));
  }
  size_t esize = kd_dtype_size(node->dtype);
  char name[32];
  static const char *ops[] = {"fill", "copy", "add", "axpy", "scale", "sum"};
  if (node->op == KD_BI_FILL || node->op == KD_BI_COPY) snprintf(name, sizeof name, "kd_%s_e%zu", ops[node->op], esize);
  else snprintf(name, sizeof name, "kd_%s_%s", ops[node->op], dtype_suffix(node->dtype));
  uint32_t idx;
  st = kd_session_note(s, kd_cu_module_function(&s->dev, op, &m->cu, name, &idx));
  if (st) return st;
  L->fn = &m->cu.fns[idx];
  memcpy(L->pat.w, node->fill, sizeof L->pat.w);
  for (uint32_t i = 0; i < node->access_count; ++i) {
    L->params[L->count] = &L->v[i];
    L->sizes[L->count++] = sizeof L->v[i];
  }
  if (node->op == KD_BI_FILL) {
    L->params[L->count] = &L->pat;
    L->sizes[L->count++] = sizeof L->pat;
  }
  if (node->op == KD_BI_AXPY || node->op == KD_BI_SCALE) {
    L->params[L->count] = &node->alpha;
    L->sizes[L->count++] = sizeof node->alpha;
  }
  long long n = kd_kview_numel(&L->v[node->op == KD_BI_SUM ? 1 : 0]);
  L->cfg = (kd_launch_config){{1, 1, 1}, {256, 1, 1}, 0, 0};
  if (node->op != KD_BI_SUM) {
    long long blocks = (n + 255) / 256, cap = (long long)s->dev.info.sm_count * 32;
    L->cfg.grid[0] = (uint32_t)(blocks < cap ? blocks : cap); /* grid-stride loops cover the rest */
    L->empty = n == 0;
  } else {
    L->cfg.block[0] = KD_KSUM_THREADS;
  }
  if (L->fn->grid_wait == KD_GRID_WAIT_YES) L->cfg.flags = KD_LAUNCH_PDL; /* built for sm_90+: they wait (kernels/builtins.cu) */
  return KD_OK;
}

static void resolve_kernel(kd_graph *g, kd_gnode *node, kd_node_launch *L) {
  L->fn = &node->module->cu.fns[node->fn_index];
  L->cfg = node->config;
  for (uint32_t i = 0; i < node->arg_count && i < KD_PTX_MAX_PARAMS; ++i) {
    kd_gvalue *a = &node->args[i];
    if (a->access >= 0) {
      kd_gaccess *acc = &g->accesses[node->first_access + (uint32_t)a->access];
      kd_tensor_obj *o = g->bindings[acc->binding].obj;
      L->ptrs[i] = o->dptr + (CUdeviceptr)((size_t)kd_access_offset(acc) * kd_dtype_size(o->dtype));
      L->params[i] = &L->ptrs[i];
      L->sizes[i] = sizeof L->ptrs[i];
    } else if (a->value.kind == KD_ARG_BYTES) {
      L->params[i] = (void *)a->value.v.bytes.data;
      L->sizes[i] = (uint32_t)a->value.v.bytes.size;
    } else {
      L->params[i] = &a->value.v;
      L->sizes[i] = (uint32_t)kd_arg_size(&a->value);
    }
    L->count = i + 1;
  }
}

kd_status kd_node_launch_resolve(kd_graph *g, const char *op, kd_gnode *node, kd_node_launch *L) {
  memset(L, 0, offsetof(kd_node_launch, params));
  if (node->kind == KD_NODE_BUILTIN) {
    memset(L->v, 0, sizeof L->v); /* only built-ins pass views: a kernel's launch skips these bytes */
    return resolve_builtin(g, op, node, L);
  }
  resolve_kernel(g, node, L);
  return KD_OK;
}

void kd_foreign_spans(kd_graph *g, const kd_gnode *node, kd_span *spans) {
  for (uint32_t k = 0; k < node->access_count; ++k) {
    kd_gaccess *a = &g->accesses[node->first_access + k];
    kd_tensor_obj *o = g->bindings[a->binding].obj;
    size_t esize = kd_dtype_size(o->dtype);
    int64_t n = kd_access_elements(a);
    memset(&spans[k], 0, sizeof spans[k]);
    /* A HOST session's spans (kdag's collectives) carry host addresses. */
    uint64_t base = g->session->has_device ? (uint64_t)o->dptr : (uint64_t)(uintptr_t)o->host;
    spans[k].device_ptr = base + (uint64_t)((size_t)kd_access_offset(a) * esize);
    spans[k].elements = n;
    spans[k].bytes = (size_t)n * esize;
    spans[k].dtype = o->dtype;
    spans[k].tensor.bits = o->handle;
  }
}

kd_status kd_foreign_invoke(const kd_gnode *node, const kd_foreign_call *call) {
  const char *was = kd_callback_enter("a foreign node's callback");
  unsigned long mark = kd_fail_mark();
  kd_status st = kd_fail_unexplained(node->foreign_fn(call, node->user), mark, "the callback");
  kd_callback_leave(was);
  return st;
}

void CUDA_CB kd_host_trampoline(void *call) {
  kd_host_call *c = call;
  const char *was = kd_callback_enter("a host function node");
  c->fn(c->user);
  kd_callback_leave(was);
}
