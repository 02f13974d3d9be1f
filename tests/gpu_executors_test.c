/* SPDX-License-Identifier: Apache-2.0 */
/* One differential suite over every executor: the same graphs run on a
 * CUDA session in EAGER, GRAPH and AUTO mode, and on the HOST backend,
 * which is the reference; results must agree bit for bit (the built-in
 * kernels promise their host twins' exact operation order), and f32
 * results stay within the stated bound of f64.
 *
 * ctest runs this program twice. gpu_executors_test runs it on the GPU
 * (skipped without one, failed with KDAG_REQUIRE_GPU=1);
 * host_executors_test runs it on the null driver (KDAG_TEST_NULL_DRIVER names it), with the
 * built-ins' host twins registered as the kernels (kdag_null_emulate):
 * what it then checks is kdag's own part (plans, executable graphs and
 * their patches, transfers, lifetimes, AUTO), not the GPU's arithmetic. */
#include "dtype_graph.h"
#include "kernels/embedded.h"
#include "kdag_test.h"
#include "null_driver.h"
#include "random_graph.h"

static const kd_exec_mode modes[] = {KD_EXEC_EAGER, KD_EXEC_GRAPH, KD_EXEC_AUTO};
static const char *const mode_names[] = {"EAGER", "GRAPH", "AUTO"};
#define MODES (sizeof modes / sizeof modes[0])

static kdag_null_api nd;

/* ---- the built-ins' host twins, as the null driver's kernels ------------ */

static kd_kview view_at(void *const *p, int i) {
  kd_kview v;
  memcpy(&v, p[i], sizeof v);
  return v;
}

static double double_at(void *const *p, int i) {
  double d;
  memcpy(&d, p[i], sizeof d);
  return d;
}

#define FILL(e)                                                    \
  static void fill_e##e(void *const *p) {                          \
    kd_kpattern pat;                                               \
    memcpy(&pat, p[1], sizeof pat);                                \
    kd_host_fill(e, view_at(p, 0), pat);                           \
  }                                                                \
  static void copy_e##e(void *const *p) { kd_host_copy(e, view_at(p, 0), view_at(p, 1)); }
FILL(1)
FILL(2)
FILL(4)
FILL(8)
FILL(16)

#define ARITH(t, T)                                                                                   \
  static void add_##t(void *const *p) { kd_host_add(T, view_at(p, 0), view_at(p, 1), view_at(p, 2)); } \
  static void sum_##t(void *const *p) { kd_host_sum(T, view_at(p, 0), view_at(p, 1)); }
ARITH(f32, KD_K_F32)
ARITH(f64, KD_K_F64)
ARITH(i32, KD_K_I32)
ARITH(i64, KD_K_I64)
ARITH(u8, KD_K_U8)
ARITH(f16, KD_K_F16)
ARITH(bf16, KD_K_BF16)

#define FLOAT(t, T)                                                                                      \
  static void axpy_##t(void *const *p) { kd_host_axpy(T, view_at(p, 0), view_at(p, 1), double_at(p, 2)); } \
  static void scale_##t(void *const *p) { kd_host_scale(T, view_at(p, 0), double_at(p, 1)); }
FLOAT(f32, KD_K_F32)
FLOAT(f64, KD_K_F64)
FLOAT(f16, KD_K_F16)
FLOAT(bf16, KD_K_BF16)

/* pdl_slow_fill_i32's work (kernels/test_kernels.cu), without the spin. */
static void slow_fill_i32(void *const *p) {
  int *x;
  int32_t value, n;
  memcpy(&x, p[1], sizeof x);
  memcpy(&value, p[2], sizeof value);
  memcpy(&n, p[3], sizeof n);
  for (int32_t i = 0; i < n; ++i) x[i] = value;
}

