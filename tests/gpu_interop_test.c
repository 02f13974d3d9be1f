/* SPDX-License-Identifier: Apache-2.0 */
/* GPU lane: memory, streams and events of another library, here the CUDA
 * driver called directly as such a library would. kd_tensor_wrap against
 * what cuPointerGetAttributes really reports (cuMemAlloc, a stream-ordered
 * pool, pinned host, managed and plain host memory, a misaligned address,
 * a view past the allocation), the release callback held back by work in
 * flight, and ordering without host waits both ways: kdag behind another
 * stream's event, another stream behind a kdag ticket, and one kdag
 * session behind another's ticket. A foreign device needs a second GPU:
 * the null driver covers it on the host lane (host_null_driver_test). Each
 * test skips without a GPU (fails with KDAG_REQUIRE_GPU=1). */
#include <time.h>

#include "kdag_test.h"
#include "kernels/embedded.h"

#include "cu_foreign.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The session's device's primary context, current on this thread: the
 * context kdag uses, as PyTorch, CuPy and the runtime API do. */
typedef struct foreign {
  CUdevice dev;
  CUcontext ctx;
  CUstream stream; /* another library's stream */
  CUmodule mod;
  CUfunction spin;
} foreign;

static void foreign_open(kd_session *s, foreign *f) {
  kd_device_info info;
  KDT_OK(kd_session_device_info(s, &info));
  foreign_resolve();
  CU_OK(cuInit(0));
  CU_OK(cuDeviceGet(&f->dev, info.ordinal));
  CU_OK(cuDevicePrimaryCtxRetain(&f->ctx, f->dev));
  CU_OK(cuCtxPushCurrent(f->ctx));
  CU_OK(cuStreamCreate(&f->stream, CU_STREAM_NON_BLOCKING));
  CU_OK(cuModuleLoadData(&f->mod, kd_kernel_test_cubin));
  CU_OK(cuModuleGetFunction(&f->spin, f->mod, "spin_kernel"));
}

static void foreign_close(foreign *f) {
  CU_OK(cuStreamSynchronize(f->stream));
  CU_OK(cuStreamDestroy(f->stream));
  CU_OK(cuModuleUnload(f->mod));
  CUcontext popped;
  CU_OK(cuCtxPopCurrent(&popped));
  CU_OK(cuDevicePrimaryCtxRelease(f->dev));
}

/* Device memory of n zeroed ints, the zeros written before it returns. */
static CUdeviceptr zeroed_ints(foreign *f, size_t n) {
  CUdeviceptr p;
  CU_OK(cuMemAlloc(&p, 4 * n));
  CU_OK(cuMemsetD32Async(p, 0, n, f->stream));
  CU_OK(cuStreamSynchronize(f->stream));
  return p;
}

/* Spins ns on the foreign stream, then writes 1 to *done. */
static void foreign_spin(foreign *f, unsigned long long ns, CUdeviceptr done) {
  void *params[] = {&ns, &done};
  CU_OK(cuLaunchKernel(f->spin, 1, 1, 1, 1, 1, 1, 0, f->stream, params, NULL));
}

typedef struct released {
  int calls;
} released;

static void count_release(void *user) { ((released *)user)->calls++; }

static kd_external_desc wrap_desc(CUdeviceptr p, kd_dtype dtype, int64_t n, released *r) {
  kd_external_desc d;
  kd_external_desc_init(&d);
  d.data = (void *)(uintptr_t)p;
  d.dtype = dtype;
  d.rank = 1;
  d.shape[0] = n;
  d.release = r ? count_release : NULL;
  d.release_user = r;
  return d;
}

typedef struct spin_kernel {
  kd_module m;
  kd_function fn;
} spin_kernel;

