/* The EAGER executor: every node of the plan, in topological order, on the
 * session's one stream. Ordering comes from the stream itself; the edges
 * matter for the HOST pool and for GRAPH mode. */
#include <ck_pr.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "cuda/cu_status.h"
#include "exec/exec.h"
#include "kernels/embedded.h"

void kd_builtins_load(kd_session *s, const char *op) {
  /* Loaded with the session, not at the first built-in node: loading
   * waits for all work in the context, and declaring a node must not
   * reach the driver. */
  kd_cu_module cu;
  kd_status st = kd_cu_module_load_image(&s->dev, op, kd_kernel_builtins_cubin, kd_kernel_builtins_cubin_size, &cu);
  if (st == KD_ERR_NO_BINARY_FOR_GPU)
    st = kd_cu_module_load_ptx(&s->dev, op, (const char *)kd_kernel_builtins_ptx, kd_kernel_builtins_ptx_size, &cu);
  kd_module_obj *m = st ? NULL : calloc(1, sizeof *m);
  if (!st && !m) {
    kd_cu_module_unload(&s->dev, &cu);
    st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory", op);
  }
  if (st) {
    s->builtins_status = kd_session_note(s, st);
    snprintf(s->builtins_error, sizeof s->builtins_error, "%s", kd_last_error());
    return;
  }
  m->cu = cu;
  m->refs = 1; /* the session's, dropped at destroy */
  s->builtins = m;
}

kd_status kd_builtins_module(kd_session *s, const char *op, kd_module_obj **out) {
  if (!s->builtins) /* a status kept from the load: never KD_OK */
    return kd_fail(s->builtins_status ? s->builtins_status : KD_ERR_DRIVER,
                   "%s: kdag's built-in kernels did not load when the session was created: %s", op,
                   s->builtins_error);
  if (out) *out = s->builtins;
  return KD_OK;
}

