/* SPDX-License-Identifier: Apache-2.0 */
/* Programmatic dependent launch (KD_LAUNCH_PDL) on the null driver: which
 * edges kdag makes programmatic, in GRAPH mode (programmatic edges through
 * cuGraphAddDependencies) and in EAGER mode (cuLaunchKernelEx with
 * programmatic stream serialization), and which it keeps full: into a
 * kernel that did not opt in, from an upload, along a declared
 * kd_graph_edge, with tracing, with KD_SESSION_NO_PDL, on a device before
 * sm_90 (the null driver then refuses both). A PTX kernel that opts in
 * without griddepcontrol.wait is refused. Results are compared across the
 * settings on the null driver's host stand-ins; on a GPU, gpu_pdl_test
 * checks the results and the race the contract rules out. */
#include <stdlib.h>
#include <unistd.h>

#include "kdag_test.h"
#include "null_driver.h"

/* Two kernels that double-and-add-one n floats: one waits for its grid
 * dependency, one does not. */
static const char k_ptx[] =
    ".version 7.8\n"
    ".target sm_90\n"
    ".address_size 64\n"
    "// griddepcontrol.wait in a comment does not count\n"
    ".visible .entry step_waits(.param .u64 x, .param .u32 n)\n"
    "{\n"
    "  griddepcontrol.wait;\n"
    "  ret;\n"
    "}\n"
    ".visible .entry step_plain(.param .u64 x, .param .u32 n)\n"
    "{\n"
    "  barrier.cluster.wait;\n"
    "  ret;\n"
    "}\n";

/* PTX for sm_80, where the wait does not exist: the flag is taken, the
 * launch stays plain. */
static const char old_ptx[] =
    ".version 7.0\n"
    ".target sm_80\n"
    ".address_size 64\n"
    ".visible .entry step_old(.param .u64 x, .param .u32 n)\n"
    "{\n"
    "  ret;\n"
    "}\n";

static void step_on_host(void *const *params) {
  float *x;
  uint32_t n;
  memcpy(&x, params[0], sizeof x);
  memcpy(&n, params[1], sizeof n);
  for (uint32_t i = 0; i < n; ++i) x[i] = 2.0f * x[i] + 1.0f;
}

typedef struct kernels {
  kd_module m;
  kd_function waits, plain;
} kernels;

static kd_status load(kd_raw *raw, void *user) {
  kernels *k = user;
  kd_session *s = kd_raw_session(raw);
  kd_status st = kd_raw_load_ptx(raw, k_ptx, sizeof k_ptx, &k->m);
  if (!st) st = kd_module_function(s, k->m, "step_waits", &k->waits);
  if (!st) st = kd_module_function(s, k->m, "step_plain", &k->plain);
  return st;
}

static kd_status load_old(kd_raw *raw, void *user) { return kd_raw_load_ptx(raw, old_ptx, sizeof old_ptx, user); }

static kdag_null_api nd;

static kd_session *session(kd_exec_mode mode, uint32_t flags, const char *trace) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_CUDA;
  o.exec_mode = mode;
  o.flags = flags;
  o.flags_set = KD_SESSION_NO_PDL; /* KDAG_NO_PDL in the environment does not decide it */
  o.trace_path = trace;
  kd_session *s = kdt_null_session_opts(KDAG_NULL_DRIVER, &o, &nd);
  static const uint32_t sizes[] = {8, 4};
  cr_assert(nd.emulate("step_waits", 2, sizes, step_on_host));
  cr_assert(nd.emulate("step_plain", 2, sizes, step_on_host));
  cr_assert(nd.emulate("step_old", 2, sizes, step_on_host));
  return s;
}

static uint64_t launches(void) {
  kdag_null_calls c;
  nd.calls_get(&c);
  return c.programmatic_launches;
}
static uint64_t edges(void) {
  kdag_null_calls c;
  nd.calls_get(&c);
  return c.programmatic_edges;
}
static uint64_t session_edges(kd_session *s) {
  kd_session_stats st;
  KDT_OK(kd_session_stats_get(s, &st));
  return st.programmatic_edges;
}

