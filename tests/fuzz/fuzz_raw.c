/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: raw scopes (kd_with_raw) on a CUDA session over the null
 * driver (tests/null_driver.c, no GPU): borrows of whole tensors and of
 * views, outputs allocated in the scope, launches of a kernel whose
 * signature the input draws, with spans of this scope and of earlier ones,
 * releases inside the scope, and the scope's kd_raw used after it ended.
 *
 * The target keeps its own model of the borrow rules (raw.h: per scope,
 * any number of shared borrows of a tensor or one exclusive one; a shared
 * borrow of a never-written tensor is refused; a launch given an exclusive
 * span marks its tensor written) and checks kdag against it both ways for
 * whole-tensor borrows: a borrow is accepted exactly when the model allows
 * it. A view borrow or a launch that kdag accepts must be one the model
 * allows (views can also be refused for their numbers). Every refusal must
 * have a code raw.h documents and a message that starts with the call's
 * name; after each input, with its tensors and module released, the
 * session holds no memory and the driver saw no lifetime violation. */
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/shared.h"
#include "tests/null_driver.h"

static const char *const target = "kdf_raw";

#define MAX_TENSORS 8
#define MAX_SPANS 24
#define MAX_ARGS 8
#define MAX_STEPS 64

typedef struct rtensor {
  kd_tensor h;
  int live;      /* ours to use (not released) */
  int written;   /* kd_raw_tensor may borrow it */
  int device;    /* device-resident */
  int borrow;    /* in the open scope: shared borrows, or -1 for an exclusive one */
} rtensor;

typedef struct rspan {
  kd_span span;
  int mut, t;    /* exclusive; our tensor's index */
  unsigned scope; /* the scope that issued it */
} rspan;

typedef struct rstate {
  kdf_input in;
  kd_session *s;
  rtensor t[MAX_TENSORS];
  int tensor_count;
  rspan spans[MAX_SPANS];
  int span_count;
  unsigned scope; /* scopes opened so far: the open one's number */
  kd_module module;
  kd_function fn;
  int loaded, param_count;
  uint32_t param_sizes[MAX_ARGS];
  kd_raw *kept;  /* the last scope's kd_raw, used after it ended */
  int trace;
} rstate;

static kdag_null_api nd;

/* raw.h's codes for the raw calls. */
static int documented(kd_status st) {
  switch (st) {
  case KD_ERR_INVALID_ARGUMENT: case KD_ERR_SCOPE_ENDED: case KD_ERR_RELEASED: case KD_ERR_WRONG_SESSION:
  case KD_ERR_NOT_RESIDENT: case KD_ERR_UNINITIALIZED: case KD_ERR_BORROW_CONFLICT: case KD_ERR_NOT_COMPACT:
  case KD_ERR_OUT_OF_BOUNDS: case KD_ERR_LAUNCH_CONFIG: case KD_ERR_ARGUMENT_MISMATCH:
    return 1;
  default:
    return 0;
  }
}

/* Checks a call's result: a refusal is documented and names the call. */
static void checked(rstate *r, const char *op, kd_status st) {
  if (r->trace) fprintf(stderr, "%s -> %s %s\n", op, kd_status_name(st), st ? kd_last_error() : "");
  if (!st) return;
  /* A tensor larger than the device's memory: KD_ERR_OUT_OF_MEMORY, as
   * kd_tensor_create's. */
  if (!documented(st) && !(st == KD_ERR_OUT_OF_MEMORY && strcmp(op, "kd_raw_alloc_output") == 0))
    kdf_violation(target, "%s: undocumented %s: %s", op, kd_status_name(st), kd_last_error());
  size_t n = strlen(op);
  if (kdf_call_length(kd_last_error()) != n || strncmp(kd_last_error(), op, n) != 0)
    kdf_violation(target, "%s: %s, and the message does not name the call: %s", op, kd_status_name(st),
                  kd_last_error());
}

