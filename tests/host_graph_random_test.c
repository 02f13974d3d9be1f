/* SPDX-License-Identifier: Apache-2.0 */
/* Host lane property test: thousands of seeded random graphs over pools of
 * i32 and f32 tensors and views of rank 1 and 2 (rg_build_mixed: in-place
 * nodes, transposes, explicit edges too), run on a HOST session with random
 * per-node delays, compared bit for bit with a sequential interpretation of
 * the same node list. A missing or wrong edge shows up as a different
 * result. The f32 results are also held to a stated error bound against an
 * f64 interpretation. */
#include "graph/graph_impl.h"
#include "random_graph.h"

#define GRAPHS 2000
#define LONG_GRAPHS 100 /* up to RG_LONG_NODES nodes: some interval sets grow past a scan */

/* A set of g's holds more than KD_IVSET_SCAN entries (so it is sorted). */
static int has_a_sorted_set(const kd_graph *g) {
  for (uint32_t i = 0; i < g->binding_count; ++i)
    if (g->bindings[i].reads.count > KD_IVSET_SCAN || g->bindings[i].writes.count > KD_IVSET_SCAN) return 1;
  return 0;
}

Test(host_graph_random, random_graphs_match_sequential_interpretation, .timeout = 300) {
  kd_session *s = kdt_host_session_flags(KD_SESSION_HOST_JITTER);
  static rg_data d;
  double worst_units = 0;
  rg_rng r = {0x2545F4914F6CDD1Dull};
  rg_counts counts = {.probe = has_a_sorted_set};
  uint64_t edges = 0, nodes = 0, sorted = 0;
  for (int gi = 0; gi < GRAPHS + LONG_GRAPHS; ++gi) {
    rg_data_init(&d, &r);
    kd_graph_stats gs = rg_run_mixed(s, &d, &r, gi < GRAPHS ? RG_MAX_NODES : -RG_LONG_NODES, 1, &counts);
    edges += gs.edges;
    nodes += gs.nodes;
    sorted += counts.probed != 0;
    counts.probed = 0;
    rg_check_exact(&d, d.igot, d.fgot, gi, "HOST");
    double w = rg_check_f32_bound(&d, d.fgot, gi);
    if (w > worst_units) worst_units = w;
  }
  static const char *kind[RG_KINDS] = {"fill", "copy", "add", "sum", "copy2", "transpose",
                                       "axpy", "scale", "fadd", "fcopy", "fsum", "edge"};
  for (int k = 0; k < RG_KINDS; ++k) {
    cr_log_info("%s: %llu", kind[k], (unsigned long long)counts.added[k]);
    cr_assert_gt(counts.added[k], GRAPHS / 20, "too few %s nodes were added: %llu", kind[k],
                 (unsigned long long)counts.added[k]);
  }
  cr_log_info("%d graphs, %llu nodes, %llu edges, %llu aliasing nodes refused, %llu that took a set past a scan",
              GRAPHS + LONG_GRAPHS, (unsigned long long)nodes, (unsigned long long)edges,
              (unsigned long long)counts.rejected, (unsigned long long)sorted);
  cr_assert_gt(sorted, LONG_GRAPHS / 10, "too few graphs took a set past a scan: %llu", (unsigned long long)sorted);
  cr_log_info("f32 against f64: worst %.3g x 2^-24 of the magnitude (bound 16)", worst_units);
  cr_assert_gt(worst_units, 0, "the f32 results were all exact: the bound was not tested");
  cr_assert_gt(edges, 0);
  cr_assert_gt(counts.rejected, 0, "the generator should hit aliasing sometimes");
  kd_session_destroy(s);
}
