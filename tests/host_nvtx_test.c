/* SPDX-License-Identifier: Apache-2.0 */
/* kdag's NVTX ranges, recorded by a tool loaded the way Nsight Systems is
 * (NVTX_INJECTION64_PATH, tests/nvtx_inject.c), on the null driver: the
 * domain and its categories, the session's stream named, a range per
 * submission named after its graph, a range per node inside an EAGER
 * one and none inside a GRAPH one, node names registered once per plan,
 * host waits as ranges, and every push matched by a pop on its thread.
 * The null driver computes nothing: what the work does is checked
 * elsewhere, here only what a tool sees. Criterion runs each test in a process of its own, so NVTX loads the
 * tool (or none) at that process's first NVTX call, after setenv. */
#include "kdag_test.h"
#include "null_driver.h"
#include "nvtx_inject.h"

static kd_session *traced_session(kd_exec_mode mode) {
  setenv("NVTX_INJECTION64_PATH", KDAG_NVTX_INJECT, 1);
  return kdt_null_session(KDAG_NULL_DRIVER, mode, NULL);
}

static const kdt_nvtx_event *recorded(uint32_t *n) {
  kdt_nvtx_events_fn *events = kdt_nvtx_recorder(KDAG_NVTX_INJECT);
  cr_assert(events, "NVTX did not load the recording tool");
  return events(n);
}

/* Three nodes in a chain (fill, scale, a sink), named "pipeline". */
static kd_graph *pipeline(kd_session *s, kd_tensor *t, float *host, kd_sink **sink) {
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {64}};
  KDT_OK(kd_tensor_create(s, &d, t));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_set_name(g, "pipeline"));
  float one = 1.0f;
  KDT_OK(kd_graph_op_fill(g, "fill t", kd_whole(*t), &one, NULL));
  KDT_OK(kd_graph_op_scale(g, "scale t", kd_whole(*t), 3.0, NULL));
  KDT_OK(kd_graph_sink(g, "t to host", *t, host, 64 * sizeof *host, sink));
  return g;
}

/* The pushes and pops in the kdag domain from index `from`, checked to
 * nest; the pushes' texts and categories into out (at most cap). */
static uint32_t ranges(const kdt_nvtx_event *e, uint32_t n, uint32_t from, kdt_nvtx_event *out, uint32_t cap) {
  uint32_t pushes = 0;
  int depth = 0;
  for (uint32_t i = from; i < n; ++i) {
    if (e[i].kind == KDT_NVTX_PUSH) {
      cr_assert(e[i].in_kdag, "a range outside the kdag domain: %s", e[i].text);
      if (pushes < cap) out[pushes] = e[i];
      pushes++;
      depth++;
    } else if (e[i].kind == KDT_NVTX_POP) {
      cr_assert(e[i].in_kdag);
      cr_assert_gt(depth, 0, "a pop without a push (event %u)", i);
      depth--;
    }
  }
  cr_assert_eq(depth, 0, "%d ranges left open", depth);
  return pushes;
}

static void assert_range(const kdt_nvtx_event *r, const char *text, uint32_t category) {
  cr_assert_str_eq(r->text, text);
  cr_assert_eq(r->category, category, "%s: category %u, want %u", text, r->category, category);
}

Test(nvtx, domain_categories_and_the_sessions_stream) {
  kd_session *s = traced_session(KD_EXEC_EAGER);
  uint32_t n;
  const kdt_nvtx_event *e = recorded(&n);
  int domain = 0, categories = 0, stream = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (e[i].kind == KDT_NVTX_DOMAIN && strcmp(e[i].text, "kdag") == 0) domain++;
    if (e[i].kind == KDT_NVTX_CATEGORY && e[i].in_kdag) {
      const char *want[] = {"", "submit", "node", "wait"};
      cr_assert(e[i].category >= 1 && e[i].category <= 3);
      cr_assert_str_eq(e[i].text, want[e[i].category]);
      categories++;
    }
    if (e[i].kind == KDT_NVTX_STREAM && strncmp(e[i].text, "kdag session #", 14) == 0) stream++;
  }
  cr_assert_eq(domain, 1, "the kdag domain, created once");
  cr_assert_eq(categories, 3);
  cr_assert_eq(stream, 1, "the session's stream, named once");
  kd_session_destroy(s);
}

