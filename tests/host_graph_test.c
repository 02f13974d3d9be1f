/* SPDX-License-Identifier: Apache-2.0 */
/* Host lane: declaring graphs (checks, inferred order, DOT) and running them
 * on a HOST session's thread pool. */
#include <ck_pr.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/serial.h"
#include "base/grow.h"
#include "graph/graph_impl.h"
#include "kdag_test.h"
#include <criterion/redirect.h> /* after criterion.h */
#include "kernels/host.h"

static kd_tensor ivec(kd_session *s, int64_t n, const int32_t *init) {
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {n}};
  kd_tensor t;
  if (init) KDT_OK(kd_tensor_from_host(s, &d, init, sizeof(int32_t) * (size_t)n, &t));
  else KDT_OK(kd_tensor_create(s, &d, &t));
  return t;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static kd_graph_stats stats(kd_graph *g) {
  kd_graph_stats st;
  KDT_OK(kd_graph_stats_get(g, &st));
  return st;
}

/* Sinks tensor t of g into out, submits g and waits for the sink. */
static void submit_and_sink(kd_graph *g, kd_tensor t, void *out, size_t bytes) {
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "out", t, out, bytes, &sink));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sink));
}

static int has_edge_text(kd_graph *g, const char *needle) {
  char *buf = kdt_dot_text(g);
  int found = strstr(buf, needle) != NULL;
  free(buf);
  return found;
}

/* The last error names the node, the argument and the tensor. */
static void names_node_argument_tensor(const char *node, int arg, kd_tensor t) {
  char want[3][64];
  snprintf(want[0], sizeof want[0], "node '%s'", node);
  snprintf(want[1], sizeof want[1], "argument %d", arg);
  snprintf(want[2], sizeof want[2], "tensor 0x%llx", (unsigned long long)t.bits);
  for (int i = 0; i < 3; ++i)
    cr_assert(strstr(kd_last_error(), want[i]), "message lacks \"%s\": %s", want[i], kd_last_error());
}

Test(host_graph, add_time_checks_have_their_own_codes) {
  kd_session *s = kdt_host_session(), *other = kdt_host_session();
  int32_t ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  kd_tensor a = ivec(s, 8, ones), b = ivec(s, 8, NULL), foreign = ivec(other, 8, ones);
  kd_tensor_desc hd = {.dtype = KD_I32, .rank = 1, .shape = {8}, .residency = KD_RESIDENCY_HOST};
  kd_tensor host;
  KDT_OK(kd_tensor_from_host(s, &hd, ones, sizeof ones, &host));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_node n;
  KDT_OK(kd_graph_op_copy(g, "first", kd_whole(b), kd_whole(a), &n));
  kd_graph_stats before = stats(g);
  char *dot_before = kdt_dot_text(g);
  kd_view lo = {.tensor = a, .rank = 1, .offset = 0, .shape = {5}, .strides = {1}};
  kd_view hi = {.tensor = a, .rank = 1, .offset = 3, .shape = {5}, .strides = {1}};
  KDT_FAILS(kd_graph_op_copy(g, "alias", hi, lo, &n), KD_ERR_ALIASING, "node 'alias'");
  cr_assert(strstr(kd_last_error(), "overlaps argument 0"), "%s", kd_last_error());
  names_node_argument_tensor("alias", 1, a);
  KDT_FAILS(kd_graph_op_copy(g, "foreign", kd_whole(b), kd_whole(foreign), &n), KD_ERR_WRONG_SESSION, "argument 1");
  names_node_argument_tensor("foreign", 1, foreign);
  kd_tensor dead = ivec(s, 8, ones);
  KDT_OK(kd_tensor_release(s, dead));
  KDT_FAILS(kd_graph_op_copy(g, "dead", kd_whole(b), kd_whole(dead), &n), KD_ERR_RELEASED, "node 'dead'");
  names_node_argument_tensor("dead", 1, dead);
  KDT_FAILS(kd_graph_op_copy(g, "host", kd_whole(b), kd_whole(host), &n), KD_ERR_NOT_RESIDENT, "host memory");
  names_node_argument_tensor("host", 1, host);
  kd_view past = {.tensor = a, .rank = 1, .offset = 4, .shape = {5}, .strides = {1}};
  KDT_FAILS(kd_graph_op_copy(g, "bounds", kd_whole(b), past, &n), KD_ERR_OUT_OF_BOUNDS, "argument 1");
  names_node_argument_tensor("bounds", 1, a);
  kd_tensor never = ivec(s, 8, NULL);
  KDT_FAILS(kd_graph_op_copy(g, "uninit", kd_whole(a), kd_whole(never), &n), KD_ERR_UNINITIALIZED, "node 'uninit'");
  names_node_argument_tensor("uninit", 1, never);
  /* A rejection after new tensors resolved: a later one must not find
   * them bound to the graph (nothing was bound). */
  kd_tensor fresh = ivec(s, 8, ones), fresh2 = ivec(s, 8, NULL);
  KDT_FAILS(kd_graph_op_copy(g, "late", kd_whole(fresh2), past, &n), KD_ERR_OUT_OF_BOUNDS, "node 'late'");
  kd_view strided = {.tensor = fresh, .rank = 1, .offset = 0, .shape = {4}, .strides = {2}};
  kd_view over = {.tensor = fresh, .rank = 1, .offset = 1, .shape = {4}, .strides = {1}};
  KDT_FAILS(kd_graph_op_copy(g, "strided alias", over, strided, &n), KD_ERR_ALIASING, "node 'strided alias'");
  kd_view half = {.tensor = b, .rank = 1, .offset = 0, .shape = {4}, .strides = {1}};
  KDT_FAILS(kd_graph_op_copy(g, "shape", half, kd_whole(a), &n), KD_ERR_INVALID_ARGUMENT,
            "node 'shape' (#1): argument 1 (tensor 0x");
  cr_assert(strstr(kd_last_error(), "has shape [8], argument 0 (tensor 0x") && strstr(kd_last_error(), ") [4]"),
            "the message gives both shapes: %s", kd_last_error());
  KDT_FAILS(kd_graph_op_axpy(g, "int axpy", kd_whole(b), kd_whole(a), 2.0, &n), KD_ERR_INVALID_ARGUMENT, "f32, f64, f16 or bf16");
  kd_function fn = {{0}, 0};
  kd_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0, 0};
  KDT_FAILS(kd_graph_kernel(g, "user", fn, &cfg, NULL, 0, &n), KD_ERR_NO_HOST_IMPL, "no host implementation");
  { /* the node's context, as the checks of a kernel node write it (by hand: see node_context) */
    kd_graph_stats st;
    KDT_OK(kd_graph_stats_get(g, &st));
    char want[64];
    snprintf(want, sizeof want, "kd_graph_kernel: node 'user' (#%u): ", (unsigned)st.nodes);
    cr_assert(strstr(kd_last_error(), want), "want \"%s\" in: %s", want, kd_last_error());
  }
  KDT_FAILS(kd_graph_foreign(g, "blas", NULL, NULL, NULL, 0, 0, NULL, NULL, &n), KD_ERR_NO_HOST_IMPL, "HOST");
  KDT_FAILS(kd_graph_op_fill(g, "", kd_whole(b), ones, &n), KD_ERR_INVALID_ARGUMENT, "name");
  /* Every rejected node left the graph exactly as it was: its counts,
   * its nodes and edges with their hazards, and what it infers next (a
   * binding or interval entry left behind would add or change an edge). */
  kd_graph_stats after = stats(g);
  cr_assert_eq(after.nodes, before.nodes);
  cr_assert_eq(after.edges, before.edges);
  cr_assert_eq(after.accesses, before.accesses);
  cr_assert_eq(after.edges_dropped, before.edges_dropped);
  char *dot_after = kdt_dot_text(g);
  cr_assert_str_eq(dot_after, dot_before);
  KDT_OK(kd_graph_op_copy(g, "next", kd_whole(a), kd_whole(fresh), &n));
  KDT_OK(kd_graph_op_copy(g, "last", kd_whole(fresh2), kd_whole(b), &n));
  kd_graph *ref;
  KDT_OK(kd_graph_create(s, &ref));
  KDT_OK(kd_graph_op_copy(ref, "first", kd_whole(b), kd_whole(a), &n));
  KDT_OK(kd_graph_op_copy(ref, "next", kd_whole(a), kd_whole(fresh), &n));
  KDT_OK(kd_graph_op_copy(ref, "last", kd_whole(fresh2), kd_whole(b), &n));
  char *dot_g = kdt_dot_text(g), *dot_ref = kdt_dot_text(ref);
  cr_assert_str_eq(dot_g, dot_ref);
  free(dot_before), free(dot_after), free(dot_g), free(dot_ref);
  kd_graph_destroy(ref);
  kd_graph_destroy(g);
  kd_session_destroy(other);
  kd_session_destroy(s);
}

static void no_op(void *user) { (void)user; }

/* A kernel node's messages name its index in full, digits in order (the
 * context is built by hand, not by snprintf), and a long name is cut off
 * rather than overflowing. */
Test(host_graph, kernel_node_messages_name_the_node_and_its_index) {
  kd_session *s = kdt_host_session();
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  for (int i = 0; i < 1203; ++i) KDT_OK(kd_graph_host(g, "h", no_op, NULL, NULL, 0, NULL));
  kd_function fn = {{0}, 0};
  kd_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0, 0};
  kd_node n;
  KDT_FAILS(kd_graph_kernel(g, "k", fn, &cfg, NULL, 0, &n), KD_ERR_NO_HOST_IMPL,
            "kd_graph_kernel: node 'k' (#1203): a user kernel has no host implementation");
  char name[400];
  memset(name, 'x', sizeof name - 1);
  name[sizeof name - 1] = 0;
  KDT_FAILS(kd_graph_kernel(g, name, fn, &cfg, NULL, 0, &n), KD_ERR_NO_HOST_IMPL, "kd_graph_kernel: node 'xxxx");
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

