/* SPDX-License-Identifier: Apache-2.0 */
/* Host lane: tensor handles, upload/download, views, on a HOST session. */
#include <pthread.h>
#include <time.h>

#include "base/serial.h"
#include "base/stamp.h"
#include "base/handle.h"
#include "kdag_test.h"

static kd_tensor vec(kd_session *s, int64_t n) {
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {n}};
  kd_tensor t;
  KDT_OK(kd_tensor_create(s, &d, &t));
  return t;
}

Test(host_tensor, upload_download_roundtrip_copies_at_the_call) {
  kd_session *s = kdt_host_session();
  float in[100], out[100];
  kdt_fill_random(in, 100, 1);
  kd_tensor t = vec(s, 100);
  KDT_OK(kd_tensor_upload(s, t, in, sizeof in));
  float keep = in[3];
  in[3] = 42.0f; /* reuse right after the call: the tensor keeps the old value */
  KDT_OK(kd_tensor_download(s, t, out, sizeof out));
  cr_assert_eq(out[3], keep);
  cr_assert_eq(memcmp(out + 4, in + 4, sizeof(float) * 96), 0);
  KDT_OK(kd_tensor_release(s, t));
  kd_session_destroy(s);
}

/* A tensor with no element is initialised from its creation (found by the
 * graph fuzzer: an upload of its 0 bytes wrote nothing, so a download
 * after it was refused as reading a tensor never written). */
Test(host_tensor, an_empty_tensor_reads_as_initialised) {
  kd_session *s = kdt_host_session();
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 2, .shape = {3, 0}};
  kd_tensor empty, one = vec(s, 1);
  KDT_OK(kd_tensor_create(s, &d, &empty));
  float host[1];
  KDT_OK(kd_tensor_download(s, empty, host, 0));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_sum(g, "sum of nothing", kd_whole(one), kd_whole(empty), NULL));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_tensor_download(s, one, host, sizeof host));
  cr_assert_eq(host[0], 0.0f);
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, empty));
  KDT_OK(kd_tensor_release(s, one));
  kd_session_destroy(s);
}

Test(host_tensor, creation_is_validated) {
  kd_session *s = kdt_host_session();
  kd_tensor t;
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 9};
  KDT_FAILS(kd_tensor_create(s, &d, &t), KD_ERR_INVALID_ARGUMENT, "rank 9");
  d.rank = 2;
  d.shape[0] = 4;
  d.shape[1] = -1;
  KDT_FAILS(kd_tensor_create(s, &d, &t), KD_ERR_INVALID_ARGUMENT, "shape[1] = -1");
  d.shape[1] = INT64_MAX / 2;
  KDT_FAILS(kd_tensor_create(s, &d, &t), KD_ERR_INVALID_ARGUMENT, "overflows");
  /* Zero elements, but the strides of the whole view would overflow. */
  kd_tensor_desc z = {.dtype = KD_F32, .rank = 3, .shape = {0, 1ll << 40, 1ll << 40}};
  KDT_FAILS(kd_tensor_create(s, &z, &t), KD_ERR_INVALID_ARGUMENT, "overflows at dimension 2");
  d.dtype = (kd_dtype)42;
  d.shape[1] = 2;
  KDT_FAILS(kd_tensor_create(s, &d, &t), KD_ERR_INVALID_ARGUMENT, "dtype 42");
  t.bits = 12345; /* a stale handle: zeroed before anything is checked */
  KDT_FAILS(kd_tensor_create(s, NULL, &t), KD_ERR_INVALID_ARGUMENT, "kd_tensor_create: argument desc is NULL");
  cr_assert_eq(t.bits, 0, "*out is zeroed even when desc is NULL");
  KDT_FAILS(kd_tensor_create(NULL, &d, &t), KD_ERR_INVALID_ARGUMENT, "session is NULL");
  d.dtype = KD_C64;
  d.rank = 8;
  for (int i = 0; i < 8; ++i) d.shape[i] = 2;
  KDT_OK(kd_tensor_create(s, &d, &t));
  kd_tensor_desc info;
  KDT_OK(kd_tensor_info(s, t, &info));
  cr_assert_eq(info.bytes, 256 * 16);
  cr_assert_eq(info.strides[7], 128);
  kd_session_destroy(s); /* frees the unreleased tensor */
}

