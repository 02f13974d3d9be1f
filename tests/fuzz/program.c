/* SPDX-License-Identifier: Apache-2.0 */
/* The graph program behind the fuzz targets fuzz_graph (a HOST session)
 * and fuzz_cuda (a CUDA session on the null driver): the input is a program
 * of calls (tensors, built-in nodes, uploads, sinks, host nodes, edges,
 * rebinds, releases, submissions, and the backend's own) whose views,
 * handles and names are drawn from it: mostly plausible, sometimes hostile
 * (ranks outside [0, KD_MAX_RANK], numbers near 2^31, 2^62 and INT64_MIN,
 * handles of released, foreign or made-up tensors).
 *
 * Properties checked on every call:
 *   - a refusal has a code the API documents for it and a message that
 *     starts with the call's name;
 *   - a refused declaration, edge or rebind leaves the graph exactly as it
 *     was (its DOT text and its stats);
 *   - an accepted node names only tensors the program made, and adds one
 *     node;
 * on every submission, the graph means what its nodes say in the order
 * they were declared: the executor must leave every tensor and sink
 * exactly as running the accepted nodes one by one does (with the host
 * kernels, or, where kernels do nothing, with the transfers alone), with
 * each host node run once; and after each input, with its graph destroyed
 * and its tensors released, the session holds no memory. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "tests/fuzz/shared.h"
#include "tests/fuzz/program.h"

static const char *target; /* the running target's name, for kdf_violation */

/* ---- the sessions ------------------------------------------------------- */

/* A live tensor of another session, for KD_ERR_WRONG_SESSION. */
static kd_tensor foreign_tensor(void) {
  static kd_session *s;
  static kd_tensor t;
  if (!s) {
    kd_session_options o;
    kd_session_options_init(&o);
    o.backend = KD_BACKEND_HOST;
    int32_t v[4] = {0};
    kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {4}};
    if (kd_session_create(&o, &s) || kd_tensor_from_host(s, &d, v, sizeof v, &t))
      kdf_violation(target, "the foreign session: %s", kd_last_error());
  }
  return t;
}

/* ---- drawing arguments from the input ---------------------------------- */

/* A handle: one of ours (maybe released), a foreign one, zero or made up.
 * *idx is ours, or -1. */
static kd_tensor pick_tensor(kdf_program *f, int *idx) {
  uint8_t b = kdf_u8(&f->in);
  *idx = -1;
  if (b == 255) return (kd_tensor){kdf_u64(&f->in)};
  if (b == 254) return (kd_tensor){0};
  if (b == 253) return foreign_tensor();
  if (!f->tensor_count) return (kd_tensor){0};
  *idx = b % f->tensor_count;
  return f->t[*idx].h;
}

static kd_view pick_view(kdf_program *f, int *idx) {
  kdf_input *in = &f->in;
  kd_tensor h = pick_tensor(f, idx);
  uint8_t how = kdf_u8(in) % 4;
  if (how == 0) return kd_whole(h);
  kd_view v;
  memset(&v, 0, sizeof v);
  v.tensor = h;
  if (how == 1 && *idx >= 0) { /* a block of the tensor, in its own layout */
    const ften *t = &f->t[*idx];
    v.rank = t->rank;
    int64_t stride = 1;
    for (int i = 0; i < t->rank; ++i) {
      v.shape[i] = kdf_u8(in) % (t->shape[i] + 1);
      v.strides[i] = stride;
      stride *= t->shape[i];
    }
    v.offset = kdf_u8(in) % (t->elements + 1);
  } else if (how <= 2) { /* small numbers, any layout */
    v.rank = kdf_u8(in) % 4;
    v.offset = kdf_u8(in) % 10;
    for (int i = 0; i < v.rank; ++i) {
      v.shape[i] = kdf_u8(in) % 10;
      v.strides[i] = kdf_u8(in) % 10;
    }
  } else { /* anything, a rank outside the struct's arrays too */
    v = kdf_wild_view(in, h, (int)(kdf_u8(in) % 12) - 2);
  }
  return v;
}

/* A node name: usually fine, sometimes NULL or empty. */
static const char *pick_name(kdf_program *f) {
  uint8_t b = kdf_u8(&f->in);
  return b == 0 ? NULL : b == 1 ? "" : "node";
}

/* ---- checking a call ----------------------------------------------------- */