Test(host_graph, order_is_inferred_from_hazards) {
  kd_session *s = kdt_host_session();
  int32_t v[8] = {0};
  kd_tensor a = ivec(s, 8, v), b = ivec(s, 8, NULL), c = ivec(s, 8, NULL);
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_node n0, n1, n2, n3;
  KDT_OK(kd_graph_op_copy(g, "b=a", kd_whole(b), kd_whole(a), &n0));
  KDT_OK(kd_graph_op_copy(g, "c=b", kd_whole(c), kd_whole(b), &n1));   /* RAW on b */
  KDT_OK(kd_graph_op_fill(g, "b=7", kd_whole(b), (int32_t[]){7}, &n2)); /* WAR on b (after c=b), WAW after b=a */
  KDT_OK(kd_graph_op_fill(g, "c=1", kd_whole(c), (int32_t[]){1}, &n3)); /* WAW on c */
  cr_assert(has_edge_text(g, "n0 -> n1 [label=\"RAW t0\"]"));
  cr_assert(has_edge_text(g, "n1 -> n2 [label=\"WAR t0\"]"));
  cr_assert(has_edge_text(g, "n1 -> n3 [label=\"WAW t2\"]"));
  /* b=a -> b=7 is implied through c=b, which read all of what b=a wrote:
   * the local shadowing rule leaves it out. */
  cr_assert_not(has_edge_text(g, "n0 -> n2"));
  cr_assert_eq(stats(g).edges, 3);
  KDT_FAILS(kd_graph_edge(g, n3, n0), KD_ERR_CYCLE, "would close a cycle");
  KDT_OK(kd_graph_edge(g, n2, n3));
  cr_assert(has_edge_text(g, "n2 -> n3 [label=\"explicit\""));
  KDT_FAILS(kd_graph_edge(g, n0, n0), KD_ERR_INVALID_ARGUMENT, "itself");
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

Test(host_graph, disjoint_views_stay_independent) {
  kd_session *s = kdt_host_session();
  kd_tensor_desc d = {.dtype = KD_F64, .rank = 2, .shape = {4, 6}};
  kd_tensor m;
  KDT_OK(kd_tensor_create(s, &d, &m));
  kd_view even = {.tensor = m, .rank = 2, .offset = 0, .shape = {4, 3}, .strides = {1, 8}};
  kd_view odd = {.tensor = m, .rank = 2, .offset = 4, .shape = {4, 3}, .strides = {1, 8}};
  kd_view row0 = {.tensor = m, .rank = 1, .offset = 0, .shape = {6}, .strides = {4}};
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_fill(g, "even", even, (double[]){1.0}, NULL));
  KDT_OK(kd_graph_op_fill(g, "odd", odd, (double[]){2.0}, NULL));
  cr_assert_eq(stats(g).edges, 0, "even and odd columns are disjoint");
  KDT_OK(kd_graph_op_scale(g, "row0", row0, 3.0, NULL)); /* touches both */
  cr_assert(has_edge_text(g, "n0 -> n2 [label=\"RAW t0\"]"));
  cr_assert(has_edge_text(g, "n1 -> n2 [label=\"RAW t0\"]"));
  /* A view with a zero extent names nothing, however wide its others: it
   * is accepted, orders nothing and does nothing. */
  kd_view none = {.tensor = m, .rank = 2, .offset = 0, .shape = {0, 1ll << 62}, .strides = {1, 4}};
  uint32_t edges = stats(g).edges;
  KDT_OK(kd_graph_op_fill(g, "none", none, (double[]){9.0}, NULL));
  cr_assert_eq(stats(g).edges, edges, "an empty view conflicts with nothing");
  double out[24];
  submit_and_sink(g, m, out, sizeof out);
  for (int j = 0; j < 6; ++j)
    for (int i = 0; i < 4; ++i) {
      double want = (j % 2 ? 2.0 : 1.0) * (i == 0 ? 3.0 : 1.0);
      cr_assert_eq(out[j * 4 + i], want, "m(%d,%d) = %g, want %g", i, j, out[j * 4 + i], want);
    }
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* Within one node, views past KD_GRAPH_EXACT_RUNS runs are still told
 * apart exactly: even columns = odd columns of a 10 x 10000 matrix (5000
 * runs each, whose intervals meet) is one valid copy, while two views one
 * column apart of the same stride overlap and are refused. */
Test(host_graph, one_node_tells_wide_strided_views_apart) {
  kd_session *s = kdt_host_session();
  enum { ROWS = 10, COLS = 10000 };
  int32_t *v = malloc(sizeof(int32_t) * ROWS * COLS);
  cr_assert_not_null(v);
  for (int i = 0; i < ROWS * COLS; ++i) v[i] = i;
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 2, .shape = {ROWS, COLS}};
  kd_tensor m;
  KDT_OK(kd_tensor_from_host(s, &d, v, sizeof(int32_t) * ROWS * COLS, &m));
  kd_view even = {.tensor = m, .rank = 2, .offset = 0, .shape = {ROWS, COLS / 2}, .strides = {1, 2 * ROWS}};
  kd_view odd = even;
  odd.offset = ROWS;
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_copy(g, "even=odd", even, odd, NULL));
  kd_view shifted = even, head = even;
  head.shape[1] = shifted.shape[1] = COLS / 2 - 1;
  shifted.offset = 2 * ROWS; /* the next even column on: shares all but one column with head */
  KDT_FAILS(kd_graph_op_copy(g, "head=shifted", head, shifted, NULL), KD_ERR_ALIASING, "overlaps argument 0");
  submit_and_sink(g, m, v, sizeof(int32_t) * ROWS * COLS);
  for (int j = 0; j < COLS; j += 2)
    for (int i = 0; i < ROWS; ++i)
      cr_assert_eq(v[j * ROWS + i], (j + 1) * ROWS + i, "m(%d,%d)", i, j);
  free(v);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* A write of an empty view writes nothing: it does not make the tensor
 * count as written, for a later read or for a rebinding. */
Test(host_graph, an_empty_write_initializes_nothing) {
  kd_session *s = kdt_host_session();
  kd_tensor t = ivec(s, 8, NULL), u = ivec(s, 8, NULL);
  kd_view none = {.tensor = t, .rank = 1, .offset = 0, .shape = {0}, .strides = {1}};
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_fill(g, "nothing", none, (int32_t[]){7}, NULL));
  int32_t out[8];
  kd_sink *sink;
  KDT_FAILS(kd_graph_sink(g, "t", t, out, sizeof out, &sink), KD_ERR_UNINITIALIZED, "which no earlier node");
  KDT_OK(kd_graph_op_fill(g, "all", kd_whole(t), (int32_t[]){7}, NULL));
  KDT_OK(kd_graph_sink(g, "t", t, out, sizeof out, &sink)); /* after a real write */
  kd_graph_destroy(g);
  /* Rebinding: the read before the whole write is checked against u. */
  KDT_OK(kd_graph_create(s, &g));
  kd_tensor w = ivec(s, 8, (int32_t[8]){0});
  KDT_OK(kd_graph_op_fill(g, "nothing", (kd_view){.tensor = w, .rank = 1, .shape = {0}, .strides = {1}},
                       (int32_t[]){7}, NULL));
  kd_tensor x = ivec(s, 8, NULL);
  KDT_OK(kd_graph_op_copy(g, "x=w", kd_whole(x), kd_whole(w), NULL));
  KDT_FAILS(kd_graph_rebind(g, w, u), KD_ERR_UNINITIALIZED, "reads old before any node writes it");
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* Forty single-element reads of one tensor keep forty active entries (its
 * set switches from a scan to a sorted search past KD_IVSET_SCAN, 32); a write of one
 * element then follows only that element's reader, and a whole write the
 * rest. Readers are declared out of element order. */
