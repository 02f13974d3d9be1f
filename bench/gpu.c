/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU context helper: a device context, stream and timing events through
 * kdag's driver table. */
#include <stdio.h>
#include <string.h>

#include "bench/gpu.h"
#include "kdag/compile.h"
#include "kdag/status.h"

static kb_gpu g_gpu;
static int g_state; /* 0 not tried, 1 open, -1 failed */
static char g_reason[KB_MESSAGE_MAX];

kb_status kb_gpu_check_msg(char *why, size_t cap, CUresult r, const char *call) {
  if (r == CUDA_SUCCESS) return KB_OK;
  const char *name, *text;
  kd_cu_error_strings(r, &name, &text);
  snprintf(why, cap, "%s failed: %s (%s)", call, name, text);
  return KB_FAIL;
}

kb_status kb_gpu_check(kb_run *run, CUresult r, const char *call) {
  if (r == CUDA_SUCCESS) return KB_OK;
  char msg[KB_MESSAGE_MAX];
  kb_gpu_check_msg(msg, sizeof msg, r, call);
  return kb_run_fail(run, "%s", msg);
}

kb_status kb_gpu_instantiate(kb_gpu *g, kb_run *run, CUgraph graph, int upload, CUgraphExec *exec) {
  if (!upload) return kb_gpu_check(run, g->cu->cuGraphInstantiateWithFlags(exec, graph, 0), "cuGraphInstantiateWithFlags");
  CUDA_GRAPH_INSTANTIATE_PARAMS ip;
  memset(&ip, 0, sizeof ip);
  ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
  ip.hUploadStream = g->stream;
  return kb_gpu_check(run, g->cu->cuGraphInstantiateWithParams(exec, graph, &ip), "cuGraphInstantiateWithParams");
}

static void close_gpu(void) {
  const kd_cu_table *cu = g_gpu.cu;
  if (!cu) return;
  if (g_gpu.context) cu->cuCtxSetCurrent(g_gpu.context);
  if (g_gpu.flush) cu->cuMemFree(g_gpu.flush);
  if (g_gpu.start) cu->cuEventDestroy(g_gpu.start);
  if (g_gpu.stop) cu->cuEventDestroy(g_gpu.stop);
  if (g_gpu.stream) cu->cuStreamDestroy(g_gpu.stream);
  if (g_gpu.context) cu->cuDevicePrimaryCtxRelease(g_gpu.device);
  memset(&g_gpu, 0, sizeof g_gpu);
}

