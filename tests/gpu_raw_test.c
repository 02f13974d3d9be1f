/* SPDX-License-Identifier: Apache-2.0 */
/* GPU lane: the raw scope on a real device. Each test skips without a GPU
 * (fails with KDAG_REQUIRE_GPU=1). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kdag_test.h"
#include "kernels/embedded.h"
#include "kernels/host.h"

typedef enum { FROM_PTX, FROM_CUBIN, FROM_NVRTC, FROM_CACHE } source_kind;

typedef struct add_case {
  source_kind source;
  int n;
  kd_tensor lhs, rhs, out;
  int release_inside; /* release every handle right after the launch */
} add_case;

static kd_status build_cubin(kd_raw *raw, void *user, kd_module *out) {
  (void)user;
  return kd_raw_load_image(raw, kd_kernel_add_cubin, kd_kernel_add_cubin_size, out);
}

static kd_status load_add(kd_raw *raw, source_kind source, kd_module *m) {
  switch (source) {
    case FROM_CACHE: return kd_raw_cached_module(raw, "test.add.cubin", build_cubin, NULL, m);
    case FROM_PTX: return kd_raw_load_ptx(raw, (const char *)kd_kernel_add_ptx, kd_kernel_add_ptx_size, m);
    case FROM_CUBIN: return kd_raw_load_image(raw, kd_kernel_add_cubin, kd_kernel_add_cubin_size, m);
    case FROM_NVRTC: return kd_raw_compile_nvrtc(raw, (const char *)kd_kernel_add_source, NULL, m);
  }
  return KD_ERR_INVALID_ARGUMENT;
}

static kd_status run_add(kd_raw *raw, void *user) {
  add_case *c = user;
  kd_session *s = kd_raw_session(raw);
  kd_module m;
  kd_function fn;
  kd_span lhs, rhs;
  kd_span_mut out;
  kd_launch_config cfg;
  kd_status st;
  if ((st = load_add(raw, c->source, &m))) return st;
  if ((st = kd_module_function(s, m, "add_kernel", &fn))) return st;
  if ((st = kd_raw_tensor(raw, c->lhs, &lhs)) || (st = kd_raw_tensor(raw, c->rhs, &rhs))) return st;
  if ((st = kd_raw_alloc_output(raw, KD_F32, 1, (int64_t[]){c->n}, &c->out))) return st;
  if ((st = kd_raw_tensor_mut(raw, c->out, &out))) return st;
  if ((st = kd_launch_config_flat((uint64_t)c->n, 256, 0, &cfg))) return st;
  kd_arg args[] = {kd_arg_tensor_mut(&out), kd_arg_tensor(&lhs), kd_arg_tensor(&rhs), kd_arg_i32(c->n)};
  /* SAFETY: add_kernel is (float *out, const float *lhs, const float *rhs,
   * int n) in this order; every tensor holds c->n f32 and the kernel checks
   * i < n; out is a fresh exclusive borrow aliasing neither input and is
   * fully written; the scope retains module and tensors until its
   * completion event fires, so releasing them below is safe. */
  st = kd_raw_launch(raw, fn, &cfg, args, 4);
  if (st) return st;
  if (c->source != FROM_CACHE && (st = kd_module_release(s, m))) return st;
  if (c->release_inside) {
    if ((st = kd_tensor_release(s, c->lhs)) || (st = kd_tensor_release(s, c->rhs))) return st;
  }
  return KD_OK;
}

static void roundtrip(source_kind source, int n) {
  kd_session *s = kdt_gpu_session();
  float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
  float *got = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * (size_t)n);
  kdt_fill_random(a, (size_t)n, 11);
  kdt_fill_random(b, (size_t)n, 12);
  kd_host_add_f32(want, a, b, n);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {n}};
  add_case c = {.source = source, .n = n};
  KDT_OK(kd_tensor_from_host(s, &d, a, sizeof(float) * (size_t)n, &c.lhs));
  KDT_OK(kd_tensor_from_host(s, &d, b, sizeof(float) * (size_t)n, &c.rhs));
  KDT_OK(kd_with_raw(s, "test.add", run_add, &c));
  KDT_OK(kd_tensor_download(s, c.out, got, sizeof(float) * (size_t)n));
  cr_assert_eq(memcmp(got, want, sizeof(float) * (size_t)n), 0, "GPU sum differs from the host sum");
  kd_session_stats k;
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(k.launches, 1);
  cr_assert_eq(k.device_syncs, 0);
  cr_assert_eq(k.stream_syncs, 0);
  KDT_OK(kd_tensor_release(s, c.lhs));
  KDT_OK(kd_tensor_release(s, c.rhs));
  KDT_OK(kd_tensor_release(s, c.out));
  kd_session_destroy(s);
  free(a), free(b), free(got), free(want);
}