static void register_builtins(void) {
  enum { V = sizeof(kd_kview), P = sizeof(kd_kpattern), D = sizeof(double) };
  static const struct {
    const char *name;
    uint32_t count, sizes[3];
    kdag_null_kernel_fn *fn;
  } k[] = {
      {"kd_fill_e1", 2, {V, P}, fill_e1},     {"kd_fill_e2", 2, {V, P}, fill_e2},
      {"kd_copy_e2", 2, {V, V}, copy_e2},     {"kd_fill_e4", 2, {V, P}, fill_e4},
      {"kd_fill_e8", 2, {V, P}, fill_e8},     {"kd_fill_e16", 2, {V, P}, fill_e16},
      {"kd_copy_e1", 2, {V, V}, copy_e1},     {"kd_copy_e4", 2, {V, V}, copy_e4},
      {"kd_copy_e8", 2, {V, V}, copy_e8},     {"kd_copy_e16", 2, {V, V}, copy_e16},
      {"kd_add_f32", 3, {V, V, V}, add_f32},  {"kd_add_f64", 3, {V, V, V}, add_f64},
      {"kd_add_i32", 3, {V, V, V}, add_i32},  {"kd_add_i64", 3, {V, V, V}, add_i64},
      {"kd_sum_f32", 2, {V, V}, sum_f32},     {"kd_sum_f64", 2, {V, V}, sum_f64},
      {"kd_sum_i32", 2, {V, V}, sum_i32},     {"kd_sum_i64", 2, {V, V}, sum_i64},
      {"kd_add_f16", 3, {V, V, V}, add_f16},  {"kd_add_bf16", 3, {V, V, V}, add_bf16},
      {"kd_add_u8", 3, {V, V, V}, add_u8},    {"kd_sum_u8", 2, {V, V}, sum_u8},
      {"kd_sum_f16", 2, {V, V}, sum_f16},     {"kd_sum_bf16", 2, {V, V}, sum_bf16},
      {"kd_axpy_f16", 3, {V, V, D}, axpy_f16}, {"kd_axpy_bf16", 3, {V, V, D}, axpy_bf16},
      {"kd_scale_f16", 2, {V, D}, scale_f16}, {"kd_scale_bf16", 2, {V, D}, scale_bf16},
      {"kd_axpy_f32", 3, {V, V, D}, axpy_f32}, {"kd_axpy_f64", 3, {V, V, D}, axpy_f64},
      {"kd_scale_f32", 2, {V, D}, scale_f32}, {"kd_scale_f64", 2, {V, D}, scale_f64},
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i)
    cr_assert(nd.emulate(k[i].name, k[i].count, k[i].sizes, k[i].fn), "%s: the null driver refused it", k[i].name);
  static const uint32_t slow_sizes[] = {8, 8, 4, 4};
  cr_assert(nd.emulate("pdl_slow_fill_i32", 4, slow_sizes, slow_fill_i32));
}

/* A CUDA session in mode: on the null driver when KDAG_TEST_NULL_DRIVER
 * names it (ctest's host_executors_test, a host-lane test that runs on
 * the GPU lane too: KDAG_REQUIRE_GPU concerns the skips of the GPU
 * runs), else on the GPU (skipping without one). */
static kd_session *cuda_session(kd_exec_mode mode) {
  const char *null = getenv("KDAG_TEST_NULL_DRIVER");
  if (null && *null) {
    kd_session *s = kdt_null_session(null, mode, &nd);
    register_builtins();
    return s;
  }
  return kdt_gpu_session_mode(mode, 0);
}

static kd_session_stats stats(kd_session *s) {
  kd_session_stats k;
  KDT_OK(kd_session_stats_get(s, &k));
  return k;
}

/* What every mode owes, after `graphs` graphs of `launches` submissions
 * each: no wait on the whole stream or device; GRAPH instantiates each
 * graph once and launches it every time, EAGER never launches a CUDA
 * graph. AUTO may do either (graph_after decides). */