static char *dot_text(kd_graph *g) {
  char *buf = NULL;
  size_t len = 0;
  FILE *file = open_memstream(&buf, &len);
  if (!file) return NULL;
  kd_status st = kd_graph_write_dot(g, file);
  fclose(file);
  if (st) kdf_violation(target, "kd_graph_write_dot: %s", kd_last_error());
  return buf;
}

typedef struct snapshot {
  char *dot;
  kd_graph_stats stats;
} snapshot;

static snapshot take(kdf_program *f) {
  snapshot s = {dot_text(f->g), {0}};
  if (kd_graph_stats_get(f->g, &s.stats)) kdf_violation(target, "kd_graph_stats_get: %s", kd_last_error());
  return s;
}

/* The codes a call may refuse with (graph.h, tensor.h); anything else,
 * such as KD_ERR_OUT_OF_MEMORY on these small graphs, is a fault, unless
 * the backend injected a driver refusal. */
static int documented(const kdf_program *f, const char *op, kd_status st) {
  if (f->injected && (st == KD_ERR_OUT_OF_MEMORY || st == KD_ERR_DRIVER)) return 1;
  int edge = strcmp(op, "kd_graph_edge") == 0, rebind = strcmp(op, "kd_graph_rebind") == 0;
  int set_arg = strcmp(op, "kd_graph_set_arg") == 0, kernel = strcmp(op, "kd_graph_kernel") == 0;
  int node = strncmp(op, "kd_graph_", 9) == 0 && !edge && !rebind && !set_arg; /* graph.h: every node-adding call */
  switch (st) {
  case KD_ERR_INVALID_ARGUMENT: return 1;
  case KD_ERR_RELEASED: case KD_ERR_WRONG_SESSION: case KD_ERR_UNINITIALIZED: return node || rebind;
  case KD_ERR_NOT_RESIDENT: case KD_ERR_OUT_OF_BOUNDS: case KD_ERR_ALIASING: return node;
  case KD_ERR_CYCLE: return edge;
  case KD_ERR_NOT_COMPACT: case KD_ERR_LAUNCH_CONFIG: return kernel;
  case KD_ERR_ARGUMENT_MISMATCH: return kernel || set_arg;
  default: return 0;
  }
}

static void check_refusal(const kdf_program *f, const char *op, kd_status st) {
  if (!documented(f, op, st)) kdf_violation(target, "%s: undocumented %s: %s", op, kd_status_name(st), kd_last_error());
  /* kd_with_raw passes on its callback's failure as the call in the
   * callback that made it ("kd_raw_load_ptx: raw scope 'x': ..."). */
  size_t n = strlen(op), named = kdf_call_length(kd_last_error());
  int ok = strcmp(op, "kd_with_raw") == 0 ? named > 0 : named == n && strncmp(kd_last_error(), op, n) == 0;
  if (!ok)
    kdf_violation(target, "%s: %s, and the message does not name the call: %s", op, kd_status_name(st),
                  kd_last_error());
}

/* After a call that may change the graph: a refusal changed nothing; an
 * accepted declaration added one node. */
static void check_call(kdf_program *f, const char *op, kd_status st, snapshot *before, int declares) {
  if (f->trace) fprintf(stderr, "%s -> %s %s\n", op, kd_status_name(st), st ? kd_last_error() : "");
  snapshot after = take(f);
  if (st) {
    check_refusal(f, op, st);
    if (!before->dot || !after.dot || strcmp(before->dot, after.dot) != 0 ||
        memcmp(&before->stats, &after.stats, sizeof after.stats) != 0)
      kdf_violation(target, "%s refused (%s) but changed the graph", op, kd_status_name(st));
  } else if (declares && after.stats.nodes != before->stats.nodes + 1) {
    kdf_violation(target, "%s accepted: %u nodes before, %u after", op, before->stats.nodes, after.stats.nodes);
  }
  free(before->dot);
  free(after.dot);
}

/* The tensor index of an accepted view whose handle the program did not
 * pick as one of its own (made-up bits that happen to be live). */
static int owner(kdf_program *f, const char *op, int idx, kd_tensor h) {
  if (idx >= 0) return idx;
  for (int i = 0; i < f->tensor_count; ++i)
    if (f->t[i].h.bits == h.bits && f->t[i].live) return i;
  kdf_violation(target, "%s accepted handle 0x%llx, which the program never made", op, (unsigned long long)h.bits);
  return -1;
}

