/* SPDX-License-Identifier: Apache-2.0 */
/* Host lane: a node refused for want of memory leaves the graph exactly as
 * it was, and a submission refused for want of memory loses nothing. The
 * library's malloc, calloc and realloc are wrapped at link time
 * (-Wl,--wrap, see CMakeLists.txt) so that one chosen call fails; every
 * allocation a node's addition, or a submission, makes is failed in turn.
 * Submissions run on CUDA sessions against the null driver
 * (tests/null_driver.c, no GPU), whose own allocations are not wrapped. */
#include <limits.h>
#include <stdlib.h>

#include "kdag_test.h"
#include "null_driver.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t count, size_t n);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t count, size_t n);
void *__wrap_realloc(void *p, size_t n);

/* The call to fail, counted from arming; -1: none. Per thread: only the
 * test's own thread is armed, so a pool worker's allocation (none runs
 * while nodes are added, nothing being submitted) could not be failed by
 * chance. */
static _Thread_local long fail_at = -1, calls;

static int fails(void) { return fail_at >= 0 && calls++ == fail_at; }

void *__wrap_malloc(size_t n) { return fails() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t count, size_t n) { return fails() ? NULL : __real_calloc(count, n); }
void *__wrap_realloc(void *p, size_t n) { return fails() ? NULL : __real_realloc(p, n); }

static void arm(long at) {
  calls = 0;
  fail_at = at;
}

/* Allocations made since arming; disarms. */
static long disarm(void) {
  fail_at = -1;
  return calls;
}

enum { TENSORS = 6, LEN = 64, NODES = 120 };

static void nothing(void *user) { (void)user; }

/* Node i of a fixed program over tensors t: reads of t[0] pile up (it is
 * never written, so its read set grows past a scan and is sorted), strided
 * views need footprints of their own, tensors enter the graph one by one,
 * and quarter-view writes retire some earlier accesses and not others. */
static kd_status add_node(kd_graph *g, const kd_tensor *t, int i) {
  char name[32];
  snprintf(name, sizeof name, "n%d", i);
  int64_t q = (i / 3) % 4 * (LEN / 4);
  kd_tensor dst = t[1 + (i < 5 * TENSORS ? i / 5 % (TENSORS - 1) : i % (TENSORS - 1))];
  kd_view quarter = {.tensor = dst, .rank = 1, .offset = q, .shape = {LEN / 4}, .strides = {1}};
  kd_view src = {.tensor = t[0], .rank = 1, .offset = (i * 7) % (LEN / 2), .shape = {LEN / 4}, .strides = {1}};
  kd_view even = {.tensor = dst, .rank = 1, .offset = i % 2, .shape = {LEN / 2}, .strides = {2}};
  kd_view half = {.tensor = t[0], .rank = 1, .offset = i % 2 * (LEN / 2), .shape = {LEN / 2}, .strides = {1}};
  switch (i % 3) {
  case 0: return kd_graph_op_copy(g, name, quarter, src, NULL);
  case 1: return kd_graph_op_add(g, name, even, half, half, NULL);
  default: {
    kd_garg acc[] = {kd_g_access(KD_INOUT, quarter), kd_g_access(KD_IN, src)};
    return kd_graph_host(g, name, nothing, NULL, acc, 2, NULL);
  }
  }
}

/* A HOST session with the program's tensors, and ref holding the whole
 * program, added without failures. */
static kd_session *program(kd_tensor *t, kd_graph **ref) {
  kd_session *s = kdt_host_session();
  int32_t init[LEN] = {0};
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {LEN}};
  for (int i = 0; i < TENSORS; ++i) KDT_OK(kd_tensor_from_host(s, &d, init, sizeof init, &t[i]));
  KDT_OK(kd_graph_create(s, ref));
  for (int i = 0; i < NODES; ++i) KDT_OK(add_node(*ref, t, i));
  return s;
}

/* g ended equal to ref; both go, and the session. */
static void same_and_done(kd_session *s, kd_graph *g, kd_graph *ref) {
  char *dot_g = kdt_dot_text(g), *dot_ref = kdt_dot_text(ref);
  cr_assert_str_eq(dot_g, dot_ref);
  free(dot_g), free(dot_ref);
  kd_graph_destroy(g);
  kd_graph_destroy(ref);
  kd_session_destroy(s);
}