/* One of ours (maybe released), or a made-up handle (*idx -1). */
static kd_tensor pick_tensor(rstate *r, int *idx) {
  uint8_t b = kdf_u8(&r->in);
  *idx = -1;
  if (b >= 250 || !r->tensor_count) return (kd_tensor){b == 255 ? kdf_u64(&r->in) : 0};
  *idx = b % r->tensor_count;
  return r->t[*idx].h;
}

static void add_tensor(rstate *r, kd_tensor h, int written, int device) {
  rtensor *t = &r->t[r->tensor_count++];
  *t = (rtensor){.h = h, .live = 1, .written = written, .device = device};
}

static void keep_span(rstate *r, const kd_span *span, int mut, int t) {
  if (r->span_count == MAX_SPANS) return;
  r->spans[r->span_count++] = (rspan){*span, mut, t, r->scope};
}

/* Whether the model lets the open scope borrow our tensor t. */
static int may_borrow(const rtensor *t, int mut) {
  return t->live && t->device && (mut ? t->borrow == 0 : t->written && t->borrow >= 0);
}

static void borrow_whole(rstate *r, kd_raw *raw, int mut) {
  int idx;
  kd_tensor h = pick_tensor(r, &idx);
  kd_span_mut span;
  const char *op = mut ? "kd_raw_tensor_mut" : "kd_raw_tensor";
  kd_status st = mut ? kd_raw_tensor_mut(raw, h, &span) : kd_raw_tensor(raw, h, &span.span);
  checked(r, op, st);
  int allowed = idx >= 0 && may_borrow(&r->t[idx], mut);
  if ((st == KD_OK) != allowed)
    kdf_violation(target, "%s of tensor %d: %s where the borrow rules %s it", op, idx, kd_status_name(st),
                  allowed ? "allow" : "forbid");
  if (st || idx < 0) return;
  r->t[idx].borrow = mut ? -1 : r->t[idx].borrow + 1;
  keep_span(r, &span.span, mut, idx);
}

static void borrow_view(rstate *r, kd_raw *raw, int mut) {
  kdf_input *in = &r->in;
  int idx;
  kd_tensor h = pick_tensor(r, &idx);
  kd_view v = kdf_wild_view(in, h, (int)(kdf_u8(in) % 6) - 1);
  kd_span_mut span;
  const char *op = mut ? "kd_raw_view_mut" : "kd_raw_view";
  kd_status st = mut ? kd_raw_view_mut(raw, &v, &span) : kd_raw_view(raw, &v, &span.span);
  checked(r, op, st);
  if (st) return;
  if (idx < 0 || !may_borrow(&r->t[idx], mut))
    kdf_violation(target, "%s of tensor %d accepted where the borrow rules forbid it", op, idx);
  if (idx < 0) return;
  r->t[idx].borrow = mut ? -1 : r->t[idx].borrow + 1;
  keep_span(r, &span.span, mut, idx);
}

static void alloc_output(rstate *r, kd_raw *raw) {
  kdf_input *in = &r->in;
  int64_t shape[3];
  int rank = (int)(kdf_u8(in) % 5) - 1;
  /* Small, or refused at once: negative or overflowing (not merely large:
   * the null driver's memory is the sanitized process's). */
  static const int64_t odd[] = {-1, INT64_MIN, INT64_MAX, 1ll << 62, 1ll << 36, 1ll << 40};
  for (int i = 0; i < 3; ++i) {
    uint8_t b = kdf_u8(in);
    shape[i] = b < 240 ? b % 5 : odd[b % (sizeof odd / sizeof *odd)];
  }
  kd_dtype dtype = (kd_dtype)(kdf_u8(in) % (KD_DTYPE_COUNT_ + 1));
  kd_tensor h;
  kd_status st = kd_raw_alloc_output(raw, dtype, rank, shape, &h);
  checked(r, "kd_raw_alloc_output", st);
  if (st) return;
  int64_t elements = 1;
  for (int i = 0; i < rank; ++i) elements *= shape[i];
  if (r->tensor_count == MAX_TENSORS) {
    if (kd_tensor_release(r->s, h)) kdf_violation(target, "kd_tensor_release: %s", kd_last_error());
    return;
  }
  add_tensor(r, h, elements == 0, 1);
}