static kb_status open_gpu(void) {
  const kd_cu_table *cu;
  if (kd_driver_load("kdag-bench", &cu) != KD_OK) {
    /* The message starts with the op we passed; the reason is the rest. */
    const char *msg = kd_last_error();
    const char *prefix = "kdag-bench: ";
    if (!strncmp(msg, prefix, strlen(prefix))) msg += strlen(prefix);
    snprintf(g_reason, sizeof g_reason, "%s", msg);
    return KB_SKIP;
  }
  g_gpu.cu = cu;
  int count = 0;
  CUresult r = cu->cuDeviceGetCount(&count);
  if (r == CUDA_SUCCESS && count == 0) {
    snprintf(g_reason, sizeof g_reason, "the CUDA driver reports no device");
    return KB_SKIP;
  }
  kb_status st;
  if ((st = kb_gpu_check_msg(g_reason, sizeof g_reason, r, "cuDeviceGetCount")) ||
      (st = kb_gpu_check_msg(g_reason, sizeof g_reason, cu->cuDeviceGet(&g_gpu.device, 0), "cuDeviceGet")) ||
      (st = kb_gpu_check_msg(g_reason, sizeof g_reason,
                             cu->cuDevicePrimaryCtxRetain(&g_gpu.context, g_gpu.device),
                             "cuDevicePrimaryCtxRetain")) ||
      (st = kb_gpu_check_msg(g_reason, sizeof g_reason, cu->cuCtxSetCurrent(g_gpu.context),
                             "cuCtxSetCurrent")) ||
      (st = kb_gpu_check_msg(g_reason, sizeof g_reason,
                             cu->cuStreamCreate(&g_gpu.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate")) ||
      (st = kb_gpu_check_msg(g_reason, sizeof g_reason, cu->cuEventCreate(&g_gpu.start, CU_EVENT_DEFAULT),
                             "cuEventCreate")) ||
      (st = kb_gpu_check_msg(g_reason, sizeof g_reason, cu->cuEventCreate(&g_gpu.stop, CU_EVENT_DEFAULT),
                             "cuEventCreate")))
    return st;
  cu->cuDeviceGetAttribute(&g_gpu.l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, g_gpu.device);
  return KB_OK;
}

kb_status kb_gpu_acquire(kb_gpu **out, char *why, size_t cap) {
  *out = NULL;
  if (g_state == 0) {
    kb_status st = open_gpu();
    if (st != KB_OK) close_gpu();
    g_state = st == KB_OK ? 1 : st == KB_SKIP ? -1 : -2;
  }
  if (g_state < 0) {
    snprintf(why, cap, "%s", g_reason);
    return g_state == -2 ? KB_FAIL : KB_SKIP;
  }
  kb_status st = kb_gpu_check_msg(why, cap, g_gpu.cu->cuCtxSetCurrent(g_gpu.context), "cuCtxSetCurrent");
  if (st == KB_OK) *out = &g_gpu;
  return st;
}

void kb_gpu_shutdown(void) {
  if (g_state == 1) close_gpu();
  g_state = 0;
}

kb_status kb_gpu_batch_begin(kb_gpu *g, kb_run *run, uint64_t *t0_ns) {
  kb_status st = kb_gpu_check(run, g->cu->cuEventRecord(g->start, g->stream), "cuEventRecord(start)");
  *t0_ns = kb_now_ns();
  return st;
}

kb_status kb_gpu_batch_end(kb_gpu *g, kb_run *run, uint64_t t0_ns, kb_timing *out) {
  out->host_ns = (double)(kb_now_ns() - t0_ns);
  kb_status st = kb_gpu_check(run, g->cu->cuEventRecord(g->stop, g->stream), "cuEventRecord(stop)");
  if (st) return st;
  if ((st = kb_gpu_check(run, g->cu->cuEventSynchronize(g->stop), "cuEventSynchronize(stop)"))) return st;
  float ms = 0;
  if ((st = kb_gpu_check(run, g->cu->cuEventElapsedTime(&ms, g->start, g->stop), "cuEventElapsedTime")))
    return st;
  out->gpu_ns = (double)ms * 1e6;
  return KB_OK;
}

kb_status kb_gpu_load_module(kb_gpu *g, const void *cubin, const void *ptx, CUmodule *out,
                             char *why, size_t cap) {
  *out = NULL;
  /* The embedded CUBIN targets KDAG_CUDA_ARCH; another GPU JITs the PTX. */
  CUresult r = g->cu->cuModuleLoadDataEx(out, cubin, 0, NULL, NULL);
  if (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE)
    r = g->cu->cuModuleLoadDataEx(out, ptx, 0, NULL, NULL);
  if (r != CUDA_SUCCESS) *out = NULL;
  return kb_gpu_check_msg(why, cap, r, "cuModuleLoadDataEx");
}

kb_status kb_gpu_flush_l2(kb_gpu *g, char *why, size_t cap) {
  const kd_cu_table *cu = g->cu;
  kb_status st;
  if (!g->flush) {
    size_t bytes = 2 * (size_t)(g->l2_bytes > 0 ? g->l2_bytes : (64 << 20));
    if ((st = kb_gpu_check_msg(why, cap, cu->cuMemAlloc(&g->flush, bytes), "cuMemAlloc(L2 flush buffer)")))
      return st;
    g->flush_bytes = bytes;
  }
  static unsigned value;
  ++value; /* a new value each time, so no write can be elided as unchanged */
  if ((st = kb_gpu_check_msg(why, cap, cu->cuMemsetD32Async(g->flush, value, g->flush_bytes / 4, g->stream),
                             "cuMemsetD32Async(L2 flush)")))
    return st;
  return kb_gpu_check_msg(why, cap, cu->cuStreamSynchronize(g->stream), "cuStreamSynchronize(L2 flush)");
}

void kb_gpu_describe(const kb_gpu *g, kb_machine *m) {
  const kd_cu_table *cu = g->cu;
  m->has_gpu = 1;
  m->gpu_ordinal = 0;
  if (cu->cuDeviceGetName(m->gpu_name, (int)sizeof m->gpu_name, g->device) != CUDA_SUCCESS)
    snprintf(m->gpu_name, sizeof m->gpu_name, "unknown");
  cu->cuDeviceGetAttribute(&m->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, g->device);
  cu->cuDeviceGetAttribute(&m->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, g->device);
  cu->cuDeviceGetAttribute(&m->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, g->device);
  cu->cuDeviceGetAttribute(&m->sm_clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, g->device);
  cu->cuDeviceGetAttribute(&m->memory_clock_khz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, g->device);
  cu->cuDeviceGetAttribute(&m->memory_bus_bits, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, g->device);
  m->l2_bytes = g->l2_bytes;
  size_t total = 0;
  if (cu->cuDeviceTotalMem(&total, g->device) == CUDA_SUCCESS) m->memory_bytes = (long long)total;
  m->driver_version = cu->driver_version;
}

void kb_gpu_describe_toolkit(kb_machine *m) {
  m->toolkit_version = CUDA_VERSION;
  int major = 0, minor = 0;
  if (kd_nvrtc_version(&major, &minor) == KD_OK)
    snprintf(m->nvrtc_version, sizeof m->nvrtc_version, "%d.%d", major, minor);
}

void kb_kernel_suite_fini(void *state) {
  kb_kernel_suite *s = state;
  if (!s) return;
  const kd_cu_table *cu = s->g->cu;
  cu->cuCtxSetCurrent(s->g->context);
  cu->cuStreamSynchronize(s->g->stream);
  if (s->done) cu->cuEventDestroy(s->done);
  if (s->module) cu->cuModuleUnload(s->module);
  free(s);
}

kb_status kb_gpu_acquire_described(kb_harness *h, kb_gpu **out, char *why, size_t cap) {
  kb_status st = kb_gpu_acquire(out, why, cap);
  if (st == KB_OK) kb_gpu_describe(*out, kb_harness_machine(h));
  return st;
}

kb_status kb_gpu_suite_init(kb_harness *h, void *user, void **state, char *why, size_t cap) {
  (void)user;
  kb_gpu *g;
  kb_status st = kb_gpu_acquire_described(h, &g, why, cap);
  if (st == KB_OK) *state = g;
  return st;
}

kb_status kb_kernel_suite_init(kb_harness *h, void *user, void **state, char *why, size_t cap) {
  const kb_kernel_spec *spec = user;
  kb_gpu *g;
  kb_status st = kb_gpu_acquire_described(h, &g, why, cap);
  if (st != KB_OK) return st;
  kb_kernel_suite *s = calloc(1, sizeof *s);
  if (!s) return snprintf(why, cap, "out of memory"), KB_FAIL;
  s->g = g;
  char call[160];
  snprintf(call, sizeof call, "cuModuleGetFunction(%s)", spec->function);
  if ((st = kb_gpu_load_module(g, spec->cubin, spec->ptx, &s->module, why, cap)) ||
      (st = kb_gpu_check_msg(why, cap, g->cu->cuModuleGetFunction(&s->fn, s->module, spec->function), call)) ||
      (st = kb_gpu_check_msg(why, cap, g->cu->cuEventCreate(&s->done, CU_EVENT_DISABLE_TIMING),
                             "cuEventCreate(done)"))) {
    kb_kernel_suite_fini(s);
    return st;
  }
  *state = s;
  return KB_OK;
}

kb_status kb_kernel_suite_flush(void *state, char *why, size_t cap) {
  return kb_gpu_flush_l2(((kb_kernel_suite *)state)->g, why, cap);
}