static kd_status load_spin(kd_raw *raw, void *user) {
  spin_kernel *k = user;
  kd_status st = kd_raw_load_image(raw, kd_kernel_test_cubin, kd_kernel_test_cubin_size, &k->m);
  return st ? st : kd_module_function(kd_raw_session(raw), k->m, "spin_kernel", &k->fn);
}

/* A graph of one spin node writing 1 to flag[0] after ns. */
static kd_graph *spin_graph(kd_session *s, const spin_kernel *k, unsigned long long ns, kd_tensor flag) {
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_launch_config one = {{1, 1, 1}, {1, 1, 1}, 0, 0};
  kd_view first = {.tensor = flag, .rank = 1, .offset = 0, .shape = {1}, .strides = {1}};
  kd_garg args[] = {kd_g_value(kd_arg_u64(ns)), kd_g_out(first)};
  KDT_OK(kd_graph_kernel(g, "spin", k->fn, &one, args, 2, NULL));
  return g;
}

static void assert_no_host_syncs(kd_session *s) {
  kd_session_stats k;
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(k.device_syncs, 0);
  cr_assert_eq(k.stream_syncs, 0);
}

Test(gpu_interop, wrap_checks_what_the_driver_reports) {
  kd_session *s = kdt_gpu_session();
  foreign f;
  foreign_open(s, &f);
  released r = {0};
  kd_tensor t;
  /* cuMemAlloc memory of 2 MiB, the allocation granularity, so the range
   * the driver reports ends exactly there. */
  const int64_t n = (2 << 20) / 4;
  CUdeviceptr dev;
  CU_OK(cuMemAlloc(&dev, (size_t)n * 4));
  kd_external_desc d = wrap_desc(dev, KD_F32, n + 1, &r);
  KDT_FAILS(kd_tensor_wrap(s, &d, &t), KD_ERR_OUT_OF_BOUNDS, "allocation");
  d = wrap_desc(dev + 4, KD_F32, n, &r);
  KDT_FAILS(kd_tensor_wrap(s, &d, &t), KD_ERR_OUT_OF_BOUNDS, "allocation");
  d = wrap_desc(dev + 2, KD_F32, 16, &r);
  KDT_FAILS(kd_tensor_wrap(s, &d, &t), KD_ERR_MISALIGNED, "kd_tensor_wrap");
  d = wrap_desc(dev + 2, KD_F16, 16, &r); /* 2 bytes is aligned for f16 */
  KDT_OK(kd_tensor_wrap(s, &d, &t));
  KDT_OK(kd_tensor_release(s, t));
  d = wrap_desc(dev + 4, KD_F32, n - 1, &r); /* the last element exactly */
  KDT_OK(kd_tensor_wrap(s, &d, &t));
  KDT_OK(kd_tensor_release(s, t));
  KDT_OK(kd_session_reap(s, NULL));
  cr_assert_eq(r.calls, 2, "one release per successful wrap, none per refusal (%d)", r.calls);

  /* Plain host memory, pinned host memory, managed memory. */
  float *heap = calloc(64, sizeof *heap);
  d = wrap_desc((CUdeviceptr)(uintptr_t)heap, KD_F32, 64, &r);
  KDT_FAILS(kd_tensor_wrap(s, &d, &t), KD_ERR_NOT_RESIDENT, "kd_tensor_wrap");
  void *pinned;
  CU_OK(cuMemAllocHost(&pinned, 256));
  d = wrap_desc((CUdeviceptr)(uintptr_t)pinned, KD_F32, 64, &r);
  KDT_FAILS(kd_tensor_wrap(s, &d, &t), KD_ERR_NOT_RESIDENT, "kd_tensor_wrap");
  CUdeviceptr managed;
  CU_OK(cuMemAllocManaged(&managed, 256, CU_MEM_ATTACH_GLOBAL));
  d = wrap_desc(managed, KD_F32, 64, &r);
  KDT_FAILS(kd_tensor_wrap(s, &d, &t), KD_ERR_NOT_RESIDENT, "managed");
  cr_assert_eq(r.calls, 2, "no release for a refused wrap");
  d.flags = KD_EXTERNAL_ALLOW_MANAGED;
  KDT_OK(kd_tensor_wrap(s, &d, &t));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  float seven = 7.0f;
  KDT_OK(kd_graph_op_fill(g, "fill managed", kd_whole(t), &seven, NULL));
  float got[64];
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "managed", t, got, sizeof got, &sink));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sink));
  for (int i = 0; i < 64; ++i) cr_assert_eq(got[i], 7.0f);
  cr_assert_eq(((float *)(uintptr_t)managed)[63], 7.0f, "the same memory, seen from the host");
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, t));

  /* A read-only wrap refused as an output, naming the node. */
  d = wrap_desc(dev, KD_F32, 64, &r);
  d.flags = KD_EXTERNAL_READ_ONLY;
  KDT_OK(kd_tensor_wrap(s, &d, &t));
  KDT_OK(kd_graph_create(s, &g));
  KDT_FAILS(kd_graph_op_fill(g, "overwrite", kd_whole(t), &seven, NULL), KD_ERR_INVALID_ARGUMENT, "overwrite");
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, t));
  KDT_OK(kd_session_reap(s, NULL));
  cr_assert_eq(r.calls, 4);
  assert_no_host_syncs(s);
  kd_session_destroy(s);
  cr_assert_eq(r.calls, 4, "released once each, not again at destroy");
  CU_OK(cuMemFree(managed));
  CU_OK(cuMemFreeHost(pinned));
  CU_OK(cuMemFree(dev));
  free(heap);
  foreign_close(&f);
}