enum { N = 64 };

typedef struct chain {
  int waits[8];   /* per kernel node: KD_LAUNCH_PDL on the waiting kernel, else the plain one */
  int count;
  int upload_at;  /* an upload of x before kernel node upload_at (-1: none) */
  int explicit_at; /* kernel node explicit_at gets a declared edge from a node that shares no tensor (-1: none) */
} chain;

/* Runs the chain over x (two submissions), returns x and the programmatic
 * edges the session reported. */
static uint64_t run(kd_exec_mode mode, uint32_t flags, const chain *c, float *out, uint64_t *null_count) {
  kd_session *s = session(mode, flags, NULL);
  kernels k;
  KDT_OK(kd_with_raw(s, "load", load, &k));
  float x0[N], one = 1;
  for (int i = 0; i < N; ++i) x0[i] = (float)i;
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {N}};
  kd_tensor x, other;
  KDT_OK(kd_tensor_from_host(s, &d, x0, sizeof x0, &x));
  KDT_OK(kd_tensor_create(s, &d, &other));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_node side = 0;
  if (c->explicit_at >= 0) KDT_OK(kd_graph_op_fill(g, "other", kd_whole(other), &one, &side));
  uint64_t before = mode == KD_EXEC_GRAPH ? edges() : launches();
  for (int i = 0; i < c->count; ++i) {
    if (i == c->upload_at) KDT_OK(kd_graph_upload(g, "x again", x, x0, sizeof x0, NULL));
    kd_launch_config cfg = {{1, 1, 1}, {32, 1, 1}, 0, c->waits[i] ? KD_LAUNCH_PDL : 0};
    kd_garg args[] = {kd_g_inout(kd_whole(x)), kd_g_value(kd_arg_u32(N))};
    char name[32];
    snprintf(name, sizeof name, "step %d", i);
    kd_node n;
    KDT_OK(kd_graph_kernel(g, name, c->waits[i] ? k.waits : k.plain, &cfg, args, 2, &n));
    if (i == c->explicit_at) KDT_OK(kd_graph_edge(g, side, n));
  }
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "x out", x, out, N * sizeof *out, &sink));
  for (int r = 0; r < 2; ++r) {
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_sink_wait(sink));
  }
  *null_count = (mode == KD_EXEC_GRAPH ? edges() : launches()) - before;
  uint64_t reported = session_edges(s);
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, x));
  KDT_OK(kd_tensor_release(s, other));
  KDT_OK(kd_module_release(s, k.m));
  kd_session_destroy(s);
  return reported;
}

/* Programmatic edges in the chain: per submission in EAGER, once per
 * build in GRAPH. */
static void expect(const chain *c, uint32_t flags, uint64_t want_per_submission) {
  float ref[N];
  for (int i = 0; i < N; ++i) {
    ref[i] = (float)i;
    for (int j = 0; j < 2 * c->count; ++j) ref[i] = 2.0f * ref[i] + 1.0f; /* two submissions */
  }
  kd_exec_mode modes[] = {KD_EXEC_EAGER, KD_EXEC_GRAPH};
  for (int m = 0; m < 2; ++m) {
    float out[N];
    uint64_t seen;
    uint64_t reported = run(modes[m], flags, c, out, &seen);
    uint64_t want = modes[m] == KD_EXEC_EAGER ? 2 * want_per_submission : want_per_submission;
    cr_assert_eq(seen, want, "%s: %llu programmatic dependencies reached the driver, want %llu",
                 modes[m] == KD_EXEC_EAGER ? "EAGER" : "GRAPH", (unsigned long long)seen, (unsigned long long)want);
    cr_assert_eq(reported, want, "kd_session_stats.programmatic_edges %llu, want %llu", (unsigned long long)reported,
                 (unsigned long long)want);
    /* The upload, when there is one, puts x back in each submission. */
    for (int i = 0; i < N; ++i) {
      float w = ref[i];
      if (c->upload_at > 0) {
        w = (float)i;
        for (int j = c->upload_at; j < c->count; ++j) w = 2.0f * w + 1.0f;
      }
      cr_assert_eq(out[i], w, "x[%d] = %g, want %g", i, out[i], w);
    }
  }
}