Test(gpu_raw, raw_ptx_load_launch_roundtrip) { roundtrip(FROM_PTX, 8); roundtrip(FROM_PTX, 1 << 20); }
Test(gpu_raw, raw_cubin_load_launch_roundtrip) { roundtrip(FROM_CUBIN, 8); roundtrip(FROM_CUBIN, 1 << 20); }
Test(gpu_raw, raw_nvrtc_launch_roundtrip) { roundtrip(FROM_NVRTC, 8); roundtrip(FROM_NVRTC, 1 << 20); }

/* ---- errors inside a scope -------------------------------------------- */

typedef kd_status (*scope_body)(kd_raw *raw, kd_session *s, void *ctx);
typedef struct scope_call {
  scope_body body;
  void *ctx;
} scope_call;

static kd_status trampoline(kd_raw *raw, void *user) {
  scope_call *c = user;
  return c->body(raw, kd_raw_session(raw), c->ctx);
}

static kd_status in_scope(kd_session *s, scope_body body, void *ctx) {
  scope_call c = {body, ctx};
  return kd_with_raw(s, "test.scope", trampoline, &c);
}

static kd_status compile_error(kd_raw *raw, kd_session *s, void *ctx) {
  (void)s, (void)ctx;
  kd_module m;
  return kd_raw_compile_nvrtc(raw, "extern \"C\" __global__ void k() { not_a_function(); }", NULL, &m);
}

Test(gpu_raw, compile_error_in_scope_carries_log) {
  kd_session *s = kdt_gpu_session();
  KDT_FAILS(in_scope(s, compile_error, NULL), KD_ERR_COMPILE_FAILED, "not_a_function");
  cr_assert(strstr(kd_last_error(), "test.scope"), "%s", kd_last_error());
  kd_session_destroy(s);
}

typedef struct tensors3 {
  kd_tensor a, b, host;
} tensors3;

static tensors3 make_tensors(kd_session *s, int n) {
  tensors3 t;
  float *x = calloc((size_t)n, sizeof(float));
  kdt_fill_random(x, (size_t)n, 5);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {n}};
  KDT_OK(kd_tensor_from_host(s, &d, x, sizeof(float) * (size_t)n, &t.a));
  KDT_OK(kd_tensor_from_host(s, &d, x, sizeof(float) * (size_t)n, &t.b));
  d.residency = KD_RESIDENCY_HOST;
  KDT_OK(kd_tensor_from_host(s, &d, x, sizeof(float) * (size_t)n, &t.host));
  free(x);
  return t;
}

