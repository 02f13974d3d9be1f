/* SPDX-License-Identifier: Apache-2.0 */
/* ThreadSanitizer lane for the HOST executor, outside Criterion (whose
 * runner does not work under TSan): seeded random graphs over a pool of
 * tensors and strided views, run with random per-node delays on the thread
 * pool, compared bit for bit with a sequential interpretation; plus
 * concurrent submit / sink-wait / release from two threads, and a graph
 * wider than the pool's ring with an upload queued behind it, and built-ins
 * split across workers while tensors are rebound. Exit 0 only
 * when every result matches; TSan itself fails the run on a race. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kdag/kdag.h"
#include "kernels/host.h"

#define POOL 4
#define LEN 64
#define GRAPHS 300

#define CHECK(call)                                                                              \
  do {                                                                                           \
    kd_status st_ = (call);                                                                      \
    if (st_) {                                                                                   \
      fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call, kd_status_name(st_),     \
              kd_last_error());                                                                  \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

static uint32_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return (uint32_t)(*s >> 16);
}

static kd_view view(uint64_t *r, kd_tensor t, int64_t n) {
  int64_t stride = 1 + next(r) % 3;
  while ((n - 1) * stride >= LEN) --stride;
  int64_t room = LEN - ((n - 1) * stride + 1);
  kd_view v = {.tensor = t, .rank = 1, .offset = room ? next(r) % (room + 1) : 0, .shape = {n}, .strides = {stride}};
  return v;
}

static kd_kview kv(int32_t *base, const kd_view *v) {
  kd_kview k;
  memset(&k, 0, sizeof k);
  k.base = (unsigned long long)(uintptr_t)(base + v->offset);
  k.rank = 1;
  k.shape[0] = v->shape[0];
  k.strides[0] = v->strides[0];
  return k;
}

static int random_graphs(kd_session *s) {
  kd_tensor t[POOL];
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {LEN}};
  for (int i = 0; i < POOL; ++i) CHECK(kd_tensor_create(s, &d, &t[i]));
  static int32_t ref[POOL][LEN], got[POOL][LEN];
  uint64_t r = 0x2545F4914F6CDD1Dull;
  for (int gi = 0; gi < GRAPHS; ++gi) {
    for (int i = 0; i < POOL; ++i) {
      for (int j = 0; j < LEN; ++j) ref[i][j] = (int32_t)(next(&r) % 1000) - 500;
      CHECK(kd_tensor_upload(s, t[i], ref[i], sizeof ref[i]));
    }
    kd_graph *g;
    CHECK(kd_graph_create(s, &g));
    for (int k = 0, count = 1 + (int)(next(&r) % 14); k < count; ++k) {
      int op = (int)(next(&r) % 3);
      int64_t n = 1 + next(&r) % 24;
      int a = (int)(next(&r) % POOL), b = (int)(next(&r) % POOL), c = (int)(next(&r) % POOL);
      kd_view va = view(&r, t[a], n), vb = view(&r, t[b], n), vc = view(&r, t[c], n);
      int32_t value = (int32_t)(next(&r) % 100);
      kd_status st = op == 0 ? kd_graph_op_fill(g, "fill", va, &value, NULL)
                     : op == 1 ? kd_graph_op_copy(g, "copy", va, vb, NULL)
                               : kd_graph_op_add(g, "add", va, vb, vc, NULL);
      if (st == KD_ERR_ALIASING) continue;
      CHECK(st);
      kd_kpattern p = {{(unsigned long long)(uint32_t)value, 0}};
      if (op == 0) kd_host_fill(4, kv(ref[a], &va), p);
      else if (op == 1) kd_host_copy(4, kv(ref[a], &va), kv(ref[b], &vb));
      else kd_host_add(KD_K_I32, kv(ref[a], &va), kv(ref[b], &vb), kv(ref[c], &vc));
    }
    kd_sink *sinks[POOL];
    for (int i = 0; i < POOL; ++i) CHECK(kd_graph_sink(g, "out", t[i], got[i], sizeof got[i], &sinks[i]));
    CHECK(kd_graph_submit(g, NULL));
    for (int i = 0; i < POOL; ++i) CHECK(kd_sink_wait(sinks[i]));
    kd_graph_destroy(g);
    if (memcmp(got, ref, sizeof got)) {
      fprintf(stderr, "graph %d differs from the sequential interpretation\n", gi);
      return 1;
    }
  }
  return 0;
}

typedef struct shared {
  kd_session *s;
  kd_graph *g;
  kd_sink *sink;
  int rc;
} shared;

static void *submitter(void *p) {
  shared *sh = p;
  for (int i = 0; i < 200 && !sh->rc; ++i)
    if (kd_graph_submit(sh->g, NULL)) sh->rc = 1;
  return NULL;
}

static int two_threads(kd_session *s) {
  int32_t v[256];
  for (int i = 0; i < 256; ++i) v[i] = i;
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {256}};
  kd_tensor a, b;
  CHECK(kd_tensor_from_host(s, &d, v, sizeof v, &a));
  CHECK(kd_tensor_create(s, &d, &b));
  int32_t out[256];
  shared sh = {s, NULL, NULL, 0};
  CHECK(kd_graph_create(s, &sh.g));
  CHECK(kd_graph_op_add(sh.g, "b=a+a", kd_whole(b), kd_whole(a), kd_whole(a), NULL));
  CHECK(kd_graph_sink(sh.g, "b", b, out, sizeof out, &sh.sink));
  CHECK(kd_tensor_release(s, a));
  CHECK(kd_tensor_release(s, b));
  pthread_t th;
  if (pthread_create(&th, NULL, submitter, &sh)) return 1;
  for (int i = 0; i < 200; ++i) {
    kd_status st = kd_sink_wait(sh.sink); /* may find nothing submitted yet */
    if (st && st != KD_ERR_INVALID_ARGUMENT) CHECK(st);
    uint32_t pending;
    CHECK(kd_session_reap(s, &pending));
  }
  pthread_join(th, NULL);
  CHECK(kd_graph_submit(sh.g, NULL));
  CHECK(kd_sink_wait(sh.sink));
  for (int i = 0; i < 256; ++i)
    if (out[i] != 2 * i) {
      fprintf(stderr, "out[%d] = %d\n", i, out[i]);
      return 1;
    }
  kd_graph_destroy(sh.g);
  return sh.rc;
}