Test(host_tensor, size_mismatch_and_null_are_rejected) {
  kd_session *s = kdt_host_session();
  kd_tensor t = vec(s, 4);
  float buf[8] = {0};
  KDT_FAILS(kd_tensor_upload(s, t, buf, sizeof buf), KD_ERR_INVALID_ARGUMENT, "bytes is 32");
  KDT_FAILS(kd_tensor_upload(s, t, NULL, 16), KD_ERR_INVALID_ARGUMENT, "kd_tensor_upload: argument host is NULL");
  KDT_FAILS(kd_tensor_download(s, t, buf, 16), KD_ERR_UNINITIALIZED, "never written");
  KDT_OK(kd_tensor_upload(s, t, buf, 16));
  KDT_OK(kd_tensor_download(s, t, buf, 16));
  kd_session_destroy(s);
}

Test(host_tensor, released_handle_is_rejected_never_crashes) {
  kd_session *s = kdt_host_session();
  kd_tensor t = vec(s, 4), copy = t;
  float buf[4] = {1, 2, 3, 4};
  KDT_OK(kd_tensor_release(s, t));
  KDT_FAILS(kd_tensor_upload(s, copy, buf, sizeof buf), KD_ERR_RELEASED, "already released");
  KDT_FAILS(kd_tensor_release(s, copy), KD_ERR_RELEASED, "kd_tensor_release");
  /* The slot is reused by a new tensor: the old handle stays dead. */
  kd_tensor again = vec(s, 4);
  KDT_FAILS(kd_tensor_download(s, copy, buf, sizeof buf), KD_ERR_RELEASED, "already released");
  KDT_OK(kd_tensor_upload(s, again, buf, sizeof buf));
  kd_tensor forged = {.bits = 0};
  KDT_FAILS(kd_tensor_upload(s, forged, buf, sizeof buf), KD_ERR_INVALID_ARGUMENT, "not a kdag tensor handle");
  forged.bits = again.bits + 12345;
  KDT_FAILS(kd_tensor_upload(s, forged, buf, sizeof buf), KD_ERR_INVALID_ARGUMENT, "names no slot");
  /* The kind bits flipped to "module": refused by the bits and by the slot. */
  forged.bits = again.bits ^ (3ull << 44);
  KDT_FAILS(kd_tensor_upload(s, forged, buf, sizeof buf), KD_ERR_INVALID_ARGUMENT, "module handle");
  kd_session_destroy(s);
}

Test(host_tensor, retain_keeps_the_handle_alive) {
  kd_session *s = kdt_host_session();
  kd_tensor t = vec(s, 4);
  KDT_OK(kd_tensor_retain(s, t));
  KDT_OK(kd_tensor_release(s, t));
  kd_tensor_desc d;
  KDT_OK(kd_tensor_info(s, t, &d));
  KDT_OK(kd_tensor_release(s, t));
  KDT_FAILS(kd_tensor_info(s, t, &d), KD_ERR_RELEASED, "released");
  kd_session_destroy(s);
}

Test(host_tensor, handle_of_another_session_is_wrong_session) {
  kd_session *a = kdt_host_session(), *b = kdt_host_session();
  kd_tensor t = vec(a, 4);
  float buf[4] = {0};
  KDT_FAILS(kd_tensor_upload(b, t, buf, sizeof buf), KD_ERR_WRONG_SESSION, "another session");
  KDT_FAILS(kd_tensor_release(b, t), KD_ERR_WRONG_SESSION, "another session");
  KDT_OK(kd_tensor_release(a, t));
  kd_session_destroy(a);
  kd_session_destroy(b);
}

