/* SPDX-License-Identifier: Apache-2.0 */
/* Communicators and collective nodes on HOST sessions (kdag/comm.h): each
 * collective against its definition on three ranks (sessions of this
 * process, and processes of their own), the order token under jitter,
 * ranks that disagree or never come, and every refusal. tests/gpu_comm_test.c
 * runs the NCCL side on the GPU. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kdag/kdag.h"
#include "comm_graph.h"
#include "kdag_test.h"

#define R 3

typedef struct rank_state {
  kd_session *s;
  kd_comm *c;
  kd_graph *g;
} rank_state;

static void ranks_open(rank_state *rs, int n, uint32_t flags) {
  kd_session *ss[R];
  for (int r = 0; r < n; ++r) {
    rs[r].s = kdt_host_session_flags(flags);
    ss[r] = rs[r].s;
  }
  kd_comm *cs[R];
  KDT_OK(kd_comm_create_all(ss, n, cs));
  for (int r = 0; r < n; ++r) {
    rs[r].c = cs[r];
    int rank = -1, nranks = -1;
    KDT_OK(kd_comm_info(cs[r], &rank, &nranks));
    cr_assert_eq(rank, r);
    cr_assert_eq(nranks, n);
    KDT_OK(kd_graph_create(rs[r].s, &rs[r].g));
  }
}

static void ranks_close(rank_state *rs, int n) {
  for (int r = 0; r < n; ++r) {
    kd_graph_destroy(rs[r].g);
    kd_comm_destroy(rs[r].c);
    kd_session_destroy(rs[r].s);
  }
}

static kd_tensor vec(kd_session *s, kd_dtype t, int64_t n, const void *data) {
  kd_tensor_desc d = {.dtype = t, .rank = 1, .shape = {n}};
  kd_tensor x;
  if (data) KDT_OK(kd_tensor_from_host(s, &d, data, (size_t)n * kd_dtype_size(t), &x));
  else KDT_OK(kd_tensor_create(s, &d, &x));
  return x;
}

/* Rank r's input element i. */
static float xf(int r, int i) { return 0.25f * (float)i + (float)r - 7.0f; }

#define N_AR 200000 /* past one 256 KiB slot: several chunks */
#define N_RS 700
#define N_AG 500
#define N_BC 300
#define N_SR 30000 /* 120 KB: past one 64 KiB mailbox */

typedef struct outs {
  float *sum, *max_inplace, *avg, *rs, *ag, *bc, *ring;
  int32_t *prod;
  kd_sink *sinks[8];
} outs;