/* Stream-ordered pool memory (cudaMallocAsync in torch, CuPy and JAX) has
 * no context attribute: it is accepted by its device ordinal. */
Test(gpu_interop, wrap_takes_stream_ordered_pool_memory_and_computes_in_place) {
  kd_session *s = kdt_gpu_session();
  foreign f;
  foreign_open(s, &f);
  const int n = 1000;
  CUdeviceptr a, b;
  CU_OK(cuMemAllocAsync(&a, n * sizeof(double), f.stream));
  CU_OK(cuMemAllocAsync(&b, n * sizeof(double), f.stream));
  double host[1000];
  for (int i = 0; i < n; ++i) host[i] = 0.5 * i;
  CU_OK(cuMemcpyHtoDAsync(a, host, sizeof host, f.stream));
  CU_OK(cuStreamSynchronize(f.stream)); /* wrap's contract: the owner's writes are done */
  released r = {0};
  kd_tensor ta, tb;
  kd_external_desc da = wrap_desc(a, KD_F64, n, &r), db = wrap_desc(b, KD_F64, n, &r);
  KDT_OK(kd_tensor_wrap(s, &da, &ta));
  KDT_OK(kd_tensor_wrap(s, &db, &tb));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_add(g, "b=a+a", kd_whole(tb), kd_whole(ta), kd_whole(ta), NULL));
  KDT_OK(kd_graph_op_axpy(g, "b+=2a", kd_whole(tb), kd_whole(ta), 2.0, NULL));
  kd_ticket ticket;
  KDT_OK(kd_graph_submit(g, &ticket));
  void *done_event;
  KDT_OK(kd_ticket_event(s, ticket, &done_event));
  CU_OK(cuStreamWaitEvent(f.stream, (CUevent)done_event, 0));
  double out[1000];
  CU_OK(cuMemcpyDtoHAsync(out, b, sizeof out, f.stream));
  CU_OK(cuStreamSynchronize(f.stream));
  for (int i = 0; i < n; ++i) cr_assert_eq(out[i], 4 * host[i], "b[%d] = %g", i, out[i]);
  CU_OK(cuEventDestroy((CUevent)done_event));
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, ta));
  KDT_OK(kd_tensor_release(s, tb));
  KDT_OK(kd_session_reap(s, NULL));
  cr_assert_eq(r.calls, 2);
  assert_no_host_syncs(s);
  kd_session_destroy(s);
  CU_OK(cuMemFreeAsync(a, f.stream));
  CU_OK(cuMemFreeAsync(b, f.stream));
  foreign_close(&f);
}

