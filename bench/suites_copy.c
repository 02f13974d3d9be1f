/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "copy": device-to-device copy bandwidth with cuMemcpyDtoDAsync. Its
 * d2d_copy case is the run's bandwidth reference: every bytes_per_second
 * row also gets a bandwidth_share relative to it. Traffic counts the bytes
 * read and the bytes written (2 x the copy size). */
#include <stdlib.h>

#include "bench/gpu.h"
#include "bench/suites.h"

static kb_status copy_flush(void *state, char *why, size_t cap) {
  return kb_gpu_flush_l2(state, why, cap);
}

typedef struct copy_buffers {
  CUdeviceptr src, dst;
  size_t bytes;
} copy_buffers;

static void copy_teardown(kb_run *run, void *state) {
  copy_buffers *b = state;
  kb_gpu *g = kb_run_suite_state(run);
  if (!b) return;
  g->cu->cuStreamSynchronize(g->stream);
  if (b->src) g->cu->cuMemFree(b->src);
  if (b->dst) g->cu->cuMemFree(b->dst);
  free(b);
}

static kb_status copy_setup(kb_run *run, void **state) {
  kb_gpu *g = kb_run_suite_state(run);
  int64_t mib = kb_run_axis(run, "MiB", 1024);
  if (mib < 1) return kb_run_fail(run, "MiB must be at least 1, not %lld", (long long)mib);
  copy_buffers *b = calloc(1, sizeof *b);
  if (!b) return kb_run_fail(run, "out of memory");
  b->bytes = (size_t)mib << 20;
  kb_status st;
  if ((st = kb_gpu_check(run, g->cu->cuMemAlloc(&b->src, b->bytes), "cuMemAlloc(src)")) ||
      (st = kb_gpu_check(run, g->cu->cuMemAlloc(&b->dst, b->bytes), "cuMemAlloc(dst)")) ||
      /* Initialised source (1.0f), so the copy moves defined data. */
      (st = kb_gpu_check(run, g->cu->cuMemsetD32Async(b->src, 0x3f800000u, b->bytes / 4, g->stream),
                         "cuMemsetD32Async(src)")) ||
      (st = kb_gpu_check(run, g->cu->cuStreamSynchronize(g->stream), "cuStreamSynchronize"))) {
    copy_teardown(run, b);
    return st;
  }
  *state = b;
  kb_run_per_iteration(run, 1, "copy");
  kb_run_throughput(run, 0, 2.0 * (double)b->bytes);
  return KB_OK;
}

static kb_status copy_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  copy_buffers *b = state;
  kb_gpu *g = kb_run_suite_state(run);
  uint64_t t0 = 0; /* set by the begin call, after its event */
  kb_status st = kb_gpu_batch_begin(g, run, &t0);
  if (st) return st;
  for (uint64_t i = 0; i < iterations; ++i) {
    CUresult r = g->cu->cuMemcpyDtoDAsync(b->dst, b->src, b->bytes, g->stream);
    if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuMemcpyDtoDAsync");
  }
  return kb_gpu_batch_end(g, run, t0, out);
}

int kb_register_copy_suite(kb_harness *h) {
  kb_suite_desc sd = {.name = "copy",
                      .description = "device-to-device copy bandwidth (bytes read + written)",
                      .needs_gpu = 1, .init = kb_gpu_suite_init, .flush = copy_flush};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static const int64_t mib[] = {1024};
  kb_case_desc c = {.name = "d2d_copy",
                    .description = "cuMemcpyDtoDAsync of MiB mebibytes between two cuMemAlloc buffers",
                    .baseline = 1, .setup = copy_setup, .batch = copy_batch, .teardown = copy_teardown};
  if (kb_suite_axis(s, "MiB", mib, 1) || kb_case_add(s, &c)) return -1;
  kb_harness_bandwidth_reference(h, "copy", "d2d_copy");
  return 0;
}
