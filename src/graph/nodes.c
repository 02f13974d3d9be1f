/* SPDX-License-Identifier: Apache-2.0 */
/* The node constructors: built-in kernels, uploads and sinks, host
 * functions, foreign nodes and user kernels, each checked and committed
 * through access.c. */
#include <ck_pr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "base/grow.h"
#include "graph/build.h"

/* ---- built-in kernels ------------------------------------------------- */

static int same_shape(const kd_view *a, const kd_view *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; ++i)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

static kd_status need_host_or_builtins(node_ctx *c) {
  kd_session *s = c->g->session;
  if (s->backend == KD_BACKEND_CUDA) return kd_builtins_module(s, c->op, NULL);
  return KD_OK;
}

/* A view's shape as "[4, 6]" (rank 0: "[]"), for messages. */
static const char *shape_text(const kd_view *v, char *buf, size_t cap) {
  size_t used = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < v->rank && used < cap; ++i)
    used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "", (long long)v->shape[i]);
  if (used < cap) snprintf(buf + used, cap - used, "]");
  return buf;
}

/* Checks shapes and dtypes of a built-in's accesses (already resolved). */
static kd_status builtin_types(node_ctx *c, kd_builtin_op op, kd_dtype *dtype) {
  pending *a = c->acc;
  kd_dtype t = a[0].obj->dtype;
  for (uint32_t i = 1; i < c->count; ++i) {
    if (a[i].obj->dtype != t)
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument %zu (tensor 0x%llx) is %s, argument 0 "
                     "(tensor 0x%llx) is %s", c->op, c->name, c->index, a[i].arg,
                     (unsigned long long)a[i].view->tensor.bits, kd_dtype_name(a[i].obj->dtype),
                     (unsigned long long)a[0].view->tensor.bits, kd_dtype_name(t));
    if (op != KD_BI_SUM && !same_shape(a[0].view, a[i].view)) {
      char s0[160], si[160];
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument %zu (tensor 0x%llx) has shape %s, "
                     "argument 0 (tensor 0x%llx) %s", c->op, c->name, c->index, a[i].arg,
                     (unsigned long long)a[i].view->tensor.bits, shape_text(a[i].view, si, sizeof si),
                     (unsigned long long)a[0].view->tensor.bits, shape_text(a[0].view, s0, sizeof s0));
    }
  }
  int fp = t == KD_F32 || t == KD_F64 || t == KD_F16 || t == KD_BF16;
  int integer = t == KD_I32 || t == KD_I64 || t == KD_U8 || t == KD_U32 || t == KD_U64;
  if ((op == KD_BI_AXPY || op == KD_BI_SCALE) && !fp)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument 0 (tensor 0x%llx) is %s; this built-in "
                   "takes f32, f64, f16 or bf16", c->op, c->name, c->index, (unsigned long long)a[0].view->tensor.bits,
                   kd_dtype_name(t));
  if ((op == KD_BI_ADD || op == KD_BI_SUM) && !fp && !integer)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument 0 (tensor 0x%llx) is %s; this built-in "
                   "takes f32, f64, f16, bf16, i32, i64, u8, u32 or u64", c->op, c->name, c->index,
                   (unsigned long long)a[0].view->tensor.bits, kd_dtype_name(t));
  if (op == KD_BI_SUM && a[0].elements != 1) /* counted by ctx_access (an empty view: 0, whatever its shape) */
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument 0 (out, tensor 0x%llx) must hold one "
                   "element, it holds %lld", c->op, c->name, c->index, (unsigned long long)a[0].view->tensor.bits,
                   (long long)a[0].elements);
  *dtype = t;
  return KD_OK;
}

static kd_status builtin(kd_graph *g, const char *op, const char *name, kd_builtin_op bop,
                         const kd_view *views, const kd_access *modes, int count, double alpha,
                         const void *fill, kd_node *out) {
  node_ctx c;
  kd_status st = kd_node_enter(g, op, name, &c);
  if (st) return st;
  kd_gnode proto;
  memset(&proto, 0, sizeof proto);
  proto.kind = KD_NODE_BUILTIN;
  proto.op = bop;
  proto.alpha = alpha;
  for (int i = 0; !st && i < count; ++i) st = kd_node_access(&c, (size_t)i, modes[i], &views[i], 0, 0);
  if (!st) st = builtin_types(&c, bop, &proto.dtype);
  if (!st && bop == KD_BI_FILL) {
    if (!fill) st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument value is NULL", op, name, c.index);
    else memcpy(proto.fill, fill, kd_dtype_size(proto.dtype));
  }
  if (!st) st = need_host_or_builtins(&c);
  st = kd_node_commit(&c, st, &proto, out);
  kd_session_leave(g->session);
  return st;
}

