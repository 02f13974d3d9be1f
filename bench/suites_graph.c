/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "graph" (CPU): declaring a graph of N nodes with 4 accesses each
 * (one write, three reads, over views of a pool of tensors), with every
 * add-time check and the order inference, into a fresh graph and after a
 * warm-up of the same stream; and a chain of N nodes joined by
 * explicit edges (kd_graph_edge, with its duplicate and cycle checks).
 * Nodes per second. Runs on a HOST session, so it needs no GPU. */
#include <stdlib.h>

#include "bench/suites.h"
#include "kdag/kdag.h"

#define POOL 1024
#define LEN 256

typedef struct graph_suite {
  kd_session *session;
  kd_tensor t[POOL];
} graph_suite;

static void nothing(void *user) { (void)user; }

static kb_status graph_init(kb_harness *h, void *user, void **state, char *why, size_t cap) {
  (void)h, (void)user;
  graph_suite *g = calloc(1, sizeof *g);
  if (!g) return snprintf(why, cap, "out of memory"), KB_FAIL;
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  static float zeros[LEN];
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  kd_status st = kd_session_create(&o, &g->session);
  for (int i = 0; !st && i < POOL; ++i) st = kd_tensor_from_host(g->session, &d, zeros, sizeof zeros, &g->t[i]);
  if (st) {
    snprintf(why, cap, "kdag: %s", kd_last_error());
    kd_session_destroy(g->session);
    free(g);
    return KB_FAIL;
  }
  *state = g;
  return KB_OK;
}

static void graph_fini(void *state) {
  graph_suite *g = state;
  if (!g) return;
  kd_session_destroy(g->session);
  free(g);
}

static kb_status build_setup(kb_run *run, void **state) {
  (void)state;
  kb_run_per_iteration(run, (double)kb_run_axis(run, "N", 10000), "node");
  kb_run_max_batch(run, 1);
  return KB_OK;
}

/* Deterministic pseudo-random views: a quarter of a tensor at one of four offsets. */
static kd_view quarter(kd_tensor t, uint32_t k) {
  kd_view v = {.tensor = t, .rank = 1, .offset = (int64_t)(k % 4) * (LEN / 4), .shape = {LEN / 4}, .strides = {1}};
  return v;
}

/* Declares n nodes into graph: KD_OK, or the failure (kd_last_error). */
typedef kd_status (*declare_fn)(graph_suite *g, kd_graph *graph, int64_t n, void *ctx);

/* Each iteration declares `before` untimed nodes and then N timed ones into
 * a fresh graph. */
static kb_status timed_declare(kb_run *run, uint64_t iterations, kb_timing *out, declare_fn fn, void *ctx,
                               int64_t before) {
  graph_suite *g = kb_run_suite_state(run);
  int64_t n = kb_run_axis(run, "N", 10000);
  out->host_ns = 0;
  out->gpu_ns = -1;
  for (uint64_t it = 0; it < iterations; ++it) {
    kd_graph *graph;
    if (kd_graph_create(g->session, &graph)) return kb_run_fail(run, "kd_graph_create: %s", kd_last_error());
    kd_status st = before ? fn(g, graph, before, ctx) : KD_OK;
    kd_graph_stats s0 = {0}, s1 = {0};
    if (!st) st = kd_graph_stats_get(graph, &s0);
    uint64_t t0 = kb_now_ns();
    if (!st) st = fn(g, graph, n, ctx);
    out->host_ns += (double)(kb_now_ns() - t0);
    if (!st) st = kd_graph_stats_get(graph, &s1);
    /* The work behind the time: inference adds more edges per node once
     * the interval sets have filled (declare at 10k against 100k). */
    if (!st) kb_run_count(run, "edges", (double)(s1.edges - s0.edges) / (double)n);
    kd_graph_destroy(graph);
    if (st) return kb_run_fail(run, "declaring: %s", kd_last_error());
  }
  return KB_OK;
}