static const char *dtype_suffix(kd_dtype d) {
  switch (d) {
    case KD_F32: return "f32";
    case KD_F64: return "f64";
    case KD_I32: return "i32";
    case KD_I64: return "i64";
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
  L->cfg = (kd_launch_config){{1, 1, 1}, {256, 1, 1}, 0};
  if (node->op != KD_BI_SUM) {
    long long blocks = (n + 255) / 256, cap = (long long)s->dev.info.sm_count * 32;
    L->cfg.grid[0] = (uint32_t)(blocks < cap ? blocks : cap); /* grid-stride loops cover the rest */
    L->empty = n == 0;
  } else {
    L->cfg.block[0] = KD_KSUM_THREADS;
  }
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

static kd_status launch(kd_graph *g, const char *op, kd_gnode *node) {
  kd_session *s = g->session;
  kd_node_launch L;
  kd_status st = kd_node_launch_resolve(g, op, node, &L);
  if (st || L.empty) return st;
  st = kd_session_note(s, kd_cu_launch(&s->dev, op, L.fn, &L.cfg, L.count ? L.params : NULL));
  if (!st) s->counters.launches++;
  return st;
}

/* Enqueues a transfer node's copy (and a sink's event) with the staging
 * and event taken for it, marking in x what enqueued work now uses. */
static kd_status transfer(kd_session *s, const char *op, kd_graph *g, kd_gnode *node, kd_xfer *x) {
  CUdeviceptr dptr = g->bindings[g->accesses[node->first_access].binding].obj->dptr;
  const kd_cu_table *cu = s->dev.cu;
  CUresult r;
  if (node->kind == KD_NODE_UPLOAD) {
    r = cu->cuMemcpyHtoDAsync(dptr, x->block->host, node->bytes, s->dev.stream);
    if (r != CUDA_SUCCESS) return kd_session_note(s, kd_fail_cu(r, op, "cuMemcpyHtoDAsync"));
    x->copying = 1;
    return KD_OK;
  }
  if (node->bytes) {
    r = cu->cuMemcpyDtoHAsync(x->block->host, dptr, node->bytes, s->dev.stream);
    if (r != CUDA_SUCCESS) return kd_session_note(s, kd_fail_cu(r, op, "cuMemcpyDtoHAsync"));
    x->copying = 1;
  }
  r = cu->cuEventRecord(x->event, s->dev.stream);
  if (r != CUDA_SUCCESS) return kd_session_note(s, kd_fail_cu(r, op, "cuEventRecord"));
  x->recorded = 1;
  return KD_OK;
}

void kd_foreign_spans(kd_graph *g, const kd_gnode *node, kd_span *spans) {
  for (uint32_t k = 0; k < node->access_count; ++k) {
    kd_gaccess *a = &g->accesses[node->first_access + k];
    kd_tensor_obj *o = g->bindings[a->binding].obj;
    size_t esize = kd_dtype_size(o->dtype);
    int64_t n = kd_access_elements(a);
    memset(&spans[k], 0, sizeof spans[k]);
    spans[k].device_ptr = o->dptr + (CUdeviceptr)((size_t)kd_access_offset(a) * esize);
    spans[k].elements = n;
    spans[k].bytes = (size_t)n * esize;
    spans[k].dtype = o->dtype;
    spans[k].tensor.bits = o->handle;
  }
}

static kd_status foreign_call(kd_session *s, const char *op, kd_graph *g, kd_gnode *node, CUdeviceptr workspace,
                              kd_held_set *held) {
  kd_span spans[KD_FOREIGN_MAX_ACCESSES];
  kd_foreign_spans(g, node, spans);
  kd_foreign_call call = {(void *)s->dev.stream, spans, node->access_count, workspace, node->workspace_bytes,
                          node->res ? node->res->resource : NULL};
  if (node->res) {
    (void)kd_held_add(held, KD_HELD_RESOURCE, &node->res->res, op); /* reserved: cannot fail */
    ck_pr_inc_32(&node->res->refs);
  }
  kd_status st = kd_foreign_invoke(node, &call);
  if (st) return kd_fail_context(st, "%s: foreign node '%s'", op, node->name);
  return KD_OK;
}

/* Every foreign node's workspace, into the plan's per-node array
 * (kd_cuda_plan.workspace), allocated in stream order before anything is
 * enqueued and held until the submission completes. */
static kd_status workspaces_take(kd_graph *g, const char *op, kd_held_set *held) {
  kd_session *s = g->session;
  kd_cuda_plan *cp = kd_cuda_plan_get(g);
  if (!cp->workspaces) return KD_OK;
  CUdeviceptr *ws = cp->workspace;
  for (uint32_t n = 0; n < g->node_count; ++n) {
    kd_gnode *node = &g->nodes[n];
    if (node->kind != KD_NODE_FOREIGN || !node->workspace_bytes) continue;
    kd_status st = kd_session_note(s, kd_device_alloc(&s->dev, op, node->workspace_bytes, &ws[n]));
    if (st) /* the ones allocated are in held: freed in stream order */
      return kd_fail_context(st, "%s: foreign node '%s' (#%u): its %zu-byte workspace", op, node->name, n,
                             node->workspace_bytes);
    (void)kd_held_add(held, KD_HELD_DEVPTR, (void *)(uintptr_t)ws[n], op); /* reserved: cannot fail */
  }
  return KD_OK;
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

/* Debug option: wait for each node's own event so a fault is charged to
 * the node that caused it (slow: the host waits after every node). */
static kd_status debug_wait(kd_session *s, const char *op) {
  CUevent ev;
  kd_status st = kd_session_note(s, kd_event_acquire(&s->dev, op, &ev));
  if (st) return st;
  CUresult r = s->dev.cu->cuEventRecord(ev, s->dev.stream);
  if (r == CUDA_SUCCESS) {
    s->counters.event_waits++;
    r = s->dev.cu->cuEventSynchronize(ev);
  }
  kd_event_release_to_pool(&s->dev, ev);
  return r == CUDA_SUCCESS ? KD_OK : kd_session_note(s, kd_fail_cu(r, op, "cuEventSynchronize (per-node debug event)"));
}

kd_status kd_exec_eager(kd_graph *g, const char *op, kd_held_set *held, uint64_t stamp, int *enqueued) {
  kd_session *s = g->session;
  *enqueued = 0;
  /* Everything that can run out is taken first, so that a shortage of
   * memory or events enqueues nothing: room in held for what the nodes
   * use (a tensor per binding at most), transfers, workspaces. */
  kd_xfer *xf = NULL;
  kd_status st = kd_held_reserve_warm(s, held, g->binding_count + kd_cuda_plan_get(g)->holds, op);
  if (!st) st = kd_xfers_take(g, op, &xf);
  if (!st) st = workspaces_take(g, op, held);
  if (st) {
    kd_xfers_settle(g, xf, 0, held, op);
    return st;
  }
  *enqueued = g->node_count != 0;
  for (uint32_t i = 0; !st && i < g->node_count; ++i) {
    uint32_t v = g->plan.order[i];
    kd_gnode *node = &g->nodes[v];
    /* Held room was reserved: these cannot fail. */
    for (uint32_t k = 0; k < node->access_count; ++k)
      (void)kd_held_tensor_once(held, g->bindings[g->accesses[node->first_access + k].binding].obj, stamp, op);
    switch (node->kind) {
      case KD_NODE_KERNEL:
        (void)kd_held_module_once(held, node->module, stamp, op);
        st = launch(g, op, node);
        break;
      case KD_NODE_BUILTIN: st = launch(g, op, node); break;
      case KD_NODE_UPLOAD:
      case KD_NODE_SINK: {
        kd_xfer *x = kd_xfer_of(g, xf, v);
        if (x) st = transfer(s, op, g, node, x); /* else an upload of nothing */
        break;
      }
      case KD_NODE_HOST: {
        CUresult r = s->dev.cu->cuLaunchHostFunc(s->dev.stream, kd_host_trampoline, node->host_call);
        if (r != CUDA_SUCCESS) st = kd_session_note(s, kd_fail_cu(r, op, "cuLaunchHostFunc"));
        break;
      }
      case KD_NODE_FOREIGN: /* the plan has a workspace array when a foreign node has a workspace */
        st = foreign_call(s, op, g, node, kd_cuda_plan_get(g)->workspace ? kd_cuda_plan_get(g)->workspace[v] : 0, held);
        break;
    }
    if (!st && (s->opts.flags & KD_SESSION_DEBUG_NODES)) st = debug_wait(s, op);
    if (st) st = kd_fail_context(st, "%s: node '%s' (#%u)", op, node->name, v);
  }
  /* Refused part way (the driver refused an enqueue, or a foreign callback
   * failed): the nodes before stay enqueued and complete with what they
   * use held, but no sink takes this submission's copy. */
  kd_xfers_settle(g, xf, !st, held, op);
  return st;
}