static void declare_all(rank_state *st, int r, outs *o) {
  kd_session *s = st->s;
  kd_graph *g = st->g;
  float *x = malloc(sizeof(float) * N_AR), *xs = malloc(sizeof(float) * N_RS * R);
  for (int i = 0; i < N_AR; ++i) x[i] = xf(r, i);
  for (int i = 0; i < N_RS * R; ++i) xs[i] = xf(r, i);
  int32_t xi[64];
  for (int i = 0; i < 64; ++i) xi[i] = (i % 5) - 2 + r;
  kd_tensor tx = vec(s, KD_F32, N_AR, x), tsum = vec(s, KD_F32, N_AR, NULL), ty = vec(s, KD_F32, N_AR, NULL);
  kd_tensor tavg = vec(s, KD_F32, N_AR, NULL), ti = vec(s, KD_I32, 64, xi), tprod = vec(s, KD_I32, 64, NULL);
  kd_tensor trs_in = vec(s, KD_F32, N_RS * R, xs), trs = vec(s, KD_F32, N_RS, NULL);
  kd_tensor tag = vec(s, KD_F32, N_AG * R, NULL), tbc = vec(s, KD_F32, N_BC, NULL), tring = vec(s, KD_F32, N_SR, NULL);
  KDT_OK(kd_graph_all_reduce(g, "sum", st->c, kd_whole(tsum), kd_whole(tx), KD_REDUCE_SUM, NULL));
  KDT_OK(kd_graph_op_copy(g, "y = x", kd_whole(ty), kd_whole(tx), NULL));
  KDT_OK(kd_graph_all_reduce(g, "max in place", st->c, kd_whole(ty), kd_whole(ty), KD_REDUCE_MAX, NULL));
  KDT_OK(kd_graph_all_reduce(g, "avg", st->c, kd_whole(tavg), kd_whole(tx), KD_REDUCE_AVG, NULL));
  KDT_OK(kd_graph_all_reduce(g, "prod", st->c, kd_whole(tprod), kd_whole(ti), KD_REDUCE_PROD, NULL));
  KDT_OK(kd_graph_reduce_scatter(g, "rs", st->c, kd_whole(trs), kd_whole(trs_in), KD_REDUCE_SUM, NULL));
  kd_view head = {.tensor = tx, .rank = 1, .offset = 0, .shape = {N_AG}, .strides = {1}};
  KDT_OK(kd_graph_all_gather(g, "ag", st->c, kd_whole(tag), head, NULL));
  KDT_OK(kd_graph_op_fill(g, "bc = rank", kd_whole(tbc), &(float){(float)(10 * r + 1)}, NULL));
  KDT_OK(kd_graph_broadcast(g, "bc", st->c, kd_whole(tbc), 1, NULL));
  kd_view ring_src = {.tensor = tx, .rank = 1, .offset = 7, .shape = {N_SR}, .strides = {1}};
  KDT_OK(kd_graph_send_recv(g, "ring", st->c, ring_src, (r + 1) % R, kd_whole(tring), (r + R - 1) % R, NULL));
  o->sum = malloc(sizeof(float) * N_AR);
  o->max_inplace = malloc(sizeof(float) * N_AR);
  o->avg = malloc(sizeof(float) * N_AR);
  o->rs = malloc(sizeof(float) * N_RS);
  o->ag = malloc(sizeof(float) * N_AG * R);
  o->bc = malloc(sizeof(float) * N_BC);
  o->ring = malloc(sizeof(float) * N_SR);
  o->prod = malloc(sizeof(int32_t) * 64);
  KDT_OK(kd_graph_sink(g, "sum", tsum, o->sum, sizeof(float) * N_AR, &o->sinks[0]));
  KDT_OK(kd_graph_sink(g, "max", ty, o->max_inplace, sizeof(float) * N_AR, &o->sinks[1]));
  KDT_OK(kd_graph_sink(g, "avg", tavg, o->avg, sizeof(float) * N_AR, &o->sinks[2]));
  KDT_OK(kd_graph_sink(g, "rs", trs, o->rs, sizeof(float) * N_RS, &o->sinks[3]));
  KDT_OK(kd_graph_sink(g, "ag", tag, o->ag, sizeof(float) * N_AG * R, &o->sinks[4]));
  KDT_OK(kd_graph_sink(g, "bc", tbc, o->bc, sizeof(float) * N_BC, &o->sinks[5]));
  KDT_OK(kd_graph_sink(g, "ring", tring, o->ring, sizeof(float) * N_SR, &o->sinks[6]));
  KDT_OK(kd_graph_sink(g, "prod", tprod, o->prod, sizeof(int32_t) * 64, &o->sinks[7]));
  kd_tensor all[] = {tx, tsum, ty, tavg, ti, tprod, trs_in, trs, tag, tbc, tring};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; ++k) KDT_OK(kd_tensor_release(s, all[k]));
  free(x);
  free(xs);
}