Test(host_graph, many_active_accesses_of_one_tensor_order_exactly) {
  kd_session *s = kdt_host_session();
  int32_t v[40];
  for (int i = 0; i < 40; ++i) v[i] = i;
  kd_tensor a = ivec(s, 40, v), c = ivec(s, 40, NULL);
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_node reader[40];
  for (int k = 0; k < 40; ++k) {
    int i = (k * 17) % 40;
    kd_view src = {.tensor = a, .rank = 1, .offset = i, .shape = {1}, .strides = {1}};
    kd_view dst = {.tensor = c, .rank = 1, .offset = i, .shape = {1}, .strides = {1}};
    char name[16];
    snprintf(name, sizeof name, "read %d", i);
    KDT_OK(kd_graph_op_copy(g, name, dst, src, &reader[i]));
  }
  cr_assert_eq(stats(g).edges, 0, "reads of one tensor and disjoint writes of another are independent");
  kd_node one, all;
  kd_view e37 = {.tensor = a, .rank = 1, .offset = 37, .shape = {1}, .strides = {1}};
  KDT_OK(kd_graph_op_fill(g, "a[37]=0", e37, (int32_t[]){0}, &one));
  cr_assert_eq(stats(g).edges, 1);
  char want[64];
  /* t1 is a: each copy names its destination c first. */
  snprintf(want, sizeof want, "n%u -> n%u [label=\"WAR t1\"]", reader[37], one);
  cr_assert(has_edge_text(g, want), "%s", want);
  KDT_OK(kd_graph_op_fill(g, "a=0", kd_whole(a), (int32_t[]){0}, &all));
  cr_assert_eq(stats(g).edges, 1 + 39 + 1, "39 readers left (WAR) and a[37]=0 (WAW)");
  for (int i = 0; i < 40; ++i) {
    if (i == 37) continue;
    snprintf(want, sizeof want, "n%u -> n%u [label=\"WAR t1\"]", reader[i], all);
    cr_assert(has_edge_text(g, want), "%s", want);
  }
  int32_t out[40];
  submit_and_sink(g, c, out, sizeof out);
  for (int i = 0; i < 40; ++i) cr_assert_eq(out[i], i, "c[%d] = %d", i, out[i]);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* A graph's arrays outgrow the heap into mappings of their own
 * (KD_GROW_MAPPED and up) and keep their contents as they grow: a
 * 20,000-node chain of writes. */
Test(host_graph, a_large_graph_keeps_its_nodes_and_edges_as_it_grows) {
  kd_session *s = kdt_host_session();
  kd_tensor a = ivec(s, 4, NULL);
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  for (int32_t i = 0; i < 20000; ++i) KDT_OK(kd_graph_op_fill(g, "fill", kd_whole(a), &i, NULL));
  kd_graph_stats st = stats(g);
  cr_assert_eq(st.nodes, 20000);
  cr_assert_eq(st.edges, 19999, "each fill follows the one before (WAW)");
  cr_assert(has_edge_text(g, "n19998 -> n19999 [label=\"WAW t0\"]"));
  cr_assert(has_edge_text(g, "n0 -> n1 [label=\"WAW t0\"]"));
  int32_t out[4];
  submit_and_sink(g, a, out, sizeof out);
  for (int i = 0; i < 4; ++i) cr_assert_eq(out[i], 19999);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* An explicit edge that exists already, inferred or declared, is not added
 * again (a CUDA graph node's dependencies must not repeat); the message of
 * a bad edge names the argument. */
Test(host_graph, a_repeated_edge_is_added_once) {
  kd_session *s = kdt_host_session();
  kd_tensor a = ivec(s, 8, NULL), b = ivec(s, 8, NULL), c = ivec(s, 8, NULL);
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_node n0, n1, n2;
  KDT_OK(kd_graph_op_fill(g, "a=1", kd_whole(a), (int32_t[]){1}, &n0));
  KDT_OK(kd_graph_op_copy(g, "b=a", kd_whole(b), kd_whole(a), &n1)); /* RAW n0 -> n1 */
  KDT_OK(kd_graph_op_fill(g, "c=2", kd_whole(c), (int32_t[]){2}, &n2));
  cr_assert_eq(stats(g).edges, 1);
  uint32_t dropped = stats(g).edges_dropped;
  KDT_OK(kd_graph_edge(g, n0, n1)); /* the inferred edge again */
  cr_assert_eq(stats(g).edges, 1, "an inferred edge is not declared twice");
  KDT_OK(kd_graph_edge(g, n1, n2));
  KDT_OK(kd_graph_edge(g, n1, n2));
  cr_assert_eq(stats(g).edges, 2, "a declared edge is added once");
  cr_assert_eq(stats(g).edges_dropped, dropped + 2);
  KDT_FAILS(kd_graph_edge(g, n0, 7), KD_ERR_INVALID_ARGUMENT, "argument after is no node");
  KDT_FAILS(kd_graph_edge(g, 9, n0), KD_ERR_INVALID_ARGUMENT, "argument before is no node");
  int32_t out[8];
  submit_and_sink(g, b, out, sizeof out);
  for (int i = 0; i < 8; ++i) cr_assert_eq(out[i], 1);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}


/* A write after R nodes that each read both tensors it writes: R edges,
 * each once, for few readers (a node's edges scanned for a repeat) and for
 * many (past the scan, pred_mark); explicit edges then see the inferred
 * ones (linked into the outgoing lists on the first kd_graph_edge). */
Test(host_graph, a_write_after_many_readers_gets_each_edge_once) {
  kd_session *s = kdt_host_session();
  int32_t init[8] = {0};
  kd_tensor a = ivec(s, 8, init), b = ivec(s, 8, init);
  static const uint32_t readers[] = {3, 16, 17, 40};
  for (size_t k = 0; k < sizeof readers / sizeof *readers; ++k) {
    uint32_t r = readers[k];
    kd_graph *g;
    KDT_OK(kd_graph_create(s, &g));
    kd_garg reads[] = {kd_g_in(kd_whole(a)), kd_g_in(kd_whole(b))};
    for (uint32_t i = 0; i < r; ++i) KDT_OK(kd_graph_host(g, "read a, b", no_op, NULL, reads, 2, NULL));
    kd_garg writes[] = {kd_g_out(kd_whole(b)), kd_g_out(kd_whole(a))};
    kd_node w;
    KDT_OK(kd_graph_host(g, "write b, a", no_op, NULL, writes, 2, &w));
    cr_assert_eq(stats(g).edges, r, "%u readers: one WAR edge from each (%u)", r, stats(g).edges);
    cr_assert_eq(stats(g).edges_dropped, r, "%u readers: the second tensor's edges repeat the first's", r);
    KDT_OK(kd_graph_edge(g, 0, w)); /* inferred already */
    KDT_OK(kd_graph_edge(g, r - 1, w));
    cr_assert_eq(stats(g).edges, r);
    cr_assert_eq(stats(g).edges_dropped, r + 2);
    KDT_FAILS(kd_graph_edge(g, w, r / 2), KD_ERR_CYCLE, "would close a cycle");
    KDT_OK(kd_graph_host(g, "read a", no_op, NULL, reads, 1, NULL)); /* RAW w -> it */
    KDT_OK(kd_graph_edge(g, w, w + 1));                                 /* inferred after the lists were linked */
    cr_assert_eq(stats(g).edges, r + 1);
    cr_assert_eq(stats(g).edges_dropped, r + 3);
    KDT_OK(kd_graph_submit(g, NULL));
    kd_graph_destroy(g);
  }
  KDT_OK(kd_tensor_release(s, a));
  KDT_OK(kd_tensor_release(s, b));
  kd_session_destroy(s);
}

/* kd_graph_edge against a reference: seeded random edges among 150 nodes,
 * each refused as a cycle exactly when its target already reaches its
 * source (breadth-first search over an adjacency matrix), added once
 * otherwise, a repeat counted as dropped. */
Test(host_graph, explicit_edges_match_a_reference_reachability) {
  enum { N = 150, TRIES = 3000 };
  kd_session *s = kdt_host_session();
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  for (int i = 0; i < N; ++i) KDT_OK(kd_graph_host(g, "n", no_op, NULL, NULL, 0, NULL));
  static unsigned char adj[N][N];
  memset(adj, 0, sizeof adj);
  uint32_t x = 2024, edges = 0, dropped = 0, cycles = 0;
  for (int t = 0; t < TRIES; ++t) {
    x = x * 1664525u + 1013904223u;
    uint32_t u = (x >> 8) % N, v = (x >> 20) % N;
    if (u == v) continue;
    /* Does v reach u already? */
    unsigned char seen[N] = {0};
    uint32_t queue[N], head = 0, tail = 0;
    queue[tail++] = v;
    seen[v] = 1;
    int reach = 0;
    while (head < tail && !reach) {
      uint32_t n = queue[head++];
      reach = n == u;
      for (uint32_t m = 0; m < N; ++m)
        if (adj[n][m] && !seen[m]) seen[m] = 1, queue[tail++] = m;
    }
    kd_status st = kd_graph_edge(g, u, v);
    if (reach) {
      cr_assert_eq(st, KD_ERR_CYCLE, "try %d: %u -> %u closes a cycle, got %d", t, u, v, (int)st);
      cycles++;
    } else {
      cr_assert_eq(st, KD_OK, "try %d: %u -> %u: %s", t, u, v, kd_last_error());
      if (adj[u][v]) dropped++;
      else edges++, adj[u][v] = 1;
    }
  }
  cr_assert(cycles > 100 && dropped > 10 && edges > 100, "the seed exercises every outcome (%u %u %u)", cycles,
            dropped, edges);
  cr_assert_eq(stats(g).edges, edges);
  cr_assert_eq(stats(g).edges_dropped, dropped);
  KDT_OK(kd_graph_submit(g, NULL)); /* the plan's topological sort accepts it */
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* Only kd_whole's rank -1 means the whole tensor; any other negative rank
 * is a bad view. */
/* A write must name each element once: a stride of 0, or strides that make
 * a view overlap itself, race inside one kernel (and would give the GPU and
 * HOST different answers). Reads may revisit (a broadcast); a view with
 * unusual but disjoint strides writes. */
Test(host_graph, a_write_through_a_view_that_revisits_elements_is_aliasing) {
  kd_session *s = kdt_host_session();
  int32_t init[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  kd_tensor t = ivec(s, 8, init), u = ivec(s, 8, init);
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_view zero_stride = {.tensor = t, .rank = 1, .offset = 2, .shape = {4}, .strides = {0}};
  kd_view overlapping = {.tensor = t, .rank = 2, .offset = 0, .shape = {2, 2}, .strides = {1, 1}}; /* 0 1 1 2 */
  KDT_FAILS(kd_graph_op_fill(g, "fill", zero_stride, (int32_t[]){9}, NULL), KD_ERR_ALIASING,
            "writes some elements of tensor");
  KDT_FAILS(kd_graph_op_copy(g, "copy", overlapping, kd_whole(u), NULL), KD_ERR_ALIASING, "more than once");
  kd_garg inout[] = {kd_g_inout(zero_stride)};
  KDT_FAILS(kd_graph_host(g, "host", no_op, NULL, inout, 1, NULL), KD_ERR_ALIASING, "argument 0");
  cr_assert_eq(stats(g).nodes, 0, "refused nodes leave the graph as it was");
  /* Elements 0 2 4 3 5 7: strides that are not sorted, but never meet. */
  kd_view disjoint = {.tensor = t, .rank = 2, .offset = 0, .shape = {2, 3}, .strides = {3, 2}};
  KDT_OK(kd_graph_op_fill(g, "fill disjoint", disjoint, (int32_t[]){0}, NULL));
  /* Past 4096 runs the footprint is a bounding interval; the strides decide. */
  kd_tensor big = ivec(s, 15000, NULL);
  kd_view big_zero = {.tensor = big, .rank = 2, .offset = 0, .shape = {2, 5000}, .strides = {1, 0}};
  kd_view big_apart = {.tensor = big, .rank = 2, .offset = 0, .shape = {2, 5000}, .strides = {1, 3}};
  KDT_FAILS(kd_graph_op_fill(g, "fill big", big_zero, (int32_t[]){1}, NULL), KD_ERR_ALIASING, "more than once");
  KDT_OK(kd_graph_op_fill(g, "fill big apart", big_apart, (int32_t[]){1}, NULL));
  /* Strides that prove nothing (2 is less than the 5 elements stride 2
   * spans over 3): the runs decide. 2a + 3b never repeats, while
   * a + 2b does. */
  kd_tensor wide = ivec(s, 12002, NULL);
  kd_view interleaved = {.tensor = wide, .rank = 2, .offset = 0, .shape = {3, 4000}, .strides = {2, 3}};
  kd_view revisits = {.tensor = wide, .rank = 2, .offset = 0, .shape = {3, 4000}, .strides = {1, 2}};
  KDT_OK(kd_graph_op_fill(g, "fill interleaved", interleaved, (int32_t[]){2}, NULL));
  KDT_FAILS(kd_graph_op_fill(g, "fill revisits", revisits, (int32_t[]){2}, NULL), KD_ERR_ALIASING, "more than once");
  /* A broadcast read: u[i] = t[1] for i < 4. */
  kd_view u4 = {.tensor = u, .rank = 1, .offset = 0, .shape = {4}, .strides = {1}};
  kd_view t2 = {.tensor = t, .rank = 1, .offset = 1, .shape = {4}, .strides = {0}};
  KDT_OK(kd_graph_op_copy(g, "broadcast", u4, t2, NULL));
  int32_t got[8], tgot[8];
  kd_sink *ts;
  KDT_OK(kd_graph_sink(g, "t", t, tgot, sizeof tgot, &ts));
  submit_and_sink(g, u, got, sizeof got);
  KDT_OK(kd_sink_wait(ts));
  for (int i = 0; i < 4; ++i) cr_assert_eq(got[i], 2, "u[%d] = t[1], untouched by the fill", i);
  for (int i = 4; i < 8; ++i) cr_assert_eq(got[i], init[i]);
  /* The disjoint fill wrote exactly elements 0 2 4 3 5 7 of t. */
  int32_t want[8] = {0, 2, 0, 0, 0, 0, 7, 0};
  cr_assert_arr_eq(tgot, want, sizeof tgot, "t after the disjoint fill");
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

Test(host_graph, a_negative_rank_other_than_whole_is_refused) {
  kd_session *s = kdt_host_session();
  kd_tensor a = ivec(s, 8, NULL);
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_view v = kd_whole(a);
  v.rank = -7;
  KDT_FAILS(kd_graph_op_fill(g, "bad", v, (int32_t[]){1}, NULL), KD_ERR_INVALID_ARGUMENT, "view rank -7");
  cr_assert_eq(stats(g).nodes, 0, "a rejected node leaves the graph as it was");
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* The graph finds a tensor's binding by its handle's slot: a slot that a
 * released tensor left and a new tensor reuses names a new tensor. */
Test(host_graph, a_reused_handle_slot_is_a_new_tensor) {
  kd_session *s = kdt_host_session();
  kd_tensor x = ivec(s, 8, NULL);
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_fill(g, "x=1", kd_whole(x), (int32_t[]){1}, NULL));
  KDT_OK(kd_tensor_release(s, x)); /* the graph keeps it */
  kd_tensor y = ivec(s, 8, NULL);
  cr_assert_eq(y.bits & 0xffffff, x.bits & 0xffffff, "the new tensor should reuse the slot");
  KDT_OK(kd_graph_op_fill(g, "y=2", kd_whole(y), (int32_t[]){2}, NULL));
  cr_assert_eq(stats(g).edges, 0, "y is not x");
  KDT_OK(kd_graph_op_fill(g, "y=3", kd_whole(y), (int32_t[]){3}, NULL));
  cr_assert(has_edge_text(g, "n1 -> n2 [label=\"WAW t1\"]"));
  KDT_FAILS(kd_graph_rebind(g, x, y), KD_ERR_RELEASED, "kd_graph_rebind: argument old: ");
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

Test(host_graph, pipeline_runs_and_resubmits_with_rebinding) {
  kd_session *s = kdt_host_session();
  float x[16], y[16];
  kdt_fill_random(x, 16, 3);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {16}};
  kd_tensor tx, ty, tz, tsum;
  KDT_OK(kd_tensor_create(s, &d, &tx));
  KDT_OK(kd_tensor_create(s, &d, &ty));
  KDT_OK(kd_tensor_create(s, &d, &tz));
  kd_tensor_desc one = {.dtype = KD_F32, .rank = 0};
  KDT_OK(kd_tensor_create(s, &one, &tsum));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_upload(g, "x", tx, x, sizeof x, NULL));
  KDT_OK(kd_graph_op_fill(g, "y=1", kd_whole(ty), (float[]){1.0f}, NULL));
  KDT_OK(kd_graph_op_axpy(g, "y+=2x", kd_whole(ty), kd_whole(tx), 2.0, NULL));
  KDT_OK(kd_graph_op_add(g, "z=x+y", kd_whole(tz), kd_whole(tx), kd_whole(ty), NULL));
  KDT_OK(kd_graph_op_scale(g, "z*=0.5", kd_whole(tz), 0.5, NULL));
  KDT_OK(kd_graph_op_sum(g, "sum", kd_whole(tsum), kd_whole(tz), NULL));
  float z[16], total = 0;
  kd_sink *sz, *ss;
  KDT_OK(kd_graph_sink(g, "z", tz, z, sizeof z, &sz));
  KDT_OK(kd_graph_sink(g, "sum", tsum, &total, sizeof total, &ss));
  kd_session_stats k0, k;
  KDT_OK(kd_session_stats_get(s, &k0));
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 16; ++i) x[i] += 1.0f; /* read at submit */
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_sink_wait(sz));
    KDT_OK(kd_sink_wait(ss));
    float want_total = 0;
    for (int i = 0; i < 16; ++i) {
      float yi = 2.0f * x[i] + 1.0f, zi = (x[i] + yi) * 0.5f;
      cr_assert_eq(z[i], zi, "round %d z[%d] = %g, want %g", round, i, z[i], zi);
      want_total += zi;
    }
    cr_assert_float_eq(total, want_total, 1e-4f * (1 + fabsf(want_total)));
  }
  KDT_FAILS(kd_sink_wait(sz), KD_ERR_INVALID_ARGUMENT, "no submission");
  /* Rebind z to a fresh tensor: same plan, new output. */
  kd_tensor tz2;
  KDT_OK(kd_tensor_create(s, &d, &tz2));
  KDT_OK(kd_graph_rebind(g, tz, tz2));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sz));
  float direct[16];
  KDT_OK(kd_tensor_download(s, tz2, direct, sizeof direct));
  for (int i = 0; i < 16; ++i)
    cr_assert_eq(direct[i], z[i], "the rebound tensor holds the result: [%d] %g vs sink %g", i, direct[i], z[i]);
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(k.plans_built - k0.plans_built, 1, "four submissions, one rebinding: one plan, built %llu",
               (unsigned long long)(k.plans_built - k0.plans_built));
  /* A new node changes the shape: the next submission plans again, once. */
  KDT_OK(kd_graph_op_scale(g, "z*=2", kd_whole(tz2), 2.0, NULL));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sz));
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(k.plans_built - k0.plans_built, 2);
  kd_tensor_desc other = {.dtype = KD_F64, .rank = 1, .shape = {16}};
  kd_tensor wrong;
  KDT_OK(kd_tensor_create(s, &other, &wrong));
  KDT_FAILS(kd_graph_rebind(g, tz2, wrong), KD_ERR_INVALID_ARGUMENT, "dtype, shape");
  (void)y;
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

