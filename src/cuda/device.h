/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: one session's hold on a CUDA device — primary context, the one
 * stream, the event pool, the stream-ordered memory pool and pinned staging.
 * Knows nothing of tensors or graphs; the engine calls it. Not thread-safe:
 * the owning session serialises every call. */
#ifndef KDAG_CUDA_DEVICE_H
#define KDAG_CUDA_DEVICE_H

#include <cuda.h>
#include <hwloc.h>
#include <stddef.h>
#include <stdint.h>

#include "base/log.h"
#include "cuda/driver.h"
#include "kdag/session.h"

typedef struct kd_staging_block {
  void *host;
  size_t size;
  int size_class;
  int registered;                 /* 1: hwloc memory + cuMemHostRegister */
  struct kd_staging_block *next;  /* free list / all-blocks list link */
  struct kd_staging_block *all_next;
} kd_staging_block;

#define KD_STAGING_CLASSES 40

typedef struct kd_device {
  const kd_cu_table *cu;
  CUdevice dev;
  CUcontext ctx;          /* primary context (retained) */
  CUstream stream;        /* the session's only stream, non-blocking */
  CUmemoryPool pool;      /* NULL until the first allocation */
  uint64_t pool_release_threshold;
  kd_device_info info;
  int sm;                 /* cc_major*10 + cc_minor */
  /* Programmatic dependent launch is used (KD_LAUNCH_PDL): sm_90 or
   * later, a driver with cuLaunchKernelEx and edge data, and not
   * KD_SESSION_NO_PDL. */
  int pdl;
  int max_threads_per_block;
  int max_shared_optin;   /* CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
  uint32_t flags;         /* KD_SESSION_* */
  const kd_logger *log;   /* the session's */
  /* event pool: free events, reused so steady state creates none */
  CUevent *free_events;
  size_t free_event_count, free_event_cap, events_created;
  /* pinned staging, placed on the GPU's NUMA node when hwloc can see it */
  hwloc_topology_t topo;
  hwloc_nodeset_t nodeset; /* NULL: no placement */
  kd_staging_block *staging_free[KD_STAGING_CLASSES];
  kd_staging_block *staging_all;
  uint64_t staging_bytes;
  uint64_t staging_blocks;
  uint64_t staging_idle_bytes; /* in the free lists */
  uint64_t staging_grows;   /* blocks allocated: each pins memory, which synchronises */
  /* Driver calls made that wait for all work in the context, whoever
   * enqueued it (tools/wait-probe measured which: module loads and
   * unloads, freeing pinned memory). Counted where they are made. */
  uint64_t context_waits;
} kd_device;

/* Opens the device for a session. On failure everything is released and
 * the message says why. */
kd_status kd_device_open(const kd_session_options *o, const kd_logger *log, kd_device *out);
/* Releases everything; the caller has drained the stream's work. */
void kd_device_close(kd_device *d);

/* A sticky device fault (a trap, an illegal address) poisons the device for
 * the rest of the process: the driver documents it, and tools/fault-probe
 * measured it on the H200 (driver 580, CUDA 13.0): after a fault, with or
 * without every object destroyed and the primary context released,
 * cuDevicePrimaryCtxReset succeeds but the next cuDevicePrimaryCtxRetain,
 * and even a cuCtxCreate of a new context, fails with the old fault. The
 * registry (process-wide, like the primary context) remembers the fault,
 * so every session of the device refuses work with it and a new session
 * is refused at once, saying the process must restart; another process is
 * unaffected. */
void kd_device_fault_report(const kd_device *d, const char *message);
/* 1 and the message when the device has faulted. */
int kd_device_fault_get(const kd_device *d, char *message, size_t cap);

/* Makes the primary context current on the calling thread (cheap when it
 * already is). */
kd_status kd_device_make_current(kd_device *d, const char *op);
/* The same without a message: 1 when the context is current. */
int kd_device_try_current(kd_device *d);

kd_status kd_device_alloc(kd_device *d, const char *op, size_t bytes, CUdeviceptr *out);
void kd_device_free(kd_device *d, CUdeviceptr p); /* stream-ordered */
/* A new event (no timing), never recorded (complete), for the caller to
 * own; kd_device_event_destroy frees one. */
kd_status kd_device_event_new(kd_device *d, const char *op, CUevent *out);
void kd_device_event_destroy(kd_device *d, CUevent e);
/* A new event (no timing) recorded on the session stream after the work
 * enqueued so far, for the caller to own (cuEventDestroy); no wait. */
kd_status kd_device_event_export(kd_device *d, const char *op, CUevent *out);
/* Makes the session stream's later work wait for event (recorded by
 * anyone, in any context); the host does not wait. */
kd_status kd_device_wait_event(kd_device *d, const char *op, CUevent event);
/* Lets d's context read peer's memory directly where the two devices
 * allow it (cuCtxEnablePeerAccess, d's context current); elsewhere the
 * driver stages copies between them. *direct: 1 same device or peer
 * access on, 0 staged. Errors name op: KD_ERR_DRIVER. */
kd_status kd_device_enable_peer(kd_device *d, const kd_device *peer, const char *op, int *direct);
/* Checks that [p, p + bytes) is memory kernels of this device may use
 * (cuPointerGetAttributes; no wait): device memory of this device, or
 * managed memory when allow_managed, inside one allocation. Alignment is
 * the caller's to check (it needs no driver). Errors name op and what:
 * KD_ERR_NOT_RESIDENT (not device memory, or managed memory without
 * allow_managed), KD_ERR_WRONG_DEVICE, KD_ERR_OUT_OF_BOUNDS (past the
 * allocation's end), KD_ERR_DRIVER. */
/* Names the session's stream in NVTX tools (Nsight Systems' timeline
 * rows); nothing without a tool (base/nvtx.h). */
void kd_device_name_stream(kd_device *d, const char *name);

kd_status kd_device_pointer_check(kd_device *d, const char *op, const char *what, CUdeviceptr p, size_t bytes,
                                  int allow_managed);
kd_status kd_device_poison(kd_device *d, const char *op, CUdeviceptr p, size_t bytes);

kd_status kd_event_acquire(kd_device *d, const char *op, CUevent *out);
void kd_event_release_to_pool(kd_device *d, CUevent e);
kd_status kd_event_record(kd_device *d, const char *op, CUevent e);
/* The driver's answers as they are, for callers that tell pending
 * (CUDA_ERROR_NOT_READY) from a fault and name the faulting work
 * themselves (the completion ring). */
CUresult kd_event_query(kd_device *d, CUevent e);
CUresult kd_event_wait(kd_device *d, CUevent e);
/* Traces (session/trace.h): an event that records time (the pool's do
 * not), and the milliseconds between two completed ones. */
kd_status kd_device_timing_event_create(kd_device *d, const char *op, CUevent *out);
CUresult kd_event_elapsed_ms(kd_device *d, CUevent from, CUevent to, float *ms);
/* Waits for everything enqueued on the session's stream: where a failure
 * leaves work enqueued that the objects it uses must outlive. */
CUresult kd_stream_wait(kd_device *d);

/* Finds the GPU's NUMA placement (never fails: falls back with a reason). */
kd_status kd_staging_init(kd_device *d);
void kd_staging_fini(kd_device *d);
kd_status kd_staging_get(kd_device *d, const char *op, size_t bytes, kd_staging_block **out);
void kd_staging_put(kd_device *d, kd_staging_block *b);
/* Frees the blocks no transfer holds: unpinning waits for all work in the
 * context (each call counted in context_waits). */
void kd_staging_trim(kd_device *d);

#endif