static void check_all(int r, const outs *o) {
  for (int i = 0; i < N_AR; ++i) {
    float want = 0, mx = xf(0, i);
    for (int k = 0; k < R; ++k) want += xf(k, i); /* in rank order, as every rank adds */
    for (int k = 1; k < R; ++k) mx = xf(k, i) > mx ? xf(k, i) : mx;
    cr_assert_eq(o->sum[i], want, "rank %d: sum[%d] = %g, want %g", r, i, o->sum[i], want);
    cr_assert_eq(o->max_inplace[i], mx, "rank %d: max[%d] = %g, want %g", r, i, o->max_inplace[i], mx);
    cr_assert_eq(o->avg[i], want / (float)R, "rank %d: avg[%d] = %g", r, i, o->avg[i]);
  }
  for (int i = 0; i < 64; ++i) {
    int32_t want = 1;
    for (int k = 0; k < R; ++k) want *= (i % 5) - 2 + k;
    cr_assert_eq(o->prod[i], want, "rank %d: prod[%d] = %d, want %d", r, i, o->prod[i], want);
  }
  for (int i = 0; i < N_RS; ++i) {
    float want = 0;
    for (int k = 0; k < R; ++k) want += xf(k, r * N_RS + i);
    cr_assert_eq(o->rs[i], want, "rank %d: rs[%d] = %g, want %g", r, i, o->rs[i], want);
  }
  for (int k = 0; k < R; ++k)
    for (int i = 0; i < N_AG; ++i)
      cr_assert_eq(o->ag[k * N_AG + i], xf(k, i), "rank %d: ag[%d]", r, k * N_AG + i);
  for (int i = 0; i < N_BC; ++i) cr_assert_eq(o->bc[i], 11.0f, "rank %d: bc[%d] = %g", r, i, o->bc[i]);
  for (int i = 0; i < N_SR; ++i)
    cr_assert_eq(o->ring[i], xf((r + R - 1) % R, 7 + i), "rank %d: ring[%d] = %g", r, i, o->ring[i]);
}

static void free_outs(outs *o) {
  free(o->sum);
  free(o->max_inplace);
  free(o->avg);
  free(o->rs);
  free(o->ag);
  free(o->bc);
  free(o->ring);
  free(o->prod);
}

Test(host_comm, every_collective_matches_its_definition_on_three_ranks) {
  rank_state rs[R];
  ranks_open(rs, R, KD_SESSION_HOST_JITTER); /* independent nodes in a random order: only the token orders them */
  outs o[R];
  for (int r = 0; r < R; ++r) declare_all(&rs[r], r, &o[r]);
  for (int round = 0; round < 2; ++round) { /* one thread submits every rank: HOST collectives wait on workers */
    for (int r = 0; r < R; ++r) KDT_OK(kd_graph_submit(rs[r].g, NULL));
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 8; ++k) KDT_OK(kd_sink_wait(o[r].sinks[k]));
    for (int r = 0; r < R; ++r) check_all(r, &o[r]);
  }
  for (int r = 0; r < R; ++r) free_outs(&o[r]);
  ranks_close(rs, R);
}

Test(host_comm, collectives_of_one_communicator_keep_the_declared_order) {
  /* Twelve independent all-reduces of different sizes: run out of order,
   * the ranks would disagree on sizes and fail. */
  rank_state rs[2];
  ranks_open(rs, 2, KD_SESSION_HOST_JITTER);
  float got[2][12][40];
  kd_sink *sinks[2][12];
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < 12; ++k) {
      float x[40];
      for (int i = 0; i < 40; ++i) x[i] = (float)(r * 100 + k + i);
      kd_tensor t = vec(rs[r].s, KD_F32, k + 1, x), sum = vec(rs[r].s, KD_F32, k + 1, NULL);
      KDT_OK(kd_graph_all_reduce(rs[r].g, "ar", rs[r].c, kd_whole(sum), kd_whole(t), KD_REDUCE_SUM, NULL));
      KDT_OK(kd_graph_sink(rs[r].g, "out", sum, got[r][k], sizeof(float) * (size_t)(k + 1), &sinks[r][k]));
      KDT_OK(kd_tensor_release(rs[r].s, t));
      KDT_OK(kd_tensor_release(rs[r].s, sum));
    }
  for (int round = 0; round < 3; ++round) {
    for (int r = 0; r < 2; ++r) KDT_OK(kd_graph_submit(rs[r].g, NULL));
    for (int r = 0; r < 2; ++r)
      for (int k = 0; k < 12; ++k) {
        KDT_OK(kd_sink_wait(sinks[r][k]));
        for (int i = 0; i <= k; ++i)
          cr_assert_eq(got[r][k][i], (float)(100 + 2 * (k + i)), "rank %d, all-reduce %d, [%d]", r, k, i);
      }
  }
  ranks_close(rs, 2);
}

