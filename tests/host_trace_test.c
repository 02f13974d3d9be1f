/* SPDX-License-Identifier: Apache-2.0 */
/* A trace of a run (kd_session_options.trace_path, KDAG_TRACE), read back
 * as JSON: on the null driver, whose events carry the host's clock, every
 * node of an EAGER submission appears once per submission, inside its
 * submission's GPU span and after the node before it; a GRAPH submission
 * holds a span per node too (event record nodes around each of its
 * nodes); host spans for submits and waits; tracing adds no host
 * wait; paths from code and from the environment, and bad ones. On a GPU
 * (trace_gpu): node times ordered on the stream, and the host cost. */
#include <jansson.h>
#include <time.h>
#include <unistd.h>

#include "kdag_test.h"
#include "null_driver.h"

static kd_session_options trace_options(kd_exec_mode mode, const char *path) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_CUDA;
  o.exec_mode = mode;
  o.trace_path = path;
  return o;
}

static kd_session *traced(kd_exec_mode mode, const char *path) {
  kd_session_options o = trace_options(mode, path);
  return kdt_null_session_opts(KDAG_NULL_DRIVER, &o, NULL);
}

/* fill, scale, add into a second tensor, and a sink: a chain of four. */
static void run(kd_session *s, int submissions) {
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {256}};
  kd_tensor a, b;
  KDT_OK(kd_tensor_create(s, &d, &a));
  KDT_OK(kd_tensor_create(s, &d, &b));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_set_name(g, "traced pipeline"));
  float one = 1, out[256];
  KDT_OK(kd_graph_op_fill(g, "fill a", kd_whole(a), &one, NULL));
  KDT_OK(kd_graph_op_scale(g, "scale a", kd_whole(a), 2.0, NULL));
  KDT_OK(kd_graph_op_add(g, "b = a + a", kd_whole(b), kd_whole(a), kd_whole(a), NULL));
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "b out", b, out, sizeof out, &sink));
  for (int i = 0; i < submissions; ++i) {
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_sink_wait(sink));
  }
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, a));
  KDT_OK(kd_tensor_release(s, b));
}

typedef struct span {
  const char *name, *cat;
  double ts, dur;
  long long tid;
} span;

/* The file's "X" events into out (at most cap): how many. */
static size_t spans_of(json_t *root, span *out, size_t cap) {
  json_t *events = json_object_get(root, "traceEvents");
  cr_assert(json_is_array(events), "no traceEvents array");
  size_t n = 0, i;
  json_t *e;
  json_array_foreach(events, i, e) {
    const char *ph = json_string_value(json_object_get(e, "ph"));
    cr_assert(ph, "event %zu has no ph", i);
    if (strcmp(ph, "X") != 0) continue;
    cr_assert(n < cap);
    out[n].name = json_string_value(json_object_get(e, "name"));
    out[n].cat = json_string_value(json_object_get(e, "cat"));
    out[n].ts = json_number_value(json_object_get(e, "ts"));
    out[n].dur = json_number_value(json_object_get(e, "dur"));
    out[n].tid = json_integer_value(json_object_get(e, "tid"));
    cr_assert(out[n].name && out[n].cat, "event %zu lacks a name or cat", i);
    cr_assert_geq(out[n].dur, 0.0);
    n++;
  }
  return n;
}

static json_t *load(const char *path) {
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  cr_assert(root, "%s: not JSON: %s (line %d)", path, err.text, err.line);
  return root;
}

static size_t count(const span *s, size_t n, const char *name, const char *cat) {
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) k += strcmp(s[i].name, name) == 0 && (!cat || strcmp(s[i].cat, cat) == 0);
  return k;
}

