/* Host lane property test: thousands of seeded random graphs over a pool of
 * tensors and views, run on a HOST session with random per-node delays,
 * compared bit for bit with a sequential interpretation of the same node
 * list. A missing or wrong edge shows up as a different result. */
#include "random_graph.h"

#define GRAPHS 2000

Test(host_graph_random, random_graphs_match_sequential_interpretation, .timeout = 300) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  o.flags = KD_SESSION_HOST_JITTER;
  kd_session *s;
  KDT_OK(kd_session_create(&o, &s));
  kd_tensor t[RG_POOL];
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {RG_LEN}};
  for (int i = 0; i < RG_POOL; ++i) KDT_OK(kd_tensor_create(s, &d, &t[i]));
  static int32_t ref[RG_POOL][RG_LEN], got[RG_POOL][RG_LEN];
  rg_rng r = {0x2545F4914F6CDD1Dull};
  uint64_t edges = 0, nodes = 0, rejected = 0;
  for (int gi = 0; gi < GRAPHS; ++gi) {
    for (int i = 0; i < RG_POOL; ++i) {
      for (int j = 0; j < RG_LEN; ++j) ref[i][j] = (int32_t)(rg_next(&r) % 1000) - 500;
      KDT_OK(kd_tensor_upload(s, t[i], ref[i], sizeof ref[i]));
    }
    kd_graph *g;
    KDT_OK(kd_graph_create(s, &g));
    rejected += (uint64_t)rg_build(g, t, &r, ref);
    kd_sink *sinks[RG_POOL];
    for (int i = 0; i < RG_POOL; ++i) KDT_OK(kd_graph_sink(g, "out", t[i], got[i], sizeof got[i], &sinks[i]));
    kd_graph_stats gs;
    KDT_OK(kd_graph_stats_get(g, &gs));
    edges += gs.edges;
    nodes += gs.nodes;
    KDT_OK(kd_graph_submit(g, NULL));
    for (int i = 0; i < RG_POOL; ++i) {
      KDT_OK(kd_sink_wait(sinks[i]));
      for (int j = 0; j < RG_LEN; ++j)
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