static void check_mode(kd_session *s, size_t m, uint64_t graphs, uint64_t launches) {
  kd_session_stats k = stats(s);
  kd_exec_mode mode = modes[m];
  cr_assert_eq(k.stream_syncs + k.device_syncs, 0, "%s waited on the whole stream or device", mode_names[m]);
  if (mode == KD_EXEC_GRAPH) {
    cr_assert_eq(k.graph_instantiations, graphs, "GRAPH: one instantiation per graph");
    cr_assert_eq(k.graph_launches, graphs * launches);
  } else if (mode == KD_EXEC_EAGER) {
    cr_assert_eq(k.graph_launches, 0, "EAGER never launches a CUDA graph");
  }
}

/* Every dtype's built-ins (tests/dtype_graph.h), bit for bit against HOST. */
Test(executors, builtins_of_every_dtype_match_host_bit_exact) {
  kd_session *host = kdt_host_session();
  static unsigned char on_cuda[DG_BYTES], on_host[DG_BYTES];
  for (size_t m = 0; m < MODES; ++m) {
    kd_session *s = cuda_session(modes[m]);
    for (size_t k = 0; k < sizeof dg_dtypes / sizeof dg_dtypes[0]; ++k) {
      kd_dtype t = dg_dtypes[k];
      uint32_t n = dg_run(s, t, on_cuda);
      cr_assert_eq(dg_run(host, t, on_host), n);
      cr_assert_geq(n, 10, "%s: %u nodes", kd_dtype_name(t), n);
      for (size_t i = 0; i < DG_BYTES; ++i)
        cr_assert_eq(on_cuda[i], on_host[i], "%s, %s: byte %zu differs (CUDA %02x, HOST %02x)", mode_names[m],
                     kd_dtype_name(t), i, on_cuda[i], on_host[i]);
    }
    check_mode(s, m, sizeof dg_dtypes / sizeof dg_dtypes[0], 1);
    kd_session_destroy(s);
  }
  kd_session_destroy(host);
}

typedef struct slow_fill {
  kd_module m;
  kd_function fn;
} slow_fill;

static kd_status load_slow_fill(kd_raw *raw, void *user) {
  slow_fill *f = user;
  kd_status st = kd_raw_load_image(raw, kd_kernel_test_cubin, kd_kernel_test_cubin_size, &f->m);
  return st ? st : kd_module_function(kd_raw_session(raw), f->m, "pdl_slow_fill_i32", &f->fn);
}

/* Random i32 graphs over pools of strided views (tests/random_graph.h),
 * each submitted twice (in GRAPH mode, a relaunch of the same executable
 * graph), its tensors released while in flight, bit for bit against HOST.
 * Each graph starts with a fill of the first tensor: on the CUDA sessions
 * a kernel that opts in to programmatic dependent launch, lets the nodes
 * after it start at once and spins 20 us before it writes (a node that
 * read or wrote before its wait would see or leave the old values); on
 * HOST, the fill built-in. */