/* Elements of an accepted view; INT64_MAX past it (a view with a zero
 * dimension may have others whose product overflows). */
static int64_t view_elements(const kd_view *v) {
  for (int i = 0; i < v->rank; ++i)
    if (!v->shape[i]) return 0;
  int64_t n = 1;
  for (int i = 0; i < v->rank; ++i)
    if (__builtin_mul_overflow(n, v->shape[i], &n)) return INT64_MAX;
  return n;
}

/* Records accepted view k of node n: resolved, with its tensor. */
static int record_view(kdf_program *f, const char *op, fnode *n, int k, int idx, kd_view v) {
  int i = owner(f, op, idx, v.tensor);
  if (i < 0) return 0;
  if (v.rank == -1 && kd_view_whole(f->s, v.tensor, &v)) {
    kdf_violation(target, "%s accepted a kd_whole of 0x%llx, which kd_view_whole refuses: %s", op,
                  (unsigned long long)v.tensor.bits, kd_last_error());
    return 0;
  }
  if (view_elements(&v) > MAX_RUN_ELEMENTS) f->heavy = 1;
  n->t[k] = i;
  n->v[k] = v;
  if (f->trace) fprintf(stderr, "  argument %d: tensor %d, %lld elements\n", k, i, (long long)view_elements(&v));
  return 1;
}

/* ---- the calls ----------------------------------------------------------- */

static void make_tensor(kdf_program *f) {
  kdf_input *in = &f->in;
  static const kd_dtype dtypes[] = {KD_F32, KD_F64, KD_I32, KD_I64, KD_U8};
  kd_tensor_desc d;
  memset(&d, 0, sizeof d);
  uint8_t b = kdf_u8(in);
  d.dtype = b < 250 ? dtypes[b % 5] : (kd_dtype)(KD_DTYPE_COUNT_ + b - 250); /* or none */
  d.rank = 1 + kdf_u8(in) % 3;
  for (int i = 0; i < d.rank; ++i) d.shape[i] = kdf_u8(in) % 7;
  uint8_t how = kdf_u8(in);
  d.residency = how % 7 == 6 ? KD_RESIDENCY_HOST : KD_RESIDENCY_DEVICE;
  int uninitialised = how % 5 == 4;
  if (f->tensor_count == MAX_TENSORS) return;
  ften *t = &f->t[f->tensor_count];
  memset(t, 0, sizeof *t);
  t->dtype = d.dtype;
  t->rank = d.rank;
  t->residency = d.residency;
  t->esize = kd_dtype_size(d.dtype);
  t->elements = 1;
  for (int i = 0; i < d.rank; ++i) t->elements *= t->shape[i] = d.shape[i];
  t->bytes = t->esize * (size_t)t->elements;
  t->ref = malloc(t->bytes + 1);
  if (!t->ref) return;
  for (size_t k = 0; k < t->bytes; ++k) t->ref[k] = kdf_u8(in);
  kd_status st = uninitialised ? kd_tensor_create(f->s, &d, &t->h)
                               : kd_tensor_from_host(f->s, &d, t->ref, t->bytes, &t->h);
  if (st) {
    const char *op = uninitialised ? "kd_tensor_create" : "kd_tensor_from_host";
    if (f->injected && st) check_refusal(f, op, st);
    else if (st != KD_ERR_INVALID_ARGUMENT || t->esize)
      kdf_violation(target, "%s refused a %s tensor: %s: %s", op, kd_dtype_name(d.dtype), kd_status_name(st),
                    kd_last_error());
    free(t->ref);
    return;
  }
  t->live = 1;
  t->unknown = uninitialised;
  if (f->trace)
    fprintf(stderr, "tensor %d: %s rank %d, %lld elements%s%s\n", f->tensor_count, kd_dtype_name(t->dtype), t->rank,
            (long long)t->elements, uninitialised ? ", uninitialised" : "",
            t->residency == KD_RESIDENCY_HOST ? ", host memory" : "");
  f->tensor_count++;
}

