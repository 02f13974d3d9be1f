/* SPDX-License-Identifier: Apache-2.0 */
/* Session device state: context, stream, pool, events, allocations. */
#include <ck_pr.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef KDAG_NO_NVTX
#include <nvtx3/nvToolsExtCuda.h>
#endif

#include "cuda/device.h"
#include "base/nvtx.h"
#include "base/status_internal.h"
#include "cuda/cu_status.h"

#define KD_CU(d, op, call, args)                        \
  do {                                                  \
    CUresult kd_r_ = (d)->cu->call args;                \
    if (kd_r_ != CUDA_SUCCESS) return kd_fail_cu(kd_r_, op, #call); \
  } while (0)

#define KD_MAX_DEVICES 64

static struct {
  pthread_mutex_t mu;
  struct { int faulted; char message[512]; } dev[KD_MAX_DEVICES];
} g_devices = {.mu = PTHREAD_MUTEX_INITIALIZER};

void kd_device_fault_report(const kd_device *d, const char *message) {
  if (d->info.ordinal < 0 || d->info.ordinal >= KD_MAX_DEVICES) return;
  pthread_mutex_lock(&g_devices.mu);
  if (!g_devices.dev[d->info.ordinal].faulted) {
    snprintf(g_devices.dev[d->info.ordinal].message, sizeof g_devices.dev[0].message, "%s", message);
    ck_pr_store_int(&g_devices.dev[d->info.ordinal].faulted, 1); /* after the message */
  }
  pthread_mutex_unlock(&g_devices.mu);
}

int kd_device_fault_get(const kd_device *d, char *message, size_t cap) {
  if (d->info.ordinal < 0 || d->info.ordinal >= KD_MAX_DEVICES) return 0;
  /* Every entry point asks: the common answer needs no lock. */
  if (!ck_pr_load_int(&g_devices.dev[d->info.ordinal].faulted)) return 0;
  pthread_mutex_lock(&g_devices.mu);
  int f = g_devices.dev[d->info.ordinal].faulted;
  if (f) snprintf(message, cap, "%s", g_devices.dev[d->info.ordinal].message);
  pthread_mutex_unlock(&g_devices.mu);
  return f;
}

/* What the driver says of device dev without a context: name, compute
 * capability, SMs, PCI bus, memory, the driver's version. */
static kd_status describe(const kd_cu_table *cu, const char *op, CUdevice dev, int ordinal, kd_device_info *info) {
  const struct { const kd_cu_table *cu; } t = {cu}, *d = &t; /* KD_CU reads d->cu */
  memset(info, 0, sizeof *info);
  info->ordinal = ordinal;
  info->numa_node = -1;
  KD_CU(d, op, cuDeviceGetName, (info->name, (int)sizeof info->name, dev));
  KD_CU(d, op, cuDeviceGetAttribute, (&info->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  KD_CU(d, op, cuDeviceGetAttribute, (&info->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  KD_CU(d, op, cuDeviceGetAttribute, (&info->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  KD_CU(d, op, cuDeviceGetPCIBusId, (info->pci_bus_id, (int)sizeof info->pci_bus_id, dev));
  KD_CU(d, op, cuDeviceTotalMem, (&info->memory_bytes, dev));
  info->driver_version = cu->driver_version;
  info->max_ptx_isa = kd_driver_max_ptx_isa(info->driver_version);
  return KD_OK;
}

kd_status kd_device_count(int *out) {
  static const char *op = "kd_device_count";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_count is NULL", op);
  *out = 0;
  const kd_cu_table *cu;
  kd_status st = kd_driver_load(op, &cu);
  if (st) return st;
  CUresult r = cu->cuDeviceGetCount(out);
  return r == CUDA_SUCCESS ? KD_OK : kd_fail_cu(r, op, "cuDeviceGetCount");
}

kd_status kd_device_query(int ordinal, kd_device_info *out) {
  static const char *op = "kd_device_query";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_info is NULL", op);
  int count;
  kd_status st = kd_device_count(&count);
  if (st) return kd_fail_context(st, "%s", op);
  if (ordinal < 0 || ordinal >= count)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument ordinal %d out of range (%d device%s)", op, ordinal, count,
                   count == 1 ? "" : "s");
  const kd_cu_table *cu;
  (void)kd_driver_load(op, &cu); /* loaded above */
  CUdevice dev;
  CUresult r = cu->cuDeviceGet(&dev, ordinal);
  if (r != CUDA_SUCCESS) return kd_fail_cu(r, op, "cuDeviceGet");
  kd_device_info info;
  st = describe(cu, op, dev, ordinal, &info);
  if (!st) *out = info;
  return st;
}

static kd_status open_impl(const kd_session_options *o, kd_device *d) {
  static const char *op = "kd_session_create";
  kd_status st = kd_driver_load(op, &d->cu);
  if (st) return st;
  int count = 0;
  KD_CU(d, op, cuDeviceGetCount, (&count));
  if (count == 0) return kd_fail(KD_ERR_NO_DEVICE, "%s: the driver reports no CUDA device", op);
  /* A caller's mistake, not a machine without a GPU: AUTO must not hide it
   * behind a HOST session. */
  if (o->device_ordinal < 0 || o->device_ordinal >= count)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->device_ordinal %d out of range (%d device%s)",
                   op, o->device_ordinal, count, count == 1 ? "" : "s");
  KD_CU(d, op, cuDeviceGet, (&d->dev, o->device_ordinal));
  if (o->device_ordinal >= KD_MAX_DEVICES)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->device_ordinal %d: kdag handles devices 0..%d", op,
                   o->device_ordinal, KD_MAX_DEVICES - 1);
  d->info.ordinal = o->device_ordinal;
  char why[512];
  if (kd_device_fault_get(d, why, sizeof why))
    return kd_fail(KD_ERR_DEVICE_FAULT, "%s: device %d faulted earlier in this process (%s); CUDA cannot "
                   "recover from a sticky fault within a process: restart the process to use the device again",
                   op, o->device_ordinal, why);
  KD_CU(d, op, cuDevicePrimaryCtxRetain, (&d->ctx, d->dev));
  KD_CU(d, op, cuCtxSetCurrent, (d->ctx));
  kd_device_info *info = &d->info;
  st = describe(d->cu, op, d->dev, o->device_ordinal, info);
  if (st) return st;
  KD_CU(d, op, cuDeviceGetAttribute, (&d->max_threads_per_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, d->dev));
  KD_CU(d, op, cuDeviceGetAttribute, (&d->max_shared_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, d->dev));
  int pools = 0;
  KD_CU(d, op, cuDeviceGetAttribute, (&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, d->dev));
  if (!pools)
    return kd_fail(KD_ERR_NO_DEVICE, "%s: device %d (%s) does not support stream-ordered memory pools "
                   "(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0); kdag allocates tensors from one",
                   op, o->device_ordinal, info->name);
  d->sm = info->cc_major * 10 + info->cc_minor;
  d->pdl = d->sm >= 90 && d->cu->cuLaunchKernelEx && d->cu->cuGraphAddDependencies && !(o->flags & KD_SESSION_NO_PDL);
  /* Non-blocking: the session's stream never implicitly waits on the legacy
   * default stream that some other library in the process might use. */
  KD_CU(d, op, cuStreamCreate, (&d->stream, CU_STREAM_NON_BLOCKING));
  d->pool_release_threshold = o->pool_release_threshold;
  return kd_staging_init(d);
}

/* The session's memory pool, made on its first allocation (under the
 * session lock, as every allocation is): a session that never allocates
 * device memory leaves no pool in the context. open_impl has checked that
 * the device supports pools, so a device without them still fails at
 * kd_session_create. */
static kd_status pool_open(kd_device *d, const char *op) {
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = d->info.ordinal;
  CUmemoryPool pool;
  KD_CU(d, op, cuMemPoolCreate, (&pool, &props));
  /* The threshold keeps freed memory cached in the pool across stream
   * syncs, so steady-state pipelines never return memory to the OS. */
  cuuint64_t threshold = d->pool_release_threshold;
  CUresult r = d->cu->cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
  if (r != CUDA_SUCCESS) {
    d->cu->cuMemPoolDestroy(pool);
    return kd_fail_cu(r, op, "cuMemPoolSetAttribute");
  }
  d->pool = pool;
  return KD_OK;
}

kd_status kd_device_open(const kd_session_options *o, const kd_logger *log, kd_device *d) {
  memset(d, 0, sizeof *d);
  d->flags = o->flags;
  d->log = log;
  d->info.numa_node = -1;
  kd_status st = open_impl(o, d);
  if (st) kd_device_close(d);
  return st;
}

void kd_device_close(kd_device *d) {
  if (!d->cu) return;
  if (d->ctx) d->cu->cuCtxSetCurrent(d->ctx);
  kd_staging_fini(d);
  for (size_t i = 0; i < d->free_event_count; ++i) d->cu->cuEventDestroy(d->free_events[i]);
  free(d->free_events);
  d->free_events = NULL;
  d->free_event_count = d->free_event_cap = 0;
  if (d->pool) d->cu->cuMemPoolDestroy(d->pool);
  if (d->stream) d->cu->cuStreamDestroy(d->stream);
  if (d->ctx) d->cu->cuDevicePrimaryCtxRelease(d->dev);
  d->pool = NULL;
  d->stream = NULL;
  d->ctx = NULL;
  d->cu = NULL;
}

static CUresult make_current(kd_device *d) {
  CUcontext cur = NULL;
  if (d->cu->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == d->ctx) return CUDA_SUCCESS;
  return d->cu->cuCtxSetCurrent(d->ctx);
}

int kd_device_try_current(kd_device *d) { return make_current(d) == CUDA_SUCCESS; }

kd_status kd_device_make_current(kd_device *d, const char *op) {
  CUresult r = make_current(d);
  return r == CUDA_SUCCESS ? KD_OK : kd_fail_cu(r, op, "cuCtxSetCurrent");
}

kd_status kd_device_alloc(kd_device *d, const char *op, size_t bytes, CUdeviceptr *out) {
  /* The pool hands out at least 1 byte so every tensor has a distinct
   * address, including zero-sized ones. */
  if (!d->pool) {
    kd_status st = pool_open(d, op);
    if (st) return st;
  }
  KD_CU(d, op, cuMemAllocFromPoolAsync, (out, bytes ? bytes : 1, d->pool, d->stream));
  return KD_OK;
}

void kd_device_free(kd_device *d, CUdeviceptr p) {
  /* Only called once every use has completed; stream order makes it safe
   * regardless. A failure here can only be a context already faulted. */
  (void)d->cu->cuMemFreeAsync(p, d->stream);
}

kd_status kd_device_event_new(kd_device *d, const char *op, CUevent *out) {
  KD_CU(d, op, cuEventCreate, (out, CU_EVENT_DISABLE_TIMING));
  return KD_OK;
}

void kd_device_event_destroy(kd_device *d, CUevent e) { (void)d->cu->cuEventDestroy(e); }

kd_status kd_device_event_export(kd_device *d, const char *op, CUevent *out) {
  CUevent e = NULL;
  KD_CU(d, op, cuEventCreate, (&e, CU_EVENT_DISABLE_TIMING));
  CUresult r = d->cu->cuEventRecord(e, d->stream);
  if (r != CUDA_SUCCESS) {
    (void)d->cu->cuEventDestroy(e);
    return kd_fail_cu(r, op, "cuEventRecord");
  }
  *out = e;
  return KD_OK;
}

void kd_device_name_stream(kd_device *d, const char *name) {
#ifndef KDAG_NO_NVTX
  if (kd_nvtx_on()) nvtxNameCuStreamA(d->stream, name);
#else
  (void)d;
  (void)name;
#endif
}

kd_status kd_device_wait_event(kd_device *d, const char *op, CUevent event) {
  KD_CU(d, op, cuStreamWaitEvent, (d->stream, event, 0));
  return KD_OK;
}

kd_status kd_device_enable_peer(kd_device *d, const kd_device *peer, const char *op, int *direct) {
  *direct = d->dev == peer->dev;
  if (*direct || !d->cu->cuDeviceCanAccessPeer || !d->cu->cuCtxEnablePeerAccess) return KD_OK;
  int can = 0;
  KD_CU(d, op, cuDeviceCanAccessPeer, (&can, d->dev, peer->dev));
  if (!can) return KD_OK;
  CUresult r = d->cu->cuCtxEnablePeerAccess(peer->ctx, 0);
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) return kd_fail_cu(r, op, "cuCtxEnablePeerAccess");
  *direct = 1;
  return KD_OK;
}

kd_status kd_device_pointer_check(kd_device *d, const char *op, const char *what, CUdeviceptr p, size_t bytes,
                                  int allow_managed) {
  /* The context is not asked: stream-ordered pool memory (kdag's own, and
   * cudaMallocAsync memory of PyTorch, CuPy or JAX) reports none. */
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED};
  unsigned type = 0;
  int ordinal = -1;
  CUdeviceptr start = 0;
  size_t size = 0;
  int managed = 0; /* the driver writes a bool-sized value: zeroed, an int holds it */
  void *data[] = {&type, &ordinal, &start, &size, &managed};
  /* An address the driver does not know is no error here: every attribute
   * comes back zero (type 0, "not CUDA memory"). */
  KD_CU(d, op, cuPointerGetAttributes, (5, attrs, data, p));
  if (managed && !allow_managed)
    return kd_fail(KD_ERR_NOT_RESIDENT, "%s: %s 0x%llx is managed memory; wrap it with KD_EXTERNAL_ALLOW_MANAGED "
                   "to accept it (pages then migrate on first touch)", op, what, (unsigned long long)p);
  if (!managed && type != CU_MEMORYTYPE_DEVICE)
    return kd_fail(KD_ERR_NOT_RESIDENT, "%s: %s 0x%llx is not device memory (%s): a host pointer, or an address "
                   "the driver does not know", op, what, (unsigned long long)p,
                   type == CU_MEMORYTYPE_HOST ? "pinned host memory" : "no CUDA allocation");
  if (!managed && ordinal != d->info.ordinal) /* managed memory is any device's */
    return kd_fail(KD_ERR_WRONG_DEVICE, "%s: %s 0x%llx is memory of device %d, the session's is device %d", op,
                   what, (unsigned long long)p, ordinal, d->info.ordinal);
  if (p < start || bytes > size || p - start > size - bytes)
    return kd_fail(KD_ERR_OUT_OF_BOUNDS, "%s: %s [0x%llx, +%zu bytes) reaches past its allocation [0x%llx, +%zu "
                   "bytes)", op, what, (unsigned long long)p, bytes, (unsigned long long)start, size);
  return KD_OK;
}

kd_status kd_device_poison(kd_device *d, const char *op, CUdeviceptr p, size_t bytes) {
  if (!bytes) return KD_OK;
  if (bytes % 4 == 0) KD_CU(d, op, cuMemsetD32Async, (p, 0x7FA5A5A5u, bytes / 4, d->stream));
  else KD_CU(d, op, cuMemsetD8Async, (p, 0xA5, bytes, d->stream));
  return KD_OK;
}

kd_status kd_event_acquire(kd_device *d, const char *op, CUevent *out) {
  if (d->free_event_count) {
    *out = d->free_events[--d->free_event_count];
    return KD_OK;
  }
  KD_CU(d, op, cuEventCreate, (out, CU_EVENT_DISABLE_TIMING));
  d->events_created++;
  return KD_OK;
}

void kd_event_release_to_pool(kd_device *d, CUevent e) {
  if (d->free_event_count == d->free_event_cap) {
    size_t cap = d->free_event_cap ? d->free_event_cap * 2 : 64;
    CUevent *grown = realloc(d->free_events, cap * sizeof *grown);
    if (!grown) {
      d->cu->cuEventDestroy(e); /* cannot pool it: destroy rather than leak */
      return;
    }
    d->free_events = grown;
    d->free_event_cap = cap;
  }
  d->free_events[d->free_event_count++] = e;
}

kd_status kd_event_record(kd_device *d, const char *op, CUevent e) {
  KD_CU(d, op, cuEventRecord, (e, d->stream));
  return KD_OK;
}

CUresult kd_event_query(kd_device *d, CUevent e) { return d->cu->cuEventQuery(e); }

kd_status kd_device_timing_event_create(kd_device *d, const char *op, CUevent *out) {
  KD_CU(d, op, cuEventCreate, (out, CU_EVENT_DEFAULT));
  return KD_OK;
}

CUresult kd_event_elapsed_ms(kd_device *d, CUevent from, CUevent to, float *ms) {
  return d->cu->cuEventElapsedTime(ms, from, to);
}

CUresult kd_event_wait(kd_device *d, CUevent e) { return d->cu->cuEventSynchronize(e); }

CUresult kd_stream_wait(kd_device *d) { return d->cu->cuStreamSynchronize(d->stream); }