/* More ready nodes than the pool's ring holds (the overflow stack), an
 * upload queued behind them while they run (a snapshot run), and every
 * handle released right after the submit. */
static int wide_then_upload(kd_session *s) {
  enum { WIDE = 6000 };
  static int32_t init[WIDE], later[WIDE], got_w[WIDE], got_y[WIDE];
  for (int i = 0; i < WIDE; ++i) init[i] = i, later[i] = -i;
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {WIDE}};
  kd_tensor w, x, y;
  CHECK(kd_tensor_create(s, &d, &w));
  CHECK(kd_tensor_from_host(s, &d, init, sizeof init, &x));
  CHECK(kd_tensor_create(s, &d, &y));
  kd_graph *g;
  CHECK(kd_graph_create(s, &g));
  for (int i = 0; i < WIDE; ++i) {
    kd_view one = {.tensor = w, .rank = 1, .offset = i, .shape = {1}, .strides = {1}};
    int32_t v = 3 * i;
    CHECK(kd_graph_op_fill(g, "w[i]", one, &v, NULL));
  }
  CHECK(kd_graph_op_copy(g, "y = x", kd_whole(y), kd_whole(x), NULL));
  kd_sink *sw, *sy;
  CHECK(kd_graph_sink(g, "w", w, got_w, sizeof got_w, &sw));
  CHECK(kd_graph_sink(g, "y", y, got_y, sizeof got_y, &sy));
  CHECK(kd_graph_submit(g, NULL));
  CHECK(kd_tensor_upload(s, x, later, sizeof later)); /* after the copy, without waiting for it */
  memset(later, 0, sizeof later);
  CHECK(kd_tensor_release(s, w));
  CHECK(kd_tensor_release(s, y));
  CHECK(kd_sink_wait(sw));
  CHECK(kd_sink_wait(sy));
  for (int i = 0; i < WIDE; ++i)
    if (got_w[i] != 3 * i || got_y[i] != i) {
      fprintf(stderr, "element %d: w %d (want %d), y %d (want %d)\n", i, got_w[i], 3 * i, got_y[i], i);
      return 1;
    }
  CHECK(kd_tensor_download(s, x, got_y, sizeof got_y));
  for (int i = 0; i < WIDE; ++i)
    if (got_y[i] != -i) {
      fprintf(stderr, "x[%d] = %d after the upload, want %d\n", i, got_y[i], -i);
      return 1;
    }
  CHECK(kd_tensor_release(s, x));
  kd_graph_destroy(g);
  return 0;
}