Test(host_graph_oom, a_node_refused_for_want_of_memory_leaves_the_graph_as_it_was) {
  kd_tensor t[TENSORS];
  kd_graph *ref, *g;
  kd_session *s = program(t, &ref);
  KDT_OK(kd_graph_create(s, &g));
  long injected = 0, in_commit = 0;
  for (int i = 0; i < NODES; ++i) {
    kd_graph_stats before;
    KDT_OK(kd_graph_stats_get(g, &before));
    char *dot_before = kdt_dot_text(g);
    for (long k = 0;; ++k) {
      arm(k);
      kd_status st = add_node(g, t, i);
      long made = disarm();
      if (made <= k) { /* nothing left to fail: the node is in */
        KDT_OK(st);
        break;
      }
      injected++;
      /* Every allocation a node's addition makes is needed: one that fails
       * refuses the node (none is swallowed). */
      cr_assert_eq(st, KD_ERR_OUT_OF_MEMORY, "node %d, allocation %ld: %s: %s", i, k, kd_status_name(st),
                   kd_last_error());
      char want[32];
      snprintf(want, sizeof want, "node 'n%d'", i);
      cr_assert(strstr(kd_last_error(), want), "node %d, allocation %ld: %s", i, k, kd_last_error());
      in_commit += strstr(kd_last_error(), "no memory to add it") != NULL; /* past the checks, rolled back */
      kd_graph_stats after;
      KDT_OK(kd_graph_stats_get(g, &after));
      cr_assert(after.nodes == before.nodes && after.edges == before.edges && after.accesses == before.accesses &&
                    after.edges_dropped == before.edges_dropped,
                "node %d, allocation %ld: the counts changed", i, k);
      char *dot_after = kdt_dot_text(g);
      cr_assert_str_eq(dot_after, dot_before, "node %d, allocation %ld: the graph changed", i, k);
      free(dot_after);
    }
    free(dot_before);
  }
  cr_assert_gt(injected, NODES / 4, "only %ld allocations were failed", injected);
  /* The graph's own growth failed too, not only the footprints of strided
   * views (which fail before anything changes): a failure in
   * ctx_commit's reservations, among them those of the nodes that bind a
   * new tensor, whose rollback a deleted line of it fails this test. */
  cr_assert_gt(in_commit, TENSORS, "only %ld failures reached the node's commit", in_commit);
  /* Every later node inferred what it would have without the failures. */
  same_and_done(s, g, ref);
}

/* The same for explicit edges: kd_graph_edge grows its lists and its
 * search's stack (the search stamps grow with the nodes). */
Test(host_graph_oom, an_edge_refused_for_want_of_memory_leaves_the_graph_as_it_was) {
  kd_tensor t[TENSORS];
  kd_graph *ref, *g;
  kd_session *s = program(t, &ref);
  KDT_OK(kd_graph_create(s, &g));
  for (int i = 0; i < NODES; ++i) KDT_OK(add_node(g, t, i));
  long injected = 0;
  for (int i = 0; i + 7 < NODES; i += 2) { /* forward edges: never a cycle */
    KDT_OK(kd_graph_edge(ref, (kd_node)i, (kd_node)(i + 7)));
    char *dot_before = kdt_dot_text(g);
    for (long k = 0;; ++k) {
      arm(k);
      kd_status st = kd_graph_edge(g, (kd_node)i, (kd_node)(i + 7));
      long made = disarm();
      if (made <= k) {
        KDT_OK(st);
        break;
      }
      injected++;
      cr_assert_eq(st, KD_ERR_OUT_OF_MEMORY, "edge %d, allocation %ld: %s", i, k, kd_last_error());
      cr_assert(strstr(kd_last_error(), "kd_graph_edge: nodes"), "%s", kd_last_error());
      char *dot_after = kdt_dot_text(g);
      cr_assert_str_eq(dot_after, dot_before, "edge %d, allocation %ld: the graph changed", i, k);
      free(dot_after);
    }
    free(dot_before);
  }
  cr_assert_geq(injected, 2, "only %ld allocations were failed", injected);
  KDT_FAILS(kd_graph_edge(g, (kd_node)(NODES - 1), 0), KD_ERR_CYCLE, "cycle");
  same_and_done(s, g, ref);
}

/* A submission of every kind of node in EAGER or GRAPH mode (the first one
 * in GRAPH mode builds and instantiates the CUDA graph), each of its
 * allocations failed in turn, on a fresh graph each time: the submission
 * is refused with KD_ERR_OUT_OF_MEMORY and a message, or goes through
 * (a failure kdag can do without); either way the next submission works
 * with the right data, and at the end the driver has every object back.
 * With relaunch, the submission after it, a tensor rebound in between
 * (which patches a CUDA graph): warm, it makes no allocation at all. */
/* A CUDA session of mode on the null driver. */
static kd_session *null_session(kd_exec_mode mode) { return kdt_null_session(KDAG_NULL_DRIVER, mode, NULL); }