static kd_status arg_mismatch(kd_raw *raw, kd_session *s, void *ctx) {
  tensors3 *t = ctx;
  kd_module m;
  kd_function fn;
  kd_span a, b;
  kd_span_mut out;
  kd_launch_config cfg;
  KDT_OK(kd_raw_load_ptx(raw, (const char *)kd_kernel_add_ptx, kd_kernel_add_ptx_size, &m));
  KDT_OK(kd_module_function(s, m, "add_kernel", &fn));
  size_t count = 0, sizes[8];
  KDT_OK(kd_function_params(s, fn, &count, sizes, 8));
  cr_assert_eq(count, 4);
  cr_assert_eq(sizes[3], 4);
  KDT_OK(kd_raw_tensor(raw, t->a, &a));
  KDT_OK(kd_raw_tensor_mut(raw, t->b, &out));
  KDT_OK(kd_launch_config_flat(8, 32, 0, &cfg));
  kd_arg wrong_size[] = {kd_arg_tensor_mut(&out), kd_arg_tensor(&a), kd_arg_tensor(&a), kd_arg_i64(8)};
  /* SAFETY: deliberately wrong (i64 for the int n); kdag must refuse it
   * before anything is enqueued, so no kernel runs. */
  KDT_FAILS(kd_raw_launch(raw, fn, &cfg, wrong_size, 4), KD_ERR_ARGUMENT_MISMATCH, "parameter 3 is 4 bytes");
  kd_arg too_few[] = {kd_arg_tensor_mut(&out), kd_arg_tensor(&a)};
  /* SAFETY: deliberately too few arguments; refused before launch. */
  KDT_FAILS(kd_raw_launch(raw, fn, &cfg, too_few, 2), KD_ERR_ARGUMENT_MISMATCH, "takes 4 parameters, 2 arguments");
  kd_arg alias[] = {kd_arg_tensor_mut(&out), kd_arg_tensor(&a), kd_arg_tensor_mut(&out), kd_arg_i32(8)};
  /* SAFETY: deliberately aliased output; refused before launch. */
  KDT_FAILS(kd_raw_launch(raw, fn, &cfg, alias, 4), KD_ERR_BORROW_CONFLICT, "same tensor");
  kd_arg read_as_mut = kd_arg_tensor(&a);
  read_as_mut.kind = KD_ARG_TENSOR_MUT;
  kd_arg forged[] = {read_as_mut, kd_arg_tensor(&a), kd_arg_tensor(&a), kd_arg_i32(8)};
  /* SAFETY: a read-only span passed as writable; refused before launch. */
  KDT_FAILS(kd_raw_launch(raw, fn, &cfg, forged, 4), KD_ERR_BORROW_CONFLICT, "read-only borrow");
  kd_launch_config big = cfg;
  big.block[0] = 1024;
  big.block[1] = 2;
  kd_arg ok[] = {kd_arg_tensor_mut(&out), kd_arg_tensor(&a), kd_arg_tensor(&a), kd_arg_i32(8)};
  /* SAFETY: valid arguments with a config kdag must refuse (2048 threads). */
  KDT_FAILS(kd_raw_launch(raw, fn, &big, ok, 4), KD_ERR_LAUNCH_CONFIG, "2048 threads");
  big = cfg;
  big.shared_bytes = 1u << 30;
  /* SAFETY: valid arguments, impossible shared memory: refused. */
  KDT_FAILS(kd_raw_launch(raw, fn, &big, ok, 4), KD_ERR_LAUNCH_CONFIG, "dynamic shared memory");
  /* Borrow rules through the API. */
  KDT_FAILS(kd_raw_tensor_mut(raw, t->a, &out), KD_ERR_BORROW_CONFLICT, "read-only borrow");
  KDT_FAILS(kd_raw_tensor(raw, t->b, &b), KD_ERR_BORROW_CONFLICT, "mutably borrowed");
  KDT_FAILS(kd_raw_tensor(raw, t->host, &b), KD_ERR_NOT_RESIDENT, "host memory");
  kd_view strided = {.tensor = t->a, .rank = 1, .offset = 0, .shape = {4}, .strides = {2}};
  KDT_FAILS(kd_raw_view(raw, &strided, &b), KD_ERR_NOT_COMPACT, "canonicalize");
  kd_view half = {.tensor = t->a, .rank = 1, .offset = 4, .shape = {4}, .strides = {1}};
  KDT_OK(kd_raw_view(raw, &half, &b));
  cr_assert_eq(b.device_ptr, a.device_ptr + 16);
  cr_assert_eq(b.bytes, 16);
  kd_function none;
  KDT_FAILS(kd_module_function(s, m, "no_such_kernel", &none), KD_ERR_NOT_FOUND, "no_such_kernel");
  kd_module bad;
  char inner[] = ".version 8.0\0.target sm_90\n";
  KDT_FAILS(kd_raw_load_ptx(raw, inner, sizeof inner, &bad), KD_ERR_INVALID_ARGUMENT, "interior NUL");
  const char *future = ".version 99.9\n.target sm_90\n.address_size 64\n";
  KDT_FAILS(kd_raw_load_ptx(raw, future, strlen(future) + 1, &bad), KD_ERR_UNSUPPORTED_PTX, "99.9");
  KDT_FAILS(kd_raw_load_image(raw, "garbage!garbage!garbage!", 24, &bad), KD_ERR_INVALID_ARGUMENT, "neither a CUBIN");
  return kd_module_release(s, m);
}

Test(gpu_raw, bad_launches_and_borrows_are_refused_before_enqueueing) {
  kd_session *s = kdt_gpu_session();
  tensors3 t = make_tensors(s, 8);
  KDT_OK(in_scope(s, arg_mismatch, &t));
  kd_session_stats k;
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(k.launches, 0, "a refused launch must enqueue nothing");
  kd_session_destroy(s);
}

static kd_status wrong_arch(kd_raw *raw, kd_session *s, void *ctx) {
  (void)s, (void)ctx;
  kd_module m;
  kd_device_info info;
  KDT_OK(kd_session_device_info(s, &info));
  if (info.cc_major == 8 && info.cc_minor == 0) cr_skip_test("this GPU is sm_80 itself");
  KDT_FAILS(kd_raw_load_image(raw, kd_kernel_add_cubin_sm80, kd_kernel_add_cubin_sm80_size, &m),
            KD_ERR_NO_BINARY_FOR_GPU, "sm_80");
  char want[32];
  snprintf(want, sizeof want, "is sm_%d%d", info.cc_major, info.cc_minor);
  cr_assert(strstr(kd_last_error(), want), "names this GPU's arch: %s", kd_last_error());
  return KD_OK;
}

Test(gpu_raw, wrong_architecture_cubin_names_both_archs) {
  kd_session *s = kdt_gpu_session();
  KDT_OK(in_scope(s, wrong_arch, NULL));
  kd_session_destroy(s);
}

/* ---- scope lifetime --------------------------------------------------- */

typedef struct escaped {
  kd_raw *raw;
  kd_span span;
  kd_tensor t;
} escaped;