Test(host_graph, exec_mode_and_set_arg_are_checked_and_a_host_session_ignores_graph_mode) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  o.exec_mode = KD_EXEC_GRAPH; /* CUDA sessions only: HOST runs its pool */
  kd_session *s;
  KDT_OK(kd_session_create(&o, &s));
  int32_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, got[8];
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {8}};
  kd_tensor a;
  KDT_OK(kd_tensor_from_host(s, &d, v, sizeof v, &a));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_node n;
  kd_tensor b;
  KDT_OK(kd_tensor_create(s, &d, &b));
  KDT_OK(kd_graph_op_add(g, "b=a+a", kd_whole(b), kd_whole(a), kd_whole(a), &n));
  KDT_OK(kd_graph_op_add(g, "a=b+b", kd_whole(a), kd_whole(b), kd_whole(b), NULL));
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "a", a, got, sizeof got, &sink));
  KDT_FAILS(kd_graph_set_exec_mode(g, (kd_exec_mode)5), KD_ERR_INVALID_ARGUMENT, "argument mode 5");
  KDT_FAILS(kd_graph_set_exec_mode(NULL, KD_EXEC_GRAPH), KD_ERR_INVALID_ARGUMENT, "argument graph");
  KDT_OK(kd_graph_set_exec_mode(g, KD_EXEC_GRAPH));
  KDT_FAILS(kd_graph_set_arg(g, n, 0, kd_arg_i32(1)), KD_ERR_INVALID_ARGUMENT, "not a kernel node");
  KDT_FAILS(kd_graph_set_arg(g, 99, 0, kd_arg_i32(1)), KD_ERR_INVALID_ARGUMENT, "node 99");
  KDT_FAILS(kd_graph_set_arg(NULL, n, 0, kd_arg_i32(1)), KD_ERR_INVALID_ARGUMENT, "argument graph");
  /* A NULL graph is named as such, also where a whole view is resolved first. */
  KDT_FAILS(kd_graph_op_transpose(NULL, "t", kd_whole(a), kd_whole(b), NULL), KD_ERR_INVALID_ARGUMENT,
            "kd_graph_op_transpose: argument graph is NULL");
  KDT_FAILS(kd_graph_edge(NULL, 0, 1), KD_ERR_INVALID_ARGUMENT, "kd_graph_edge: argument graph is NULL");
  KDT_FAILS(kd_graph_rebind(NULL, a, b), KD_ERR_INVALID_ARGUMENT, "kd_graph_rebind: argument graph is NULL");
  KDT_FAILS(kd_graph_submit(NULL, NULL), KD_ERR_INVALID_ARGUMENT, "kd_graph_submit: argument graph is NULL");
  for (int i = 0; i < 4; ++i) KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sink));
  for (int i = 0; i < 8; ++i) cr_assert_eq(got[i], 256 * v[i]); /* (4^4) */
  kd_session_stats k;
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(k.graph_launches + k.graph_instantiations, 0);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

Test(host_graph, release_everything_right_after_submit) {
  kd_session *s = kdt_host_session();
  int32_t a[1000];
  for (int i = 0; i < 1000; ++i) a[i] = i;
  kd_tensor ta = ivec(s, 1000, a), tb = ivec(s, 1000, NULL);
  kd_tensor_desc one = {.dtype = KD_I32, .rank = 0};
  kd_tensor ts;
  KDT_OK(kd_tensor_create(s, &one, &ts));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_add(g, "b=a+a", kd_whole(tb), kd_whole(ta), kd_whole(ta), NULL));
  KDT_OK(kd_graph_op_sum(g, "sum", kd_whole(ts), kd_whole(tb), NULL));
  int32_t total = 0;
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "sum", ts, &total, sizeof total, &sink));
  for (int i = 0; i < 50; ++i) KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_tensor_release(s, ta));
  KDT_OK(kd_tensor_release(s, tb));
  KDT_OK(kd_tensor_release(s, ts));
  KDT_OK(kd_sink_wait(sink));
  cr_assert_eq(total, 999 * 1000);
  kd_graph_destroy(g); /* the last holder: the tensors go once their work is done */
  uint32_t pending = 1;
  /* A run marks itself done just after its last node returns: poll with a
   * deadline, not a count of tight retries. */
  for (double until = now_ms() + 10000; pending && now_ms() < until;) {
    KDT_OK(kd_session_reap(s, &pending));
    if (pending) sched_yield();
  }
  kd_session_stats k;
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(pending, 0);
  cr_assert_eq(k.device_syncs, 0);
  cr_assert_eq(k.submissions, 50);
  kd_session_destroy(s);
}

static void wait_gate(void *p) {
  while (!ck_pr_load_int(p)) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
}

/* Empty submissions queued behind a long one are finished by a loop on the
 * worker that finishes the long one, not by one nested call each (300,000
 * nested calls overflowed a worker's stack). */
Test(host_graph, a_long_queue_of_empty_submissions_finishes_without_nesting, .timeout = 120) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  o.completion_ring_capacity = 1u << 20;
  kd_session *s;
  KDT_OK(kd_session_create(&o, &s));
  int gate = 0;
  kd_graph *slow, *empty;
  KDT_OK(kd_graph_create(s, &slow));
  KDT_OK(kd_graph_host(slow, "gate", wait_gate, &gate, NULL, 0, NULL));
  KDT_OK(kd_graph_create(s, &empty));
  KDT_OK(kd_graph_submit(slow, NULL));
  enum { EMPTY = 300000 };
  kd_ticket last = {0};
  for (int i = 0; i < EMPTY; ++i) {
    kd_status st = kd_graph_submit(empty, &last);
    if (st) cr_assert_fail("submission %d: %s", i, kd_last_error());
  }
  int done = 0;
  KDT_OK(kd_ticket_done(s, last, &done));
  cr_assert_eq(done, 0, "queued behind the gated submission");
  ck_pr_store_int(&gate, 1);
  while (!done) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
    KDT_OK(kd_ticket_done(s, last, &done));
  }
  kd_session_stats k;
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(k.inflight, 0, "every completion retired with the last (%llu in flight)",
               (unsigned long long)k.inflight);
  kd_graph_destroy(empty);
  kd_graph_destroy(slow);
  kd_session_destroy(s);
}

typedef struct sink_waiter {
  kd_graph *g;
  kd_sink *sink;
  int32_t *out, got[4];
  kd_status st;
  int submitted;
  long tid;
} sink_waiter;

/* 1 when thread tid of this process is asleep (state S in /proc). */
static int thread_sleeps(long tid) {
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *close = strrchr(buf, ')'); /* "tid (comm) S ..." */
  return close && close[1] == ' ' && close[2] == 'S';
}

static void *submit_then_wait(void *p) {
  sink_waiter *w = p;
  ck_pr_store_64((uint64_t *)&w->tid, (uint64_t)syscall(SYS_gettid));
  w->st = kd_graph_submit(w->g, NULL);
  ck_pr_store_int(&w->submitted, 1);
  if (!w->st) w->st = kd_sink_wait(w->sink);
  memcpy(w->got, w->out, sizeof w->got);
  return NULL;
}

/* HOST: a thread waiting on a sink gets its own submission's copy even when
 * another thread submits the graph again while it waits; the later
 * submission stays pending for its own wait. */
Test(host_graph, a_sink_wait_gets_its_submission_when_another_thread_resubmits, .timeout = 20) {
  kd_session *s = kdt_host_session();
  kd_tensor t = ivec(s, 4, NULL);
  int32_t src[4] = {1, 1, 1, 1}, out[4] = {0};
  int gate = 0;
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_upload(g, "t<-src", t, src, sizeof src, NULL));
  kd_garg acc[] = {kd_g_access(KD_IN, kd_whole(t))};
  KDT_OK(kd_graph_host(g, "gate", wait_gate, &gate, acc, 1, NULL));
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "out", t, out, sizeof out, &sink));
  sink_waiter w = {.g = g, .sink = sink, .out = out};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, submit_then_wait, &w), 0);
  while (!ck_pr_load_int(&w.submitted)) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  /* Past its submit, the waiter sleeps only inside kd_sink_wait, on the
   * gated run: wait for that rather than for a guess of time. */
  double until = now_ms() + 10000;
  while (!thread_sleeps((long)ck_pr_load_64((uint64_t *)&w.tid)) && now_ms() < until) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  cr_assert(thread_sleeps((long)ck_pr_load_64((uint64_t *)&w.tid)), "the waiter never blocked in kd_sink_wait");
  for (int i = 0; i < 4; ++i) src[i] = 2;
  KDT_OK(kd_graph_submit(g, NULL)); /* read at submit: 2s */
  ck_pr_store_int(&gate, 1);
  pthread_join(th, NULL);
  KDT_OK(w.st);
  for (int i = 0; i < 4; ++i) cr_assert_eq(w.got[i], 1, "the waiter's submission uploaded 1s: [%d] %d", i, w.got[i]);
  KDT_OK(kd_sink_wait(sink));
  for (int i = 0; i < 4; ++i) cr_assert_eq(out[i], 2, "the later submission uploaded 2s: [%d] %d", i, out[i]);
  KDT_FAILS(kd_sink_wait(sink), KD_ERR_INVALID_ARGUMENT, "no submission");
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* Rebinding to a tensor nothing wrote follows the rule of declaration: a
 * read (KD_IN or KD_INOUT) is defined only once an earlier node writes the
 * binding. A binding the graph writes somewhere is not enough. */
Test(host_graph, rebinding_to_a_never_written_tensor_follows_the_declaration_rule) {
  kd_session *s = kdt_host_session();
  float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {8}};
  kd_tensor x, y, z, fresh;
  KDT_OK(kd_tensor_from_host(s, &d, v, sizeof v, &x));
  KDT_OK(kd_tensor_from_host(s, &d, v, sizeof v, &y));
  KDT_OK(kd_tensor_from_host(s, &d, v, sizeof v, &z));
  KDT_OK(kd_tensor_create(s, &d, &fresh));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  /* y: read and written by one node (KD_INOUT) before anything else writes it. */
  KDT_OK(kd_graph_op_axpy(g, "y+=x", kd_whole(y), kd_whole(x), 1.0, NULL));
  /* x: read by node 0, written by a later node. */
  KDT_OK(kd_graph_op_copy(g, "x=y", kd_whole(x), kd_whole(y), NULL));
  /* z: written first, then read. */
  KDT_OK(kd_graph_op_copy(g, "z=x", kd_whole(z), kd_whole(x), NULL));
  KDT_OK(kd_graph_op_copy(g, "y=z", kd_whole(y), kd_whole(z), NULL));
  KDT_FAILS(kd_graph_rebind(g, y, fresh), KD_ERR_UNINITIALIZED, "node 'y+=x' (#0) reads old");
  KDT_FAILS(kd_graph_rebind(g, x, fresh), KD_ERR_UNINITIALIZED, "node 'y+=x' (#0) reads old");
  KDT_OK(kd_graph_rebind(g, z, fresh)); /* node 2 writes it before node 3 reads it */
  KDT_OK(kd_graph_submit(g, NULL));
  float got[8];
  KDT_OK(kd_tensor_download(s, y, got, sizeof got));
  for (int i = 0; i < 8; ++i) cr_assert_eq(got[i], 2 * v[i], "y = z = x = y0 + x0: [%d] %g", i, got[i]);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* An empty write does not count as writing its tensor for the rule either,
 * whatever its other dimensions (which multiply past 2^63 here: counting
 * its elements was undefined, which the sanitized build reports). */
Test(host_graph, an_empty_write_does_not_let_a_rebinding_read_a_never_written_tensor) {
  kd_session *s = kdt_host_session();
  float v[8] = {0}, one = 1.0f;
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {8}};
  kd_tensor x, fresh;
  KDT_OK(kd_tensor_from_host(s, &d, v, sizeof v, &x));
  KDT_OK(kd_tensor_create(s, &d, &fresh));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_view empty = {.tensor = x, .rank = 3, .shape = {1ll << 40, 1ll << 40, 0}, .strides = {1, 1, 1}};
  KDT_OK(kd_graph_op_fill(g, "nothing", empty, &one, NULL));
  KDT_OK(kd_graph_op_scale(g, "x*=2", kd_whole(x), 2.0, NULL));
  KDT_FAILS(kd_graph_rebind(g, x, fresh), KD_ERR_UNINITIALIZED, "node 'x*=2' (#1) reads old");
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, x));
  KDT_OK(kd_tensor_release(s, fresh));
  kd_session_destroy(s);
}

