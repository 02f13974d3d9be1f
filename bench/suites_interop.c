/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "interop" [GPU]: the host cost of bringing memory into kdag and
 * handing it out, per operation (the target: at most 1 us of
 * kdag's own host time each, measured on the null driver; on a GPU the
 * driver's cuPointerGetAttributes comes on top):
 *   pointer_attributes  the driver's part of a wrap alone: the five
 *                       attributes kdag asks for (baseline)
 *   wrap                kd_tensor_wrap of cuMemAlloc memory, then
 *                       kd_tensor_release (the release callback runs)
 *   dlpack_import       kd_tensor_from_dlpack of a 256 x 256 f32
 *                       DLManagedTensorVersioned, then kd_tensor_release
 *                       (its deleter runs)
 *   dlpack_export       kd_tensor_to_dlpack of a kdag tensor, then the
 *                       consumer's deleter
 *   dlpack_export_event the same with an event for the consumer, then
 *                       cuEventDestroy */
#include <stdlib.h>
#include <string.h>

#include "bench/gpu.h"
#include "bench/kdag_session.h"
#include "bench/suites.h"
#include "session/dlpack.h"

#define IO_N 256

typedef enum io_kind { IO_ATTRIBUTES, IO_WRAP, IO_IMPORT, IO_EXPORT, IO_EXPORT_EVENT } io_kind;

typedef struct io_case {
  io_kind kind;
  kb_kdag k;
  CUdeviceptr mem;
  kd_tensor t; /* the exported tensor */
  int64_t shape[2];
  kd_dl_managed_versioned dl;
  uint64_t released;
} io_case;

static void counted(void *user) { ++*(uint64_t *)user; }
static void counted_dl(kd_dl_managed_versioned *self) { ++*(uint64_t *)self->manager_ctx; }

static void io_teardown(kb_run *run, void *state) {
  io_case *c = state;
  kb_gpu *g = kb_run_suite_state(run);
  if (!c) return;
  if (c->t.bits) kd_tensor_release(c->k.session, c->t);
  kb_kdag_close(&c->k);
  if (c->mem) g->cu->cuMemFree(c->mem);
  free(c);
}

static kb_status io_setup(kb_run *run, void **state) {
  kb_gpu *g = kb_run_suite_state(run);
  io_case *c = calloc(1, sizeof *c);
  if (!c) return kb_run_fail(run, "out of memory");
  c->kind = (io_kind)(uintptr_t)kb_run_user(run);
  kb_status st = kb_kdag_open(run, KD_EXEC_EAGER, &c->k);
  if (!st) st = kb_gpu_check(run, g->cu->cuMemAlloc(&c->mem, IO_N * IO_N * sizeof(float)), "cuMemAlloc");
  if (!st) st = kb_gpu_check(run, g->cu->cuMemsetD32Async(c->mem, 0, IO_N * IO_N, g->stream), "cuMemsetD32Async");
  if (!st) st = kb_gpu_check(run, g->cu->cuStreamSynchronize(g->stream), "cuStreamSynchronize");
  if (!st && (c->kind == IO_EXPORT || c->kind == IO_EXPORT_EVENT)) {
    kd_tensor_desc d = {.dtype = KD_F32, .rank = 2, .shape = {IO_N, IO_N}};
    float *zeros = calloc(IO_N * IO_N, sizeof(float));
    if (!zeros || kd_tensor_from_host(c->k.session, &d, zeros, IO_N * IO_N * sizeof(float), &c->t))
      st = kb_run_fail(run, "kdag: %s", zeros ? kd_last_error() : "out of memory");
    free(zeros);
  }
  if (st) {
    io_teardown(run, c);
    return st;
  }
  c->shape[0] = c->shape[1] = IO_N;
  c->dl.version = (kd_dl_version){1, 1};
  c->dl.manager_ctx = &c->released;
  c->dl.deleter = counted_dl;
  c->dl.dl_tensor.data = (void *)(uintptr_t)c->mem;
  c->dl.dl_tensor.device = (kd_dl_device){KD_DL_CUDA, 0};
  c->dl.dl_tensor.ndim = 2;
  c->dl.dl_tensor.dtype = (kd_dl_dtype){KD_DL_FLOAT, 32, 1};
  c->dl.dl_tensor.shape = c->shape;
  kb_run_per_iteration(run, 1, "operation");
  *state = c;
  return KB_OK;
}

static kb_status io_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  io_case *c = state;
  kb_gpu *g = kb_run_suite_state(run);
  kd_session *s = c->k.session;
  out->gpu_ns = -1;
  kd_external_desc d;
  kd_external_desc_init(&d);
  d.data = (void *)(uintptr_t)c->mem;
  d.dtype = KD_F32;
  d.rank = 2;
  d.shape[0] = d.shape[1] = IO_N;
  d.release = counted;
  d.release_user = &c->released;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED};
  unsigned type;
  int ordinal, managed;
  CUdeviceptr start;
  size_t size;
  void *data[] = {&type, &ordinal, &start, &size, &managed};
  uint64_t t0 = kb_now_ns();
  for (uint64_t it = 0; it < iterations; ++it) {
    kd_tensor t;
    kd_view v;
    void *m = NULL, *e = NULL;
    kd_status st = KD_OK;
    switch (c->kind) {
      case IO_ATTRIBUTES: {
        CUresult r = g->cu->cuPointerGetAttributes(5, attrs, data, c->mem);
        if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuPointerGetAttributes");
        break;
      }
      case IO_WRAP:
        st = kd_tensor_wrap(s, &d, &t);
        if (!st) st = kd_tensor_release(s, t);
        break;
      case IO_IMPORT:
        st = kd_tensor_from_dlpack(s, &c->dl, KD_DLPACK_VERSIONED, NULL, &t, &v);
        if (!st) st = kd_tensor_release(s, t);
        break;
      case IO_EXPORT:
      case IO_EXPORT_EVENT:
        st = kd_tensor_to_dlpack(s, c->t, KD_DLPACK_VERSIONED, c->kind == IO_EXPORT_EVENT ? &e : NULL, &m);
        if (!st) ((kd_dl_managed_versioned *)m)->deleter(m);
        if (e) g->cu->cuEventDestroy((CUevent)e);
        break;
    }
    if (st) return kb_run_fail(run, "kdag: %s", kd_last_error());
  }
  out->host_ns = (double)(kb_now_ns() - t0);
  if (c->kind == IO_WRAP || c->kind == IO_IMPORT) {
    if (c->released != iterations) return kb_run_fail(run, "%llu of %llu releases ran", (unsigned long long)c->released,
                                                     (unsigned long long)iterations);
    c->released = 0;
  }
  return KB_OK;
}