static void builtin(kdf_program *f, uint8_t which) {
  static const char *const ops[] = {"kd_graph_op_fill", "kd_graph_op_copy",  "kd_graph_op_transpose", "kd_graph_op_add",
                                    "kd_graph_op_axpy", "kd_graph_op_scale", "kd_graph_op_sum"};
  static const nkind kinds[] = {N_FILL, N_COPY, N_COPY, N_ADD, N_AXPY, N_SCALE, N_SUM};
  static const int counts[] = {1, 2, 2, 3, 2, 1, 2};
  which %= 7;
  const char *name = pick_name(f);
  int idx[3] = {-1, -1, -1};
  kd_view v[3];
  for (int k = 0; k < counts[which]; ++k) v[k] = pick_view(f, &idx[k]);
  kd_kpattern fill = {{kdf_u64(&f->in), kdf_u64(&f->in)}};
  double alpha;
  uint64_t bits = kdf_u64(&f->in);
  memcpy(&alpha, &bits, sizeof alpha);
  snapshot before = take(f);
  kd_node node = 0;
  kd_status st;
  switch (which) {
  case 0: st = kd_graph_op_fill(f->g, name, v[0], &fill, &node); break;
  case 1: st = kd_graph_op_copy(f->g, name, v[0], v[1], &node); break;
  case 2: st = kd_graph_op_transpose(f->g, name, v[0], v[1], &node); break;
  case 3: st = kd_graph_op_add(f->g, name, v[0], v[1], v[2], &node); break;
  case 4: st = kd_graph_op_axpy(f->g, name, v[0], v[1], alpha, &node); break;
  case 5: st = kd_graph_op_scale(f->g, name, v[0], alpha, &node); break;
  default: st = kd_graph_op_sum(f->g, name, v[0], v[1], &node); break;
  }
  check_call(f, ops[which], st, &before, 1);
  if (st) return;
  if (node != (kd_node)f->node_count) kdf_violation(target, "%s: node %u, expected %d", ops[which], node, f->node_count);
  fnode *n = &f->n[f->node_count++];
  memset(n, 0, sizeof *n);
  n->kind = kinds[which];
  n->count = counts[which];
  n->fill = fill;
  n->alpha = alpha;
  for (int k = 0; k < n->count; ++k)
    if (!record_view(f, ops[which], n, k, idx[k], v[k])) return;
  if (which == 2) { /* the source read in the destination's order */
    kd_view *s = &n->v[1];
    int64_t x = s->shape[0];
    s->shape[0] = s->shape[1];
    s->shape[1] = x;
    x = s->strides[0];
    s->strides[0] = s->strides[1];
    s->strides[1] = x;
  }
}

static void transfer(kdf_program *f, int sink) {
  const char *op = sink ? "kd_graph_sink" : "kd_graph_upload";
  const char *name = pick_name(f);
  int idx;
  kd_tensor h = pick_tensor(f, &idx);
  uint8_t b = kdf_u8(&f->in);
  size_t bytes = idx >= 0 ? f->t[idx].bytes : 4;
  if (b % 8 == 7) bytes += 1 + kdf_u8(&f->in) % 8; /* the wrong size */
  if ((sink ? f->sink_count == MAX_SINKS : f->upload_count == MAX_UPLOADS)) return;
  unsigned char *host = b % 16 == 15 ? NULL : malloc(bytes + 1);
  if (host)
    for (size_t k = 0; k < bytes; ++k) host[k] = sink ? 0xee : kdf_u8(&f->in);
  snapshot before = take(f);
  kd_sink *out = NULL;
  kd_node node = 0;
  kd_status st = sink ? kd_graph_sink(f->g, name, h, host, bytes, &out) : kd_graph_upload(f->g, name, h, host, bytes, &node);
  check_call(f, op, st, &before, 1);
  if (st) {
    free(host);
    return;
  }
  fnode *n = &f->n[f->node_count++];
  memset(n, 0, sizeof *n);
  n->kind = sink ? N_SINK : N_UPLOAD;
  n->count = 1;
  if (!record_view(f, op, n, 0, idx, kd_whole(h))) return;
  if (sink) {
    n->slot = f->sink_count++;
    f->sinks[n->slot] = (fsink){.sink = out, .t = n->t[0], .bytes = bytes, .host = host, .expect = malloc(bytes + 1)};
  } else {
    n->slot = f->upload_count++;
    f->uploads[n->slot] = host;
  }
}

static void count_run(void *user) { atomic_fetch_add((atomic_uint *)user, 1); }