Test(trace, eager_nodes_appear_once_per_submission_in_order) {
  char path[] = "/tmp/kdag-trace-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  kd_session *s = traced(KD_EXEC_EAGER, path);
  run(s, 3);
  kd_session_destroy(s);
  json_t *root = load(path);
  span sp[256];
  size_t n = spans_of(root, sp, 256);
  const char *nodes[] = {"fill a", "scale a", "b = a + a", "b out"};
  for (int k = 0; k < 4; ++k)
    cr_assert_eq(count(sp, n, nodes[k], "node"), 3, "'%s' once per submission", nodes[k]);
  cr_assert_eq(count(sp, n, "traced pipeline", "an EAGER graph submission"), 3, "the submissions' GPU spans");
  cr_assert_eq(count(sp, n, "traced pipeline", "submit"), 3, "the submits' host spans");
  cr_assert_eq(count(sp, n, "kd_sink_wait", "wait"), 3);
  /* Each submission's GPU span starts after its submit's host span does
   * (the clocks are one: the null driver's events carry the host's). */
  for (int k = 0; k < 3; ++k) {
    const span *host = NULL, *gpu = NULL;
    int h = 0, d = 0;
    for (size_t i = 0; i < n; ++i) {
      if (strcmp(sp[i].cat, "submit") == 0 && h++ == k) host = &sp[i];
      if (strcmp(sp[i].cat, "an EAGER graph submission") == 0 && d++ == k) gpu = &sp[i];
    }
    cr_assert(host && gpu);
    cr_assert_geq(gpu->ts, host->ts, "submission %d ran on the GPU (%.3f us) before it was submitted (%.3f us)", k,
                  gpu->ts, host->ts);
  }
  /* In each submission's GPU span, the nodes in order, one after another. */
  for (size_t i = 0; i < n; ++i) {
    if (strcmp(sp[i].cat, "an EAGER graph submission") != 0) continue;
    double begin = sp[i].ts, end = sp[i].ts + sp[i].dur, last = begin;
    int seen = 0;
    for (size_t j = 0; j < n; ++j) {
      if (strcmp(sp[j].cat, "node") != 0 || sp[j].ts < begin || sp[j].ts > end) continue;
      cr_assert_eq(sp[j].tid, sp[i].tid, "nodes on the stream's row");
      cr_assert_str_eq(sp[j].name, nodes[seen], "node %d of a submission", seen);
      cr_assert_geq(sp[j].ts, last, "'%s' starts before the node before it ends", sp[j].name);
      cr_assert_leq(sp[j].ts + sp[j].dur, end + 0.001, "'%s' ends after its submission", sp[j].name);
      last = sp[j].ts + sp[j].dur;
      seen++;
    }
    cr_assert_eq(seen, 4, "a submission's span holds its 4 nodes (%d)", seen);
  }
  json_t *other = json_object_get(root, "otherData");
  cr_assert_eq(json_integer_value(json_object_get(other, "dropped_spans")), 0);
  json_decref(root);
  unlink(path);
}

Test(trace, graph_launches_hold_their_nodes_and_tracing_adds_no_host_wait) {
  char path[] = "/tmp/kdag-trace-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  kd_session_stats with, without;
  kd_session *s = traced(KD_EXEC_GRAPH, path);
  run(s, 2);
  KDT_OK(kd_session_stats_get(s, &with));
  kd_session_destroy(s);
  s = traced(KD_EXEC_GRAPH, "");
  run(s, 2);
  KDT_OK(kd_session_stats_get(s, &without));
  kd_session_destroy(s);
  cr_assert_eq(with.event_waits, without.event_waits, "tracing waited on the host");
  cr_assert_eq(with.stream_syncs, without.stream_syncs);
  cr_assert_eq(with.device_syncs, 0);
  json_t *root = load(path);
  span sp[64];
  size_t n = spans_of(root, sp, 64);
  cr_assert_eq(count(sp, n, "traced pipeline", "a CUDA graph launch"), 2);
  const char *nodes[] = {"fill a", "scale a", "b = a + a", "b out"};
  for (int k = 0; k < 4; ++k)
    cr_assert_eq(count(sp, n, nodes[k], "node"), 2, "'%s' once per launch of the CUDA graph", nodes[k]);
  /* Inside each launch's span, in the chain's order. */
  for (size_t i = 0; i < n; ++i) {
    if (strcmp(sp[i].cat, "a CUDA graph launch") != 0) continue;
    double last = sp[i].ts;
    int seen = 0;
    for (size_t j = 0; j < n; ++j) {
      if (strcmp(sp[j].cat, "node") != 0 || sp[j].ts < sp[i].ts || sp[j].ts > sp[i].ts + sp[i].dur) continue;
      cr_assert_str_eq(sp[j].name, nodes[seen]);
      cr_assert_geq(sp[j].ts, last);
      last = sp[j].ts + sp[j].dur;
      seen++;
    }
    cr_assert_eq(seen, 4);
  }
  json_decref(root);
  unlink(path);
}

Test(trace, the_environment_names_the_file_and_code_can_refuse_it) {
  char dir[] = "/tmp/kdag-trace-XXXXXX";
  cr_assert(mkdtemp(dir));
  char env[256], want[300];
  snprintf(env, sizeof env, "%s/run-{session}.json", dir);
  setenv("KDAG_TRACE", env, 1);
  kd_session *s = traced(KD_EXEC_EAGER, NULL);
  run(s, 1);
  kd_session_stats st;
  KDT_OK(kd_session_stats_get(s, &st));
  kd_session_destroy(s);
  /* Which number the session had: the only file there. */
  char cmd[400];
  snprintf(cmd, sizeof cmd, "ls %s/run-*.json | wc -l | grep -qx 1", dir);
  cr_assert_eq(system(cmd), 0, "one trace file, its {session} replaced");
  s = traced(KD_EXEC_EAGER, ""); /* "": none, whatever KDAG_TRACE says */
  run(s, 1);
  kd_session_destroy(s);
  cr_assert_eq(system(cmd), 0, "\"\" wrote no trace");
  snprintf(want, sizeof want, "rm -rf %s", dir);
  cr_assert_eq(system(want), 0);
  unsetenv("KDAG_TRACE");
}