Test(executors, random_graphs_match_host_bit_exact) {
  kd_session *all[MODES + 1];
  slow_fill slow[MODES];
  for (size_t m = 0; m < MODES; ++m) {
    all[m] = cuda_session(modes[m]);
    KDT_OK(kd_with_raw(all[m], "load", load_slow_fill, &slow[m]));
  }
  all[MODES] = kdt_host_session();
  static int32_t init[RG_POOL][RG_LEN], out[MODES + 1][RG_POOL][RG_LEN];
  rg_rng seeds = {0x9E3779B97F4A7C15ull};
  const int graphs = 300;
  uint64_t nodes = 0; /* accepted, over every session */
  for (int gi = 0; gi < graphs; ++gi) {
    for (int i = 0; i < RG_POOL; ++i)
      for (int j = 0; j < RG_LEN; ++j) init[i][j] = (int32_t)(rg_next(&seeds) % 2000) - 1000;
    rg_rng r = {seeds.s ^ (uint64_t)gi * 0x100000001B3ull};
    for (size_t w = 0; w <= MODES; ++w) {
      kd_session *s = all[w];
      kd_tensor t[RG_POOL];
      kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {RG_LEN}};
      for (int i = 0; i < RG_POOL; ++i) KDT_OK(kd_tensor_from_host(s, &d, init[i], sizeof init[i], &t[i]));
      kd_graph *g;
      KDT_OK(kd_graph_create(s, &g));
      int32_t first = (int32_t)gi - 150;
      if (w < MODES) {
        kd_launch_config four = {{4, 1, 1}, {256, 1, 1}, 0, KD_LAUNCH_PDL};
        kd_garg a[] = {kd_g_value(kd_arg_u64(20000)), kd_g_out(kd_whole(t[0])), kd_g_value(kd_arg_i32(first)),
                       kd_g_value(kd_arg_i32(RG_LEN))};
        KDT_OK(kd_graph_kernel(g, "slow fill", slow[w].fn, &four, a, 4, NULL));
      } else {
        KDT_OK(kd_graph_op_fill(g, "fill", kd_whole(t[0]), &first, NULL));
      }
      rg_rng copy = r;
      rg_build(g, t, &copy, NULL);
      kd_graph_stats gs;
      KDT_OK(kd_graph_stats_get(g, &gs));
      nodes += gs.nodes;
      kd_sink *sinks[RG_POOL];
      for (int i = 0; i < RG_POOL; ++i) KDT_OK(kd_graph_sink(g, "out", t[i], out[w][i], sizeof out[w][i], &sinks[i]));
      KDT_OK(kd_graph_submit(g, NULL));
      KDT_OK(kd_graph_submit(g, NULL));
      for (int i = 0; i < RG_POOL; ++i) KDT_OK(kd_tensor_release(s, t[i])); /* in flight: kept alive */
      for (int i = 0; i < RG_POOL; ++i) KDT_OK(kd_sink_wait(sinks[i]));
      kd_graph_destroy(g);
    }
    for (size_t m = 0; m < MODES; ++m)
      cr_assert_eq(memcmp(out[m], out[MODES], sizeof out[m]), 0, "graph %d: %s and HOST differ", gi, mode_names[m]);
  }
  /* Graphs emptied by a check gone wrong would compare equal too. */
  cr_assert_gt(nodes, (uint64_t)graphs * 3 * (MODES + 1), "only %llu nodes were added in %d graphs",
               (unsigned long long)nodes, graphs);
  for (size_t m = 0; m < MODES; ++m) {
    check_mode(all[m], m, graphs, 2);
    KDT_OK(kd_module_release(all[m], slow[m].m));
    kd_session_destroy(all[m]);
  }
  kd_session_destroy(all[MODES]);
}

/* Mixed random graphs (f32 beside i32, rank-2 views, in-place nodes,
 * transposes, explicit edges, the last 20 long), against HOST bit for bit
 * and against f64 within the stated bound (rg_differential). */
Test(executors, mixed_random_graphs_match_host_and_f64) {
  kd_session *host = kdt_host_session();
  for (size_t m = 0; m < MODES; ++m) {
    kd_session *s = cuda_session(modes[m]);
    double worst = rg_differential(s, host, 0x5DEECE66Dull + m, 300);
    check_mode(s, m, 300, 1);
    fprintf(stderr, "executors: 300 mixed random graphs on %s, f32 worst %.3g x 2^-24 of the magnitude\n",
            mode_names[m], worst);
    kd_session_destroy(s);
  }
  kd_session_destroy(host);
}

/* One pipeline submitted again and again while its inputs change between
 * submissions: the uploaded host buffer is rewritten, a tensor is rebound
 * (a GRAPH launch patches the executable graph in place), and several
 * submissions are in flight before their sinks are waited for; each sink
 * gives its own submission's result, HOST's bit for bit. */
typedef struct pipeline {
  kd_graph *g;
  kd_tensor a[2], b, c;
  float in[64];
  float out[64];
  kd_sink *sink;
} pipeline;