/* Serials are never shared by two live sessions: with every serial taken
 * but one, the next session gets that one, and none is left after it; a
 * session's serial is free again once it is destroyed. (Criterion runs each
 * test in its own process, so the other tests' sessions are not counted.) */
Test(host_tensor, live_sessions_never_share_a_serial) {
  kd_session *a = kdt_host_session();
  kd_tensor ta = vec(a, 4);
  static uint32_t taken[KD_SERIAL_MAX];
  uint32_t n = 0, v;
  while (kd_serial_take(&v, "test") == KD_OK) taken[n++] = v;
  cr_assert_eq(n, KD_SERIAL_MAX - 1, "every serial but session a's was free: %u", n);
  cr_assert_eq(kd_serial_take(&v, "test"), KD_ERR_RESOURCE_EXHAUSTED);
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  kd_session *none = NULL;
  KDT_FAILS(kd_session_create(&o, &none), KD_ERR_RESOURCE_EXHAUSTED, "sessions are open");
  cr_assert_null(none);
  kd_serial_give(taken[--n]);
  kd_session *b = kdt_host_session(); /* the one serial left */
  kd_tensor tb = vec(b, 4);
  cr_assert_neq(ta.bits, tb.bits);
  KDT_FAILS(kd_tensor_release(b, ta), KD_ERR_WRONG_SESSION, "another session");
  KDT_FAILS(kd_tensor_release(a, tb), KD_ERR_WRONG_SESSION, "another session");
  kd_session_destroy(a); /* its serial is free again */
  KDT_OK(kd_serial_take(&v, "test"));
  taken[n++] = v;
  for (uint32_t i = 0; i < n; ++i) kd_serial_give(taken[i]);
  kd_session_destroy(b);
}

/* Stamps never repeat in the process and are never 0, across sessions
 * and past the end of a block (a session's 2^20th holding pass). The old
 * stamps, serial << 40 | a count, ran into the serial's bits after 2^40
 * passes of one session. */
Test(host_tensor, stamps_are_unique_across_sessions_and_blocks) {
  kd_stamps a = {0}, b = {0};
  uint64_t first_a = kd_stamp_next(&a), first_b = kd_stamp_next(&b);
  cr_assert(first_a && first_b && first_a != first_b);
  cr_assert(first_a / KD_STAMP_BLOCK != first_b / KD_STAMP_BLOCK, "each session draws from a block of its own");
  uint64_t last = first_a;
  for (uint64_t i = 1; i < KD_STAMP_BLOCK + 3; ++i) {
    uint64_t v = kd_stamp_next(&a);
    cr_assert(v > last && v >> 63 == 0, "pass %llu: %llu after %llu", (unsigned long long)i,
              (unsigned long long)v, (unsigned long long)last);
    cr_assert(v / KD_STAMP_BLOCK != first_b / KD_STAMP_BLOCK, "never in the other session's block");
    last = v;
  }
}

/* A slot that has used every generation is retired: a handle kept from its
 * first use never names a later object. */
Test(host_tensor, a_slot_is_retired_before_its_generation_wraps) {
  kd_handle_table t;
  kd_handle_table_init(&t, 7);
  int objs[2];
  uint64_t first, h;
  KDT_OK(kd_handle_alloc(&t, KD_HANDLE_TENSOR, &objs[0], &first, "test"));
  kd_handle_free(&t, first);
  for (uint32_t i = 0; i < (1u << 20); ++i) { /* more than the 2^20 - 1 generations */
    KDT_OK(kd_handle_alloc(&t, KD_HANDLE_TENSOR, &objs[1], &h, "test"));
    cr_assert_neq(h, first, "reuse %u gave back the first handle", i);
    kd_handle_free(&t, h);
  }
  void *obj;
  KDT_FAILS(kd_handle_get(&t, first, KD_HANDLE_TENSOR, &obj, "test", "first"), KD_ERR_RELEASED, "released");
  cr_assert_eq(t.count, 2, "the worn-out slot was retired and a second one made");
  kd_handle_table_fini(&t);
}