Test(host_pdl, a_chain_of_waiting_kernels_is_programmatic) {
  chain c = {{1, 1, 1, 1, 1}, 5, -1, -1};
  expect(&c, 0, 4);
}

Test(host_pdl, a_kernel_that_does_not_wait_keeps_full_edges_into_it) {
  /* waits, plain, waits, waits: the edge into the plain one is full, the
   * one out of it programmatic (its successor waits). */
  chain c = {{1, 0, 1, 1}, 4, -1, -1};
  expect(&c, 0, 2);
}

Test(host_pdl, an_upload_or_a_declared_edge_keeps_a_full_dependency) {
  chain up = {{1, 1, 1, 1}, 4, 2, -1}; /* the upload clears step 0 and 1's work; step 2 follows the copy */
  expect(&up, 0, 2);
  /* A declared edge into step 2 from a fill node of another tensor: in
   * GRAPH, that edge is full and the one from step 1 still programmatic
   * (its data edge); in EAGER, step 2 launches plainly, and step 0 follows
   * the fill programmatically (the kernel before it on the stream). */
  chain ex = {{1, 1, 1, 1}, 4, -1, 2};
  float out[N];
  uint64_t seen;
  cr_assert_eq(run(KD_EXEC_EAGER, 0, &ex, out, &seen), 2 * 3);
  cr_assert_eq(seen, 2 * 3);
  cr_assert_eq(run(KD_EXEC_GRAPH, 0, &ex, out, &seen), 3);
  cr_assert_eq(seen, 3);
}

Test(host_pdl, no_pdl_flag_and_an_sm80_device_keep_every_edge_full) {
  chain c = {{1, 1, 1, 1, 1}, 5, -1, -1};
  expect(&c, KD_SESSION_NO_PDL, 0);
  setenv("KDAG_NULL_SM", "80", 1); /* the null driver refuses programmatic launches and edges */
  expect(&c, 0, 0);
  unsetenv("KDAG_NULL_SM");
}

Test(host_pdl, built_in_kernels_wait_and_are_programmatic) {
  kd_exec_mode modes[] = {KD_EXEC_EAGER, KD_EXEC_GRAPH};
  for (int m = 0; m < 2; ++m) {
    kd_session *s = session(modes[m], 0, NULL);
    kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {N}};
    kd_tensor a, b;
    KDT_OK(kd_tensor_create(s, &d, &a));
    KDT_OK(kd_tensor_create(s, &d, &b));
    kd_graph *g;
    KDT_OK(kd_graph_create(s, &g));
    float one = 1;
    KDT_OK(kd_graph_op_fill(g, "a = 1", kd_whole(a), &one, NULL));
    KDT_OK(kd_graph_op_scale(g, "a *= 2", kd_whole(a), 2.0, NULL));
    KDT_OK(kd_graph_op_copy(g, "b = a", kd_whole(b), kd_whole(a), NULL));
    KDT_OK(kd_graph_op_fill(g, "a = 1 (after the copy read it)", kd_whole(a), &one, NULL));
    KDT_OK(kd_graph_submit(g, NULL));
    /* fill -> scale -> copy -> fill: three edges (RAW, RAW, WAR), all into waiting built-ins */
    cr_assert_eq(session_edges(s), 3, "%s: %llu", modes[m] == KD_EXEC_EAGER ? "EAGER" : "GRAPH",
                 (unsigned long long)session_edges(s));
    kd_graph_destroy(g);
    KDT_OK(kd_tensor_release(s, a));
    KDT_OK(kd_tensor_release(s, b));
    kd_session_destroy(s);
  }
}