static void pipeline_build(kd_session *s, pipeline *p) {
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 2, .shape = {8, 8}};
  float init[64];
  for (int i = 0; i < 64; ++i) init[i] = 0.25f * (float)(i % 13) - 1.0f;
  for (int i = 0; i < 2; ++i) KDT_OK(kd_tensor_from_host(s, &d, init, sizeof init, &p->a[i]));
  KDT_OK(kd_tensor_create(s, &d, &p->b));
  KDT_OK(kd_tensor_create(s, &d, &p->c));
  KDT_OK(kd_graph_create(s, &p->g));
  kd_view col_pairs = {.tensor = p->a[0], .rank = 2, .offset = 8, .shape = {8, 3}, .strides = {1, 16}};
  kd_view b_cols = {.tensor = p->b, .rank = 2, .offset = 0, .shape = {8, 3}, .strides = {1, 8}};
  KDT_OK(kd_graph_upload(p->g, "b = in", p->b, p->in, sizeof p->in, NULL));
  KDT_OK(kd_graph_op_axpy(p->g, "b[:, :3] += 0.5 a[:, 1::2]", b_cols, col_pairs, 0.5, NULL));
  KDT_OK(kd_graph_op_transpose(p->g, "c = b^T", kd_whole(p->c), kd_whole(p->b), NULL));
  KDT_OK(kd_graph_op_axpy(p->g, "c += a", kd_whole(p->c), kd_whole(p->a[0]), 1.0, NULL));
  KDT_OK(kd_graph_op_scale(p->g, "c *= -3", kd_whole(p->c), -3.0, NULL));
  KDT_OK(kd_graph_sink(p->g, "out", p->c, p->out, sizeof p->out, &p->sink));
}

/* Round r's inputs: the upload's buffer, and which a the graph reads. */
static void pipeline_round(pipeline *p, int r, int *bound) {
  for (int i = 0; i < 64; ++i) p->in[i] = (float)((i * 7 + r * 3) % 17) * 0.125f - 1.0f;
  if (r % 3 == 2) {
    KDT_OK(kd_graph_rebind(p->g, p->a[*bound], p->a[!*bound]));
    *bound = !*bound;
  }
}

Test(executors, resubmissions_with_new_inputs_and_rebinding_match_host) {
  enum { ROUNDS = 12, IN_FLIGHT = 3 };
  static float want[ROUNDS][64], got[ROUNDS][64];
  kd_session *host = kdt_host_session();
  pipeline hp;
  pipeline_build(host, &hp);
  int bound = 0;
  for (int r = 0; r < ROUNDS; ++r) {
    pipeline_round(&hp, r, &bound);
    KDT_OK(kd_graph_submit(hp.g, NULL));
    KDT_OK(kd_sink_wait(hp.sink));
    memcpy(want[r], hp.out, sizeof want[r]);
  }
  for (size_t m = 0; m < MODES; ++m) {
    kd_session *s = cuda_session(modes[m]);
    pipeline p;
    pipeline_build(s, &p);
    bound = 0;
    /* IN_FLIGHT submissions before each wait: a sink waits for the latest
     * one, so the rounds between are checked by the last of each group. */
    for (int r = 0; r < ROUNDS; ++r) {
      pipeline_round(&p, r, &bound);
      KDT_OK(kd_graph_submit(p.g, NULL));
      if (r % IN_FLIGHT == IN_FLIGHT - 1) {
        KDT_OK(kd_sink_wait(p.sink));
        memcpy(got[r], p.out, sizeof got[r]);
        cr_assert_eq(memcmp(got[r], want[r], sizeof got[r]), 0, "%s: round %d differs from HOST", mode_names[m], r);
      }
    }
    kd_session_stats k = stats(s);
    cr_assert_eq(k.stream_syncs + k.device_syncs, 0);
    if (modes[m] == KD_EXEC_GRAPH) {
      cr_assert_eq(k.graph_instantiations, 1, "GRAPH: rebinding patches the one executable graph");
      cr_assert_eq(k.graph_launches, ROUNDS);
    }
    kd_graph_destroy(p.g);
    for (int i = 0; i < 2; ++i) KDT_OK(kd_tensor_release(s, p.a[i]));
    KDT_OK(kd_tensor_release(s, p.b));
    KDT_OK(kd_tensor_release(s, p.c));
    kd_session_destroy(s);
  }
  kd_graph_destroy(hp.g);
  kd_session_destroy(host);
}