typedef struct random_accesses {
  uint32_t x;
  kd_garg acc[4];
} random_accesses;

static kd_status declare_random(graph_suite *g, kd_graph *graph, int64_t n, void *ctx) {
  random_accesses *r = ctx;
  for (int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < 4; ++k) {
      r->x = r->x * 1664525u + 1013904223u;
      r->acc[k].view.tensor = g->t[(r->x >> 8) % POOL];
      r->acc[k].view.offset = (int64_t)((r->x >> 24) % 4) * (LEN / 4);
    }
    kd_status st = kd_graph_host(graph, "node", nothing, NULL, r->acc, 4, NULL);
    if (st == KD_ERR_ALIASING) continue; /* the write hit a view read by the same node: also measured */
    if (st) return st;
  }
  return KD_OK;
}

/* Untimed nodes before declare_warm's timed ones: by then every tensor's
 * interval sets have reached their steady size. The first nodes of a graph
 * meet empty sets: "declare" adds 3.98 edges per node at 10k and 5.99 at
 * 100k, declare_warm 6.19 and 6.23 (the edges_per_node rows), so
 * "declare" at 10k times less work per node than at 100k. */
#define WARM_NODES 20000

static kb_status random_batch(kb_run *run, uint64_t iterations, kb_timing *out, int64_t before) {
  graph_suite *g = kb_run_suite_state(run);
  /* The arguments are built once and retargeted per node, as a caller
   * declaring many nodes of one shape would: what is timed is kdag's work,
   * not copying 200-byte view structs around. */
  random_accesses r = {.x = 12345};
  for (int k = 0; k < 4; ++k) r.acc[k] = kd_g_access(k == 0 ? KD_OUT : KD_IN, quarter(g->t[0], 0));
  return timed_declare(run, iterations, out, declare_random, &r, before);
}

static kb_status build_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  (void)state;
  return random_batch(run, iterations, out, 0);
}

static kb_status warm_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  (void)state;
  return random_batch(run, iterations, out, WARM_NODES);
}

/* N access-free host nodes, each after the one before by kd_graph_edge. */
static kd_status declare_chain(graph_suite *g, kd_graph *graph, int64_t n, void *ctx) {
  (void)g, (void)ctx;
  for (int64_t i = 0; i < n; ++i) {
    kd_node node;
    kd_status st = kd_graph_host(graph, "node", nothing, NULL, NULL, 0, &node);
    if (!st && i) st = kd_graph_edge(graph, node - 1, node);
    if (st) return st;
  }
  return KD_OK;
}

static kb_status chain_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  (void)state;
  return timed_declare(run, iterations, out, declare_chain, NULL, 0);
}

int kb_register_graph_suite(kb_harness *h) {
  kb_suite_desc sd = {.name = "graph",
                      .description = "declaring N nodes of 4 accesses each: checks and order inference (CPU)",
                      .init = graph_init, .fini = graph_fini};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static const int64_t n[] = {10000, 100000};
  kb_case_desc build = {.name = "declare", .description = "kd_graph_host x N into a fresh graph",
                        .setup = build_setup, .batch = build_batch};
  kb_case_desc warm = {.name = "declare_warm",
                       .description = "as declare, but the N timed nodes follow 20000 untimed ones in the same "
                                      "graph: each meets interval sets at their steady size, so the cost per "
                                      "node is the marginal one, and its growth with N tests linearity alone",
                       .setup = build_setup, .batch = warm_batch};
  kb_case_desc chain = {.name = "declare_edges",
                        .description = "N access-free kd_graph_host nodes, each joined to the one before by "
                                       "kd_graph_edge (linear: the checks follow only the edges they need)",
                        .setup = build_setup, .batch = chain_batch};
  if (kb_suite_axis(s, "N", n, 2) || kb_case_add(s, &build) || kb_case_add(s, &warm) || kb_case_add(s, &chain)) return -1;
  return 0;
}
