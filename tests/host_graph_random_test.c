/* Host lane property test: thousands of seeded random graphs over a pool of
 * tensors and views, run on a HOST session with random per-node delays,
 * compared bit for bit with a sequential interpretation of the same node
 * list. A missing or wrong edge shows up as a different result. */
#include "kdag_test.h"
#include "kernels/host.h"

#define POOL 4
#define LEN 64
#define GRAPHS 2000
#define MAX_NODES 14

typedef struct rng { uint64_t s; } rng;
static uint32_t next(rng *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return (uint32_t)(r->s >> 16);
}

/* A random rank-1 view of n elements inside a tensor of LEN. */
static kd_view random_view(rng *r, kd_tensor t, int64_t n) {
  int64_t stride = 1 + next(r) % 3;
  while ((n - 1) * stride >= LEN) --stride;
  int64_t room = LEN - ((n - 1) * stride + 1);
  kd_view v = {.tensor = t, .rank = 1, .offset = room ? next(r) % (room + 1) : 0, .shape = {n}, .strides = {stride}};
  return v;
}

static kd_kview ref_view(int32_t *base, const kd_view *v) {
  kd_kview k;
  memset(&k, 0, sizeof k);
  k.base = (unsigned long long)(uintptr_t)(base + v->offset);
  k.rank = 1;
  k.shape[0] = v->shape[0];
  k.strides[0] = v->strides[0];
  return k;
}

Test(host_graph_random, random_graphs_match_sequential_interpretation, .timeout = 300) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  o.flags = KD_SESSION_HOST_JITTER;
  kd_session *s;
  KDT_OK(kd_session_create(&o, &s));
  kd_tensor t[POOL];
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {LEN}};
  for (int i = 0; i < POOL; ++i) KDT_OK(kd_tensor_create(s, &d, &t[i]));
  static int32_t ref[POOL][LEN], got[POOL][LEN];
  rng r = {0x2545F4914F6CDD1Dull};
  uint64_t edges = 0, nodes = 0, rejected = 0;
  for (int gi = 0; gi < GRAPHS; ++gi) {
    for (int i = 0; i < POOL; ++i) {
      for (int j = 0; j < LEN; ++j) ref[i][j] = (int32_t)(next(&r) % 1000) - 500;
      KDT_OK(kd_tensor_upload(s, t[i], ref[i], sizeof ref[i]));
    }
    kd_graph *g;
    KDT_OK(kd_graph_create(s, &g));
    int count = 1 + (int)(next(&r) % MAX_NODES);
    for (int k = 0; k < count; ++k) {
      int op = (int)(next(&r) % 4);
      int64_t n = 1 + next(&r) % 24;
      int a = (int)(next(&r) % POOL), b = (int)(next(&r) % POOL), c = (int)(next(&r) % POOL);
      kd_view va = random_view(&r, t[a], n), vb = random_view(&r, t[b], n), vc = random_view(&r, t[c], n);
      kd_status st;
      int32_t value = (int32_t)(next(&r) % 100);
      if (op == 0) st = kd_graph_fill(g, "fill", va, &value, NULL);
      else if (op == 1) st = kd_graph_copy(g, "copy", va, vb, NULL);
      else if (op == 2) st = kd_graph_add(g, "add", va, vb, vc, NULL);
      else {
        kd_view one = random_view(&r, t[a], 1);
        va = one;
        st = kd_graph_sum(g, "sum", one, vb, NULL);
      }
      if (st == KD_ERR_ALIASING) { /* refused: the graph is unchanged, so is the reference */
        rejected++;
        continue;
      }
      cr_assert_eq(st, KD_OK, "graph %d node %d: %s: %s", gi, k, kd_status_name(st), kd_last_error());
      kd_kpattern p = {{(unsigned long long)(uint32_t)value, 0}};
      if (op == 0) kd_host_fill(4, ref_view(ref[a], &va), p);
      else if (op == 1) kd_host_copy(4, ref_view(ref[a], &va), ref_view(ref[b], &vb));
      else if (op == 2) kd_host_add(KD_K_I32, ref_view(ref[a], &va), ref_view(ref[b], &vb), ref_view(ref[c], &vc));
      else kd_host_sum(KD_K_I32, ref_view(ref[a], &va), ref_view(ref[b], &vb));
    }
    kd_sink *sinks[POOL];
    for (int i = 0; i < POOL; ++i) KDT_OK(kd_graph_sink(g, "out", t[i], got[i], sizeof got[i], &sinks[i]));
    kd_graph_stats gs;
    KDT_OK(kd_graph_stats_get(g, &gs));
    edges += gs.edges;
    nodes += gs.nodes;
    KDT_OK(kd_graph_submit(g, NULL));
    for (int i = 0; i < POOL; ++i) {
      KDT_OK(kd_sink_wait(sinks[i]));
      for (int j = 0; j < LEN; ++j)
        cr_assert_eq(got[i][j], ref[i][j], "graph %d: tensor %d[%d] = %d, sequential gives %d", gi, i, j,
                     got[i][j], ref[i][j]);
    }
    kd_graph_destroy(g);
  }
  cr_log_info("%d graphs, %llu nodes, %llu edges, %llu aliasing nodes refused", GRAPHS,
              (unsigned long long)nodes, (unsigned long long)edges, (unsigned long long)rejected);
  cr_assert_gt(edges, 0);
  cr_assert_gt(rejected, 0, "the generator should hit aliasing sometimes");
  kd_session_destroy(s);
}