static kd_status escape(kd_raw *raw, kd_session *s, void *ctx) {
  (void)s;
  escaped *e = ctx;
  e->raw = raw;
  return kd_raw_tensor(raw, e->t, &e->span);
}

static kd_status use_old_span(kd_raw *raw, kd_session *s, void *ctx) {
  escaped *e = ctx;
  kd_module m;
  kd_function fn;
  kd_launch_config cfg;
  kd_span_mut out;
  kd_tensor o;
  KDT_OK(kd_raw_load_ptx(raw, (const char *)kd_kernel_add_ptx, kd_kernel_add_ptx_size, &m));
  KDT_OK(kd_module_function(s, m, "add_kernel", &fn));
  KDT_OK(kd_raw_alloc_output(raw, KD_F32, 1, (int64_t[]){8}, &o));
  KDT_OK(kd_raw_tensor_mut(raw, o, &out));
  KDT_OK(kd_launch_config_flat(8, 32, 0, &cfg));
  kd_arg args[] = {kd_arg_tensor_mut(&out), kd_arg_tensor(&e->span), kd_arg_tensor(&e->span), kd_arg_i32(8)};
  /* SAFETY: args[1..2] come from an ended scope; kdag must refuse them. */
  KDT_FAILS(kd_raw_launch(raw, fn, &cfg, args, 4), KD_ERR_SCOPE_ENDED, "ended raw scope");
  KDT_OK(kd_tensor_release(s, o));
  return kd_module_release(s, m);
}

Test(gpu_raw, raw_handle_and_spans_die_with_the_scope) {
  kd_session *s = kdt_gpu_session();
  tensors3 t = make_tensors(s, 8);
  escaped e = {.t = t.a};
  KDT_OK(in_scope(s, escape, &e));
  kd_span again;
  KDT_FAILS(kd_raw_tensor(e.raw, t.a, &again), KD_ERR_SCOPE_ENDED, "has ended");
  kd_module m;
  KDT_FAILS(kd_raw_load_ptx(e.raw, (const char *)kd_kernel_add_ptx, kd_kernel_add_ptx_size, &m),
            KD_ERR_SCOPE_ENDED, "kd_with_raw callback");
  KDT_OK(in_scope(s, use_old_span, &e));
  kd_session_destroy(s);
}

static kd_status read_uninit(kd_raw *raw, kd_session *s, void *ctx) {
  (void)s, (void)ctx;
  kd_tensor o;
  kd_span sp;
  KDT_OK(kd_raw_alloc_output(raw, KD_F32, 1, (int64_t[]){8}, &o));
  KDT_FAILS(kd_raw_tensor(raw, o, &sp), KD_ERR_UNINITIALIZED, "never written");
  return KD_OK;
}

static kd_status foreign(kd_raw *raw, kd_session *s, void *ctx) {
  (void)s;
  kd_span sp;
  KDT_FAILS(kd_raw_tensor(raw, *(kd_tensor *)ctx, &sp), KD_ERR_WRONG_SESSION, "another session");
  return KD_OK;
}

static kd_status nested(kd_raw *raw, kd_session *s, void *ctx) {
  (void)raw, (void)ctx;
  KDT_FAILS(in_scope(s, read_uninit, NULL), KD_ERR_BUSY, "do not nest");
  return KD_OK;
}

Test(gpu_raw, uninitialised_foreign_and_nested_are_refused) {
  kd_session *s = kdt_gpu_session(), *other = kdt_gpu_session();
  tensors3 t = make_tensors(other, 8);
  KDT_OK(in_scope(s, read_uninit, NULL));
  KDT_OK(in_scope(s, foreign, &t.a));
  KDT_OK(in_scope(s, nested, NULL));
  kd_session_destroy(other);
  kd_session_destroy(s);
}

/* ---- lifetimes with work in flight ------------------------------------ */

typedef struct spin_job {
  uint64_t ns;
  kd_tensor done;
} spin_job;