/* A tensor rebound into a binding the graph writes is initialized by the
 * next submission, not by the rebinding; swapping back to one already
 * written keeps it so. */
Test(host_graph, a_rebound_output_is_initialized_by_the_submission_not_the_rebind) {
  kd_session *s = kdt_host_session();
  int32_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, got[8];
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {8}};
  kd_tensor ta, tb, tb2;
  KDT_OK(kd_tensor_from_host(s, &d, a, sizeof a, &ta));
  KDT_OK(kd_tensor_create(s, &d, &tb));
  KDT_OK(kd_tensor_create(s, &d, &tb2));
  kd_graph *g, *reader;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_add(g, "b=a+a", kd_whole(tb), kd_whole(ta), kd_whole(ta), NULL));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_graph_rebind(g, tb, tb2));
  KDT_OK(kd_graph_create(s, &reader));
  KDT_FAILS(kd_graph_op_copy(reader, "read b2", kd_whole(ta), kd_whole(tb2), NULL), KD_ERR_UNINITIALIZED, "no earlier");
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_graph_op_copy(reader, "read b2", kd_whole(ta), kd_whole(tb2), NULL));
  KDT_OK(kd_graph_rebind(g, tb2, tb)); /* both written now: no marking walk needed */
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_graph_submit(reader, NULL));
  KDT_OK(kd_tensor_download(s, ta, got, sizeof got));
  for (int i = 0; i < 8; ++i) cr_assert_eq(got[i], 2 * a[i], "a <- b2 = 2a: [%d] %d", i, got[i]);
  kd_graph_destroy(reader);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* A graph lets go of a rebound tensor, or of all its tensors when it is
 * destroyed, only once the submission in flight has completed. */
Test(host_graph, rebound_and_destroyed_bindings_outlive_the_work_in_flight) {
  kd_session *s = kdt_host_session();
  int32_t a[1000] = {0};
  kd_tensor ta = ivec(s, 1000, a), tb = ivec(s, 1000, a);
  int gate = 0;
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_garg acc[] = {kd_g_access(KD_IN, kd_whole(ta))};
  KDT_OK(kd_graph_host(g, "gate", wait_gate, &gate, acc, 1, NULL));
  kd_ticket t;
  KDT_OK(kd_graph_submit(g, &t));
  KDT_OK(kd_graph_rebind(g, ta, tb));
  KDT_OK(kd_tensor_release(s, ta)); /* the graph's deferred reference keeps it */
  kd_session_stats k;
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(k.bytes_retained, sizeof a, "the rebound tensor must outlive the submission that reads it");
  KDT_OK(kd_graph_submit(g, NULL)); /* now reads tb */
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, tb));
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(k.bytes_retained, 2 * sizeof a, "a destroyed graph's tensors outlive its submissions");
  ck_pr_store_int(&gate, 1);
  uint32_t pending = 1;
  for (int i = 0; i < 10000 && pending; ++i) {
    KDT_OK(kd_session_reap(s, &pending));
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  cr_assert_eq(pending, 0);
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(k.bytes_retained, 0, "both tensors go once their work is done");
  cr_assert_eq(k.bytes_device, 0);
  kd_session_destroy(s);
}

typedef struct meet {
  int arrived;
  int met[2];
} meet;

static void meet_fn(void *p, int who) {
  meet *m = p;
  ck_pr_inc_int(&m->arrived);
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do { /* wait up to 5 s for the other node */
    if (ck_pr_load_int(&m->arrived) == 2) {
      m->met[who] = 1;
      return;
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 5000000000L);
}
static void meet0(void *p) { meet_fn(p, 0); }
static void meet1(void *p) { meet_fn(p, 1); }

Test(host_graph, independent_nodes_run_at_the_same_time) {
  kd_session *s = kdt_host_session();
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  meet m = {0, {0, 0}};
  KDT_OK(kd_graph_host(g, "left", meet0, &m, NULL, 0, NULL));
  KDT_OK(kd_graph_host(g, "right", meet1, &m, NULL, 0, NULL));
  kd_ticket t;
  KDT_OK(kd_graph_submit(g, &t));
  int done = 0;
  for (int i = 0; i < 10000 && !done; ++i) {
    KDT_OK(kd_ticket_done(s, t, &done));
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  cr_assert(done);
  cr_assert(m.met[0] && m.met[1], "the two independent host nodes never ran concurrently");
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* A host node that waits for the test to open its gate, until a deadline
 * shared by every node of the gate. */
typedef struct timed_gate {
  uint32_t open, ran, timed_out;
  double deadline;
} timed_gate;

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void gated(void *p) {
  timed_gate *gt = p;
  while (!ck_pr_load_32(&gt->open))
    if (mono_s() > gt->deadline) {
      ck_pr_store_32(&gt->timed_out, 1);
      break;
    } else {
      sched_yield();
    }
  ck_pr_inc_32(&gt->ran);
}

/* More independent nodes than the pool's ring holds, each waiting for a
 * gate the caller opens only after submitting, then uploading: neither call
 * may wait for the work before it. Until 2026-12-05 the submit waited for
 * room in the ring (under the session lock) and the upload for every
 * submission in flight, so this deadlocked until the gates timed out. The
 * upload is still ordered: the copy node submitted before it reads the old
 * values, a download after it the new ones. */
Test(host_graph, a_wide_submission_and_an_upload_behind_it_never_wait, .timeout = 60) {
  enum { WIDE = 5000 };
  kd_session *s = kdt_host_session();
  int32_t old_v[4] = {1, 2, 3, 4}, new_v[4] = {5, 6, 7, 8}, got[4];
  kd_tensor x = ivec(s, 4, old_v), y = ivec(s, 4, NULL);
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  timed_gate gt = {.deadline = mono_s() + 10.0};
  kd_node first;
  KDT_OK(kd_graph_host(g, "first", gated, &gt, NULL, 0, &first));
  for (int i = 1; i < WIDE; ++i) KDT_OK(kd_graph_host(g, "wide", gated, &gt, NULL, 0, NULL));
  kd_node copy;
  KDT_OK(kd_graph_op_copy(g, "y = x", kd_whole(y), kd_whole(x), &copy));
  KDT_OK(kd_graph_edge(g, first, copy)); /* the copy runs once the gate is open */
  double t0 = mono_s();
  kd_ticket t;
  KDT_OK(kd_graph_submit(g, &t));
  double submitted = mono_s() - t0;
  t0 = mono_s();
  KDT_OK(kd_tensor_upload(s, x, new_v, sizeof new_v));
  double uploaded = mono_s() - t0;
  memset(new_v, 0, sizeof new_v); /* the caller's memory is free again at once */
  ck_pr_store_32(&gt.open, 1);
  cr_assert_lt(submitted, 1.0, "submitting %d gated nodes took %.3f s", WIDE, submitted);
  cr_assert_lt(uploaded, 1.0, "an upload behind gated work took %.3f s", uploaded);
  KDT_OK(kd_tensor_download(s, y, got, sizeof got));
  cr_assert_arr_eq(got, old_v, sizeof got, "the copy submitted before the upload saw the new values");
  KDT_OK(kd_tensor_download(s, x, got, sizeof got));
  int32_t want[4] = {5, 6, 7, 8};
  cr_assert_arr_eq(got, want, sizeof got, "the upload's values did not land");
  cr_assert_eq(ck_pr_load_32(&gt.ran), WIDE);
  cr_assert_eq(ck_pr_load_32(&gt.timed_out), 0, "a gated node timed out: something waited for it");
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, x));
  KDT_OK(kd_tensor_release(s, y));
  kd_session_destroy(s);
}

/* A ticket names the session that issued it: another session's, or one
 * never issued, is refused rather than read as a submission of this one. */
Test(host_graph, a_ticket_is_checked_against_its_session) {
  kd_session *s = kdt_host_session(), *other = kdt_host_session();
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_host(g, "n", no_op, NULL, NULL, 0, NULL));
  kd_ticket t;
  KDT_OK(kd_graph_submit(g, &t));
  int done = 0;
  KDT_FAILS(kd_ticket_done(other, t, &done), KD_ERR_WRONG_SESSION, "argument ticket is of another session");
  KDT_FAILS(kd_ticket_done(s, (kd_ticket){0}, &done), KD_ERR_INVALID_ARGUMENT, "never issued");
  KDT_FAILS(kd_ticket_done(other, (kd_ticket){0}, &done), KD_ERR_INVALID_ARGUMENT, "never issued");
  KDT_FAILS(kd_ticket_done(s, t, NULL), KD_ERR_INVALID_ARGUMENT, "argument out_done");
  for (int i = 0; i < 10000 && !done; ++i) {
    KDT_OK(kd_ticket_done(s, t, &done));
    struct timespec ts = {0, 1000000};
    if (!done) nanosleep(&ts, NULL);
  }
  cr_assert(done);
  kd_graph_destroy(g);
  kd_session_destroy(other);
  /* A later session given the destroyed one's serial (the 16 bits in its
   * handles: here the only one free) still refuses its tickets. */
  static uint32_t taken[KD_SERIAL_MAX];
  uint32_t n = 0, v;
  while (kd_serial_take(&v, "test") == KD_OK) taken[n++] = v;
  kd_session_destroy(s);
  kd_session *later = kdt_host_session();
  KDT_FAILS(kd_ticket_done(later, t, &done), KD_ERR_WRONG_SESSION, "argument ticket is of another session");
  kd_session_destroy(later);
  while (n) kd_serial_give(taken[--n]);
}

/* A host node that holds its submission in flight until the gate opens. */
static int gate_open;
static void gate(void *user) {
  (void)user;
  while (!ck_pr_load_int(&gate_open)) sched_yield();
}
static double gate_opened_ms; /* CLOCK_MONOTONIC, when open_gate_later opened it */
static void *open_gate_later(void *ms) {
  struct timespec ts = {0, *(long *)ms * 1000000L};
  nanosleep(&ts, NULL);
  clock_gettime(CLOCK_MONOTONIC, &ts);
  gate_opened_ms = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
  ck_pr_store_int(&gate_open, 1);
  return NULL;
}

Test(host_graph, a_full_completion_ring_waits_for_the_oldest_and_counts_it) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  o.completion_ring_capacity = 2;
  kd_session *s;
  KDT_OK(kd_session_create(&o, &s));
  int32_t v[64], ones[64];
  for (int i = 0; i < 64; ++i) v[i] = i, ones[i] = 1;
  kd_tensor a = ivec(s, 64, v), b = ivec(s, 64, NULL), one = ivec(s, 64, ones);
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_garg in_a = kd_g_in(kd_whole(a));
  KDT_OK(kd_graph_host(g, "gate", gate, NULL, &in_a, 1, NULL));
  for (int i = 0; i < 8; ++i) { /* adds 8 per submission: the result counts them */
    KDT_OK(kd_graph_op_add(g, "b=a+1", kd_whole(b), kd_whole(a), kd_whole(one), NULL));
    KDT_OK(kd_graph_op_copy(g, "a=b", kd_whole(a), kd_whole(b), NULL));
  }
  int32_t got[64];
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "a", a, got, sizeof got, &sink));
  ck_pr_store_int(&gate_open, 0);
  kd_session_stats k;
  /* Two submissions fill the ring; neither can complete. */
  for (int i = 0; i < 2; ++i) {
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_session_stats_get(s, &k));
    cr_assert_eq(k.inflight, (uint64_t)i + 1);
    cr_assert_eq(k.ring_full_waits, 0);
  }
  /* The third waits for the oldest, which completes once the gate opens. */
  long delay_ms = 100;
  pthread_t opener;
  cr_assert_eq(pthread_create(&opener, NULL, open_gate_later, &delay_ms), 0);
  KDT_OK(kd_graph_submit(g, NULL));
  double returned = now_ms();
  pthread_join(opener, NULL);
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_geq(k.ring_full_waits, 1, "a full ring waits for its oldest entry and counts it");
  /* Against when the gate opened, not a duration: a descheduled test thread
   * cannot make this pass or fail by itself. */
  cr_assert_geq(returned, gate_opened_ms, "the submit returned %.1f ms before the gate opened: it did not wait",
                gate_opened_ms - returned);
  cr_assert_leq(k.inflight, 2);
  for (int i = 3; i < 10; ++i) {
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_session_stats_get(s, &k));
    cr_assert_leq(k.inflight, 2, "submission %d: %llu in flight, more than the ring holds", i,
                  (unsigned long long)k.inflight);
  }
  KDT_OK(kd_sink_wait(sink));
  for (int i = 0; i < 64; ++i) cr_assert_eq(got[i], i + 80, "a[%d] = %d after ten submissions of +8", i, got[i]);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