Test(host_tensor, views_are_bounds_checked_and_classified) {
  kd_session *s = kdt_host_session();
  kd_tensor_desc d = {.dtype = KD_F64, .rank = 2, .shape = {4, 6}};
  kd_tensor m;
  KDT_OK(kd_tensor_create(s, &d, &m));
  kd_view v;
  KDT_OK(kd_view_whole(s, m, &v));
  KDT_FAILS(kd_view_whole(NULL, m, &v), KD_ERR_INVALID_ARGUMENT, "kd_view_whole: kd_tensor_info: argument session");
  cr_assert(kd_view_is_compact(&v));
  KDT_OK(kd_view_check(s, &v));
  /* Columns 2..3: contiguous in column-major order. */
  kd_view cols = {.tensor = m, .rank = 2, .offset = 8, .shape = {4, 2}, .strides = {1, 4}};
  cr_assert(kd_view_is_compact(&cols));
  KDT_OK(kd_view_check(s, &cols));
  /* Even columns: strided, in bounds. */
  kd_view even = {.tensor = m, .rank = 2, .offset = 0, .shape = {4, 3}, .strides = {1, 8}};
  cr_assert_not(kd_view_is_compact(&even));
  KDT_OK(kd_view_check(s, &even));
  /* Row 0: one element per column. */
  kd_view row = {.tensor = m, .rank = 1, .offset = 0, .shape = {6}, .strides = {4}};
  cr_assert_not(kd_view_is_compact(&row));
  kd_view past = {.tensor = m, .rank = 2, .offset = 16, .shape = {4, 3}, .strides = {1, 4}};
  KDT_FAILS(kd_view_check(s, &past), KD_ERR_OUT_OF_BOUNDS, "out of bounds");
  kd_view wraps = {.tensor = m, .rank = 1, .offset = 0, .shape = {3}, .strides = {1ll << 62}};
  KDT_FAILS(kd_view_check(s, &wraps), KD_ERR_OUT_OF_BOUNDS, "overflows");
  /* 2^64 reads of element 0: in bounds, but not a count an int64_t holds. */
  kd_view broadcast = {.tensor = m, .rank = 2, .offset = 0, .shape = {1ll << 32, 1ll << 32}, .strides = {0, 0}};
  KDT_FAILS(kd_view_check(s, &broadcast), KD_ERR_INVALID_ARGUMENT, "element count overflows at dimension 1");
  /* An empty view is compact whatever its strides, for kd_view_is_compact as for the graph's checks. */
  kd_view empty = {.tensor = m, .rank = 2, .offset = 0, .shape = {3, 0}, .strides = {2, 1}};
  cr_assert(kd_view_is_compact(&empty));
  kd_view whole = kd_whole(m); /* a graph node's shorthand, not a view to check */
  KDT_FAILS(kd_view_check(s, &whole), KD_ERR_INVALID_ARGUMENT, "kd_view_whole");
  /* Rank 1 has a quick path: its edges answer as the full check does. */
  kd_view last = {.tensor = m, .rank = 1, .offset = 20, .shape = {2}, .strides = {3}};
  KDT_OK(kd_view_check(s, &last)); /* reaches element 23 of 24 */
  last.strides[0] = 4;
  KDT_FAILS(kd_view_check(s, &last), KD_ERR_OUT_OF_BOUNDS, "reaches element 24 of a tensor of 24");
  kd_view back = {.tensor = m, .rank = 1, .offset = 3, .shape = {2}, .strides = {-1}};
  KDT_FAILS(kd_view_check(s, &back), KD_ERR_INVALID_ARGUMENT, "strides[0] is negative");
  kd_view big = {.tensor = m, .rank = 1, .offset = 0, .shape = {1ll << 40}, .strides = {0}};
  KDT_OK(kd_view_check(s, &big)); /* a broadcast read: every index names element 0 */
  kd_view neg = {.tensor = m, .rank = 1, .offset = -1, .shape = {2}, .strides = {1}};
  KDT_FAILS(kd_view_check(s, &neg), KD_ERR_INVALID_ARGUMENT, "negative");
  /* An empty view touches nothing, but a span is built from its offset: at
   * most one past the last element. */
  kd_view empty_end = {.tensor = m, .rank = 1, .offset = 24, .shape = {0}, .strides = {1}};
  KDT_OK(kd_view_check(s, &empty_end));
  kd_view empty_far = {.tensor = m, .rank = 1, .offset = 1ll << 60, .shape = {0}, .strides = {1}};
  KDT_FAILS(kd_view_check(s, &empty_far), KD_ERR_OUT_OF_BOUNDS, "an empty view at offset");
  /* A zero extent empties the view whatever its other extents and strides:
   * nothing of it is outside the tensor, nor can it overflow. */
  kd_view empty_wide = {.tensor = m, .rank = 2, .offset = 0, .shape = {0, 1ll << 62}, .strides = {1, 4}};
  KDT_OK(kd_view_check(s, &empty_wide));
  kd_view empty_last = {.tensor = m, .rank = 3, .offset = 0, .shape = {1ll << 40, 1ll << 40, 0}, .strides = {1, 1, 1}};
  KDT_OK(kd_view_check(s, &empty_last));
  /* Classifying never reads past the view's dimensions, nor overflows. */
  kd_view ranked = cols;
  ranked.rank = KD_MAX_RANK + 1;
  cr_assert_not(kd_view_is_compact(&ranked));
  ranked.rank = -1; /* kd_whole's, unresolved */
  cr_assert_not(kd_view_is_compact(&ranked));
  cr_assert_not(kd_view_is_compact(NULL));
  kd_view huge = {.tensor = m, .rank = 3, .offset = 0, .shape = {1ll << 40, 1ll << 40, 2}, .strides = {1, 1ll << 40, 0}};
  cr_assert_not(kd_view_is_compact(&huge));
  kd_session_destroy(s);
}

