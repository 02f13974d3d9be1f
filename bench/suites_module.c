/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "module": getting a kernel from nothing to a finished first launch,
 * through kdag's public API (one CUDA session, its raw scope):
 *   nvrtc_compile  kd_raw_compile_nvrtc of kernels/add.cu (CUBIN for the
 *                  device) -> load -> function lookup -> launch -> done
 *   cubin_load     kd_raw_load_image of the embedded CUBIN -> ... -> done
 *   ptx_jit        kd_raw_load_ptx of the embedded PTX (the driver JITs it;
 *                  kdag-bench disables the JIT cache) -> ... -> done
 *   disk_cache     kd_build_cubin of kernels/add.cu through a new
 *                  kd_cubin_cache (memory level empty) over a folder one
 *                  cold build filled in setup: key, read, checksum ->
 *                  kd_raw_load_binary -> ... -> done (the warm start)
 * Each iteration is one kd_with_raw scope that loads a fresh module, runs
 * add_kernel once, waits for the stream and releases the module. Host time
 * only: the wait for the launch is part of what is measured. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/gpu.h"
#include "bench/suites.h"
#include "kdag/cache.h"
#include "kdag/kdag.h"
#include "kernels/embedded.h"

#define MODULE_N 4096

typedef enum module_source { FROM_NVRTC, FROM_CUBIN, FROM_PTX, FROM_DISK } module_source;

typedef struct module_suite {
  kb_gpu *g;
  kd_session *session;
  kd_tensor lhs, rhs, out;
  char arch[16];       /* sm_XX of the device */
  char cache_dir[64];  /* disk_cache: the folder setup filled; "" otherwise */
} module_suite;

typedef struct module_job {
  module_suite *s;
  module_source source;
} module_job;

static void module_fini(void *state) {
  module_suite *s = state;
  if (!s) return;
  kd_session_destroy(s->session); /* frees the tensors it still holds */
  free(s);
}

static kb_status session_fail(char *why, size_t cap, const char *call, kd_status st) {
  snprintf(why, cap, "%s: %s: %s", call, kd_status_name(st), kd_last_error());
  return KB_FAIL;
}

static kb_status module_init(kb_harness *h, void *user, void **state, char *why, size_t cap) {
  (void)user;
  kb_gpu *g;
  kb_status st = kb_gpu_acquire_described(h, &g, why, cap);
  if (st != KB_OK) return st;
  module_suite *s = calloc(1, sizeof *s);
  if (!s) return snprintf(why, cap, "out of memory"), KB_FAIL;
  s->g = g;
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_CUDA;
  kd_status ks = kd_session_create(&o, &s->session);
  if (ks != KD_OK) {
    free(s);
    if (ks == KD_ERR_DRIVER_MISSING || ks == KD_ERR_NO_DEVICE)
      return snprintf(why, cap, "%s", kd_last_error()), KB_SKIP;
    return session_fail(why, cap, "kd_session_create", ks);
  }
  kd_device_info info;
  if ((ks = kd_session_device_info(s->session, &info))) {
    module_fini(s);
    return session_fail(why, cap, "kd_session_device_info", ks);
  }
  snprintf(s->arch, sizeof s->arch, "sm_%d%d", info.cc_major, info.cc_minor);
  float *x = malloc(sizeof(float) * MODULE_N);
  if (!x) {
    module_fini(s);
    return snprintf(why, cap, "out of memory"), KB_FAIL;
  }
  for (int i = 0; i < MODULE_N; ++i) x[i] = (float)i;
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {MODULE_N}};
  if ((ks = kd_tensor_from_host(s->session, &d, x, sizeof(float) * MODULE_N, &s->lhs)) ||
      (ks = kd_tensor_from_host(s->session, &d, x, sizeof(float) * MODULE_N, &s->rhs)) ||
      (ks = kd_tensor_create(s->session, &d, &s->out))) {
    free(x);
    module_fini(s);
    return session_fail(why, cap, "kd_tensor_from_host/create", ks);
  }
  free(x);
  *state = s;
  return KB_OK;
}