kd_status kd_graph_op_fill(kd_graph *g, const char *name, kd_view dst, const void *value, kd_node *out) {
  kd_access m[] = {KD_OUT};
  return builtin(g, "kd_graph_op_fill", name, KD_BI_FILL, &dst, m, 1, 0, value, out);
}

kd_status kd_graph_op_copy(kd_graph *g, const char *name, kd_view dst, kd_view src, kd_node *out) {
  kd_view v[] = {dst, src};
  kd_access m[] = {KD_OUT, KD_IN};
  return builtin(g, "kd_graph_op_copy", name, KD_BI_COPY, v, m, 2, 0, NULL, out);
}

kd_status kd_graph_op_transpose(kd_graph *g, const char *name, kd_view dst, kd_view src, kd_node *out) {
  if (!g) return kd_fail(KD_ERR_INVALID_ARGUMENT, "kd_graph_op_transpose: argument graph is NULL");
  if (!name || !*name) return kd_fail(KD_ERR_INVALID_ARGUMENT, "kd_graph_op_transpose: argument name is NULL or empty");
  kd_tensor named = src.tensor;
  if (src.rank == -1) { /* resolve the whole tensor to swap its dimensions */
    kd_status st = kd_view_whole(g->session, src.tensor, &src);
    if (st) return kd_fail_context(st, "kd_graph_op_transpose: node '%s', argument 1 (tensor 0x%llx)", name,
                                   (unsigned long long)named.bits);
  }
  if (src.rank != 2)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "kd_graph_op_transpose: node '%s': argument 1 (tensor 0x%llx) has rank %d, "
                   "not 2", name, (unsigned long long)named.bits, src.rank);
  int64_t t = src.shape[0];
  src.shape[0] = src.shape[1];
  src.shape[1] = t;
  t = src.strides[0];
  src.strides[0] = src.strides[1];
  src.strides[1] = t;
  kd_view v[] = {dst, src};
  kd_access m[] = {KD_OUT, KD_IN};
  return builtin(g, "kd_graph_op_transpose", name, KD_BI_COPY, v, m, 2, 0, NULL, out);
}

kd_status kd_graph_op_add(kd_graph *g, const char *name, kd_view out, kd_view a, kd_view b, kd_node *node) {
  kd_view v[] = {out, a, b};
  kd_access m[] = {KD_OUT, KD_IN, KD_IN};
  return builtin(g, "kd_graph_op_add", name, KD_BI_ADD, v, m, 3, 0, NULL, node);
}

kd_status kd_graph_op_axpy(kd_graph *g, const char *name, kd_view y, kd_view x, double alpha, kd_node *out) {
  kd_view v[] = {y, x};
  kd_access m[] = {KD_INOUT, KD_IN};
  return builtin(g, "kd_graph_op_axpy", name, KD_BI_AXPY, v, m, 2, alpha, NULL, out);
}

kd_status kd_graph_op_scale(kd_graph *g, const char *name, kd_view y, double alpha, kd_node *out) {
  kd_access m[] = {KD_INOUT};
  return builtin(g, "kd_graph_op_scale", name, KD_BI_SCALE, &y, m, 1, alpha, NULL, out);
}

kd_status kd_graph_op_sum(kd_graph *g, const char *name, kd_view out, kd_view x, kd_node *node) {
  kd_view v[] = {out, x};
  kd_access m[] = {KD_OUT, KD_IN};
  return builtin(g, "kd_graph_op_sum", name, KD_BI_SUM, v, m, 2, 0, NULL, node);
}

/* ---- transfers, host functions ---------------------------------------- */

/* The checks shared by uploads and sinks: one whole, compact tensor whose
 * size is the host buffer's. */