static kd_status never(kd_raw *raw, void *user) {
  (void)raw;
  *(int *)user = 1;
  return KD_OK;
}

Test(host_tensor, raw_scope_on_host_is_wrong_backend) {
  kd_session *s = kdt_host_session();
  int called = 0;
  KDT_FAILS(kd_with_raw(s, "custom.add", never, &called), KD_ERR_WRONG_BACKEND, "backend session is not CUDA");
  cr_assert_eq(called, 0, "the callback must not run");
  KDT_FAILS(kd_with_raw(s, NULL, never, &called), KD_ERR_INVALID_ARGUMENT, "argument op is NULL");
  kd_session_destroy(s);
}

typedef struct shared_job {
  kd_session *s;
  kd_tensor t;
  float sum;
  kd_status st;
} shared_job;

static void *worker(void *p) {
  shared_job *job = p;
  float data[16];
  for (int i = 0; i < 16; ++i) data[i] = (float)i;
  job->st = kd_tensor_upload(job->s, job->t, data, sizeof data);
  if (!job->st) job->st = kd_tensor_download(job->s, job->t, data, sizeof data);
  for (int i = 0; i < 16; ++i) job->sum += data[i];
  return NULL;
}

Test(host_tensor, a_second_thread_drives_the_session) {
  kd_session *s = kdt_host_session();
  shared_job job = {.s = s, .t = vec(s, 16)};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, worker, &job), 0);
  pthread_join(th, NULL);
  cr_assert_eq(job.st, KD_OK);
  cr_assert_eq(job.sum, 120.0f);
  KDT_OK(kd_tensor_release(s, job.t));
  kd_session_destroy(s);
}

/* ---- memory another library owns (kd_tensor_wrap) ---------------------- */