/* Built-ins large enough to be split into slices that idle workers take
 * (a session without jitter, so workers are idle as they start), several
 * independent chains of them at once, rebinding between submissions. */
static int split_builtins(void) {
  enum { N = 70001, CH = 3 };
  static int32_t a[CH][N], got[CH][N];
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  kd_session *s;
  CHECK(kd_session_create(&o, &s));
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {N}};
  kd_tensor x[CH], y[CH], z[CH], z2[CH];
  kd_graph *g;
  CHECK(kd_graph_create(s, &g));
  kd_sink *sk[CH];
  for (int c = 0; c < CH; ++c) {
    for (int i = 0; i < N; ++i) a[c][i] = i * (c + 1);
    CHECK(kd_tensor_from_host(s, &d, a[c], sizeof a[c], &x[c]));
    CHECK(kd_tensor_create(s, &d, &y[c]));
    CHECK(kd_tensor_create(s, &d, &z[c]));
    CHECK(kd_tensor_create(s, &d, &z2[c]));
    CHECK(kd_graph_op_copy(g, "y = x", kd_whole(y[c]), kd_whole(x[c]), NULL));
    CHECK(kd_graph_op_add(g, "z = y + x", kd_whole(z[c]), kd_whole(y[c]), kd_whole(x[c]), NULL));
    CHECK(kd_graph_sink(g, "z", z[c], got[c], sizeof got[c], &sk[c]));
  }
  for (int round = 0; round < 6; ++round) {
    CHECK(kd_graph_submit(g, NULL));
    for (int c = 0; c < CH; ++c) {
      if (round % 2 == 0) CHECK(kd_graph_rebind(g, z[c], z2[c])); /* while the run may still go on */
      else CHECK(kd_graph_rebind(g, z2[c], z[c]));
    }
    for (int c = 0; c < CH; ++c) {
      CHECK(kd_sink_wait(sk[c]));
      for (int i = 0; i < N; ++i)
        if (got[c][i] != 2 * a[c][i]) {
          fprintf(stderr, "round %d, chain %d, element %d: %d, want %d\n", round, c, i, got[c][i], 2 * a[c][i]);
          return 1;
        }
    }
  }
  kd_session_stats k;
  CHECK(kd_session_stats_get(s, &k));
  fprintf(stderr, "split_builtins: %llu built-ins split\n", (unsigned long long)k.host_splits);
  kd_graph_destroy(g);
  for (int c = 0; c < CH; ++c) {
    CHECK(kd_tensor_release(s, x[c]));
    CHECK(kd_tensor_release(s, y[c]));
    CHECK(kd_tensor_release(s, z[c]));
    CHECK(kd_tensor_release(s, z2[c]));
  }
  kd_session_destroy(s);
  return 0;
}

int main(void) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  o.flags = KD_SESSION_HOST_JITTER;
  kd_session *s;
  CHECK(kd_session_create(&o, &s));
  int rc = random_graphs(s);
  if (!rc) rc = two_threads(s);
  if (!rc) rc = wide_then_upload(s);
  kd_session_destroy(s);
  if (!rc) rc = split_builtins();
  printf("%s\n", rc ? "tsan_host_executor: FAILED" : "tsan_host_executor: 4 passed, 0 failed");
  return rc;
}