Test(host_comm, ranks_that_disagree_fail_together_and_their_sessions_with_them) {
  rank_state rs[2];
  ranks_open(rs, 2, 0);
  kd_sink *sinks[2];
  float out[16];
  for (int r = 0; r < 2; ++r) {
    float x[16] = {0};
    kd_tensor t = vec(rs[r].s, KD_F32, r ? 16 : 8, x);
    KDT_OK(kd_graph_all_reduce(rs[r].g, "mismatched", rs[r].c, kd_whole(t), kd_whole(t), KD_REDUCE_SUM, NULL));
    KDT_OK(kd_graph_sink(rs[r].g, "out", t, out, sizeof(float) * (r ? 16 : 8), &sinks[r]));
    KDT_OK(kd_tensor_release(rs[r].s, t));
  }
  for (int r = 0; r < 2; ++r) KDT_OK(kd_graph_submit(rs[r].g, NULL));
  for (int r = 0; r < 2; ++r) {
    KDT_FAILS(kd_sink_wait(sinks[r]), KD_ERR_COMM_FAILED, "the ranks disagree");
    cr_assert(strstr(kd_last_error(), "all_reduce of 8 f32 elements") && strstr(kd_last_error(), "of 16 f32"),
              "%s", kd_last_error());
    cr_assert(strstr(kd_last_error(), "all_reduce node 'mismatched'"), "%s", kd_last_error());
    kd_graph *g2;
    KDT_FAILS(kd_graph_create(rs[r].s, &g2), KD_ERR_COMM_FAILED, "unusable after a communicator failed");
  }
  ranks_close(rs, 2); /* the release calls still work */
}

Test(host_comm, a_rank_that_never_comes_times_out) {
  setenv("KDAG_COMM_TIMEOUT_S", "0.5", 1);
  rank_state rs[2];
  ranks_open(rs, 2, 0);
  unsetenv("KDAG_COMM_TIMEOUT_S");
  float x[4] = {1, 2, 3, 4}, out[4];
  kd_tensor t = vec(rs[0].s, KD_F32, 4, x);
  kd_sink *sink;
  KDT_OK(kd_graph_broadcast(rs[0].g, "alone", rs[0].c, kd_whole(t), 0, NULL));
  KDT_OK(kd_graph_sink(rs[0].g, "out", t, out, sizeof out, &sink));
  KDT_OK(kd_tensor_release(rs[0].s, t));
  KDT_OK(kd_graph_submit(rs[0].g, NULL)); /* rank 1 submits nothing */
  KDT_FAILS(kd_sink_wait(sink), KD_ERR_COMM_FAILED, "rank 1 did not arrive within 0.5 s");
  ranks_close(rs, 2);
}