static void submit_oom(kd_exec_mode mode, int relaunch) {
  kd_session *s = null_session(mode);
  enum { N = 256 };
  float in[N], out[N], y_out[N];
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {N}};
  kd_tensor a, b, y, spare;
  KDT_OK(kd_tensor_create(s, &d, &a));
  KDT_OK(kd_tensor_create(s, &d, &b));
  KDT_OK(kd_tensor_create(s, &d, &y));
  KDT_OK(kd_tensor_create(s, &d, &spare));
  kdag_null_api drv; /* to count the launches: the null driver runs no kernel */
  cr_assert(kdag_null_api_get(KDAG_NULL_DRIVER, &drv));
  long refused = 0, swallowed = 0, k;
  for (k = 0;; ++k) {
    kd_graph *g;
    kd_sink *sink, *ysink;
    KDT_OK(kd_graph_create(s, &g));
    KDT_OK(kd_graph_upload(g, "up", a, in, sizeof in, NULL));
    KDT_OK(kd_graph_op_scale(g, "a*=2", kd_whole(a), 2.0, NULL));
    KDT_OK(kd_graph_op_copy(g, "b=a", kd_whole(b), kd_whole(a), NULL));
    KDT_OK(kd_graph_host(g, "host", nothing, NULL, NULL, 0, NULL));
    KDT_OK(kd_graph_op_add(g, "y=a+b", kd_whole(y), kd_whole(a), kd_whole(b), NULL));
    KDT_OK(kd_graph_sink(g, "a", a, out, sizeof out, &sink));
    KDT_OK(kd_graph_sink(g, "y", y, y_out, sizeof y_out, &ysink));
    if (relaunch) {
      KDT_OK(kd_graph_submit(g, NULL));
      KDT_OK(kd_sink_wait(sink));
      KDT_OK(kd_sink_wait(ysink));
      KDT_OK(kd_graph_rebind(g, b, spare));
    }
    for (int i = 0; i < N; ++i) in[i] = (float)(k * N + i);
    kdag_null_calls c0, c1;
    drv.calls_get(&c0);
    arm(k);
    kd_status st = kd_graph_submit(g, NULL);
    long made = disarm();
    drv.calls_get(&c1);
    if (!st) { /* it launched all its work: scale, copy and add, or the one CUDA graph */
      if (mode == KD_EXEC_EAGER)
        cr_assert_eq(c1.kernel_launches - c0.kernel_launches, 3u, "allocation %ld: %llu kernels launched", k,
                     (unsigned long long)(c1.kernel_launches - c0.kernel_launches));
      else
        cr_assert_eq(c1.graph_launches - c0.graph_launches, 1u, "allocation %ld: %llu graphs launched", k,
                     (unsigned long long)(c1.graph_launches - c0.graph_launches));
    }
    if (st) {
      refused++;
      cr_assert_eq(st, KD_ERR_OUT_OF_MEMORY, "allocation %ld: %s: %s", k, kd_status_name(st), kd_last_error());
      cr_assert(strstr(kd_last_error(), "kd_graph_submit"), "allocation %ld: %s", k, kd_last_error());
      (void)kd_sink_wait(sink); /* a copy committed before the failure, if any */
      (void)kd_sink_wait(ysink);
    } else if (made > k) {
      swallowed++; /* e.g. a deferred poll: nothing depends on it */
      KDT_OK(kd_sink_wait(sink));
      KDT_OK(kd_sink_wait(ysink));
    } else {
      KDT_OK(kd_sink_wait(sink));
      KDT_OK(kd_sink_wait(ysink));
      kd_graph_destroy(g);
      break; /* nothing left to fail */
    }
    for (int i = 0; i < N; ++i) in[i] = (float)(-k * N - i);
    KDT_OK(kd_graph_submit(g, NULL)); /* the session and the graph work */
    KDT_OK(kd_sink_wait(sink));
    for (int i = 0; i < N; ++i) cr_assert_eq(out[i], in[i], "allocation %ld: out[%d]", k, i);
    KDT_OK(kd_sink_wait(ysink));
    kd_graph_destroy(g);
  }
  cr_log_info("%s%s: %ld allocations, %ld refused the submission, %ld were done without",
              mode == KD_EXEC_GRAPH ? "GRAPH" : "EAGER", relaunch ? " relaunch" : "", k, refused, swallowed);
  if (relaunch) /* warm, even after a rebinding: the held array is a retired submission's */
    cr_assert_eq(k, 0, "a warm relaunch made %ld host allocations", k);
  else
    cr_assert_gt(refused, mode == KD_EXEC_GRAPH ? 10 : 2, "only %ld submissions were refused", refused);
  KDT_OK(kd_tensor_release(s, a));
  KDT_OK(kd_tensor_release(s, b));
  KDT_OK(kd_tensor_release(s, y));
  KDT_OK(kd_tensor_release(s, spare));
  kd_session_destroy(s);
  kdag_null_api nd;
  cr_assert(kdag_null_api_get(KDAG_NULL_DRIVER, &nd));
  kdag_null_calls c;
  nd.calls_get(&c);
  cr_assert_eq(c.lifetime_violations, 0);
  cr_assert_eq(c.device_frees, c.device_allocs);
  cr_assert_eq(c.events_destroyed, c.events_created);
  cr_assert_eq(c.exec_destroys, c.graph_instantiations);
  cr_assert_eq(c.module_unloads, c.module_loads);
}