static kd_status load(rstate *r, kd_raw *raw) {
  char ptx[2048];
  r->param_count = kdf_signature(&r->in, r->param_sizes, MAX_ARGS);
  kdf_kernel_ptx(ptx, sizeof ptx, r->param_count, r->param_sizes);
  kd_status st = kd_raw_load_ptx(raw, ptx, strlen(ptx) + 1, &r->module);
  checked(r, "kd_raw_load_ptx", st);
  if (st) return st;
  r->loaded = 1;
  st = kd_module_function(r->s, r->module, "k", &r->fn);
  if (st) kdf_violation(target, "kd_module_function: %s", kd_last_error());
  return st;
}

static void launch(rstate *r, kd_raw *raw) {
  kdf_input *in = &r->in;
  if (!r->loaded && load(r, raw)) return;
  kd_launch_config cfg = kdf_launch_config(in);
  size_t n = kdf_u8(in) % (MAX_ARGS + 2);
  kd_arg args[MAX_ARGS + 1];
  int from[MAX_ARGS + 1]; /* the kept span an argument passes, or -1 */
  for (size_t i = 0; i < n; ++i) {
    uint8_t b = kdf_u8(in);
    from[i] = -1;
    if (b % 2 && r->span_count) {
      from[i] = kdf_u8(in) % r->span_count;
      args[i] = kd_arg_tensor(&r->spans[from[i]].span);
      if (b % 4 == 3) args[i].kind = KD_ARG_TENSOR_MUT;
    } else {
      args[i] = kdf_value(in);
    }
  }
  /* SAFETY: ABI: k's signature is the one drawn (kdf_kernel_ptx), and kdag
   * checks the arguments against it, which is what is tested here. Order,
   * bounds, aliasing, initialisation: k is an empty kernel (ret) that
   * reads and writes nothing, and the null driver runs no kernel at all.
   * Lifetime: spans are checked against this scope and their tensors. */
  kd_status st = kd_raw_launch(raw, r->fn, &cfg, n ? args : NULL, n);
  checked(r, "kd_raw_launch", st);
  if (st) return;
  if ((int)n != r->param_count) kdf_violation(target, "kd_raw_launch accepted %zu arguments for %d", n, r->param_count);
  for (size_t i = 0; i < n; ++i) {
    int tensor = args[i].kind == KD_ARG_TENSOR || args[i].kind == KD_ARG_TENSOR_MUT;
    size_t size = tensor ? 8 : kdf_value_size(&args[i]);
    if ((int)i < r->param_count && size != r->param_sizes[i])
      kdf_violation(target, "kd_raw_launch accepted argument %zu of %zu bytes for a parameter of %u", i, size,
                    r->param_sizes[i]);
    if (!tensor) continue;
    const rspan *sp = from[i] >= 0 ? &r->spans[from[i]] : NULL;
    if (!sp || sp->scope != r->scope)
      kdf_violation(target, "kd_raw_launch accepted argument %zu, a span of an ended scope", i);
    else if (!r->t[sp->t].live)
      kdf_violation(target, "kd_raw_launch accepted argument %zu, a span of a released tensor", i);
    else if (args[i].kind == KD_ARG_TENSOR_MUT && !sp->mut)
      kdf_violation(target, "kd_raw_launch accepted a shared span as argument %zu of kind tensor_mut", i);
    for (size_t j = 0; sp && j < i; ++j)
      if (from[j] >= 0 && r->spans[from[j]].t == sp->t &&
          (args[i].kind == KD_ARG_TENSOR_MUT || args[j].kind == KD_ARG_TENSOR_MUT))
        kdf_violation(target, "kd_raw_launch accepted tensor %d twice, once writable (arguments %zu, %zu)", sp->t, j,
                      i);
  }
  for (size_t i = 0; i < n; ++i) /* a launch given an exclusive span writes it */
    if (args[i].kind == KD_ARG_TENSOR_MUT && from[i] >= 0) r->t[r->spans[from[i]].t].written = 1;
}