typedef struct owner {
  int releases;
  kd_status call_inside; /* what a kdag call made from the callback returned */
  kd_session *session;
} owner;

static void owner_release(void *user) {
  owner *o = user;
  o->releases++;
  if (o->session) {
    kd_tensor t;
    kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {1}};
    o->call_inside = kd_tensor_create(o->session, &d, &t);
  }
}

static kd_external_desc wrap_desc(void *data, int64_t n, owner *o) {
  kd_external_desc d;
  kd_external_desc_init(&d);
  d.data = data;
  d.dtype = KD_F32;
  d.rank = 1;
  d.shape[0] = n;
  d.release = owner_release;
  d.release_user = o;
  return d;
}

/* A HOST session computes in the owner's memory itself, and hands it back
 * (one release call) once the handle is released and the work is done. */
Test(host_tensor, wrapped_memory_is_used_in_place_and_handed_back_once) {
  kd_session *s = kdt_host_session();
  enum { N = 1000 };
  /* aligned_alloc: a size that is a multiple of the alignment */
  float *x = aligned_alloc(64, 1024 * sizeof(float)), *y = aligned_alloc(64, 1024 * sizeof(float)), total = 0;
  for (int i = 0; i < N; ++i) x[i] = (float)i, y[i] = 1;
  owner ox = {0}, oy = {0};
  kd_external_desc dx = wrap_desc(x, N, &ox), dy = wrap_desc(y, N, &oy);
  dx.flags = KD_EXTERNAL_READ_ONLY;
  kd_tensor tx, ty, tsum;
  KDT_OK(kd_tensor_wrap(s, &dx, &tx));
  KDT_OK(kd_tensor_wrap(s, &dy, &ty));
  kd_tensor_desc one = {.dtype = KD_F32, .rank = 1, .shape = {1}};
  KDT_OK(kd_tensor_create(s, &one, &tsum));
  kd_tensor_desc info;
  KDT_OK(kd_tensor_info(s, tx, &info));
  cr_assert_eq(info.shape[0], N);
  cr_assert_eq(info.residency, KD_RESIDENCY_DEVICE);

  kd_graph *g;
  kd_sink *sink;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_axpy(g, "y += 2x", kd_whole(ty), kd_whole(tx), 2.0, NULL)); /* wrapped: initialised */
  KDT_OK(kd_graph_op_sum(g, "sum", kd_whole(tsum), kd_whole(ty), NULL));
  KDT_OK(kd_graph_sink(g, "sum out", tsum, &total, sizeof total, &sink));
  /* Read-only memory is never written, by a node or an upload. */
  KDT_FAILS(kd_graph_op_scale(g, "x *= 2", kd_whole(tx), 2.0, NULL), KD_ERR_INVALID_ARGUMENT,
            "node 'x *= 2' (#3), argument 0: tensor");
  cr_assert(strstr(kd_last_error(), "read-only"), "%s", kd_last_error());
  KDT_FAILS(kd_tensor_upload(s, tx, x, N * sizeof(float)), KD_ERR_INVALID_ARGUMENT, "read-only");
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sink));
  cr_assert_eq(total, (float)N * N);
  cr_assert_eq(y[7], 15.0f, "the owner's memory holds the result: %g", (double)y[7]);
  cr_assert_eq(x[7], 7.0f);

  /* Released by the caller, still held by the graph: not handed back yet. */
  KDT_OK(kd_tensor_release(s, tx));
  KDT_OK(kd_tensor_release(s, ty));
  cr_assert_eq(ox.releases + oy.releases, 0);
  KDT_OK(kd_graph_submit(g, NULL));
  kd_graph_destroy(g); /* the last holder: once its submission is done */
  /* The pool runs it meanwhile: reap until it has, for up to 10 s. */
  for (int polls = 0; ox.releases + oy.releases < 2 && polls < 100000; ++polls) {
    uint32_t pending;
    KDT_OK(kd_session_reap(s, &pending));
    struct timespec pause = {0, 100 * 1000};
    nanosleep(&pause, NULL);
  }
  cr_assert_eq(ox.releases, 1);
  cr_assert_eq(oy.releases, 1);
  cr_assert_eq(y[7], 29.0f, "the second submission ran in place too");
  KDT_OK(kd_tensor_release(s, tsum));
  kd_session_destroy(s);
  cr_assert_eq(ox.releases + oy.releases, 2, "released once each, not again at destroy");
  free(x);
  free(y);
}