static kd_status spin(kd_raw *raw, kd_session *s, void *ctx) {
  spin_job *j = ctx;
  kd_module m;
  kd_function fn;
  kd_span_mut done;
  kd_launch_config cfg;
  KDT_OK(kd_raw_load_image(raw, kd_kernel_test_cubin, kd_kernel_test_cubin_size, &m));
  KDT_OK(kd_module_function(s, m, "spin_kernel", &fn));
  KDT_OK(kd_raw_alloc_output(raw, KD_I32, 1, (int64_t[]){1}, &j->done));
  KDT_OK(kd_raw_tensor_mut(raw, j->done, &done));
  KDT_OK(kd_launch_config_flat(1, 1, 0, &cfg));
  kd_arg args[] = {kd_arg_u64(j->ns), kd_arg_tensor_mut(&done)};
  /* SAFETY: spin_kernel is (unsigned long long ns, int *done); done holds
   * one i32 written by thread 0; the module is released right after and
   * kept alive by the scope's completion event. */
  kd_status st = kd_raw_launch(raw, fn, &cfg, args, 2);
  KDT_OK(kd_module_release(s, m));
  return st;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static kd_status check_poison(kd_raw *raw, kd_session *s, void *ctx) {
  (void)ctx;
  kd_module m;
  kd_function fn;
  kd_tensor o;
  kd_span_mut sp;
  kd_launch_config cfg;
  KDT_OK(kd_raw_load_image(raw, kd_kernel_test_cubin, kd_kernel_test_cubin_size, &m));
  KDT_OK(kd_module_function(s, m, "fill_i32_kernel", &fn));
  KDT_OK(kd_raw_alloc_output(raw, KD_I32, 1, (int64_t[]){64}, &o));
  KDT_OK(kd_raw_tensor_mut(raw, o, &sp));
  KDT_OK(kd_launch_config_flat(32, 32, 0, &cfg));
  kd_arg args[] = {kd_arg_tensor_mut(&sp), kd_arg_i32(7), kd_arg_i32(32)};
  /* SAFETY: fill_i32_kernel is (int *out, int value, int n); o holds 64
   * i32 and only the first n = 32 are written, on purpose: the rest must
   * still show the poison pattern. Released after the download waits. */
  KDT_OK(kd_raw_launch(raw, fn, &cfg, args, 3));
  KDT_OK(kd_module_release(s, m));
  *(kd_tensor *)ctx = o;
  return KD_OK;
}

Test(gpu_raw, release_before_completion_is_safe) {
  kd_session *s = kdt_gpu_session_flags(KD_SESSION_POISON_ALLOCATIONS);
  const int n = 1 << 20;
  const size_t bytes = sizeof(float) * (size_t)n;
  float *a = malloc(bytes), *b = malloc(bytes), *got = malloc(bytes), *want = malloc(bytes);
  kdt_fill_random(a, (size_t)n, 21);
  kdt_fill_random(b, (size_t)n, 22);
  kd_host_add_f32(want, a, b, n);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {n}};
  /* Warm the staging pool to this pipeline's high-water mark (two uploads
   * in flight): growing it pins memory, which synchronises implicitly. */
  kd_tensor warm1, warm2;
  KDT_OK(kd_tensor_from_host(s, &d, a, bytes, &warm1));
  KDT_OK(kd_tensor_from_host(s, &d, b, bytes, &warm2));
  /* Load the add module before the spin kernel, as a pipeline's steady
   * state does (module cache): with lazy loading the driver may wait for
   * running kernels when it loads code. */
  add_case first = {.source = FROM_CACHE, .n = n, .lhs = warm1, .rhs = warm2};
  KDT_OK(kd_with_raw(s, "test.add.warm", run_add, &first));
  KDT_OK(kd_tensor_download(s, first.out, got, bytes));
  cr_assert_eq(memcmp(got, want, bytes), 0);
  KDT_OK(kd_tensor_release(s, first.out));
  KDT_OK(kd_tensor_release(s, warm1));
  KDT_OK(kd_tensor_release(s, warm2));
  kd_session_stats k;
  KDT_OK(kd_session_stats_get(s, &k));
  uint64_t grows = k.staging_grows;
  spin_job sj = {.ns = 300ull * 1000 * 1000};
  KDT_OK(in_scope(s, spin, &sj));
  double t0 = now_ms();
  add_case c = {.source = FROM_CACHE, .n = n, .release_inside = 1};
  KDT_OK(kd_tensor_from_host(s, &d, a, bytes, &c.lhs));
  KDT_OK(kd_tensor_from_host(s, &d, b, bytes, &c.rhs));
  double t_upload = now_ms();
  KDT_OK(kd_with_raw(s, "test.add", run_add, &c)); /* loads, launches, releases lhs, rhs, module */
  double t_scope = now_ms();
  uint32_t pending = 0;
  KDT_OK(kd_session_reap(s, &pending));
  double t1 = now_ms();
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(k.staging_grows, grows, "steady state pins no new staging memory");
  cr_assert_lt(t1 - t0, 50.0, "submitting and releasing took %.1f ms behind a 300 ms kernel "
               "(uploads %.2f ms, raw scope %.2f ms, reap %.2f ms)", t1 - t0, t_upload - t0,
               t_scope - t_upload, t1 - t_scope);
  fprintf(stderr, "witness: behind a 300 ms kernel, 2 uploads %.3f ms, raw scope %.3f ms, reap %.3f ms\n",
          t_upload - t0, t_scope - t_upload, t1 - t_scope);
  cr_assert_gt(pending, 0, "the add's completion must still be pending behind the spin kernel");
  cr_assert_eq(k.bytes_retained, 2 * bytes, "released inputs are retained while in flight (%llu)",
               (unsigned long long)k.bytes_retained);
  /* Fresh memory while the released inputs are in flight: must not be theirs. */
  kd_tensor fresh;
  KDT_OK(kd_tensor_create(s, &d, &fresh));
  KDT_OK(kd_tensor_download(s, c.out, got, bytes)); /* the explicit wait */
  cr_assert_eq(memcmp(got, want, bytes), 0, "sum corrupted by early release");
  KDT_OK(kd_session_reap(s, &pending));
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(pending, 0);
  cr_assert_eq(k.bytes_retained, 0, "retained bytes return to 0 (%llu)", (unsigned long long)k.bytes_retained);
  cr_assert_eq(k.device_syncs, 0);
  cr_assert_eq(k.stream_syncs, 0);
  KDT_OK(kd_tensor_upload(s, fresh, a, bytes));
  KDT_OK(kd_tensor_download(s, fresh, got, bytes));
  cr_assert_eq(memcmp(got, a, bytes), 0);
  KDT_OK(kd_tensor_release(s, fresh));
  /* Pool memory handed out again after the retire carries the poison
   * sentinel, not what the released tensors held. */
  kd_tensor reused;
  KDT_OK(in_scope(s, check_poison, &reused));
  uint32_t words[64];
  KDT_OK(kd_tensor_download(s, reused, words, sizeof words));
  for (int i = 32; i < 64; ++i) cr_assert_eq(words[i], 0x7FA5A5A5u, "element %d = 0x%x", i, words[i]);
  int32_t done = 0;
  KDT_OK(kd_tensor_download(s, sj.done, &done, sizeof done));
  cr_assert_eq(done, 1);
  KDT_OK(kd_tensor_release(s, c.out));
  KDT_OK(kd_tensor_release(s, sj.done));
  KDT_OK(kd_tensor_release(s, reused));
  kd_session_destroy(s);
  free(a), free(b), free(got), free(want);
}