static void host_node(kdf_program *f) {
  const char *name = pick_name(f);
  size_t count = kdf_u8(&f->in) % 5;
  kd_garg acc[4];
  int idx[4];
  for (size_t k = 0; k < count; ++k) {
    uint8_t m = kdf_u8(&f->in);
    acc[k] = kd_g_access(m < 250 ? (kd_access)(1 + m % 3) : (kd_access)(m - 250), pick_view(f, &idx[k]));
    if (m == 249) acc[k].is_tensor = 0;
  }
  snapshot before = take(f);
  kd_status st = kd_graph_host(f->g, name, count_run, &f->host_runs, count ? acc : NULL, count, NULL);
  check_call(f, "kd_graph_host", st, &before, 1);
  if (st) return;
  fnode *n = &f->n[f->node_count++];
  memset(n, 0, sizeof *n);
  n->kind = N_HOST;
  f->host_nodes++;
  /* Its accesses only order it; their views still count toward the
   * heavy check (the executor does not walk them, but keep it simple). */
  for (size_t k = 0; k < count; ++k) owner(f, "kd_graph_host", idx[k], acc[k].view.tensor);
}

static void edge(kdf_program *f) {
  kd_node a = kdf_u8(&f->in), b = kdf_u8(&f->in);
  if (f->node_count) { /* mostly nodes of the graph */
    if (a < 224) a %= (kd_node)f->node_count;
    if (b < 224) b %= (kd_node)f->node_count;
  }
  snapshot before = take(f);
  kd_status st = kd_graph_edge(f->g, a, b);
  check_call(f, "kd_graph_edge", st, &before, 0);
}

static void rebind(kdf_program *f) {
  int from, to;
  kd_tensor old = pick_tensor(f, &from), replacement = pick_tensor(f, &to);
  snapshot before = take(f);
  kd_status st = kd_graph_rebind(f->g, old, replacement);
  check_call(f, "kd_graph_rebind", st, &before, 0);
  if (st) return;
  if (f->trace) fprintf(stderr, "  rebound tensor %d to tensor %d\n", from, to);
  from = owner(f, "kd_graph_rebind", from, old);
  to = owner(f, "kd_graph_rebind", to, replacement);
  if (from < 0 || to < 0) return;
  const ften *a = &f->t[from], *b = &f->t[to];
  if (a->dtype != b->dtype || a->rank != b->rank || a->residency != b->residency ||
      memcmp(a->shape, b->shape, sizeof a->shape) != 0)
    kdf_violation(target, "kd_graph_rebind accepted tensors of another dtype, shape or residency");
  for (int i = 0; i < f->node_count; ++i)
    for (int k = 0; k < f->n[i].count; ++k)
      if (f->n[i].t[k] == from) f->n[i].t[k] = to;
  for (int i = 0; i < f->sink_count; ++i)
    if (f->sinks[i].t == from) f->sinks[i].t = to;
}

static void release(kdf_program *f) {
  int idx;
  kd_tensor h = pick_tensor(f, &idx);
  kd_status st = kd_tensor_release(f->s, h);
  if (f->trace) fprintf(stderr, "release tensor %d -> %s\n", idx, kd_status_name(st));
  int ours = idx >= 0 && f->t[idx].live;
  if (ours && st) kdf_violation(target, "kd_tensor_release of a live tensor: %s", kd_last_error());
  if (!ours && !st)
    kdf_violation(target, "kd_tensor_release accepted handle 0x%llx", (unsigned long long)h.bits);
  if (st && (st != KD_ERR_RELEASED && st != KD_ERR_INVALID_ARGUMENT && st != KD_ERR_WRONG_SESSION))
    kdf_violation(target, "kd_tensor_release: undocumented %s", kd_status_name(st));
  if (ours) f->t[idx].live = 0;
}

/* ---- user kernels (CUDA backends) ---------------------------------------- */

/* Loads "k" with the drawn signature, in a raw scope. */
static kd_status load_kernel(kd_raw *raw, void *user) {
  kdf_program *f = user;
  char ptx[2048];
  kdf_kernel_ptx(ptx, sizeof ptx, f->param_count, f->param_sizes);
  kd_status st = kd_raw_load_ptx(raw, ptx, strlen(ptx) + 1, &f->module);
  if (st) return st;
  f->module_live = 1;
  return kd_module_function(kd_raw_session(raw), f->module, "k", &f->fn);
}