Test(host_comm, bad_inputs_are_refused_naming_the_argument) {
  rank_state rs[2];
  ranks_open(rs, 2, 0);
  kd_session *s = rs[0].s;
  kd_graph *g = rs[0].g;
  kd_comm *c = rs[0].c;
  kd_tensor a = vec(s, KD_F32, 8, NULL), b = vec(s, KD_F32, 8, NULL), i8 = vec(s, KD_I32, 8, NULL);
  kd_tensor big = vec(s, KD_F32, 16, NULL), z = vec(s, KD_C32, 8, NULL), other = vec(rs[1].s, KD_F32, 8, NULL);
  float zero[16] = {0};
  KDT_OK(kd_tensor_upload(s, a, zero, sizeof(float) * 8));
  KDT_OK(kd_tensor_upload(s, big, zero, sizeof zero));
  KDT_FAILS(kd_graph_all_reduce(g, "n", NULL, kd_whole(a), kd_whole(b), KD_REDUCE_SUM, NULL), KD_ERR_INVALID_ARGUMENT,
            "argument comm is NULL");
  KDT_FAILS(kd_graph_all_reduce(g, "n", rs[1].c, kd_whole(a), kd_whole(b), KD_REDUCE_SUM, NULL),
            KD_ERR_WRONG_SESSION, "communicator of another session");
  KDT_FAILS(kd_graph_all_reduce(g, "n", c, kd_whole(a), kd_whole(other), KD_REDUCE_SUM, NULL), KD_ERR_WRONG_SESSION,
            "argument src");
  KDT_FAILS(kd_graph_all_reduce(g, "n", c, kd_whole(i8), kd_whole(a), KD_REDUCE_SUM, NULL), KD_ERR_INVALID_ARGUMENT,
            "dst is i32 and src f32");
  KDT_FAILS(kd_graph_all_reduce(g, "n", c, kd_whole(a), kd_whole(big), KD_REDUCE_SUM, NULL), KD_ERR_INVALID_ARGUMENT,
            "dst has 8 elements and src 16");
  KDT_FAILS(kd_graph_all_reduce(g, "n", c, kd_whole(i8), kd_whole(i8), KD_REDUCE_AVG, NULL), KD_ERR_INVALID_ARGUMENT,
            "i32 elements have no average");
  KDT_FAILS(kd_graph_all_reduce(g, "n", c, kd_whole(z), kd_whole(z), KD_REDUCE_MAX, NULL), KD_ERR_INVALID_ARGUMENT,
            "c32 elements have no ordered");
  KDT_FAILS(kd_graph_all_reduce(g, "n", c, kd_whole(a), kd_whole(a), (kd_reduce)9, NULL), KD_ERR_INVALID_ARGUMENT,
            "op is 9");
  KDT_FAILS(kd_graph_reduce_scatter(g, "n", c, kd_whole(a), kd_whole(a), KD_REDUCE_SUM, NULL),
            KD_ERR_INVALID_ARGUMENT, "src must have nranks times dst's");
  KDT_FAILS(kd_graph_all_gather(g, "n", c, kd_whole(a), kd_whole(a), NULL), KD_ERR_INVALID_ARGUMENT,
            "dst must have nranks times src's");
  KDT_FAILS(kd_graph_broadcast(g, "n", c, kd_whole(a), 2, NULL), KD_ERR_INVALID_ARGUMENT, "argument root is 2");
  KDT_FAILS(kd_graph_send_recv(g, "n", c, kd_whole(a), 2, kd_whole(b), 1, NULL), KD_ERR_INVALID_ARGUMENT,
            "send_to is 2, not a rank");
  KDT_OK(kd_graph_send_recv(g, "nothing to move", c, kd_whole(a), KD_NO_PEER, kd_whole(b), KD_NO_PEER, NULL));
  KDT_FAILS(kd_graph_send_recv(g, "n", c, kd_whole(a), 1, kd_whole(b), -5, NULL), KD_ERR_INVALID_ARGUMENT,
            "recv_from is -5");
  kd_view strided = {.tensor = big, .rank = 1, .offset = 0, .shape = {8}, .strides = {2}};
  KDT_FAILS(kd_graph_all_reduce(g, "n", c, kd_whole(a), strided, KD_REDUCE_SUM, NULL), KD_ERR_NOT_COMPACT, "strided");
  kd_view lo = {.tensor = big, .rank = 1, .offset = 0, .shape = {8}, .strides = {1}}, mid = lo;
  mid.offset = 4;
  KDT_FAILS(kd_graph_all_reduce(g, "n", c, mid, lo, KD_REDUCE_SUM, NULL), KD_ERR_ALIASING, "overlap");
  kd_tensor cond = vec(s, KD_I32, 1, &(int32_t){0});
  kd_node loop;
  KDT_OK(kd_graph_if_begin(g, "if", cond, &loop));
  KDT_FAILS(kd_graph_all_reduce(g, "in a body", c, kd_whole(a), kd_whole(a), KD_REDUCE_SUM, NULL),
            KD_ERR_INVALID_ARGUMENT, "body");
  KDT_OK(kd_graph_op_fill(g, "something", kd_whole(b), &(float){1}, NULL));
  KDT_OK(kd_graph_end(g, loop));
  /* Refused declarations left nothing behind: the graph runs. */
  KDT_OK(kd_graph_submit(g, NULL));
  kd_comm_id id;
  memset(&id, 0x5a, sizeof id);
  kd_comm *x;
  KDT_FAILS(kd_comm_create(s, &id, 2, 0, &x), KD_ERR_INVALID_ARGUMENT, "not made by kd_comm_id_create");
  KDT_OK(kd_comm_id_create(s, &id));
  KDT_FAILS(kd_comm_create(s, &id, 2, 2, &x), KD_ERR_INVALID_ARGUMENT, "argument rank is 2");
  KDT_FAILS(kd_comm_create(s, &id, 0, 0, &x), KD_ERR_INVALID_ARGUMENT, "argument nranks is 0");
  KDT_FAILS(kd_comm_create(s, &id, 65, 0, &x), KD_ERR_INVALID_ARGUMENT, "at most 64");
  KDT_FAILS(kd_comm_create(NULL, &id, 1, 0, &x), KD_ERR_INVALID_ARGUMENT, "argument session is NULL");
  KDT_FAILS(kd_comm_create(s, NULL, 1, 0, &x), KD_ERR_INVALID_ARGUMENT, "argument id is NULL");
  kd_session *twice[2] = {s, s};
  kd_comm *cs[2];
  KDT_FAILS(kd_comm_create_all(twice, 2, cs), KD_ERR_INVALID_ARGUMENT, "sessions[1] is sessions[0]");
  KDT_FAILS(kd_comm_create_all(twice, 0, cs), KD_ERR_INVALID_ARGUMENT, "argument count is 0");
  int rank, nranks;
  KDT_FAILS(kd_comm_info(NULL, &rank, &nranks), KD_ERR_INVALID_ARGUMENT, "argument comm is NULL");
  kd_tensor all[] = {a, b, i8, big, z, cond};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; ++k) KDT_OK(kd_tensor_release(s, all[k]));
  KDT_OK(kd_tensor_release(rs[1].s, other));
  ranks_close(rs, 2);
}