Test(gpu_raw, poison_shows_unwritten_output) {
  kd_session *s = kdt_gpu_session_flags(KD_SESSION_POISON_ALLOCATIONS);
  kd_tensor o;
  KDT_OK(in_scope(s, check_poison, &o));
  uint32_t got[64];
  KDT_OK(kd_tensor_download(s, o, got, sizeof got));
  for (int i = 0; i < 32; ++i) cr_assert_eq(got[i], 7u);
  for (int i = 32; i < 64; ++i) cr_assert_eq(got[i], 0x7FA5A5A5u, "element %d = 0x%x", i, got[i]);
  kd_session_destroy(s);
}

static int g_builds;
static kd_status build_add(kd_raw *raw, void *user, kd_module *out) {
  (void)user;
  g_builds++;
  return kd_raw_compile_nvrtc(raw, (const char *)kd_kernel_add_source, NULL, out);
}

static kd_status cached(kd_raw *raw, kd_session *s, void *ctx) {
  (void)s;
  kd_module *m = ctx;
  KDT_OK(kd_raw_cached_module(raw, "test.add", build_add, NULL, m));
  void *stream = NULL;
  KDT_OK(kd_raw_stream(raw, &stream));
  cr_assert_not_null(stream);
  KDT_OK(kd_raw_synchronize(raw));
  return KD_OK;
}

Test(gpu_raw, module_cache_builds_once_per_session) {
  kd_session *s = kdt_gpu_session();
  kd_module m1, m2;
  KDT_OK(in_scope(s, cached, &m1));
  KDT_OK(in_scope(s, cached, &m2));
  cr_assert_eq(g_builds, 1);
  cr_assert_eq(m1.bits, m2.bits);
  KDT_FAILS(kd_module_release(s, m1), KD_ERR_INVALID_ARGUMENT, "module cache");
  kd_session_stats k;
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(k.stream_syncs, 2, "kd_raw_synchronize waits on the stream, counted");
  cr_assert_eq(k.device_syncs, 0);
  kd_session_destroy(s);
}

typedef struct thread_job {
  kd_session *s;
  kd_tensor lhs, rhs, out;
  int n;
  kd_status st;
  char msg[512];
} thread_job;

static void *drive(void *p) {
  thread_job *j = p;
  add_case c = {.source = FROM_CUBIN, .n = j->n, .lhs = j->lhs, .rhs = j->rhs};
  j->st = kd_with_raw(j->s, "test.thread", run_add, &c);
  j->out = c.out;
  if (j->st) snprintf(j->msg, sizeof j->msg, "%s", kd_last_error());
  return NULL;
}