static kd_status transfer_node(node_ctx *c, kd_gnode *proto, kd_node_kind kind, kd_tensor t, const void *host,
                               size_t bytes) {
  memset(proto, 0, sizeof *proto);
  proto->kind = kind;
  proto->host = host;
  proto->bytes = bytes;
  kd_view whole = kd_whole(t); /* of this frame: ctx_access keeps its own copy of a kd_whole */
  if (!host) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument host is NULL", c->op, c->name,
                            c->index);
  kd_status st = kd_node_access(c, 0, kind == KD_NODE_UPLOAD ? KD_OUT : KD_IN, &whole, 1, 0);
  if (!st && bytes != c->acc[0].obj->bytes)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument bytes is %zu, tensor 0x%llx holds %zu",
                 c->op, c->name, c->index, bytes, (unsigned long long)t.bits, c->acc[0].obj->bytes);
  return st;
}

kd_status kd_graph_upload(kd_graph *g, const char *name, kd_tensor dst, const void *host, size_t bytes,
                          kd_node *out) {
  node_ctx c;
  kd_status st = kd_node_enter(g, "kd_graph_upload", name, &c);
  if (st) return st;
  kd_gnode proto;
  st = transfer_node(&c, &proto, KD_NODE_UPLOAD, dst, host, bytes);
  st = kd_node_commit(&c, st, &proto, out);
  kd_session_leave(g->session);
  return st;
}

kd_status kd_graph_sink(kd_graph *g, const char *name, kd_tensor src, void *host, size_t bytes, kd_sink **out) {
  static const char *op = "kd_graph_sink";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_sink is NULL", op);
  *out = NULL;
  node_ctx c;
  kd_status st = kd_node_enter(g, op, name, &c);
  if (st) return st;
  kd_gnode proto;
  st = transfer_node(&c, &proto, KD_NODE_SINK, src, host, bytes);
  proto.host = NULL; /* a sink's host memory belongs to the kd_sink */
  kd_sink *sink = NULL;
  if (!st && (!(sink = calloc(1, sizeof *sink)) || !KD_GROW(g->sinks, g->sink_cap, g->sink_count + 1)))
    st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: node '%s' (#%u): no memory for the sink; the graph is as it was", op,
                 name, c.index);
  if (sink) {
    sink->graph = g;
    sink->node = c.index;
    sink->host = host;
    sink->bytes = bytes;
    proto.sink = sink;
  }
  st = kd_node_commit(&c, st, &proto, NULL);
  if (st) free(sink);
  else g->sinks[g->sink_count++] = sink; /* listed in the critical section that added its node */
  kd_session_leave(g->session);
  if (!st) *out = sink;
  return st;
}

/* compact: the node gets one contiguous span per access (a foreign node),
 * so a strided or broadcast view is refused. */
static kd_status declared(node_ctx *c, const kd_garg *accesses, size_t count, int any_residency, int compact) {
  if (count && !accesses)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument accesses is NULL with count %zu", c->op,
                   c->name, c->index, count);
  for (size_t i = 0; i < count; ++i) {
    if (!accesses[i].is_tensor)
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): access %zu is a value, not a tensor access",
                     c->op, c->name, c->index, i);
    kd_status st = kd_node_access(c, i, accesses[i].access, &accesses[i].view, compact, any_residency);
    if (st) return st;
  }
  return KD_OK;
}