static void count_run(void *p) { ck_pr_inc_int(p); }

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* 100 submissions queue up behind a gate (HOST runs start in order), then
 * finish at once. Retiring them must not poll each one: a ticket's poll
 * looks at that ticket alone, and a reap finds the finished prefix by
 * halves. Polling one by one, as a plain FIFO must, takes over 100. */
static void queue_behind_a_gate(kd_session *s, int *gate, int *runs, kd_ticket *last) {
  kd_graph *hold, *g;
  KDT_OK(kd_graph_create(s, &hold));
  KDT_OK(kd_graph_host(hold, "gate", wait_gate, gate, NULL, 0, NULL));
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_host(g, "count", count_run, runs, NULL, 0, NULL));
  KDT_OK(kd_graph_submit(hold, NULL));
  for (int i = 0; i < 100; ++i) KDT_OK(kd_graph_submit(g, last));
  kd_graph_destroy(hold);
  kd_graph_destroy(g);
  kd_session_stats k;
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(k.inflight, 101, "the gate holds every submission in flight (%llu)", (unsigned long long)k.inflight);
  ck_pr_store_int(gate, 1);
  for (int i = 0; i < 5000 && ck_pr_load_int(runs) < 100; ++i) sleep_ms(1);
  cr_assert_eq(ck_pr_load_int(runs), 100);
  sleep_ms(100); /* the last run marks itself done just after its node returns (no signal to wait on
                  * that would not poll, which these tests count) */
}

static uint64_t queries(kd_session *s) {
  kd_session_stats k;
  KDT_OK(kd_session_stats_get(s, &k));
  return k.event_queries;
}

Test(host_graph, retiring_a_finished_batch_polls_a_few_completions_not_each) {
  kd_session *s = kdt_host_session();
  int gate = 0, runs = 0;
  kd_ticket last;
  queue_behind_a_gate(s, &gate, &runs, &last);
  uint64_t q0 = queries(s);
  uint32_t pending = 1;
  for (int i = 0; i < 1000 && pending; ++i) {
    KDT_OK(kd_session_reap(s, &pending));
    if (pending) sleep_ms(1);
  }
  cr_assert_eq(pending, 0);
  uint64_t used = queries(s) - q0;
  cr_assert_leq(used, 16, "retiring 101 finished completions took %llu polls (2 + log2(101) is 9)",
                (unsigned long long)used);
  kd_session_destroy(s);
}

Test(host_graph, a_finished_ticket_retires_everything_before_it_in_one_poll) {
  kd_session *s = kdt_host_session();
  int gate = 0, runs = 0;
  kd_ticket last;
  queue_behind_a_gate(s, &gate, &runs, &last);
  int done = 0;
  uint64_t used = 0;
  for (int i = 0; i < 1000 && !done; ++i) {
    uint64_t q0 = queries(s);
    KDT_OK(kd_ticket_done(s, last, &done));
    used = queries(s) - q0;
    if (!done) sleep_ms(1);
  }
  cr_assert(done);
  cr_assert_eq(used, 1, "a ticket's poll looks at that ticket alone (%llu polls)", (unsigned long long)used);
  kd_session_stats k;
  KDT_OK(kd_session_stats_get(s, &k));
  cr_assert_eq(k.inflight, 0, "everything before a finished ticket has finished too");
  cr_assert_eq(k.completions_retired, 101);
  kd_session_destroy(s);
}

/* A large array a freed graph let go of serves the next one of its element
 * size at the size it had reached (no regrowth, no fresh pages); one of
 * another element size that does not fit gets a mapping of its own. */
Test(host_graph, a_freed_large_array_is_kept_for_the_next_graph) {
  const uint32_t big = (uint32_t)(4 * KD_GROW_MAPPED / sizeof(uint64_t));
  uint64_t *a = NULL;
  uint32_t cap = 0;
  cr_assert(KD_GROW(a, cap, big));
  for (uint32_t i = 0; i < cap; ++i) a[i] = i;
  void *was = a;
  uint32_t was_cap = cap;
  KD_GROW_FREE(a, cap);
  uint64_t *b = NULL;
  uint32_t bcap = 0;
  cr_assert(KD_GROW(b, bcap, (uint32_t)(KD_GROW_MAPPED / sizeof(uint64_t))));
  cr_assert_eq((void *)b, was, "the kept mapping is reused");
  cr_assert_geq(bcap, was_cap, "with all of its capacity (%u < %u)", bcap, was_cap);
  for (uint32_t i = 0; i < bcap; ++i) b[i] = ~(uint64_t)i; /* writable throughout */
  uint32_t *c = NULL;
  uint32_t ccap = 0;
  cr_assert(KD_GROW(c, ccap, (uint32_t)(64 * KD_GROW_MAPPED / sizeof(uint32_t))));
  cr_assert_neq((void *)c, (void *)b);
  for (uint32_t i = 0; i < ccap; i += 1024) c[i] = i;
  cr_assert(KD_GROW(b, bcap, bcap + 1)); /* grows past the kept size: moves */
  for (uint32_t i = 0; i < was_cap; ++i) cr_assert_eq(b[i], ~(uint64_t)i, "b[%u] kept through the move", i);
  KD_GROW_FREE(b, bcap);
  KD_GROW_FREE(c, ccap);
}

/* A set's length bound may go loose while the set is small (queries scan
 * it whole), but is tight again once it grows past a scan: else one long
 * entry retired long ago would send every later query back over the whole
 * set. */
Test(host_graph, an_interval_set_bound_is_tight_once_it_grows_past_a_scan) {
  kd_ivset s;
  kd_ivset_init(&s);
  cr_assert(kd_ivset_reserve(&s, 1));
  kd_footprint whole = {.one = {0, 1000000}, .count = 1};
  kd_ivset_insert(&s, 0, KD_IN, &whole);
  kd_ival *found[KD_IVSET_SCAN + 8]; /* room for every entry of the set */
  cr_assert_eq(kd_ivset_find(&s, 0, 10, found), 1);
  kd_ivset_retire(&s, found[0]);
  kd_ivset_sweep(&s);
  cr_assert_eq(s.count, 0);
  enum { CHUNKS = KD_IVSET_SCAN + 8 }; /* past a scan */
  for (int64_t i = 0; i < CHUNKS; ++i) {
    cr_assert(kd_ivset_reserve(&s, 1));
    kd_footprint chunk = {.one = {i * 10, i * 10 + 10}, .count = 1};
    kd_ivset_insert(&s, (uint32_t)i + 1, KD_IN, &chunk);
  }
  cr_assert_eq(s.max_len, 10, "the retired entry's length still bounds queries: %lld", (long long)s.max_len);
  cr_assert_eq(kd_ivset_find(&s, CHUNKS * 10 - 5, CHUNKS * 10, found), 1);
  cr_assert_eq(found[0]->node, CHUNKS);
  kd_ivset_free(&s);
}

/* A small set keeps its entries in the order they came (until a
 * retirement) and is sorted when it grows past a scan; queries find the
 * same entries either way. */
Test(host_graph, an_interval_set_answers_alike_unsorted_and_sorted) {
  kd_ivset s;
  kd_ivset_init(&s);
  kd_ival *found[KD_IVSET_SCAN + 8]; /* room for every entry of the set */
  for (int64_t i = 0; i < KD_IVSET_SCAN; ++i) { /* descending starts: as unsorted as it gets */
    cr_assert(kd_ivset_reserve(&s, 1));
    kd_footprint f = {.one = {(KD_IVSET_SCAN - i) * 10, (KD_IVSET_SCAN - i) * 10 + 10}, .count = 1};
    kd_ivset_insert(&s, (uint32_t)i, KD_IN, &f);
  }
  cr_assert_eq(s.at[0].lo, KD_IVSET_SCAN * 10, "appended, not sorted");
  cr_assert_eq(kd_ivset_find(&s, 35, 45, found), 2); /* [30, 40) and [40, 50) */
  cr_assert_eq(kd_ivset_find(&s, 0, 10, found), 0);
  cr_assert(kd_ivset_reserve(&s, 1));
  kd_footprint last = {.one = {5, 6}, .count = 1};
  kd_ivset_insert(&s, 99, KD_IN, &last);
  for (uint32_t i = 1; i < s.count; ++i) cr_assert_leq(s.at[i - 1].lo, s.at[i].lo, "sorted past a scan at %u", i);
  cr_assert_eq(kd_ivset_find(&s, 35, 45, found), 2);
  cr_assert_eq(kd_ivset_find(&s, 0, 10, found), 1);
  cr_assert_eq(found[0]->node, 99);
  kd_ivset_free(&s);
}

/* Random inserts, retirements and sweeps that take two sets back and forth
 * across the scan threshold, used as inference uses them: one query of
 * both into one array (the first set's matches, then the second's), the
 * matches visited last first, a random half of them retired, then both
 * swept. Every query finds exactly the live entries a brute-force pass
 * over a shadow list finds. */
Test(host_graph, interval_set_queries_match_brute_force_across_the_threshold) {
  enum { CAP = 2 * KD_IVSET_SCAN, IDS = 8192 };
  kd_ivset set[2];
  kd_ivset_init(&set[0]);
  kd_ivset_init(&set[1]);
  static int64_t shadow_lo[IDS], shadow_hi[IDS];
  static int shadow_live[IDS];
  memset(shadow_live, 0, sizeof shadow_live);
  uint32_t inserted = 0, x = 7, crossings = 0, kept = 0;
  kd_ival *found[2 * CAP + 2];
  for (int step = 0; step < 8000 && inserted < IDS; ++step) {
    int small[2] = {set[0].count <= KD_IVSET_SCAN, set[1].count <= KD_IVSET_SCAN};
    x = x * 1664525u + 1013904223u;
    kd_ivset *s = &set[(x >> 3) & 1];
    /* insert, biased to grow below the threshold and to shrink above it */
    if (s->count < CAP && ((x >> 28) < (s->count <= KD_IVSET_SCAN ? 12u : 5u) || s->count < 4)) {
      int64_t lo = (x >> 8) % 1000, len = 1 + (int64_t)((x >> 4) % 64);
      cr_assert(kd_ivset_reserve(s, 1));
      kd_footprint f = {.one = {lo, lo + len}, .count = 1};
      kd_ivset_insert(s, inserted, KD_IN, &f);
      shadow_lo[inserted] = lo, shadow_hi[inserted] = lo + len, shadow_live[inserted] = 1;
      inserted++;
    } else { /* retire some of what meets a random interval in either set */
      int64_t lo = (x >> 8) % 1000, hi = lo + 1 + (int64_t)((x >> 4) % 200);
      uint32_t n = kd_ivset_find(&set[0], lo, hi, found), first_of_1 = n;
      n += kd_ivset_find(&set[1], lo, hi, found + n);
      for (uint32_t k = n; k-- > 0;) { /* last first, as kd_ivset_retire asks */
        x = x * 1664525u + 1013904223u;
        if ((x >> 20) & 1) {
          kept++;
          continue;
        }
        cr_assert(shadow_live[found[k]->node], "step %d: a visited match is stale", step);
        shadow_live[found[k]->node] = 0;
        kd_ivset_retire(&set[k >= first_of_1], found[k]);
      }
      kd_ivset_sweep(&set[0]);
      kd_ivset_sweep(&set[1]);
    }
    for (int i = 0; i < 2; ++i) crossings += small[i] != (set[i].count <= KD_IVSET_SCAN);
    x = x * 1664525u + 1013904223u;
    int64_t qlo = (x >> 8) % 1100, qhi = qlo + 1 + (int64_t)((x >> 4) % 150);
    uint32_t n = kd_ivset_find(&set[0], qlo, qhi, found);
    n += kd_ivset_find(&set[1], qlo, qhi, found + n);
    uint32_t want = 0;
    for (uint32_t i = 0; i < inserted; ++i) want += shadow_live[i] && shadow_lo[i] < qhi && qlo < shadow_hi[i];
    cr_assert_eq(n, want, "step %d: query [%lld, %lld) found %u of %u (sets of %u and %u)", step, (long long)qlo,
                 (long long)qhi, n, want, set[0].count, set[1].count);
    for (uint32_t k = 0; k < n; ++k) {
      uint32_t id = found[k]->node;
      cr_assert(shadow_live[id] && shadow_lo[id] < qhi && qlo < shadow_hi[id], "step %d: entry %u", step, id);
    }
  }
  cr_assert_geq(crossings, 20, "the sets crossed the scan threshold %u times", crossings);
  cr_assert_geq(kept, 100, "matches left in place: %u", kept);
  kd_ivset_free(&set[0]);
  kd_ivset_free(&set[1]);
}