Test(host_pdl, a_traced_session_keeps_full_edges) {
  char path[] = "/tmp/kdag-pdl-trace-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  kd_exec_mode modes[] = {KD_EXEC_EAGER, KD_EXEC_GRAPH};
  for (int m = 0; m < 2; ++m) {
    kd_session *s = session(modes[m], 0, path);
    kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {N}};
    kd_tensor a;
    KDT_OK(kd_tensor_create(s, &d, &a));
    kd_graph *g;
    KDT_OK(kd_graph_create(s, &g));
    float one = 1;
    KDT_OK(kd_graph_op_fill(g, "a = 1", kd_whole(a), &one, NULL));
    KDT_OK(kd_graph_op_scale(g, "a *= 2", kd_whole(a), 2.0, NULL));
    KDT_OK(kd_graph_submit(g, NULL));
    cr_assert_eq(session_edges(s), 0, "the trace's events sit between the nodes");
    kd_graph_destroy(g);
    KDT_OK(kd_tensor_release(s, a));
    kd_session_destroy(s);
  }
  unlink(path);
}

Test(host_pdl, opting_in_without_a_grid_dependency_wait_is_refused) {
  kd_session *s = session(KD_EXEC_GRAPH, 0, NULL);
  kernels k;
  KDT_OK(kd_with_raw(s, "load", load, &k));
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {N}};
  static const float zeros[N];
  kd_tensor x;
  KDT_OK(kd_tensor_from_host(s, &d, zeros, sizeof zeros, &x));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_launch_config cfg = {{1, 1, 1}, {32, 1, 1}, 0, KD_LAUNCH_PDL};
  kd_garg args[] = {kd_g_inout(kd_whole(x)), kd_g_value(kd_arg_u32(N))};
  KDT_FAILS(kd_graph_kernel(g, "no wait", k.plain, &cfg, args, 2, NULL), KD_ERR_LAUNCH_CONFIG,
            "kernel step_plain's PTX has no griddepcontrol.wait");
  cr_assert(strstr(kd_last_error(), "'no wait'"), "names the node: %s", kd_last_error());
  cfg.flags = 1u << 7;
  KDT_FAILS(kd_graph_kernel(g, "odd flag", k.waits, &cfg, args, 2, NULL), KD_ERR_LAUNCH_CONFIG,
            "config flags 0x80 has unknown bits");
  cfg.flags = KD_LAUNCH_PDL;
  KDT_OK(kd_graph_kernel(g, "waits", k.waits, &cfg, args, 2, NULL));
  kd_graph_destroy(g);
  /* PTX for sm_80 has no wait to give: taken, and launched plainly. */
  kd_module old_m;
  kd_function old;
  KDT_OK(kd_with_raw(s, "load old", load_old, &old_m));
  KDT_OK(kd_module_function(s, old_m, "step_old", &old));
  KDT_OK(kd_graph_create(s, &g));
  float out[N];
  kd_sink *sink;
  KDT_OK(kd_graph_kernel(g, "old 1", old, &cfg, args, 2, NULL));
  KDT_OK(kd_graph_kernel(g, "old 2", old, &cfg, args, 2, NULL));
  KDT_OK(kd_graph_sink(g, "x out", x, out, sizeof out, &sink));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sink));
  cr_assert_eq(session_edges(s), 0, "a kernel whose PTX cannot wait never starts programmatically");
  cr_assert_eq(out[0], 3.0f, "two steps from 0: %g", out[0]);
  kd_graph_destroy(g);
  KDT_OK(kd_module_release(s, old_m));
  KDT_OK(kd_tensor_release(s, x));
  KDT_OK(kd_module_release(s, k.m));
  kd_session_destroy(s);
}