static void need_kernel(kdf_program *f) {
  if (f->kernel_state) return;
  f->param_count = kdf_signature(&f->in, f->param_sizes, MAX_KERNEL_ARGS);
  kd_status st = kd_with_raw(f->s, "kdf_load_kernel", load_kernel, f);
  f->kernel_state = kdf_program_worked(f, "kd_with_raw", st) ? 1 : -1;
  if (f->trace) fprintf(stderr, "kernel k: %d parameters -> %s\n", f->param_count, kd_status_name(st));
}

void kdf_program_kernel(kdf_program *f) {
  need_kernel(f);
  kdf_input *in = &f->in;
  const char *name = pick_name(f);
  kd_launch_config cfg = kdf_launch_config(in);
  size_t n = kdf_u8(in) % (MAX_KERNEL_ARGS + 2); /* one more than fits: refused */
  kd_garg args[MAX_KERNEL_ARGS + 1];
  int idx[MAX_KERNEL_ARGS + 1];
  for (size_t i = 0; i < n; ++i) {
    uint8_t b = kdf_u8(in);
    idx[i] = -1;
    if (b % 3 == 0) {
      uint8_t m = kdf_u8(in);
      args[i] = kd_g_access(m < 250 ? (kd_access)(1 + m % 3) : (kd_access)(m - 250), pick_view(f, &idx[i]));
    } else {
      args[i] = kd_g_value(kdf_value(in));
    }
  }
  kd_function fn = f->fn;
  if (kdf_u8(in) == 255) fn.module.bits = kdf_u64(in); /* made up */
  snapshot before = take(f);
  kd_node node = 0;
  kd_status st = kd_graph_kernel(f->g, name, fn, &cfg, n ? args : NULL, n, &node);
  check_call(f, "kd_graph_kernel", st, &before, 1);
  if (st) return;
  if (f->kernel_state != 1 || fn.module.bits != f->fn.module.bits || !f->module_live)
    kdf_violation(target, "kd_graph_kernel accepted a function the program never loaded, or released");
  if ((int)n != f->param_count)
    kdf_violation(target, "kd_graph_kernel accepted %zu arguments for a kernel of %d parameters", n, f->param_count);
  fnode *nd = &f->n[f->node_count++];
  memset(nd, 0, sizeof *nd);
  nd->kind = N_KERNEL;
  nd->arg_count = (int)n;
  for (size_t i = 0; i < n && i < MAX_KERNEL_ARGS; ++i) {
    size_t size = args[i].is_tensor ? 8 : kdf_value_size(&args[i].value);
    if ((int)i < f->param_count && size != f->param_sizes[i])
      kdf_violation(target, "kd_graph_kernel accepted argument %zu of %zu bytes for a parameter of %u", i, size,
                    f->param_sizes[i]);
    nd->arg_value[i] = !args[i].is_tensor;
    nd->arg_kind[i] = args[i].value.kind;
    nd->arg_size[i] = size;
    if (args[i].is_tensor) owner(f, "kd_graph_kernel", idx[i], args[i].view.tensor);
  }
}

void kdf_program_set_arg(kdf_program *f) {
  kd_node node = kdf_u8(&f->in);
  if (node < 224 && f->node_count) node %= (kd_node)f->node_count;
  uint32_t index = kdf_u8(&f->in) % (MAX_KERNEL_ARGS + 1);
  kd_arg value = kdf_value(&f->in);
  snapshot before = take(f);
  kd_status st = kd_graph_set_arg(f->g, node, index, value);
  check_call(f, "kd_graph_set_arg", st, &before, 0);
  if (st) return;
  const fnode *n = node < (kd_node)f->node_count ? &f->n[node] : NULL;
  if (!n || n->kind != N_KERNEL || (int)index >= n->arg_count || !n->arg_value[index] ||
      n->arg_kind[index] != value.kind || n->arg_size[index] != kdf_value_size(&value))
    kdf_violation(target, "kd_graph_set_arg accepted node %u argument %u, kind %d of %zu bytes", node, index,
                  (int)value.kind, kdf_value_size(&value));
}

void kdf_program_release_module(kdf_program *f) {
  if (!f->module_live) return;
  kd_status st = kd_module_release(f->s, f->module);
  if (st) kdf_violation(target, "kd_module_release: %s", kd_last_error());
  f->module_live = 0;
}