/* The release callback waits for the last submission that used the memory,
 * and the caller's calls meanwhile do not wait for it. */
Test(gpu_interop, release_waits_for_the_work_in_flight) {
  kd_session *s = kdt_gpu_session();
  foreign f;
  foreign_open(s, &f);
  spin_kernel k;
  KDT_OK(kd_with_raw(s, "test.load", load_spin, &k));
  CUdeviceptr flag = zeroed_ints(&f, 16);
  released r = {0};
  kd_external_desc d = wrap_desc(flag, KD_I32, 16, &r);
  kd_tensor t;
  KDT_OK(kd_tensor_wrap(s, &d, &t));
  kd_graph *g = spin_graph(s, &k, 200ull * 1000 * 1000, t);
  kd_ticket ticket;
  double t0 = now_ms();
  KDT_OK(kd_graph_submit(g, &ticket));
  KDT_OK(kd_tensor_release(s, t));
  kd_graph_destroy(g);
  KDT_OK(kd_session_reap(s, NULL));
  double t1 = now_ms();
  int done = 1;
  KDT_OK(kd_ticket_done(s, ticket, &done));
  if (kdt_timed()) {
    cr_assert_eq(done, 0, "the 200 ms kernel still runs");
    cr_assert_eq(r.calls, 0, "released while a kernel writes the memory");
  }
  cr_assert_eq(r.calls, done, "released exactly when the kernel is found complete");
  fprintf(stderr, "interop witness: submit, release, destroy and reap behind a 200 ms kernel: %.3f ms\n", t1 - t0);
  if (kdt_timed())
    cr_assert_lt(t1 - t0, 20.0, "submit, release, destroy and reap took %.1f ms behind a 200 ms kernel", t1 - t0);
  while (!done) KDT_OK(kd_ticket_done(s, ticket, &done));
  cr_assert_eq(r.calls, 1, "released once the kernel completed (%d)", r.calls);
  int host = 0;
  CU_OK(cuMemcpyDtoH(&host, flag, sizeof host));
  cr_assert_eq(host, 1, "the kernel wrote the caller's memory");
  assert_no_host_syncs(s);
  kd_session_destroy(s);
  cr_assert_eq(r.calls, 1);
  CU_OK(cuMemFree(flag));
  foreign_close(&f);
}

/* kdag behind another library's stream: its work waits on the device for
 * the event, the host does not. */