kd_status kd_graph_host(kd_graph *g, const char *name, kd_host_fn fn, void *user, const kd_garg *accesses,
                        size_t count, kd_node *out) {
  static const char *op = "kd_graph_host";
  node_ctx c;
  kd_status st = kd_node_enter(g, op, name, &c);
  if (st) return st;
  kd_gnode proto;
  memset(&proto, 0, sizeof proto);
  proto.kind = KD_NODE_HOST;
  proto.host_fn = fn;
  proto.user = user;
  if (!fn) st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument fn is NULL", op, name, c.index);
  if (!st) st = declared(&c, accesses, count, 1, 0); /* accesses only order it: any view */
  if (!st && g->session->has_device) { /* HOST workers mark their own calls */
    proto.host_call = malloc(sizeof *proto.host_call);
    if (!proto.host_call)
      st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: node '%s' (#%u): no memory for its callback record", op, name, c.index);
    else *proto.host_call = (kd_host_call){fn, user};
  }
  st = kd_node_commit(&c, st, &proto, out);
  kd_session_leave(g->session);
  if (st) free(proto.host_call); /* never launched */
  return st;
}

void kd_foreign_res_unref(kd_foreign_res *r) {
  bool zero = false;
  ck_pr_dec_32_zero(&r->refs, &zero);
  if (!zero) return;
  if (r->release) {
    const char *was = kd_callback_enter("a foreign resource's release callback");
    r->release(r->resource);
    kd_callback_leave(was);
  }
  free(r);
}

static void foreign_res_drop(kd_resource *r) { kd_foreign_res_unref((kd_foreign_res *)r); }

kd_status kd_graph_foreign_add(kd_graph *g, const char *op, const char *name, kd_foreign_fn fn, void *user,
                               const kd_garg *accesses, size_t count, size_t workspace_bytes, void *resource,
                               void (*release)(void *), int host_too, kd_node *out) {
  node_ctx c;
  kd_status st = kd_node_enter(g, op, name, &c);
  if (st) return st;
  kd_gnode proto;
  memset(&proto, 0, sizeof proto);
  proto.kind = KD_NODE_FOREIGN;
  proto.foreign_fn = fn;
  proto.user = user;
  proto.workspace_bytes = workspace_bytes;
  if (g->session->backend != KD_BACKEND_CUDA && !host_too)
    st = kd_fail(KD_ERR_NO_HOST_IMPL, "%s: node '%s' (#%u): a foreign-library node has no host implementation; "
                 "this session's backend is HOST", op, name, c.index);
  if (!st && !fn) st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument fn is NULL", op, name, c.index);
  /* Refused now, not at a submission's allocation: no device holds it. */
  if (!st && g->session->has_device && workspace_bytes > g->session->dev.info.memory_bytes)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument workspace_bytes is %zu, more than the "
                 "device's %zu bytes of memory", op, name, c.index, workspace_bytes, g->session->dev.info.memory_bytes);
  if (!st && count > KD_FOREIGN_MAX_ACCESSES)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): %zu accesses, at most %d", op, name, c.index, count,
                 KD_FOREIGN_MAX_ACCESSES);
  if (!st) st = declared(&c, accesses, count, 0, 1); /* spans: compact views only */
  if (!st && (resource || release)) {
    proto.res = calloc(1, sizeof *proto.res);
    if (!proto.res)
      st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: node '%s' (#%u): no memory for its resource's hold", op, name,
                   c.index);
    else *proto.res = (kd_foreign_res){{foreign_res_drop}, 1, resource, release};
  }
  st = kd_node_commit(&c, st, &proto, out);
  kd_session_leave(g->session);
  if (st && proto.res) free(proto.res); /* never used: the caller keeps its resource */
  return st;
}

kd_status kd_graph_foreign(kd_graph *g, const char *name, kd_foreign_fn fn, void *user, const kd_garg *accesses,
                           size_t count, size_t workspace_bytes, void *resource, void (*release)(void *),
                           kd_node *out) {
  return kd_graph_foreign_add(g, "kd_graph_foreign", name, fn, user, accesses, count, workspace_bytes, resource,
                              release, 0, out);
}

/* ---- user kernels ----------------------------------------------------- */

/* "op: node 'name' (#index)", as snprintf would write it (truncated to
 * cap), for the messages of a kernel node's checks. Written on every
 * declaration, before any check can fail, so built by hand: snprintf was
 * a tenth of declaring and launching a one-shot graph. */
static void node_context(char *buf, size_t cap, const char *op, const char *name, uint32_t index) {
  char digits[16];
  size_t nd = 0;
  do digits[nd++] = (char)('0' + index % 10); while ((index /= 10) && nd < sizeof digits);
  const char *parts[] = {op, ": node '", name, "' (#"};
  size_t at = 0;
  for (size_t p = 0; p < 4; ++p)
    for (const char *q = parts[p]; *q && at + 1 < cap; ++q) buf[at++] = *q;
  while (nd && at + 1 < cap) buf[at++] = digits[--nd];
  if (at + 1 < cap) buf[at++] = ')';
  buf[at] = 0;
}