/* ---- the reference and the comparison ----------------------------------- */

static kd_kview kview(kdf_program *f, const fnode *n, int k) {
  const ften *t = &f->t[n->t[k]];
  const kd_view *v = &n->v[k];
  kd_kview kv;
  memset(&kv, 0, sizeof kv);
  kv.base = (unsigned long long)(uintptr_t)(t->ref + (size_t)v->offset * t->esize);
  kv.rank = v->rank;
  for (int i = 0; i < v->rank; ++i) {
    kv.shape[i] = v->shape[i];
    kv.strides[i] = v->strides[i];
  }
  return kv;
}

/* One submission, node by node in declaration order. */
static void run_reference(kdf_program *f) {
  for (int i = 0; i < f->node_count; ++i) {
    const fnode *n = &f->n[i];
    ften *out = n->count ? &f->t[n->t[0]] : NULL;
    int unknown = 0;
    for (int k = 0; k < n->count; ++k) unknown |= f->t[n->t[k]].unknown;
    kd_kdtype kt = out ? kd_kdtype_of(out->dtype) : KD_K_F32; /* the executors' own mapping */
    if (!f->b->kernels_run && n->kind <= N_SUM) continue; /* they do nothing there */
    switch (n->kind) {
    case N_FILL: kd_host_fill(out->esize, kview(f, n, 0), n->fill); break;
    case N_COPY: kd_host_copy(out->esize, kview(f, n, 0), kview(f, n, 1)); break;
    case N_ADD: kd_host_add(kt, kview(f, n, 0), kview(f, n, 1), kview(f, n, 2)); break;
    case N_AXPY: kd_host_axpy(kt, kview(f, n, 0), kview(f, n, 1), n->alpha); break;
    case N_SCALE: kd_host_scale(kt, kview(f, n, 0), n->alpha); break;
    case N_SUM: kd_host_sum(kt, kview(f, n, 0), kview(f, n, 1)); break;
    case N_UPLOAD:
      memcpy(out->ref, f->uploads[n->slot], out->bytes);
      unknown = 0;
      break;
    case N_SINK: {
      fsink *s = &f->sinks[n->slot];
      s->known = !unknown && s->expect;
      if (s->known) memcpy(s->expect, out->ref, s->bytes);
      break;
    }
    case N_HOST: case N_KERNEL: break;
    }
    if (out && n->kind != N_SINK) out->unknown = unknown;
  }
}

/* The reference knows nothing any more: a call failed part-way (a
 * refusal the backend injected), after which a tensor may hold part of a
 * submission's work. */
static void forget(kdf_program *f) {
  for (int i = 0; i < f->tensor_count; ++i) f->t[i].unknown = 1;
  f->host_expected = UINT32_MAX; /* nor how often host nodes ran */
}

/* A call that must succeed unless the backend injected a refusal; then it
 * must be a clear one, and the contents are no longer known. 1: it worked. */
int kdf_program_worked(kdf_program *f, const char *op, kd_status st) {
  if (!st) return 1;
  if (!f->injected) kdf_violation(target, "%s: %s: %s", op, kd_status_name(st), kd_last_error());
  else check_refusal(f, op, st);
  forget(f);
  return 0;
}

/* A download waits for every submission made before it (HOST: the
 * executor's queue; CUDA: the stream, of which the copy's event is the
 * latest): after one of the witness, which no node uses, everything
 * submitted has run. 1: it did. */
static int wait_all(kdf_program *f) {
  int32_t x;
  return kdf_program_worked(f, "kd_tensor_download", kd_tensor_download(f->s, f->witness, &x, sizeof x));
}

int kdf_program_submit(kdf_program *f) {
  if (f->heavy && f->b->kernels_run) return 0;
  if (!kdf_program_worked(f, "kd_graph_submit", kd_graph_submit(f->g, NULL))) return 0;
  f->submitted++;
  if (f->trace) fprintf(stderr, "submission %u\n", f->submitted);
  if (f->host_expected != UINT32_MAX) f->host_expected += f->host_nodes;
  run_reference(f);
  return 1;
}

