/* SPDX-License-Identifier: Apache-2.0 */
/* Shared helpers for kdag's Criterion tests.
 *
 * GPU-lane tests call kdt_gpu_session() first: without a usable device they
 * skip with the driver's reason, unless KDAG_REQUIRE_GPU=1, where the
 * missing device is a failure (the H200 lane sets it). Sessions are created
 * inside each test, never in the parent runner, because Criterion forks
 * every test and CUDA must not be initialised before a fork. */
#ifndef KDAG_TESTS_KDAG_TEST_H
#define KDAG_TESTS_KDAG_TEST_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kdag/kdag.h"

/* Asserts a call succeeded, printing kdag's message otherwise. */
#define KDT_OK(call)                                                              \
  do {                                                                            \
    kd_status kdt_st_ = (call);                                                   \
    cr_assert_eq(kdt_st_, KD_OK, "%s -> %s: %s", #call, kd_status_name(kdt_st_),  \
                 kd_last_error());                                                \
  } while (0)

/* Asserts a call failed with code and that its message contains needle. */
#define KDT_FAILS(call, code, needle)                                             \
  do {                                                                            \
    kd_status kdt_st_ = (call);                                                   \
    cr_assert_eq(kdt_st_, (code), "%s -> %s (want %s): %s", #call,                \
                 kd_status_name(kdt_st_), kd_status_name(code), kd_last_error()); \
    cr_assert(strstr(kd_last_error(), (needle)) != NULL,                          \
              "message of %s lacks \"%s\": %s", #call, (needle), kd_last_error()); \
  } while (0)

static inline int kdt_require_gpu(void) {
  const char *v = getenv("KDAG_REQUIRE_GPU");
  return v && strcmp(v, "1") == 0;
}

/* 0 when timing assertions must not run: under compute-sanitizer, whose
 * launches wait for the context (the GPU lane sets KDAG_TEST_UNTIMED=1
 * there). What is ordered is checked either way; only how soon is not. */
static inline int kdt_timed(void) {
  const char *v = getenv("KDAG_TEST_UNTIMED");
  return !(v && strcmp(v, "1") == 0);
}

/* The graph as DOT text (nodes, edges and their hazards): malloc'd. */
static inline char *kdt_dot_text(kd_graph *g) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cr_assert(f);
  KDT_OK(kd_graph_write_dot(g, f));
  fclose(f);
  return buf;
}

/* A CUDA session on the GPU with options *o (backend CUDA), skipping
 * without one. */
static inline kd_session *kdt_gpu_session_opts(const kd_session_options *o) {
  kd_session *s = NULL;
  kd_status st = kd_session_create(o, &s);
  if (st == KD_ERR_DRIVER_MISSING || st == KD_ERR_NO_DEVICE) {
    if (kdt_require_gpu())
      cr_assert_fail("KDAG_REQUIRE_GPU=1 but no GPU: %s: %s", kd_status_name(st), kd_last_error());
    cr_skip_test("GPU lane: no usable CUDA device (%s)", kd_last_error());
  }
  cr_assert_eq(st, KD_OK, "kd_session_create: %s: %s", kd_status_name(st), kd_last_error());
  /* A GPU test against the null driver (KDAG_CUDA_DRIVER_PATH left set,
   * as bench-ab.sh's null-driver runs set it) would test a mock: never. */
  kd_device_info info;
  KDT_OK(kd_session_device_info(s, &info));
  if (strstr(info.name, "kdag null driver")) {
    kd_session_destroy(s);
    if (kdt_require_gpu()) cr_assert_fail("KDAG_REQUIRE_GPU=1 but the null driver is loaded: %s", info.name);
    cr_skip_test("GPU lane: the null driver is loaded (KDAG_CUDA_DRIVER_PATH), not a GPU");
  }
  return s;
}

/* A CUDA session on the GPU in exec mode `mode` (skipping without one). */
static inline kd_session *kdt_gpu_session_mode(kd_exec_mode mode, uint32_t flags) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_CUDA;
  o.flags = flags;
  o.exec_mode = mode;
  return kdt_gpu_session_opts(&o);
}

static inline kd_session *kdt_gpu_session_flags(uint32_t flags) { return kdt_gpu_session_mode(KD_EXEC_AUTO, flags); }

static inline kd_session *kdt_gpu_session(void) { return kdt_gpu_session_flags(0); }

static inline kd_session *kdt_host_session_flags(uint32_t flags) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  o.flags = flags;
  kd_session *s = NULL;
  KDT_OK(kd_session_create(&o, &s));
  return s;
}

static inline kd_session *kdt_host_session(void) { return kdt_host_session_flags(0); }

/* Writes text (a C string) to the file at path, replacing it. */
static inline void kdt_write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert(f, "open %s", path);
  fputs(text, f);
  cr_assert_eq(fclose(f), 0, "write %s", path);
}

/* A fresh, empty folder under /tmp, the caller's until kdt_remove_dir. */
static inline char *kdt_temp_dir(void) {
  char *d = strdup("/tmp/kdag-test-XXXXXX");
  cr_assert(d && mkdtemp(d), "mkdtemp");
  return d;
}

/* Removes d and everything in it, and frees the name. */
static inline void kdt_remove_dir(char *d) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  free(d);
}

/* Deterministic pseudo-random floats in [-1, 1) (xorshift), never all zero. */
static inline void kdt_fill_random(float *x, size_t n, uint64_t seed) {
  uint64_t v = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    v ^= v << 13;
    v ^= v >> 7;
    v ^= v << 17;
    x[i] = (float)((double)(v >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
  }
}

#endif