static void record_affinity(void *p) { /* on a worker: no cr_assert here */
  cpu_set_t *out = p;
  CPU_ZERO(out);
  if (sched_getaffinity(0, sizeof *out, out) != 0) CPU_ZERO(out); /* fails the check below */
}

/* A session created on a thread bound to one CPU (taskset, an MPI rank's
 * binding) keeps its workers there. Until 2026-12-05 worker i was bound to
 * core i of the whole machine, outside the binding. */
Test(host_graph, workers_stay_inside_the_creating_threads_cpu_binding) {
  cpu_set_t mine, one;
  cr_assert_eq(sched_getaffinity(0, sizeof mine, &mine), 0);
  int cpu = -1;
  for (int i = 0; i < CPU_SETSIZE && cpu < 0; ++i)
    if (CPU_ISSET(i, &mine)) cpu = i;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0);
  kd_session *s = kdt_host_session();
  cr_assert_eq(sched_setaffinity(0, sizeof mine, &mine), 0); /* the caller may move on; the pool stays */
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  enum { NODES = 16 };
  cpu_set_t seen[NODES];
  for (int i = 0; i < NODES; ++i) KDT_OK(kd_graph_host(g, "where", record_affinity, &seen[i], NULL, 0, NULL));
  kd_ticket t;
  KDT_OK(kd_graph_submit(g, &t));
  int done = 0;
  for (int i = 0; i < 10000 && !done; ++i) {
    KDT_OK(kd_ticket_done(s, t, &done));
    if (!done) sleep_ms(1);
  }
  cr_assert(done);
  for (int i = 0; i < NODES; ++i) {
    cr_assert_eq(CPU_COUNT(&seen[i]), 1, "node %d ran on a worker allowed %d CPUs, not the one bound", i,
                 CPU_COUNT(&seen[i]));
    cr_assert(CPU_ISSET(cpu, &seen[i]), "node %d ran on a worker bound outside CPU %d", i, cpu);
  }
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* A HOST host function runs on a pool worker, which an API call may be
 * waiting for under the session's lock: a kdag call from it is refused
 * with KD_ERR_BUSY naming the callback instead of deadlocking. */
typedef struct calls_from_worker {
  kd_session *s;
  kd_tensor t;
  kd_status counters, download, create;
  char msg[256];
} calls_from_worker;

static void host_fn_calls_kdag(void *p) {
  calls_from_worker *c = p;
  kd_session_stats k;
  c->counters = kd_session_stats_get(c->s, &k);
  int32_t got[4];
  c->download = kd_tensor_download(c->s, c->t, got, sizeof got);
  snprintf(c->msg, sizeof c->msg, "%s", kd_last_error());
  kd_session *other = NULL;
  c->create = kd_session_create(NULL, &other);
  if (other) kd_session_destroy(other);
}

Test(host_graph, a_host_function_calling_kdag_is_refused) {
  kd_session *s = kdt_host_session();
  int32_t v[4] = {1, 2, 3, 4};
  calls_from_worker c = {.s = s, .t = ivec(s, 4, v)};
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_host(g, "calls kdag", host_fn_calls_kdag, &c, NULL, 0, NULL));
  int32_t got[4];
  submit_and_sink(g, c.t, got, sizeof got);
  cr_assert_eq(c.counters, KD_ERR_BUSY);
  cr_assert_eq(c.download, KD_ERR_BUSY);
  cr_assert_eq(c.create, KD_ERR_BUSY);
  cr_assert(strstr(c.msg, "kd_tensor_download: called from inside a host function node"), "%s", c.msg);
  cr_assert_arr_eq(got, v, sizeof got);
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, c.t));
  kd_session_destroy(s);
}

/* Node names are DOT strings: a quote, a backslash or a line break in a
 * name is escaped, so the file stays one valid graph. */
Test(host_graph, dot_escapes_node_names) {
  kd_session *s = kdt_host_session();
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_host(g, "say \"hi\"\\\nbye", no_op, NULL, NULL, 0, NULL));
  char *dot = kdt_dot_text(g);
  cr_assert(strstr(dot, "#0 say \\\"hi\\\"\\\\\\nbye\\n"), "%s", dot);
  cr_assert_null(strstr(dot, "\nbye"), "a raw line break in a label: %s", dot);
  free(dot);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* The shape checks of transfers and of the built-ins with a shape of their
 * own, each refusal leaving the graph as it was. */
Test(host_graph, transfer_transpose_and_sum_shapes_are_checked) {
  kd_session *s = kdt_host_session();
  int32_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, big[9];
  kd_tensor a = ivec(s, 8, v), out = ivec(s, 1, NULL), two = ivec(s, 2, NULL);
  kd_tensor_desc md = {.dtype = KD_I32, .rank = 2, .shape = {2, 4}};
  kd_tensor m, mt;
  KDT_OK(kd_tensor_from_host(s, &md, v, sizeof v, &m));
  md.shape[0] = 4, md.shape[1] = 2;
  KDT_OK(kd_tensor_create(s, &md, &mt));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  char *before = kdt_dot_text(g);
  KDT_FAILS(kd_graph_upload(g, "up", a, big, sizeof big, NULL), KD_ERR_INVALID_ARGUMENT,
            "kd_graph_upload: node 'up' (#0): argument bytes is 36, tensor 0x");
  cr_assert(strstr(kd_last_error(), " holds 32"), "%s", kd_last_error());
  KDT_FAILS(kd_graph_sink(g, "down", a, big, sizeof big, &(kd_sink *){NULL}), KD_ERR_INVALID_ARGUMENT,
            "kd_graph_sink: node 'down' (#0): argument bytes is 36, tensor 0x");
  KDT_FAILS(kd_graph_op_transpose(g, "t", kd_whole(mt), kd_whole(a), NULL), KD_ERR_INVALID_ARGUMENT,
            "argument 1 (tensor 0x");
  cr_assert(strstr(kd_last_error(), ") has rank 1, not 2"), "%s", kd_last_error());
  KDT_FAILS(kd_graph_op_sum(g, "s", kd_whole(two), kd_whole(a), NULL), KD_ERR_INVALID_ARGUMENT,
            "argument 0 (out, tensor 0x");
  cr_assert(strstr(kd_last_error(), ") must hold one element, it holds 2"), "%s", kd_last_error());
  /* An empty out view whose other dimensions multiply past int64 (found by
   * the graph fuzzer: the count overflowed, undefined behaviour). */
  kd_view huge_empty = {.tensor = two, .rank = 3, .shape = {1ll << 40, 1ll << 40, 0}, .strides = {1, 1, 1}};
  KDT_FAILS(kd_graph_op_sum(g, "s", huge_empty, kd_whole(a), NULL), KD_ERR_INVALID_ARGUMENT,
            "must hold one element, it holds 0");
  char *after = kdt_dot_text(g);
  cr_assert_str_eq(before, after, "a refused node changed the graph");
  free(before);
  free(after);
  KDT_FAILS(kd_tensor_download(s, a, big, sizeof big), KD_ERR_INVALID_ARGUMENT,
            "kd_tensor_download: argument bytes is 36, the i32 tensor holds 32");
  /* And what they accept runs. */
  KDT_OK(kd_graph_op_transpose(g, "t", kd_whole(mt), kd_whole(m), NULL));
  KDT_OK(kd_graph_op_sum(g, "s", kd_whole(out), kd_whole(a), NULL));
  int32_t total, tr[8];
  kd_sink *ss, *ts;
  KDT_OK(kd_graph_sink(g, "total", out, &total, sizeof total, &ss));
  KDT_OK(kd_graph_sink(g, "tr", mt, tr, sizeof tr, &ts));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(ss));
  KDT_OK(kd_sink_wait(ts));
  cr_assert_eq(total, 36);
  int32_t want[8] = {1, 3, 5, 7, 2, 4, 6, 8}; /* column-major 2x4 -> 4x2 */
  cr_assert_arr_eq(tr, want, sizeof tr);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* KD_SESSION_VERBOSE says where the HOST pool's workers went. */
Test(host_graph, verbose_sessions_print_the_pool_placement, .init = cr_redirect_stderr) {
  kd_session_destroy(kdt_host_session_flags(KD_SESSION_VERBOSE));
  fflush(stderr);
  char text[512] = {0};
  FILE *f = cr_get_redirected_stderr();
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = 0;
  cr_assert(strstr(text, "kdag: [info] HOST pool: ") && strstr(text, " workers "), "stderr: %s", text);
}

/* ---- footprints against the elements themselves ------------------------ */

/* Views drawn over small tensors of rank 1 to 3: sub-boxes (offset, steps,
 * transposed), broadcasts, views whose dimensions share one tensor
 * dimension or wrap into the next (runs, then), and compact ones; their
 * footprints built with boxes, with runs only, and with too few runs
 * (SPAN) are held to the element sets: overlap and cover exact where both
 * are exact, conservative (overlap may say 1, cover may say 0) with a SPAN;
 * a witness run lies inside its footprint. */
#define FP_MAX 64 /* elements of a tensor */

typedef struct fp_case {
  int rank;
  int64_t shape[3], elements;
} fp_case;

static uint32_t fp_next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return (uint32_t)(*s >> 16);
}

/* A random in-bounds view of t (rank 1..3). */
static kd_view fp_view(uint64_t *r, const fp_case *t) {
  for (;;) {
    kd_view v = {.rank = 1 + (int)(fp_next(r) % 3)};
    int64_t g[3] = {1, t->shape[0], t->shape[0] * t->shape[1]};
    for (int k = 0; k < v.rank; ++k) {
      v.shape[k] = 1 + fp_next(r) % 4;
      uint32_t kind = fp_next(r) % 8;
      int d = (int)(fp_next(r) % (uint32_t)t->rank);
      /* mostly a multiple of a tensor dimension's stride; sometimes 0, or any */
      v.strides[k] = kind == 0 ? 0 : kind == 1 ? 1 + fp_next(r) % 9 : g[d] * (1 + fp_next(r) % 2);
    }
    int64_t last = 0;
    for (int k = 0; k < v.rank; ++k) last += (v.shape[k] - 1) * v.strides[k];
    if (last >= t->elements) continue;
    v.offset = fp_next(r) % (uint32_t)(t->elements - last);
    return v;
  }
}

static void fp_elements(const kd_view *v, uint8_t *set) {
  memset(set, 0, FP_MAX);
  for (int64_t i = 0; i < v->shape[0]; ++i)
    for (int64_t j = 0; j < (v->rank > 1 ? v->shape[1] : 1); ++j)
      for (int64_t k = 0; k < (v->rank > 2 ? v->shape[2] : 1); ++k)
        set[v->offset + i * v->strides[0] + (v->rank > 1 ? j * v->strides[1] : 0) +
            (v->rank > 2 ? k * v->strides[2] : 0)] = 1;
}

