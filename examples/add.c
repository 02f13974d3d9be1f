/* SPDX-License-Identifier: Apache-2.0 */
/* examples/add.c — a custom kernel through kdag's raw scope.
 *
 * Uploads two vectors, compiles add_kernel with NVRTC (once per session:
 * the module cache keeps it), launches it on the session stream, downloads
 * the sum, and checks it. Without a usable GPU the AUTO backend falls back
 * to HOST, and the example says so and adds on the host instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kdag/kdag.h"

#define N 8

/* out[i] = lhs[i] + rhs[i] for i < n. ABI: (float *out, const float *lhs,
 * const float *rhs, int n). */
static const char add_source[] =
    "extern \"C\" __global__ void add_kernel(float *out, const float *lhs, const float *rhs, int n) {\n"
    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = lhs[i] + rhs[i];\n"
    "}\n";

static void add_on_host(float *out, const float *lhs, const float *rhs, int n) {
  for (int i = 0; i < n; ++i) out[i] = lhs[i] + rhs[i];
}

typedef struct add_job {
  kd_tensor lhs, rhs, out;
} add_job;

static kd_status build_module(kd_raw *raw, void *user, kd_module *out) {
  (void)user;
  return kd_raw_compile_nvrtc(raw, add_source, NULL, out); /* NULL options: this GPU's architecture */
}

static kd_status launch_add(kd_raw *raw, void *user) {
  add_job *job = user;
  kd_module module;
  kd_function fn;
  kd_span lhs, rhs;
  kd_span_mut out;
  kd_launch_config config;
  kd_status st;
  if ((st = kd_raw_cached_module(raw, "examples.add", build_module, NULL, &module))) return st;
  if ((st = kd_module_function(kd_raw_session(raw), module, "add_kernel", &fn))) return st;
  if ((st = kd_raw_tensor(raw, job->lhs, &lhs))) return st;
  if ((st = kd_raw_tensor(raw, job->rhs, &rhs))) return st;
  if ((st = kd_raw_alloc_output(raw, KD_F32, 1, (int64_t[]){N}, &job->out))) return st;
  if ((st = kd_raw_tensor_mut(raw, job->out, &out))) return st;
  if ((st = kd_launch_config_flat(N, 128, 0, &config))) return st;
  kd_arg args[] = {kd_arg_tensor_mut(&out), kd_arg_tensor(&lhs), kd_arg_tensor(&rhs), kd_arg_i32(N)};
  /* SAFETY: add_kernel's ABI is (float *out, const float *lhs, const float
   * *rhs, int n), in that order; all three tensors hold N f32 values and the
   * kernel bounds-checks i < n = N; out is a fresh exclusive borrow aliasing
   * neither input, and every element is written before the download reads
   * it; kdag retains the module and tensors until the scope's completion
   * event fires, and the download below waits for the kernel. */
  return kd_raw_launch(raw, fn, &config, args, 4);
}

int main(void) {
  float lhs[N], rhs[N], out[N], want[N];
  for (int i = 0; i < N; ++i) {
    lhs[i] = (float)i;
    rhs[i] = 0.5f * (float)i + 1.0f;
  }
  add_on_host(want, lhs, rhs, N);

  kd_session *s;
  kd_status st = kd_session_create(NULL, &s);
  if (st) {
    fprintf(stderr, "kd_session_create: %s: %s\n", kd_status_name(st), kd_last_error());
    return 1;
  }
  int on_gpu = kd_session_backend(s) == KD_BACKEND_CUDA;
  printf("kdag add example: %s backend (%s)\n", on_gpu ? "CUDA" : "HOST", kd_session_backend_reason(s));

  kd_tensor_desc desc = {.dtype = KD_F32, .rank = 1, .shape = {N}};
  add_job job = {{0}, {0}, {0}};
  if ((st = kd_tensor_from_host(s, &desc, lhs, sizeof lhs, &job.lhs)) ||
      (st = kd_tensor_from_host(s, &desc, rhs, sizeof rhs, &job.rhs)))
    goto fail;
  if (on_gpu) {
    if ((st = kd_with_raw(s, "examples.add", launch_add, &job))) goto fail;
    if ((st = kd_tensor_download(s, job.out, out, sizeof out))) goto fail;
    printf("ran add_kernel on the GPU\n");
  } else {
    /* No GPU: kd_with_raw would return KD_ERR_WRONG_BACKEND. Add the
     * session's tensors on the host instead. */
    float a[N], b[N];
    if ((st = kd_tensor_download(s, job.lhs, a, sizeof a)) ||
        (st = kd_tensor_download(s, job.rhs, b, sizeof b)))
      goto fail;
    add_on_host(out, a, b, N);
    printf("added on the host (no GPU)\n");
  }
  int bad = memcmp(out, want, sizeof out) != 0;
  printf("out =");
  for (int i = 0; i < N; ++i) printf(" %g", out[i]);
  printf("\n%s\n", bad ? "MISMATCH against the host reference" : "matches the host reference");
  kd_session_destroy(s);
  return bad;
fail:
  fprintf(stderr, "kdag add example failed: %s: %s\n", kd_status_name(st), kd_last_error());
  kd_session_destroy(s);
  return 1;
}