/* A submission, then every sink and tensor checked against the reference. */
static void submit(kdf_program *f) {
  if (!kdf_program_submit(f)) return;
  for (int i = 0; i < f->sink_count; ++i) {
    fsink *s = &f->sinks[i];
    if (kdf_program_worked(f, "kd_sink_wait", kd_sink_wait(s->sink)) && s->known && memcmp(s->host, s->expect, s->bytes) != 0)
      kdf_violation(target, "sink %d (submission %u) differs from the sequential reference", i, f->submitted);
  }
  for (int i = 0; i < f->tensor_count; ++i) {
    ften *t = &f->t[i];
    if (!t->live || t->unknown || t->residency != KD_RESIDENCY_DEVICE) continue;
    unsigned char *got = malloc(t->bytes + 1);
    if (!got) continue;
    if (kdf_program_worked(f, "kd_tensor_download", kd_tensor_download(f->s, t->h, got, t->bytes)) &&
        memcmp(got, t->ref, t->bytes) != 0)
      kdf_violation(target, "tensor %d (submission %u) differs from the sequential reference", i, f->submitted);
    free(got);
  }
  if (!wait_all(f)) return;
  unsigned runs = atomic_load(&f->host_runs);
  if (f->host_expected != UINT32_MAX && runs != f->host_expected)
    kdf_violation(target, "host nodes ran %u times, expected %u", runs, f->host_expected);
}

void kdf_program_run(const kdf_backend *b, const uint8_t *data, size_t size) {
  target = b->target;
  kdf_program *f = calloc(1, sizeof *f);
  if (!f) return;
  f->b = b;
  f->in = (kdf_input){data, size, 0};
  f->trace = getenv("KDF_TRACE") != NULL;
  f->s = b->session();
  int32_t zero = 0;
  kd_tensor_desc one = {.dtype = KD_I32, .rank = 1, .shape = {1}};
  if (!f->s || kd_tensor_from_host(f->s, &one, &zero, sizeof zero, &f->witness) || kd_graph_create(f->s, &f->g)) {
    if (f->s) kdf_violation(target, "setting up: %s", kd_last_error());
    if (f->witness.bits) kd_tensor_release(f->s, f->witness);
    free(f);
    return;
  }
  for (int ops = 0; ops < MAX_OPS && !kdf_done(&f->in); ++ops) {
    uint8_t op = kdf_u8(&f->in);
    int declares = op % 16 < 11;
    if (declares && f->node_count == MAX_NODES) continue;
    switch (op % 16) {
    case 0: case 1: case 2: make_tensor(f); break;
    case 3: case 4: case 5: case 6: case 7: builtin(f, kdf_u8(&f->in)); break;
    case 8: transfer(f, 0); break;
    case 9: transfer(f, 1); break;
    case 10: host_node(f); break;
    case 11: edge(f); break;
    case 12: rebind(f); break;
    case 13: release(f); break;
    case 14: submit(f); break;
    default:
      if (b->op) b->op(f, kdf_u8(&f->in));
      else submit(f);
      break;
    }
  }
  if (b->settle) b->settle(f);
  f->injected = 0; /* settled: from here every call must work */
  submit(f);
  /* Everything submitted has completed and retires: destroying the graph
   * and releasing every tensor must then give all memory back. */
  wait_all(f);
  uint32_t pending = 0;
  if (kd_session_reap(f->s, &pending) || pending)
    kdf_violation(target, "kd_session_reap after a wait for everything: %u pending: %s", pending, kd_last_error());
  kd_graph_destroy(f->g);
  kdf_program_release_module(f);
  if (kd_tensor_release(f->s, f->witness)) kdf_violation(target, "kd_tensor_release of the witness: %s", kd_last_error());
  for (int i = 0; i < f->tensor_count; ++i) {
    if (f->t[i].live && kd_tensor_release(f->s, f->t[i].h))
      kdf_violation(target, "kd_tensor_release: %s", kd_last_error());
    free(f->t[i].ref);
  }
  for (int i = 0; i < f->sink_count; ++i) {
    free(f->sinks[i].host);
    free(f->sinks[i].expect);
  }
  for (int i = 0; i < f->upload_count; ++i) free(f->uploads[i]);
  kd_session_stats c;
  if (!kd_session_stats_get(f->s, &c) && (c.bytes_device || c.bytes_retained))
    kdf_violation(target, "after destroying the graph and releasing every tensor: %llu device bytes, %llu retained",
                  (unsigned long long)c.bytes_device, (unsigned long long)c.bytes_retained);
  if (b->end) b->end(f);
  free(f);
}