static void release(rstate *r) {
  int idx;
  kd_tensor h = pick_tensor(r, &idx);
  kd_status st = kd_tensor_release(r->s, h);
  int ours = idx >= 0 && r->t[idx].live;
  if (ours != (st == KD_OK)) kdf_violation(target, "kd_tensor_release of tensor %d: %s", idx, kd_status_name(st));
  if (ours) r->t[idx].live = 0;
}

/* The scope: calls drawn from the input until it says to close. */
static kd_status scope(kd_raw *raw, void *user) {
  rstate *r = user;
  r->kept = raw;
  for (int step = 0; step < MAX_STEPS && !kdf_done(&r->in); ++step) {
    uint8_t op = kdf_u8(&r->in);
    switch (op % 10) {
    case 0: case 1: borrow_whole(r, raw, op % 10); break;
    case 2: case 3: borrow_view(r, raw, op % 10 == 3); break;
    case 4: if (r->tensor_count < MAX_TENSORS) alloc_output(r, raw); break;
    case 5: case 6: launch(r, raw); break;
    case 7: checked(r, "kd_raw_synchronize", kd_raw_synchronize(raw)); break;
    case 8: release(r); break;
    default: return KD_OK; /* close */
    }
  }
  return KD_OK;
}

int kdf_raw(const uint8_t *data, size_t size) {
  rstate *r = calloc(1, sizeof *r);
  if (!r) return 0;
  r->in = (kdf_input){data, size, 0};
  r->trace = getenv("KDF_TRACE") != NULL;
  r->s = kdf_null_session(target, 0, &nd);
  if (!r->s) {
    free(r);
    return 0;
  }
  /* Tensors: written or not, on the device or in host memory. */
  int count = 1 + kdf_u8(&r->in) % 4;
  for (int i = 0; i < count; ++i) {
    uint8_t b = kdf_u8(&r->in);
    float v[8] = {0};
    kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {1 + b % 8},
                        .residency = b % 7 == 6 ? KD_RESIDENCY_HOST : KD_RESIDENCY_DEVICE};
    kd_tensor h;
    int written = b % 3 != 2;
    kd_status st = written ? kd_tensor_from_host(r->s, &d, v, (size_t)d.shape[0] * sizeof *v, &h)
                           : kd_tensor_create(r->s, &d, &h);
    if (st) kdf_violation(target, "making tensor %d: %s", i, kd_last_error());
    else add_tensor(r, h, written, d.residency == KD_RESIDENCY_DEVICE);
  }
  for (int s = 0; s < 3 && !kdf_done(&r->in); ++s) {
    r->scope++;
    for (int i = 0; i < r->tensor_count; ++i) r->t[i].borrow = 0;
    kd_status st = kd_with_raw(r->s, "kdf.raw", scope, r);
    if (st) kdf_violation(target, "kd_with_raw: %s", kd_last_error());
    /* Its kd_raw, now that it has ended. */
    if (r->tensor_count) {
      kd_span span;
      st = kd_raw_tensor(r->kept, r->t[0].h, &span);
      if (st != KD_ERR_SCOPE_ENDED)
        kdf_violation(target, "kd_raw_tensor after its scope ended: %s", kd_status_name(st));
    }
  }
  for (int i = 0; i < r->tensor_count; ++i)
    if (r->t[i].live && kd_tensor_release(r->s, r->t[i].h))
      kdf_violation(target, "kd_tensor_release: %s", kd_last_error());
  if (r->loaded && kd_module_release(r->s, r->module)) kdf_violation(target, "kd_module_release: %s", kd_last_error());
  uint32_t pending = 0;
  kd_session_stats c;
  if (kd_session_reap(r->s, &pending) || pending || kd_session_stats_get(r->s, &c) || c.bytes_device ||
      c.bytes_retained)
    kdf_violation(target, "after releasing everything: %u pending, %llu device bytes, %llu retained", pending,
                  (unsigned long long)c.bytes_device, (unsigned long long)c.bytes_retained);
  kdag_null_calls calls;
  nd.calls_get(&calls);
  if (calls.lifetime_violations)
    kdf_violation(target, "%llu lifetime violations", (unsigned long long)calls.lifetime_violations);
  free(r);
  return 0;
}