Test(gpu_interop, session_waits_for_another_streams_event_on_the_device) {
  kd_session *s = kdt_gpu_session();
  foreign f;
  foreign_open(s, &f);
  CUdeviceptr flag = zeroed_ints(&f, 1);
  kd_tensor_desc one = {.dtype = KD_I32, .rank = 1, .shape = {1}};
  kd_tensor wrapped, copy;
  kd_external_desc d = wrap_desc(flag, KD_I32, 1, NULL);
  d.flags = KD_EXTERNAL_READ_ONLY;
  KDT_OK(kd_tensor_wrap(s, &d, &wrapped));
  KDT_OK(kd_tensor_create(s, &one, &copy));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_copy(g, "copy", kd_whole(copy), kd_whole(wrapped), NULL));
  int32_t got = -1;
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "copy", copy, &got, sizeof got, &sink));
  KDT_OK(kd_graph_submit(g, NULL)); /* warm: plan, staging */
  KDT_OK(kd_sink_wait(sink));
  cr_assert_eq(got, 0);
  kd_session_stats before;
  KDT_OK(kd_session_stats_get(s, &before));

  CUevent ev;
  CU_OK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  foreign_spin(&f, 200ull * 1000 * 1000, flag);
  CU_OK(cuEventRecord(ev, f.stream));
  double t0 = now_ms();
  KDT_OK(kd_session_wait_event(s, ev));
  CU_OK(cuEventRecord(ev, f.stream)); /* re-recording after the call does not undo the wait */
  KDT_OK(kd_graph_submit(g, NULL));
  double t1 = now_ms();
  fprintf(stderr, "interop witness: kd_session_wait_event and a submit behind a foreign 200 ms kernel: %.3f ms\n",
          t1 - t0);
  if (kdt_timed()) cr_assert_eq(cu.cuEventQuery(ev), CUDA_ERROR_NOT_READY, "the foreign kernel still spins");
  if (kdt_timed()) cr_assert_lt(t1 - t0, 20.0, "the wait and the submit took %.1f ms behind a 200 ms kernel", t1 - t0);
  KDT_OK(kd_sink_wait(sink));
  cr_assert_eq(got, 1, "kdag read the flag before the foreign kernel wrote it");
  kd_session_stats after;
  KDT_OK(kd_session_stats_get(s, &after));
  cr_assert_eq(after.stream_event_waits - before.stream_event_waits, 1);
  cr_assert_eq(after.event_waits - before.event_waits, 1, "the sink's wait alone");
  assert_no_host_syncs(s);
  KDT_FAILS(kd_session_wait_event(s, NULL), KD_ERR_INVALID_ARGUMENT, "event");
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, wrapped));
  KDT_OK(kd_tensor_release(s, copy));
  kd_session_destroy(s);
  CU_OK(cuEventDestroy(ev));
  CU_OK(cuMemFree(flag));
  foreign_close(&f);
}

/* Another library's stream behind a kdag ticket, and a retired ticket's
 * event, complete at once. */
Test(gpu_interop, another_stream_waits_for_a_ticket_on_the_device) {
  kd_session *s = kdt_gpu_session();
  foreign f;
  foreign_open(s, &f);
  spin_kernel k;
  KDT_OK(kd_with_raw(s, "test.load", load_spin, &k));
  CUdeviceptr flag = zeroed_ints(&f, 1);
  kd_tensor t;
  kd_external_desc d = wrap_desc(flag, KD_I32, 1, NULL);
  KDT_OK(kd_tensor_wrap(s, &d, &t));
  kd_graph *g = spin_graph(s, &k, 200ull * 1000 * 1000, t);
  kd_ticket ticket;
  KDT_OK(kd_graph_submit(g, &ticket));
  double t0 = now_ms();
  void *ev;
  KDT_OK(kd_ticket_event(s, ticket, &ev));
  double t1 = now_ms();
  fprintf(stderr, "interop witness: kd_ticket_event behind a 200 ms kernel: %.3f ms\n", t1 - t0);
  if (kdt_timed()) cr_assert_eq(cu.cuEventQuery((CUevent)ev), CUDA_ERROR_NOT_READY, "the kdag kernel still spins");
  if (kdt_timed()) cr_assert_lt(t1 - t0, 10.0, "kd_ticket_event took %.1f ms behind a 200 ms kernel", t1 - t0);
  int32_t *host;
  CU_OK(cuMemAllocHost((void **)&host, sizeof *host));
  *host = -1;
  CU_OK(cuStreamWaitEvent(f.stream, (CUevent)ev, 0));
  CU_OK(cuMemcpyDtoHAsync(host, flag, sizeof *host, f.stream));
  CU_OK(cuStreamSynchronize(f.stream));
  cr_assert_eq(*host, 1, "the foreign stream read before kdag's kernel wrote");
  CU_OK(cuEventDestroy((CUevent)ev));
  int done = 0;
  while (!done) KDT_OK(kd_ticket_done(s, ticket, &done));
  KDT_OK(kd_ticket_event(s, ticket, &ev));
  cr_assert_eq(cu.cuEventQuery((CUevent)ev), CUDA_SUCCESS, "a retired ticket's event is complete");
  CU_OK(cuEventDestroy((CUevent)ev));
  assert_no_host_syncs(s);
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, t));
  kd_session_destroy(s);
  CU_OK(cuMemFreeHost(host));
  CU_OK(cuMemFree(flag));
  foreign_close(&f);
}