/* One rank of a process of its own: an all-reduce and a ring exchange. 0
 * when both are right. */
static int process_rank(const kd_comm_id *id, int r, int n) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  kd_session *s;
  kd_comm *c;
  kd_graph *g;
  if (kd_session_create(&o, &s) || kd_comm_create(s, id, n, r, &c) || kd_graph_create(s, &g)) return 2;
  float x[1000], sum[1000], ring[1000];
  for (int i = 0; i < 1000; ++i) x[i] = xf(r, i);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {1000}};
  kd_tensor tx, ts, tr;
  kd_sink *k1, *k2;
  if (kd_tensor_from_host(s, &d, x, sizeof x, &tx) || kd_tensor_create(s, &d, &ts) || kd_tensor_create(s, &d, &tr) ||
      kd_graph_all_reduce(g, "sum", c, kd_whole(ts), kd_whole(tx), KD_REDUCE_SUM, NULL) ||
      kd_graph_send_recv(g, "ring", c, kd_whole(tx), (r + 1) % n, kd_whole(tr), (r + n - 1) % n, NULL) ||
      kd_graph_sink(g, "sum", ts, sum, sizeof sum, &k1) || kd_graph_sink(g, "ring", tr, ring, sizeof ring, &k2) ||
      kd_graph_submit(g, NULL) || kd_sink_wait(k1) || kd_sink_wait(k2))
    return 3;
  for (int i = 0; i < 1000; ++i) {
    float want = 0;
    for (int k = 0; k < n; ++k) want += xf(k, i);
    if (sum[i] != want || ring[i] != xf((r + n - 1) % n, i)) return 4;
  }
  kd_graph_destroy(g);
  kd_comm_destroy(c);
  kd_session_destroy(s);
  return 0;
}

