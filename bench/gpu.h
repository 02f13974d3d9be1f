/* SPDX-License-Identifier: Apache-2.0 */
/* bench/gpu.h — the GPU context helper of kdag-bench's built-in suites.
 *
 * One process-wide device context (device 0's primary context), one
 * non-blocking stream and a pair of timing events, opened on first use
 * through kdag's dlopen'd driver table (cuda/driver.h) and kept until
 * kb_gpu_shutdown. The harness stays CUDA-free: a case times its own batch
 * with kb_gpu_batch_begin / kb_gpu_batch_end and reports the GPU ns.
 *
 * A batch is timed as:
 *   uint64_t t0;
 *   kb_gpu_batch_begin(g, run, &t0);     start event on the stream, then t0
 *   ... enqueue `iterations` repetitions ...
 *   kb_gpu_batch_end(g, run, t0, out);   out->host_ns is the submission time
 *                                        (t0 to here), then the stop event;
 *                                        the host waits on it and
 *                                        out->gpu_ns is start to stop.
 * The two event records stay out of the host time: per batch they would
 * weigh on a batch of few long submissions, and more on a session's stream
 * (a raw scope each) than on this one.
 */
#ifndef KDAG_BENCH_GPU_H
#define KDAG_BENCH_GPU_H

#include <cuda.h>

#include "bench/harness.h"
#include "cuda/driver.h"

typedef struct kb_gpu {
  const kd_cu_table *cu;
  CUdevice device;
  CUcontext context;   /* primary context of device 0, retained */
  CUstream stream;     /* CU_STREAM_NON_BLOCKING */
  CUevent start, stop; /* timing events */
  CUdeviceptr flush;   /* L2 flush buffer (2 x L2), allocated on first flush */
  size_t flush_bytes;
  int l2_bytes;
} kb_gpu;

/* The shared GPU, opened on the first call. KB_SKIP with the driver's reason
 * (kd_last_error of kd_driver_load, or the failing call) when there is no
 * usable GPU; every later call returns the same. Makes the context current
 * on the calling thread. */
kb_status kb_gpu_acquire(kb_gpu **out, char *why, size_t why_cap);
/* Releases the shared GPU (stream, events, buffers, primary context). */
void kb_gpu_shutdown(void);

/* Formats "call failed: CUDA_ERROR_X (text)" into the run and returns
 * KB_FAIL; KB_OK when r is CUDA_SUCCESS. */
kb_status kb_gpu_check(kb_run *run, CUresult r, const char *call);
/* Same, into a buffer (for suite hooks). */
kb_status kb_gpu_check_msg(char *why, size_t cap, CUresult r, const char *call);

/* Instantiates graph into *exec; with upload, as kdag's GRAPH executor
 * does (CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD on g's stream). */
kb_status kb_gpu_instantiate(kb_gpu *g, kb_run *run, CUgraph graph, int upload, CUgraphExec *exec);

kb_status kb_gpu_batch_begin(kb_gpu *g, kb_run *run, uint64_t *t0_ns);
kb_status kb_gpu_batch_end(kb_gpu *g, kb_run *run, uint64_t t0_ns, kb_timing *out);

/* Loads an embedded kernel image into the shared context: the CUBIN, or the
 * PTX (driver JIT) when the CUBIN is for another GPU. The caller unloads it. */
kb_status kb_gpu_load_module(kb_gpu *g, const void *cubin, const void *ptx, CUmodule *out,
                             char *why, size_t cap);

/* Overwrites a buffer twice the L2 size on the stream and waits for it, so
 * the next sample starts with nothing of its own in L2. */
kb_status kb_gpu_flush_l2(kb_gpu *g, char *why, size_t cap);

/* A suite init for the suites whose state is the shared GPU itself: it
 * acquires it and describes it in the run's machine. */
kb_status kb_gpu_suite_init(kb_harness *h, void *user, void **state, char *why, size_t cap);
/* kb_gpu_acquire, then describes the GPU in h's machine: the start of
 * every GPU suite's init. */
kb_status kb_gpu_acquire_described(kb_harness *h, kb_gpu **out, char *why, size_t cap);

/* Suite state shared by the suites that time one kernel of an embedded
 * module (launch, fanout, rebind): the GPU, the module, the function, and a
 * completion event recorded once per submission or batch. Pass a
 * kb_kernel_spec (static storage) as kb_suite_desc.user and these three as
 * its init, fini and flush. */
typedef struct kb_kernel_spec {
  const void *cubin, *ptx; /* embedded images: the CUBIN, else its PTX */
  const char *function;
} kb_kernel_spec;
typedef struct kb_kernel_suite {
  kb_gpu *g;
  CUmodule module;
  CUfunction fn;
  CUevent done;
} kb_kernel_suite;
kb_status kb_kernel_suite_init(kb_harness *h, void *user, void **state, char *why, size_t cap);
void kb_kernel_suite_fini(void *state);
kb_status kb_kernel_suite_flush(void *state, char *why, size_t cap);

/* Fills the GPU fields of *m from the open GPU. */
void kb_gpu_describe(const kb_gpu *g, kb_machine *m);
/* Fills what needs no GPU: toolkit version (the headers') and NVRTC's. */
void kb_gpu_describe_toolkit(kb_machine *m);

#endif /* KDAG_BENCH_GPU_H */