Test(trace, an_unwritable_path_fails_in_code_and_is_ignored_from_the_environment) {
  setenv("KDAG_CUDA_DRIVER_PATH", KDAG_NULL_DRIVER, 1);
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  o.trace_path = "/nonexistent/folder/trace.json";
  kd_session *s;
  KDT_FAILS(kd_session_create(&o, &s), KD_ERR_INVALID_ARGUMENT, "/nonexistent/folder/trace.json");
  setenv("KDAG_TRACE", "/nonexistent/folder/trace.json", 1);
  o.trace_path = NULL;
  o.log_level = KD_LOG_OFF;
  KDT_OK(kd_session_create(&o, &s));
  kd_session_destroy(s);
  unsetenv("KDAG_TRACE");
}

Test(trace, a_host_session_traces_its_host_spans) {
  char path[] = "/tmp/kdag-trace-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  o.trace_path = path;
  kd_session *s;
  KDT_OK(kd_session_create(&o, &s));
  run(s, 2);
  kd_session_destroy(s);
  json_t *root = load(path);
  span sp[64];
  size_t n = spans_of(root, sp, 64);
  cr_assert_eq(count(sp, n, "traced pipeline", "submit"), 2);
  cr_assert_eq(count(sp, n, "kd_sink_wait", "wait"), 2);
  json_decref(root);
  unlink(path);
}

/* ---- on a GPU (skipped without one; a failure under KDAG_REQUIRE_GPU=1) -- */

static kd_session *gpu_traced(kd_exec_mode mode, const char *path) {
  kd_session_options o = trace_options(mode, path);
  return kdt_gpu_session_opts(&o);
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* A chain of 64 built-ins over 1M floats, submitted `rounds` times: host
 * microseconds per submission. */
static double chain(kd_session *s, int rounds) {
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {1 << 20}};
  kd_tensor a;
  KDT_OK(kd_tensor_create(s, &d, &a));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_set_name(g, "chain"));
  float one = 1;
  KDT_OK(kd_graph_op_fill(g, "fill", kd_whole(a), &one, NULL));
  char name[32];
  for (int i = 1; i < 64; ++i) {
    snprintf(name, sizeof name, "scale %d", i);
    KDT_OK(kd_graph_op_scale(g, name, kd_whole(a), 1.0, NULL));
  }
  static float out[1 << 20];
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "out", a, out, sizeof out, &sink));
  KDT_OK(kd_graph_submit(g, NULL)); /* warm */
  KDT_OK(kd_sink_wait(sink));
  double t0 = now_us();
  for (int i = 0; i < rounds; ++i) KDT_OK(kd_graph_submit(g, NULL));
  double t1 = now_us();
  KDT_OK(kd_sink_wait(sink));
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, a));
  return (t1 - t0) / rounds;
}

static void gpu_node_times(kd_exec_mode mode, const char *cat) {
  char path[] = "/tmp/kdag-trace-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  kd_session *s = gpu_traced(mode, path);
  double traced_us = chain(s, 20);
  kd_session_destroy(s);
  s = gpu_traced(mode, "");
  double plain_us = chain(s, 20);
  kd_session_destroy(s);
  fprintf(stderr, "trace witness: %s, 64 nodes: %.1f us of host time per submission traced, %.1f untraced\n", cat,
          traced_us, plain_us);
  json_t *root = load(path);
  static span sp[4096];
  size_t n = spans_of(root, sp, 4096);
  cr_assert_eq(count(sp, n, "fill", "node"), 21, "once per submission");
  cr_assert_eq(count(sp, n, "scale 63", "node"), 21);
  cr_assert_eq(count(sp, n, "chain", cat), 21);
  double last_end = 0;
  size_t nodes = 0;
  for (size_t i = 0; i < n; ++i) {
    if (strcmp(sp[i].cat, "node") != 0) continue;
    /* One stream: each node starts once the one before has ended. */
    cr_assert_geq(sp[i].ts + 0.001, last_end, "'%s' at %.3f us overlaps the node before (ends %.3f)", sp[i].name,
                  sp[i].ts, last_end);
    last_end = sp[i].ts + sp[i].dur;
    nodes++;
  }
  cr_assert_eq(nodes, 21 * 64 + 21, "every node, the sinks too");
  json_t *other = json_object_get(root, "otherData");
  cr_assert_eq(json_integer_value(json_object_get(other, "dropped_spans")), 0);
  json_decref(root);
  unlink(path);
}

Test(trace_gpu, eager_node_times_are_ordered_on_the_gpu) { gpu_node_times(KD_EXEC_EAGER, "an EAGER graph submission"); }

Test(trace_gpu, graph_node_times_are_ordered_on_the_gpu) { gpu_node_times(KD_EXEC_GRAPH, "a CUDA graph launch"); }