static kb_status module_flush(void *state, char *why, size_t cap) {
  return kb_gpu_flush_l2(((module_suite *)state)->g, why, cap);
}

static kd_build_recipe add_recipe(const module_suite *s) {
  kd_build_recipe r;
  kd_build_recipe_init(&r);
  r.source = (const char *)kd_kernel_add_source;
  r.nvrtc.arch = s->arch;
  r.nvrtc.program_name = "add.cu";
  return r;
}

/* kernels/add.cu through a new cache object (nothing in memory) over the
 * suite's folder: a compile when the folder is empty, else a disk read. */
static kd_status build_add(const module_suite *s, kd_binary **cubin, kd_build_report *rep) {
  kd_cubin_cache *cache = NULL;
  kd_build_recipe r = add_recipe(s);
  kd_status st = kd_cubin_cache_create(s->cache_dir, &cache);
  if (!st) st = kd_build_cubin(cache, &r, cubin, rep);
  kd_cubin_cache_destroy(cache);
  return st;
}

/* The warm start. */
static kd_status load_from_disk(kd_raw *raw, const module_suite *s, kd_module *m) {
  kd_binary *cubin = NULL;
  kd_build_report rep;
  kd_status st = build_add(s, &cubin, &rep);
  if (!st && rep.origin != KD_BUILD_DISK) { /* the case would time a compile: refuse */
    fprintf(stderr, "kdag-bench module/disk_cache: the module was compiled, not read from the cache\n");
    st = KD_ERR_INVALID_ARGUMENT;
  }
  if (!st) st = kd_raw_load_binary(raw, cubin, m);
  kd_binary_destroy(cubin);
  return st;
}

static kd_status load(kd_raw *raw, const module_suite *s, module_source source, kd_module *m) {
  switch (source) {
    case FROM_DISK: return load_from_disk(raw, s, m);
    case FROM_NVRTC: return kd_raw_compile_nvrtc(raw, (const char *)kd_kernel_add_source, NULL, m);
    case FROM_CUBIN: return kd_raw_load_image(raw, kd_kernel_add_cubin, kd_kernel_add_cubin_size, m);
    case FROM_PTX: return kd_raw_load_ptx(raw, (const char *)kd_kernel_add_ptx, kd_kernel_add_ptx_size, m);
  }
  return KD_ERR_INVALID_ARGUMENT;
}

static kd_status first_launch(kd_raw *raw, void *user) {
  module_job *job = user;
  kd_session *session = kd_raw_session(raw);
  kd_module m;
  kd_function fn;
  kd_span lhs, rhs;
  kd_span_mut out;
  kd_launch_config cfg;
  kd_status st = load(raw, job->s, job->source, &m);
  if (st) return st;
  if ((st = kd_module_function(session, m, "add_kernel", &fn)) ||
      (st = kd_raw_tensor(raw, job->s->lhs, &lhs)) || (st = kd_raw_tensor(raw, job->s->rhs, &rhs)) ||
      (st = kd_raw_tensor_mut(raw, job->s->out, &out)) ||
      (st = kd_launch_config_flat(MODULE_N, 256, 0, &cfg))) {
    kd_module_release(session, m);
    return st;
  }
  kd_arg args[] = {kd_arg_tensor_mut(&out), kd_arg_tensor(&lhs), kd_arg_tensor(&rhs), kd_arg_i32(MODULE_N)};
  /* SAFETY: add_kernel is (float *out, const float *lhs, const float *rhs,
   * int n), in this order; all three tensors hold MODULE_N f32 and the
   * kernel checks i < n; out is this scope's only (exclusive) borrow of a
   * tensor aliasing neither input, and is fully written; lhs and rhs were
   * uploaded at suite init; the scope keeps module and tensors alive until
   * its completion event fires, and kd_raw_synchronize below waits anyway. */
  st = kd_raw_launch(raw, fn, &cfg, args, 4);
  if (st == KD_OK) st = kd_raw_synchronize(raw);
  kd_status rel = kd_module_release(session, m);
  return st ? st : rel;
}