Test(gpu_raw, a_second_thread_drives_the_session) {
  kd_session *s = kdt_gpu_session();
  float a[64], b[64], got[64], want[64];
  kdt_fill_random(a, 64, 1);
  kdt_fill_random(b, 64, 2);
  kd_host_add_f32(want, a, b, 64);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {64}};
  thread_job j = {.s = s, .n = 64};
  KDT_OK(kd_tensor_from_host(s, &d, a, sizeof a, &j.lhs));
  KDT_OK(kd_tensor_from_host(s, &d, b, sizeof b, &j.rhs));
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, drive, &j), 0);
  pthread_join(th, NULL);
  cr_assert_eq(j.st, KD_OK, "%s", j.msg);
  KDT_OK(kd_tensor_download(s, j.out, got, sizeof got)); /* back on the main thread */
  cr_assert_eq(memcmp(got, want, sizeof got), 0);
  kd_session_destroy(s);
}

Test(gpu_raw, device_info_and_placement_are_reported) {
  kd_session *s = kdt_gpu_session();
  kd_device_info info;
  KDT_OK(kd_session_device_info(s, &info));
  cr_assert_gt(info.sm_count, 0);
  cr_assert_gt(info.driver_version, 12000);
  cr_assert_gt(strlen(info.placement), 0);
  cr_assert_gt(strlen(info.pci_bus_id), 0);
  cr_log_info("%s sm_%d%d, %d SMs, driver %d, PTX ISA <= %d, staging %s", info.name, info.cc_major,
              info.cc_minor, info.sm_count, info.driver_version, info.max_ptx_isa, info.placement);
  kd_session_destroy(s);
}

static kd_status trap(kd_raw *raw, kd_session *s, void *ctx) {
  (void)ctx;
  kd_module m;
  kd_function fn;
  kd_launch_config cfg;
  KDT_OK(kd_raw_load_image(raw, kd_kernel_test_cubin, kd_kernel_test_cubin_size, &m));
  KDT_OK(kd_module_function(s, m, "trap_kernel", &fn));
  KDT_OK(kd_launch_config_flat(1, 1, 0, &cfg));
  /* SAFETY: trap_kernel takes no arguments and executes a trap on purpose,
   * to provoke a sticky device fault; it touches no memory. */
  kd_status st = kd_raw_launch(raw, fn, &cfg, NULL, 0);
  KDT_OK(kd_module_release(s, m));
  return st;
}

Test(gpu_raw, device_fault_is_sticky_and_reported) {
  kd_session *s = kdt_gpu_session();
  tensors3 t = make_tensors(s, 8);
  /* The scope's own non-blocking reap may already see the trap. */
  kd_status st = in_scope(s, trap, NULL);
  cr_assert(st == KD_OK || st == KD_ERR_DEVICE_FAULT, "%s: %s", kd_status_name(st), kd_last_error());
  float got[8];
  /* The next wait sees it for sure, with the driver's error name. */
  KDT_FAILS(kd_tensor_download(s, t.a, got, sizeof got), KD_ERR_DEVICE_FAULT, "CUDA_ERROR_");
  /* Every later call refuses work with the same code, naming the cause. */
  KDT_FAILS(kd_tensor_upload(s, t.b, got, sizeof got), KD_ERR_DEVICE_FAULT, "unusable after a device fault");
  KDT_FAILS(in_scope(s, read_uninit, NULL), KD_ERR_DEVICE_FAULT, "device fault");
  uint32_t pending;
  KDT_FAILS(kd_session_reap(s, &pending), KD_ERR_DEVICE_FAULT, "device fault");
  /* Releasing and destroying still work. */
  KDT_OK(kd_tensor_release(s, t.a));
  kd_session_destroy(s);
}

static kd_status destroy_inside(kd_raw *raw, kd_session *s, void *ctx) {
  (void)ctx;
  kd_session_destroy(s); /* deferred until the scope closes */
  kd_tensor o;
  KDT_OK(kd_raw_alloc_output(raw, KD_F32, 1, (int64_t[]){4}, &o)); /* the scope still works */
  return KD_OK;
}

Test(gpu_raw, destroy_inside_the_callback_is_deferred) {
  kd_session *s = kdt_gpu_session();
  KDT_OK(in_scope(s, destroy_inside, NULL)); /* the session is gone afterwards (ASan checks) */
}

static kd_status return_cached(kd_raw *raw, void *user, kd_module *out) {
  return kd_raw_cached_module(raw, "test.first", build_cubin, user, out);
}