/* One session behind another's ticket: both wrap the same memory, the
 * first writes it after a spin, the second copies it out. */
Test(gpu_interop, one_session_waits_for_anothers_ticket) {
  kd_session *a = kdt_gpu_session();
  kd_session *b = kdt_gpu_session();
  foreign f;
  foreign_open(a, &f);
  spin_kernel k;
  KDT_OK(kd_with_raw(a, "test.load", load_spin, &k));
  CUdeviceptr flag = zeroed_ints(&f, 1);
  released r = {0};
  kd_external_desc d = wrap_desc(flag, KD_I32, 1, &r);
  kd_tensor in_a, in_b, copy;
  KDT_OK(kd_tensor_wrap(a, &d, &in_a));
  d.flags = KD_EXTERNAL_READ_ONLY;
  KDT_OK(kd_tensor_wrap(b, &d, &in_b));
  kd_tensor_desc one = {.dtype = KD_I32, .rank = 1, .shape = {1}};
  KDT_OK(kd_tensor_create(b, &one, &copy));
  kd_graph *ga = spin_graph(a, &k, 200ull * 1000 * 1000, in_a);
  kd_graph *gb;
  KDT_OK(kd_graph_create(b, &gb));
  KDT_OK(kd_graph_op_copy(gb, "copy", kd_whole(copy), kd_whole(in_b), NULL));
  int32_t got = -1;
  kd_sink *sink;
  KDT_OK(kd_graph_sink(gb, "copy", copy, &got, sizeof got, &sink));
  kd_ticket ticket;
  KDT_OK(kd_graph_submit(ga, &ticket));
  double t0 = now_ms();
  KDT_OK(kd_session_wait_ticket(b, a, ticket));
  KDT_OK(kd_graph_submit(gb, NULL));
  double t1 = now_ms();
  int done = 1;
  KDT_OK(kd_ticket_done(a, ticket, &done));
  fprintf(stderr, "interop witness: kd_session_wait_ticket and b's submit behind a's 200 ms kernel: %.3f ms\n",
          t1 - t0);
  if (kdt_timed()) cr_assert_eq(done, 0, "a's kernel still spins");
  if (kdt_timed()) cr_assert_lt(t1 - t0, 20.0, "the wait and b's submit took %.1f ms behind a 200 ms kernel", t1 - t0);
  KDT_OK(kd_sink_wait(sink));
  cr_assert_eq(got, 1, "b read the memory before a's kernel wrote it");
  kd_session_stats sb;
  KDT_OK(kd_session_stats_get(b, &sb));
  cr_assert_eq(sb.stream_event_waits, 1);
  /* Retired now: a wait on it adds nothing. */
  while (!done) KDT_OK(kd_ticket_done(a, ticket, &done));
  KDT_OK(kd_session_wait_ticket(b, a, ticket));
  KDT_OK(kd_session_stats_get(b, &sb));
  cr_assert_eq(sb.stream_event_waits, 1, "a retired ticket adds no wait");
  assert_no_host_syncs(a);
  assert_no_host_syncs(b);
  kd_graph_destroy(ga);
  kd_graph_destroy(gb);
  KDT_OK(kd_tensor_release(a, in_a));
  KDT_OK(kd_tensor_release(b, in_b));
  KDT_OK(kd_tensor_release(b, copy));
  kd_session_destroy(b);
  kd_session_destroy(a);
  cr_assert_eq(r.calls, 2, "each session released its wrap once");
  CU_OK(cuMemFree(flag));
  foreign_close(&f);
}