/* A release callback must not call kdag; tensors the caller never
 * released are handed back at kd_session_destroy. */
Test(host_tensor, release_callbacks_run_outside_kdag_and_at_destroy) {
  kd_session *s = kdt_host_session();
  float a[4] = {0}, b[4] = {0};
  owner oa = {.session = s}, ob = {0};
  kd_external_desc da = wrap_desc(a, 4, &oa), db = wrap_desc(b, 4, &ob);
  kd_tensor ta, tb;
  KDT_OK(kd_tensor_wrap(s, &da, &ta));
  KDT_OK(kd_tensor_wrap(s, &db, &tb));
  KDT_OK(kd_tensor_release(s, ta)); /* nothing in flight: handed back by this call */
  cr_assert_eq(oa.releases, 1);
  cr_assert_eq(oa.call_inside, KD_ERR_BUSY, "a kdag call from the release callback is refused");
  kd_session_destroy(s); /* tb never released */
  cr_assert_eq(ob.releases, 1);
}

Test(host_tensor, wrap_is_validated) {
  kd_session *s = kdt_host_session();
  float *buf = aligned_alloc(64, 64 * sizeof(float));
  owner o = {0};
  kd_external_desc d = wrap_desc(buf, 16, &o);
  kd_tensor t = {1};
  KDT_FAILS(kd_tensor_wrap(s, NULL, &t), KD_ERR_INVALID_ARGUMENT, "kd_tensor_wrap: argument desc is NULL");
  cr_assert_eq(t.bits, 0);
  KDT_FAILS(kd_tensor_wrap(s, &d, NULL), KD_ERR_INVALID_ARGUMENT, "argument out_tensor is NULL");
  kd_external_desc bad = d;
  bad.struct_size = 0;
  KDT_FAILS(kd_tensor_wrap(s, &bad, &t), KD_ERR_INVALID_ARGUMENT, "desc->struct_size is 0");
  bad = d, bad.data = NULL;
  KDT_FAILS(kd_tensor_wrap(s, &bad, &t), KD_ERR_INVALID_ARGUMENT, "desc->data is NULL");
  bad = d, bad.flags = 1u << 7;
  KDT_FAILS(kd_tensor_wrap(s, &bad, &t), KD_ERR_INVALID_ARGUMENT, "desc->flags");
  bad = d, bad.dtype = (kd_dtype)99;
  KDT_FAILS(kd_tensor_wrap(s, &bad, &t), KD_ERR_INVALID_ARGUMENT, "dtype 99");
  bad = d, bad.data = (char *)buf + 2;
  KDT_FAILS(kd_tensor_wrap(s, &bad, &t), KD_ERR_MISALIGNED, "4-byte f32 elements");
  bad = d, bad.rank = 2, bad.shape[0] = 4, bad.shape[1] = 4, bad.strides[0] = 1, bad.strides[1] = 8;
  KDT_FAILS(kd_tensor_wrap(s, &bad, &t), KD_ERR_NOT_COMPACT, "desc->strides[1] is 8, compact column-major needs 4");
  bad.strides[1] = 4; /* spelled-out compact strides are fine */
  KDT_OK(kd_tensor_wrap(s, &bad, &t));
  KDT_OK(kd_tensor_release(s, t));
  cr_assert_eq(o.releases, 1, "a failed wrap never calls release; the good one did once");
  kd_session_destroy(s);
  free(buf);
}