Test(nvtx, eager_submission_holds_a_range_per_node) {
  kd_session *s = traced_session(KD_EXEC_EAGER);
  kd_tensor t;
  float host[64];
  kd_sink *sink;
  kd_graph *g = pipeline(s, &t, host, &sink);
  uint32_t n0;
  (void)recorded(&n0);
  for (int k = 0; k < 2; ++k) {
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_sink_wait(sink));
  }
  uint32_t n;
  const kdt_nvtx_event *e = recorded(&n);
  kdt_nvtx_event r[16];
  uint32_t pushes = ranges(e, n, n0, r, 16);
  cr_assert_eq(pushes, 10, "per round a submission, its 3 nodes and the sink's wait: %u ranges", pushes);
  for (int k = 0; k < 2; ++k) {
    const kdt_nvtx_event *round = &r[5 * k];
    assert_range(&round[0], "pipeline", 1);
    cr_assert(round[0].registered, "the graph's name is a registered string");
    assert_range(&round[1], "fill t", 2);
    assert_range(&round[2], "scale t", 2);
    assert_range(&round[3], "t to host", 2);
    for (int i = 1; i <= 3; ++i) cr_assert(round[i].registered, "node names are registered strings");
    assert_range(&round[4], "kd_sink_wait", 3);
  }
  /* Nesting: each node's range opens and closes inside its submission's. */
  int depth = 0, node_depth = -1;
  for (uint32_t i = n0; i < n; ++i) {
    if (e[i].kind == KDT_NVTX_PUSH) {
      depth++;
      if (e[i].category == 2) node_depth = depth;
      if (e[i].category == 2) cr_assert_eq(depth, 2, "%s: a node range inside the submission's", e[i].text);
    } else if (e[i].kind == KDT_NVTX_POP) {
      depth--;
    }
  }
  cr_assert_eq(node_depth, 2);
  /* Names registered once: the graph's, and each node's per plan. */
  int graph_regs = 0, node_regs = 0;
  for (uint32_t i = 0; i < n; ++i)
    if (e[i].kind == KDT_NVTX_STRING) {
      graph_regs += strcmp(e[i].text, "pipeline") == 0;
      node_regs += strcmp(e[i].text, "fill t") == 0 || strcmp(e[i].text, "scale t") == 0;
    }
  cr_assert_eq(graph_regs, 1);
  cr_assert_eq(node_regs, 2);
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, t));
  kd_session_destroy(s);
}

Test(nvtx, graph_submission_is_one_range) {
  kd_session *s = traced_session(KD_EXEC_GRAPH);
  kd_tensor t;
  float host[64];
  kd_sink *sink;
  kd_graph *g = pipeline(s, &t, host, &sink);
  uint32_t n0;
  (void)recorded(&n0);
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_tensor_download(s, t, host, sizeof host));
  KDT_OK(kd_graph_set_name(g, "renamed"));
  KDT_OK(kd_graph_submit(g, NULL));
  uint32_t n;
  const kdt_nvtx_event *e = recorded(&n);
  kdt_nvtx_event r[8];
  uint32_t pushes = ranges(e, n, n0, r, 8);
  cr_assert_eq(pushes, 3, "two submissions and a download: %u ranges", pushes);
  assert_range(&r[0], "pipeline", 1);
  assert_range(&r[1], "kd_tensor_download", 3);
  assert_range(&r[2], "renamed", 1);
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, t));
  kd_session_destroy(s);
}

Test(nvtx, default_name_and_bad_names) {
  kd_session *s = traced_session(KD_EXEC_GRAPH);
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_FAILS(kd_graph_set_name(g, NULL), KD_ERR_INVALID_ARGUMENT, "kd_graph_set_name: argument name is NULL");
  KDT_FAILS(kd_graph_set_name(g, ""), KD_ERR_INVALID_ARGUMENT, "empty");
  char longer[300];
  memset(longer, 'x', sizeof longer - 1);
  longer[sizeof longer - 1] = 0;
  KDT_FAILS(kd_graph_set_name(g, longer), KD_ERR_INVALID_ARGUMENT, "too long");
  KDT_FAILS(kd_graph_set_name(NULL, "x"), KD_ERR_INVALID_ARGUMENT, "argument graph is NULL");
  uint32_t n0;
  (void)recorded(&n0);
  KDT_OK(kd_graph_submit(g, NULL)); /* empty, unnamed */
  uint32_t n;
  const kdt_nvtx_event *e = recorded(&n);
  kdt_nvtx_event r[2];
  cr_assert_eq(ranges(e, n, n0, r, 2), 1);
  assert_range(&r[0], "kdag graph", 1);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* Without a tool NVTX loads nothing, and kdag works the same. */
Test(nvtx, no_tool_no_recorder) {
  unsetenv("NVTX_INJECTION64_PATH");
  kd_session *s = kdt_null_session(KDAG_NULL_DRIVER, KD_EXEC_EAGER, NULL);
  kd_tensor t;
  float host[64];
  kd_sink *sink;
  kd_graph *g = pipeline(s, &t, host, &sink);
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sink));
  kd_session_stats st;
  KDT_OK(kd_session_stats_get(s, &st));
  cr_assert_eq(st.submissions, 1);
  cr_assert_null(kdt_nvtx_recorder(KDAG_NVTX_INJECT), "NVTX loaded a tool nobody named");
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, t));
  kd_session_destroy(s);
}