static kd_status swap_span(kd_raw *raw, kd_session *s, void *ctx) {
  tensors3 *t = ctx;
  kd_module m, again;
  KDT_OK(kd_raw_cached_module(raw, "test.first", build_cubin, NULL, &m));
  KDT_FAILS(kd_raw_cached_module(raw, "test.second", return_cached, NULL, &again),
            KD_ERR_INVALID_ARGUMENT, "already cached");
  kd_function fn;
  kd_span a;
  kd_span_mut out;
  kd_launch_config cfg;
  KDT_OK(kd_module_function(s, m, "add_kernel", &fn));
  KDT_OK(kd_raw_tensor(raw, t->a, &a));
  KDT_OK(kd_raw_alloc_output(raw, KD_F32, 1, (int64_t[]){8}, &t->host));
  KDT_OK(kd_raw_tensor_mut(raw, t->host, &out));
  KDT_OK(kd_launch_config_flat(8, 32, 0, &cfg));
  kd_span forged = a; /* point a read span at a tensor this scope never borrowed */
  kd_tensor_desc info;
  KDT_OK(kd_tensor_info(s, t->b, &info));
  forged.tensor = t->b;
  kd_arg args[] = {kd_arg_tensor_mut(&out), kd_arg_tensor(&a), kd_arg_tensor(&forged), kd_arg_i32(8)};
  /* SAFETY: args[2] names an unborrowed tensor; kdag must refuse it. */
  KDT_FAILS(kd_raw_launch(raw, fn, &cfg, args, 4), KD_ERR_INVALID_ARGUMENT, "not borrowed");
  return KD_OK;
}

Test(gpu_raw, cache_and_span_misuse_is_refused) {
  kd_session *s = kdt_gpu_session();
  tensors3 t = make_tensors(s, 8);
  KDT_OK(in_scope(s, swap_span, &t));
  kd_session_destroy(s);
}

Test(gpu_raw, a_fault_poisons_every_session_of_the_device_for_the_process) {
  kd_session *s1 = kdt_gpu_session(), *s2 = kdt_gpu_session();
  tensors3 t2 = make_tensors(s2, 8);
  kd_status st = in_scope(s1, trap, NULL);
  cr_assert(st == KD_OK || st == KD_ERR_DEVICE_FAULT, "%s", kd_last_error());
  uint32_t pending;
  for (int i = 0; i < 1000 && kd_session_reap(s1, &pending) == KD_OK && pending; ++i) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  KDT_FAILS(kd_session_reap(s1, &pending), KD_ERR_DEVICE_FAULT, "device fault");
  /* The other session of the device refuses work with the same fault. */
  float buf[8] = {0};
  KDT_FAILS(kd_tensor_upload(s2, t2.a, buf, sizeof buf), KD_ERR_DEVICE_FAULT, "unusable after a device fault");
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_CUDA;
  kd_session *s3 = NULL;
  KDT_FAILS(kd_session_create(&o, &s3), KD_ERR_DEVICE_FAULT, "restart the process");
  KDT_OK(kd_tensor_release(s2, t2.a)); /* releasing still works */
  kd_session_destroy(s1);
  kd_session_destroy(s2);
  /* Even with every session gone, CUDA cannot recover within the process:
   * a new session is refused at once, naming the fault. */
  KDT_FAILS(kd_session_create(&o, &s3), KD_ERR_DEVICE_FAULT, "faulted earlier in this process");
  cr_assert_null(s3);
}

/* The fresh-process half of fault recovery. A sticky fault kills CUDA for
 * the process that took it (tools/fault-probe shows that no reset, retain
 * or new context brings the device back in that process); another process
 * is unaffected. The child faults and checks that kdag reports it; then
 * this process, which had not touched CUDA before the fork, works. */
Test(gpu_raw, a_fresh_process_works_after_a_fault_in_another) {
  fflush(NULL);
  pid_t pid = fork();
  cr_assert(pid >= 0, "fork failed");
  if (pid == 0) {
    kd_session_options o;
    kd_session_options_init(&o);
    o.backend = KD_BACKEND_CUDA;
    kd_session *s = NULL;
    kd_status st = kd_session_create(&o, &s);
    if (st == KD_ERR_DRIVER_MISSING || st == KD_ERR_NO_DEVICE) _exit(77);
    if (st) _exit(2);
    (void)in_scope(s, trap, NULL);
    uint32_t pending = 0;
    for (int i = 0; i < 1000 && (st = kd_session_reap(s, &pending)) == KD_OK && pending; ++i) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    st = kd_session_reap(s, &pending);
    kd_session_destroy(s);
    _exit(st == KD_ERR_DEVICE_FAULT ? 0 : 3);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status), "the faulting child did not exit normally");
  kd_session *s = kdt_gpu_session(); /* skips (or fails under KDAG_REQUIRE_GPU) without a device */
  cr_assert_eq(WEXITSTATUS(status), 0, "child: 0 when its fault was reported as KD_ERR_DEVICE_FAULT, got %d",
               WEXITSTATUS(status));
  tensors3 t = make_tensors(s, 8);
  float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8] = {0};
  KDT_OK(kd_tensor_upload(s, t.a, in, sizeof in));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_scale(g, "twice", kd_whole(t.a), 2.0, NULL));
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "out", t.a, out, sizeof out, &sink));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sink));
  for (int i = 0; i < 8; ++i) cr_assert_eq(out[i], 2 * in[i], "out[%d] = %g", i, out[i]);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}