Test(host_graph, footprints_answer_as_the_elements_do) {
  uint64_t r = 0x9E3779B97F4A7C15ull;
  uint64_t boxes = 0, lists = 0, spans = 0, overlaps = 0, covers = 0, revisiting = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    fp_case t = {.rank = 1 + (int)(fp_next(&r) % 3)};
    t.elements = 1;
    for (int d = 0; d < t.rank; ++d) {
      t.shape[d] = 1 + fp_next(&r) % (t.rank == 1 ? 64 : t.rank == 2 ? 8 : 4);
      t.elements *= t.shape[d];
    }
    kd_view v[2] = {fp_view(&r, &t), fp_view(&r, &t)};
    uint8_t set[2][FP_MAX];
    kd_footprint fp[2][3]; /* built with boxes; runs only; at most one run (SPAN past it) */
    for (int i = 0; i < 2; ++i) {
      kd_extent e;
      KDT_OK(kd_view_extent("test", &v[i], t.elements, &e));
      fp_elements(&v[i], set[i]);
      KDT_OK(kd_footprint_build(&v[i], &e, &t.rank, t.shape, 4096, &fp[i][0], "test"));
      KDT_OK(kd_footprint_build_runs(&v[i], &e, 4096, &fp[i][1], "test"));
      KDT_OK(kd_footprint_build(&v[i], &e, &t.rank, t.shape, 1, &fp[i][2], "test"));
      boxes += fp[i][0].kind == KD_FP_BOX;
      lists += fp[i][0].kind == KD_FP_RUNS && fp[i][0].count > 1;
      spans += fp[i][2].kind == KD_FP_SPAN;
      int64_t n = 0;
      for (int x = 0; x < FP_MAX; ++x) n += set[i][x];
      int distinct = n == e.elements;
      revisiting += !distinct;
      for (int k = 0; k < 2; ++k) cr_assert_eq(kd_view_distinct(&v[i], e.elements, &fp[i][k]), distinct, "trial %d", trial);
      kd_run w;
      if (kd_footprint_witness(&fp[i][0], &w)) {
        cr_assert_lt(w.lo, w.hi);
        for (int64_t x = w.lo; x < w.hi; ++x) cr_assert(set[i][x], "trial %d: witness element %lld not in the view", trial, (long long)x);
      }
    }
    int shared = 0, a_in_b = 1, b_in_a = 1;
    for (int x = 0; x < FP_MAX; ++x) {
      shared |= set[0][x] & set[1][x];
      if (set[0][x] && !set[1][x]) a_in_b = 0;
      if (set[1][x] && !set[0][x]) b_in_a = 0;
    }
    overlaps += shared;
    covers += a_in_b;
    for (int ka = 0; ka < 3; ++ka)
      for (int kb = 0; kb < 3; ++kb) {
        const kd_footprint *a = &fp[0][ka], *b = &fp[1][kb];
        int exact = kd_footprint_exact(a) && kd_footprint_exact(b);
        int o = kd_footprint_overlap(a, b), ab = kd_footprint_covers(b, a), ba = kd_footprint_covers(a, b);
        cr_assert_eq(o, kd_footprint_overlap(b, a), "trial %d (%d, %d): overlap is not symmetric", trial, ka, kb);
        if (exact) {
          cr_assert_eq(o, shared, "trial %d (%d, %d): overlap %d, the elements say %d", trial, ka, kb, o, shared);
          cr_assert_eq(ab, a_in_b, "trial %d (%d, %d): cover %d, the elements say %d", trial, ka, kb, ab, a_in_b);
          cr_assert_eq(ba, b_in_a, "trial %d (%d, %d): cover %d, the elements say %d", trial, ka, kb, ba, b_in_a);
        } else {
          cr_assert(o || !shared, "trial %d (%d, %d): a SPAN missed an overlap", trial, ka, kb);
          cr_assert(!ab || a_in_b, "trial %d (%d, %d): a SPAN claimed a cover", trial, ka, kb);
          cr_assert(!ba || b_in_a, "trial %d (%d, %d): a SPAN claimed a cover", trial, ka, kb);
        }
      }
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 3; ++k) kd_footprint_free(&fp[i][k]);
  }
  cr_log_info("%llu boxes, %llu run lists, %llu spans, %llu overlapping pairs, %llu covers, %llu revisiting views",
              (unsigned long long)boxes, (unsigned long long)lists, (unsigned long long)spans,
              (unsigned long long)overlaps, (unsigned long long)covers, (unsigned long long)revisiting);
  cr_assert(boxes > 5000 && lists > 1000 && spans > 5000 && overlaps > 2000 && covers > 500 && revisiting > 500,
            "the draws reach every kind and outcome");
}

/* ---- inference on iterative patterns ----------------------------------- */

/* What one sweep of an iterative pattern declares (sweep k), over two
 * grids of R x C floats. */
#define SWEEP_R 34
#define SWEEP_C 26
typedef void sweep_fn(kd_graph *g, kd_tensor *t, int k);

static kd_view grid_box(kd_tensor t, int64_t i0, int64_t j0, int64_t rows, int64_t cols, int64_t step) {
  kd_view v = {.tensor = t, .rank = 2, .offset = i0 + j0 * SWEEP_R, .shape = {rows, cols},
               .strides = {step, step * SWEEP_R}};
  return v;
}
static kd_view interior(kd_tensor t, int di, int dj) { return grid_box(t, 1 + di, 1 + dj, SWEEP_R - 2, SWEEP_C - 2, 1); }

static void host_node(kd_graph *g, const kd_garg *acc, size_t n) {
  KDT_OK(kd_graph_host(g, "n", no_op, NULL, acc, n, NULL));
}

/* Jacobi of built-ins: y's interior from four shifted views of x, then the
 * grids swap. */
static void sweep_jacobi(kd_graph *g, kd_tensor *t, int k) {
  kd_tensor x = t[k & 1], y = t[!(k & 1)];
  kd_view in = interior(y, 0, 0);
  KDT_OK(kd_graph_op_add(g, "up+down", in, interior(x, -1, 0), interior(x, 1, 0), NULL));
  KDT_OK(kd_graph_op_axpy(g, "+left", in, interior(x, 0, -1), 1.0, NULL));
  KDT_OK(kd_graph_op_axpy(g, "+right", in, interior(x, 0, 1), 1.0, NULL));
  KDT_OK(kd_graph_op_scale(g, "/4", in, 0.25, NULL));
}

/* A halo exchange: the interior in place from a 5-point read of itself
 * (through a second grid), then the four boundary strips from the rows and
 * columns next to the opposite edges (periodic). */
static void sweep_halo(kd_graph *g, kd_tensor *t, int k) {
  (void)k;
  kd_tensor u = t[0], w = t[1];
  kd_garg st[] = {kd_g_out(interior(w, 0, 0)), kd_g_in(interior(u, -1, 0)), kd_g_in(interior(u, 1, 0)),
                  kd_g_in(interior(u, 0, -1)), kd_g_in(interior(u, 0, 1)), kd_g_in(interior(u, 0, 0))};
  host_node(g, st, 6);
  kd_garg back[] = {kd_g_out(interior(u, 0, 0)), kd_g_in(interior(w, 0, 0))};
  host_node(g, back, 2);
  kd_garg top[] = {kd_g_out(grid_box(u, 0, 1, 1, SWEEP_C - 2, 1)), kd_g_in(grid_box(u, SWEEP_R - 2, 1, 1, SWEEP_C - 2, 1))};
  kd_garg bottom[] = {kd_g_out(grid_box(u, SWEEP_R - 1, 1, 1, SWEEP_C - 2, 1)), kd_g_in(grid_box(u, 1, 1, 1, SWEEP_C - 2, 1))};
  kd_garg left[] = {kd_g_out(grid_box(u, 0, 0, SWEEP_R, 1, 1)), kd_g_in(grid_box(u, 0, SWEEP_C - 2, SWEEP_R, 1, 1))};
  kd_garg right[] = {kd_g_out(grid_box(u, 0, SWEEP_C - 1, SWEEP_R, 1, 1)), kd_g_in(grid_box(u, 0, 1, SWEEP_R, 1, 1))};
  host_node(g, top, 2);
  host_node(g, bottom, 2);
  host_node(g, left, 2);
  host_node(g, right, 2);
}

/* Tiles updated in place, then a reduction of the whole grid into one
 * element, which the next sweep's tiles read. */
static void sweep_tiles(kd_graph *g, kd_tensor *t, int k) {
  (void)k;
  kd_view one = {.tensor = t[1], .rank = 1, .offset = 0, .shape = {1}, .strides = {1}};
  for (int q = 0; q < 4; ++q) {
    int64_t h = SWEEP_R / 2, w = SWEEP_C / 2;
    kd_garg acc[] = {kd_g_inout(grid_box(t[0], q & 1 ? h : 0, q & 2 ? w : 0, h, w, 1)), kd_g_in(one)};
    host_node(g, acc, 2);
  }
  kd_garg sum[] = {kd_g_out(one), kd_g_in(kd_whole(t[0]))};
  host_node(g, sum, 2);
}

/* Red-black Gauss-Seidel: each colour of the interior (two stepped boxes)
 * from the other colour's neighbours. */
static void sweep_red_black(kd_graph *g, kd_tensor *t, int k) {
  (void)k;
  for (int colour = 0; colour < 2; ++colour) {
    /* (i + j) even or odd, as two boxes of step 2 */
    kd_garg acc[] = {kd_g_inout(grid_box(t[0], 1 + colour, 1, (SWEEP_R - 2) / 2, (SWEEP_C - 2) / 2, 2)),
                     kd_g_inout(grid_box(t[0], 2 - colour, 2, (SWEEP_R - 2) / 2, (SWEEP_C - 2) / 2, 2)),
                     kd_g_in(grid_box(t[0], 2 - colour, 1, (SWEEP_R - 2) / 2, (SWEEP_C - 2) / 2, 2)),
                     kd_g_in(grid_box(t[0], 1 + colour, 2, (SWEEP_R - 2) / 2, (SWEEP_C - 2) / 2, 2))};
    host_node(g, acc, 4);
  }
}

typedef struct sweep_stats {
  uint32_t max_in, last_edges, active;
} sweep_stats;

static sweep_stats run_sweeps(kd_session *s, sweep_fn *fn, int sweeps) {
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 2, .shape = {SWEEP_R, SWEEP_C}};
  kd_tensor t[2];
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  float zero = 0;
  for (int i = 0; i < 2; ++i) {
    KDT_OK(kd_tensor_create(s, &d, &t[i]));
    KDT_OK(kd_graph_op_fill(g, "init", kd_whole(t[i]), &zero, NULL)); /* whole grids: boundaries included */
  }
  uint32_t before = 0;
  for (int k = 0; k < sweeps; ++k) {
    before = g->edge_count;
    fn(g, t, k);
  }
  sweep_stats st = {.last_edges = g->edge_count - before};
  uint32_t *in = calloc(g->node_count, sizeof *in);
  for (uint32_t e = 0; e < g->edge_count; ++e) in[g->edges[e].to]++;
  for (uint32_t n = 0; n < g->node_count; ++n) st.max_in = in[n] > st.max_in ? in[n] : st.max_in;
  free(in);
  for (uint32_t b = 0; b < g->binding_count; ++b) st.active += g->bindings[b].reads.count + g->bindings[b].writes.count;
  kd_graph_destroy(g);
  for (int i = 0; i < 2; ++i) KDT_OK(kd_tensor_release(s, t[i]));
  return st;
}

/* The edges a sweep adds, the most any node gets and the accesses kept
 * active do not grow with the number of sweeps, on each pattern; and a
 * sweep adds no edge another implies (the counts are each pattern's
 * transitive reduction: a chain of four for Jacobi; for the tiles, each
 * tile after the last sum and the sum after the four tiles). */
Test(host_graph, inference_stays_bounded_on_iterative_patterns) {
  kd_session *s = kdt_host_session();
  static const struct { const char *name; sweep_fn *fn; uint32_t most_in, sweep_edges; } patterns[] = {
      {"jacobi", sweep_jacobi, 2, 4}, {"halo", sweep_halo, 3, 11}, {"tiles", sweep_tiles, 4, 8},
      {"red-black", sweep_red_black, 1, 2}};
  for (size_t p = 0; p < sizeof patterns / sizeof patterns[0]; ++p) {
    sweep_stats few = run_sweeps(s, patterns[p].fn, 20), many = run_sweeps(s, patterns[p].fn, 400);
    cr_log_info("%s: last sweep %u edges, most into a node %u, %u accesses active (400 sweeps)", patterns[p].name,
                many.last_edges, many.max_in, many.active);
    cr_assert_eq(many.last_edges, few.last_edges, "%s: a sweep adds %u edges after 400 sweeps, %u after 20",
                 patterns[p].name, many.last_edges, few.last_edges);
    cr_assert_eq(many.active, few.active, "%s: %u accesses active after 400 sweeps, %u after 20", patterns[p].name,
                 many.active, few.active);
    cr_assert_leq(many.max_in, patterns[p].most_in, "%s: a node has %u edges in", patterns[p].name, many.max_in);
    cr_assert_eq(many.last_edges, patterns[p].sweep_edges, "%s: a sweep adds %u edges", patterns[p].name,
                 many.last_edges);
  }
  kd_session_destroy(s);
}