static void remove_cache_dir(module_suite *s) {
  if (kb_remove_scratch_dir(s->cache_dir)) fprintf(stderr, "kdag-bench module: could not remove %s\n", s->cache_dir);
  s->cache_dir[0] = '\0';
}

static kb_status module_setup(kb_run *run, void **state) {
  (void)state;
  kb_run_per_iteration(run, 1, "module");
  module_suite *s = kb_run_suite_state(run);
  if (*(const module_source *)kb_run_user(run) != FROM_DISK) return KB_OK;
  /* One cold build fills a fresh folder; the samples read it. */
  snprintf(s->cache_dir, sizeof s->cache_dir, "/tmp/kdag-bench-module-XXXXXX");
  if (!mkdtemp(s->cache_dir)) {
    s->cache_dir[0] = '\0';
    return kb_run_fail(run, "mkdtemp: cannot create a cache folder under /tmp");
  }
  kd_binary *cubin = NULL;
  kd_status st = build_add(s, &cubin, NULL);
  kd_binary_destroy(cubin);
  if (st) {
    remove_cache_dir(s);
    return kb_run_fail(run, "filling the cache: %s", kd_last_error());
  }
  return KB_OK;
}

static void module_teardown(kb_run *run, void *state) {
  (void)state;
  remove_cache_dir(kb_run_suite_state(run));
}

static kb_status module_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  (void)state;
  module_job job = {.s = kb_run_suite_state(run), .source = *(const module_source *)kb_run_user(run)};
  uint64_t t0 = kb_now_ns();
  for (uint64_t i = 0; i < iterations; ++i) {
    kd_status st = kd_with_raw(job.s->session, "bench.module", first_launch, &job);
    /* The embedded CUBIN is for one architecture: on another GPU, skip. */
    if (st == KD_ERR_NO_BINARY_FOR_GPU) return kb_run_skip(run, "%s", kd_last_error());
    if (st != KD_OK) return kb_run_fail(run, "kd_with_raw: %s: %s", kd_status_name(st), kd_last_error());
  }
  out->host_ns = (double)(kb_now_ns() - t0);
  return KB_OK;
}

int kb_register_module_suite(kb_harness *h) {
  kb_suite_desc sd = {.name = "module",
                      .description = "kernel from nothing to a finished first launch, via kdag's raw scope",
                      .needs_gpu = 1, .init = module_init, .fini = module_fini, .flush = module_flush};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static module_source nvrtc = FROM_NVRTC, cubin = FROM_CUBIN, ptx = FROM_PTX;
  kb_case_desc c_nvrtc = {.name = "nvrtc_compile",
                          .description = "NVRTC compile (CUBIN for the device) -> load -> lookup -> first launch done",
                          .setup = module_setup, .batch = module_batch, .user = &nvrtc};
  kb_case_desc c_cubin = {.name = "cubin_load",
                          .description = "load the embedded CUBIN -> lookup -> first launch done",
                          .baseline = 1, .setup = module_setup, .batch = module_batch, .user = &cubin};
  kb_case_desc c_ptx = {.name = "ptx_jit",
                        .description = "load the embedded PTX (driver JIT, cache off) -> lookup -> first launch done",
                        .setup = module_setup, .batch = module_batch, .user = &ptx};
  static module_source disk = FROM_DISK;
  kb_case_desc c_disk = {.name = "disk_cache",
                         .description = "kd_build_cubin from the disk cache (warm start) -> load -> lookup -> first "
                                        "launch done",
                         .setup = module_setup, .batch = module_batch, .teardown = module_teardown, .user = &disk};
  if (kb_case_add(s, &c_cubin) || kb_case_add(s, &c_nvrtc) || kb_case_add(s, &c_ptx) || kb_case_add(s, &c_disk))
    return -1;
  return 0;
}