Test(host_graph_oom, an_eager_submission_refused_for_want_of_memory_loses_nothing) {
  submit_oom(KD_EXEC_EAGER, 0);
  submit_oom(KD_EXEC_EAGER, 1);
}
Test(host_graph_oom, a_graph_submission_refused_for_want_of_memory_loses_nothing) {
  submit_oom(KD_EXEC_GRAPH, 0);
}
Test(host_graph_oom, a_graph_relaunch_refused_for_want_of_memory_loses_nothing) {
  submit_oom(KD_EXEC_GRAPH, 1);
}

static kd_status no_work(const kd_foreign_call *call, void *user) {
  (void)call, (void)user;
  return KD_OK;
}

/* EAGER's steady state makes no host allocation: once warm, resubmitting a
 * graph with an upload, a foreign node with a workspace and a sink, and
 * waiting on the sink, calls none of malloc, calloc and realloc (the
 * per-node workspace array is the plan's; it was a calloc per submission). */
Test(host_graph_oom, an_eager_resubmission_allocates_nothing_on_the_host) {
  kd_session *s = null_session(KD_EXEC_EAGER);
  float in[LEN] = {1, 2, 3}, out[LEN];
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  kd_tensor a;
  KDT_OK(kd_tensor_create(s, &d, &a));
  kd_graph *g;
  kd_sink *sink;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_upload(g, "up", a, in, sizeof in, NULL));
  kd_garg acc[] = {kd_g_inout(kd_whole(a))};
  KDT_OK(kd_graph_foreign(g, "lib", no_work, NULL, acc, 1, 4096, NULL, NULL, NULL));
  KDT_OK(kd_graph_sink(g, "down", a, out, sizeof out, &sink));
  for (int warm = 0; warm < 3; ++warm) {
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_sink_wait(sink));
  }
  arm(LONG_MAX); /* counts, fails nothing */
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sink));
  long made = disarm();
  cr_assert_eq(made, 0, "a warm EAGER submission and sink wait made %ld host allocations", made);
  cr_assert_eq(out[2], 3.0f);
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, a));
  kd_session_destroy(s);
}

/* HOST: every allocation of a submission failed in turn either refuses it
 * with KD_ERR_OUT_OF_MEMORY naming kd_graph_submit, or is not one it
 * needed (the submission succeeds with the sink's data). The sink reads the
 * submission's fifth tensor, whose hold grows the held set past its inline
 * room: a failure there was taken for success, the sink's tensor left
 * unheld. */
Test(host_graph_oom, a_host_submission_refused_for_want_of_memory_says_so) {
  kd_session *s = kdt_host_session();
  int32_t init[LEN], out[LEN];
  for (int i = 0; i < LEN; ++i) init[i] = i;
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {LEN}};
  kd_tensor t[5];
  for (int i = 0; i < 5; ++i) KDT_OK(kd_tensor_from_host(s, &d, init, sizeof init, &t[i]));
  long refused = 0;
  for (long k = 0;; ++k) {
    kd_graph *g;
    kd_sink *sink;
    KDT_OK(kd_graph_create(s, &g));
    for (int i = 0; i < 4; ++i) KDT_OK(kd_graph_op_fill(g, "fill", kd_whole(t[i]), (int32_t[]){i}, NULL));
    KDT_OK(kd_graph_sink(g, "t4", t[4], out, sizeof out, &sink));
    memset(out, 0xff, sizeof out);
    arm(k);
    kd_status st = kd_graph_submit(g, NULL);
    long made = disarm();
    if (st) {
      refused++;
      cr_assert_eq(st, KD_ERR_OUT_OF_MEMORY, "allocation %ld: %s", k, kd_last_error());
      cr_assert(strstr(kd_last_error(), "kd_graph_submit"), "allocation %ld: %s", k, kd_last_error());
      KDT_FAILS(kd_sink_wait(sink), KD_ERR_INVALID_ARGUMENT, "no submission");
    } else {
      cr_assert_leq(made, k, "allocation %ld of %ld failed, and the submission said it succeeded", k, made);
      KDT_OK(kd_sink_wait(sink));
      cr_assert_arr_eq(out, init, sizeof out);
      kd_graph_destroy(g);
      break; /* nothing left to fail */
    }
    kd_graph_destroy(g);
  }
  cr_assert_gt(refused, 2);
  for (int i = 0; i < 5; ++i) KDT_OK(kd_tensor_release(s, t[i]));
  kd_session_destroy(s);
}