kd_status kd_graph_kernel(kd_graph *g, const char *name, kd_function fn, const kd_launch_config *config,
                          const kd_garg *args, size_t n, kd_node *out) {
  static const char *op = "kd_graph_kernel";
  node_ctx c;
  kd_status st = kd_node_enter(g, op, name, &c);
  if (st) return st;
  kd_session *s = g->session;
  kd_gnode proto;
  memset(&proto, 0, sizeof proto);
  proto.kind = KD_NODE_KERNEL;
  kd_module_obj *mod = NULL;
  kd_cu_function *f = NULL;
  char ctx[300];
  node_context(ctx, sizeof ctx, op, name, c.index);
  if (s->backend != KD_BACKEND_CUDA)
    st = kd_fail(KD_ERR_NO_HOST_IMPL, "%s: a user kernel has no host implementation; this session's backend "
                 "is HOST (%s)", ctx, s->reason);
  if (!st && !config) st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument config is NULL", ctx);
  if (!st && n && !args) st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: args is NULL with %zu arguments", ctx, n);
  if (!st) st = kd_function_lookup(s, fn, &mod, &f, ctx);
  /* Raising the kernel's dynamic shared-memory limit (kd_cu_check_config)
   * is a driver call, which this host-only call makes current for. */
  if (!st && (int64_t)config->shared_bytes > f->dyn_smem_limit) kd_session_device(s);
  if (!st) st = kd_session_note(s, kd_cu_check_config(&s->dev, ctx, f, config));
  if (!st && n > KD_PTX_MAX_PARAMS) /* a launch passes at most this many, whatever the driver reports */
    st = kd_fail(KD_ERR_ARGUMENT_MISMATCH, "%s: %zu arguments given; a kernel takes at most %d", ctx, n,
                 KD_PTX_MAX_PARAMS);
  if (!st && f->params_known && f->param_count != n)
    st = kd_fail(KD_ERR_ARGUMENT_MISMATCH, "%s: kernel %s takes %u parameters, %zu arguments given", ctx, f->name,
                 f->param_count, n);
  if (!st && n && !(proto.args = calloc(n, sizeof *proto.args)))
    st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory", ctx);
  for (size_t i = 0; !st && i < n; ++i) {
    size_t size = args[i].is_tensor ? sizeof(CUdeviceptr) : kd_arg_size(&args[i].value);
    if (!args[i].is_tensor && ((unsigned)args[i].value.kind < KD_ARG_I32 || args[i].value.kind > KD_ARG_BYTES)) {
      st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument %zu is a value of kind %d; tensors go through "
                   "kd_g_in/kd_g_out/kd_g_inout", ctx, i, (int)args[i].value.kind);
      break;
    }
    if (f->params_known && size != f->param_sizes[i]) {
      char what[48] = "";
      if (args[i].is_tensor)
        snprintf(what, sizeof what, " (tensor 0x%llx, a device pointer)", (unsigned long long)args[i].view.tensor.bits);
      st = kd_fail(KD_ERR_ARGUMENT_MISMATCH, "%s: kernel %s parameter %zu is %u bytes, argument %zu%s is %zu bytes",
                   ctx, f->name, i, f->param_sizes[i], i, what, size);
      break;
    }
    if (args[i].is_tensor) {
      proto.args[i].access = (int)c.count;
      st = kd_node_access(&c, i, args[i].access, &args[i].view, 1, 0);
    } else {
      proto.args[i].access = -1;
      proto.args[i].value = args[i].value;
      if (args[i].value.kind == KD_ARG_BYTES) {
        const kd_arg *a = &args[i].value;
        void *copy = NULL;
        if (!a->v.bytes.data || !a->v.bytes.size)
          st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument %zu (bytes) is NULL or empty", ctx, i);
        else if (!(copy = malloc(a->v.bytes.size)))
          st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: argument %zu: no memory for its %zu bytes", ctx, i, a->v.bytes.size);
        if (st) {
          proto.args[i].value.kind = KD_ARG_I32; /* nothing to free */
          break;
        }
        memcpy(copy, a->v.bytes.data, a->v.bytes.size);
        proto.args[i].value.v.bytes.data = copy;
      }
    }
    proto.arg_count = (uint32_t)(i + 1);
  }
  if (!st) {
    proto.module = mod;
    proto.fn_index = fn.index;
    proto.config = *config;
    kd_module_ref(mod);
  }
  kd_gnode copy = proto;
  /* A refused node's cleanup may drop the module's last reference (another
   * thread released its handle meanwhile), which frees a handle slot and
   * unloads: under the session lock, as kd_graph_destroy's. */
  st = kd_node_commit(&c, st, &proto, out);
  if (st) kd_gnode_free(s, &copy);
  kd_session_leave(s);
  return st;
}