Test(host_comm, ranks_in_processes_of_their_own) {
  kd_session *s = kdt_host_session();
  kd_comm_id id;
  KDT_OK(kd_comm_id_create(s, &id));
  kd_session_destroy(s); /* no worker thread crosses the fork */
  pid_t kids[R];
  for (int r = 0; r < R; ++r) {
    kids[r] = fork();
    cr_assert(kids[r] >= 0);
    if (!kids[r]) _exit(process_rank(&id, r, R));
  }
  for (int r = 0; r < R; ++r) {
    int status = 0;
    cr_assert_eq(waitpid(kids[r], &status, 0), kids[r]);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank %d: status %d", r, status);
  }
}

Test(host_comm, one_rank_runs_every_collective_as_a_copy) {
  kd_session *s = kdt_host_session_flags(KD_SESSION_HOST_JITTER);
  kd_comm *c;
  KDT_OK(kd_comm_create_all(&s, 1, &c));
  kdt_comm_graph k;
  kdt_comm_declare(s, c, &k);
  for (int seed = 0; seed < 2; ++seed) {
    kdt_comm_upload(s, &k, seed);
    KDT_OK(kd_graph_submit(k.g, NULL));
    kdt_comm_wait(&k);
    kdt_comm_check(&k, seed, "HOST");
  }
  kdt_comm_free(s, &k);
  kd_comm_destroy(c);
  kd_session_destroy(s);
}

Test(host_comm, a_collective_in_flight_outlives_its_graph_and_communicator) {
  /* Graphs and communicators destroyed right after their submission, the
   * runs still going (jitter delays every task): the runs hold what the
   * collective uses (ASan and valgrind see any use after the free). */
  rank_state rs[2];
  ranks_open(rs, 2, KD_SESSION_HOST_JITTER);
  kd_tensor out[2];
  for (int r = 0; r < 2; ++r) {
    float x[1000];
    for (int i = 0; i < 1000; ++i) x[i] = xf(r, i);
    kd_tensor t = vec(rs[r].s, KD_F32, 1000, x);
    out[r] = vec(rs[r].s, KD_F32, 1000, NULL);
    KDT_OK(kd_graph_op_scale(rs[r].g, "slow start", kd_whole(t), 1.0, NULL));
    KDT_OK(kd_graph_all_reduce(rs[r].g, "sum", rs[r].c, kd_whole(out[r]), kd_whole(t), KD_REDUCE_SUM, NULL));
    KDT_OK(kd_tensor_release(rs[r].s, t));
  }
  for (int r = 0; r < 2; ++r) {
    KDT_OK(kd_graph_submit(rs[r].g, NULL));
    kd_graph_destroy(rs[r].g);
    kd_comm_destroy(rs[r].c);
  }
  for (int r = 0; r < 2; ++r) {
    float got[1000];
    KDT_OK(kd_tensor_download(rs[r].s, out[r], got, sizeof got)); /* after the run */
    for (int i = 0; i < 1000; ++i) cr_assert_eq(got[i], xf(0, i) + xf(1, i), "rank %d: [%d]", r, i);
    KDT_OK(kd_tensor_release(rs[r].s, out[r]));
    kd_session_destroy(rs[r].s);
  }
}