int kb_register_interop_suite(kb_harness *h) {
  kb_suite_desc sd = {.name = "interop",
                      .description = "memory into and out of kdag: wrap, DLPack import and export, per operation "
                                     "(host time)",
                      .needs_gpu = 1, .init = kb_gpu_suite_init, .interleave = 1, .host_cost = 1};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static const struct { const char *name, *description; io_kind kind; int baseline; } cases[] = {
      {"pointer_attributes", "cuPointerGetAttributes of the five attributes kdag asks for: the driver's part",
       IO_ATTRIBUTES, 1},
      {"wrap", "kd_tensor_wrap of cuMemAlloc memory, then kd_tensor_release (the release callback runs)", IO_WRAP, 0},
      {"dlpack_import", "kd_tensor_from_dlpack of a 256 x 256 f32 DLManagedTensorVersioned, then kd_tensor_release",
       IO_IMPORT, 0},
      {"dlpack_export", "kd_tensor_to_dlpack of a 256 x 256 f32 tensor, then the consumer's deleter", IO_EXPORT, 0},
      {"dlpack_export_event", "dlpack_export with an event for the consumer, then cuEventDestroy", IO_EXPORT_EVENT, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    kb_case_desc c = {.name = cases[i].name, .description = cases[i].description, .baseline = cases[i].baseline,
                      .setup = io_setup, .batch = io_batch, .teardown = io_teardown,
                      .user = (void *)(uintptr_t)cases[i].kind};
    if (kb_case_add(s, &c)) return -1;
  }
  return 0;
}
