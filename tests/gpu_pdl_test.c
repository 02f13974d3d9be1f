/* SPDX-License-Identifier: Apache-2.0 */
/* GPU lane: programmatic dependent launch (KD_LAUNCH_PDL) on sm_90 or
 * later, in EAGER and GRAPH mode, each against a session with
 * KD_SESSION_NO_PDL:
 *  - a planted violation (a kernel that opts in but reads before its wait,
 *    behind a writer that lets its dependents start at once and then spins)
 *    sees the old value under PDL and never without it: the edges really are
 *    programmatic, and the tests below could fail;
 *  - transitivity, which kdag relies on when it drops implied edges: a
 *    waiting reader after a middle kernel (not opting in, or opting in) reads
 *    what a slow writer before the middle wrote, its own edge to the writer
 *    dropped as implied;
 *  - a pipeline of built-ins behind a spinning writer gives the same bits with
 *    and without PDL, and the values computed on the host.
 * The host-lane side (which edges, the fallbacks) is host_pdl_test.c. */
#include "kernels/embedded.h"
#include "kdag_test.h"

typedef struct fns {
  kd_module m;
  kd_function slow, early, read_sum, plain_double, pdl_double;
} fns;

static kd_status load(kd_raw *raw, void *user) {
  fns *f = user;
  kd_session *s = kd_raw_session(raw);
  kd_status st = kd_raw_load_image(raw, kd_kernel_test_cubin, kd_kernel_test_cubin_size, &f->m);
  if (!st) st = kd_module_function(s, f->m, "pdl_slow_write", &f->slow);
  if (!st) st = kd_module_function(s, f->m, "pdl_early_read", &f->early);
  if (!st) st = kd_module_function(s, f->m, "pdl_read_sum", &f->read_sum);
  if (!st) st = kd_module_function(s, f->m, "plain_double", &f->plain_double);
  if (!st) st = kd_module_function(s, f->m, "pdl_double", &f->pdl_double);
  return st;
}

/* A session of mode with PDL on or off (the environment does not decide),
 * skipping on a device without PDL. */
static kd_session *session(kd_exec_mode mode, int pdl, fns *f) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_CUDA;
  o.exec_mode = mode;
  o.flags = pdl ? 0 : KD_SESSION_NO_PDL;
  o.flags_set = KD_SESSION_NO_PDL;
  kd_session *s = kdt_gpu_session_opts(&o);
  kd_device_info info;
  KDT_OK(kd_session_device_info(s, &info));
  if (info.cc_major < 9) {
    kd_session_destroy(s);
    cr_skip_test("programmatic dependent launch needs sm_90 or later; this is sm_%d%d", info.cc_major, info.cc_minor);
  }
  KDT_OK(kd_with_raw(s, "load", load, f));
  return s;
}

static uint64_t programmatic(kd_session *s) {
  kd_session_stats st;
  KDT_OK(kd_session_stats_get(s, &st));
  return st.programmatic_edges;
}

static const char *mode_name(kd_exec_mode m) { return m == KD_EXEC_EAGER ? "EAGER" : "GRAPH"; }

static const kd_launch_config one_pdl = {{1, 1, 1}, {32, 1, 1}, 0, KD_LAUNCH_PDL};
static const kd_launch_config one_plain = {{1, 1, 1}, {32, 1, 1}, 0, 0};

/* fill x = 0, slow write x = 1 after 2 ms, early read of x into out: how
 * many of `rounds` submissions saw the old value. */
static int stale_reads(kd_exec_mode mode, int pdl, int rounds) {
  fns f;
  kd_session *s = session(mode, pdl, &f);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {1}};
  kd_tensor x, out;
  KDT_OK(kd_tensor_create(s, &d, &x));
  KDT_OK(kd_tensor_create(s, &d, &out));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  float zero = 0, seen = -1;
  KDT_OK(kd_graph_op_fill(g, "x = 0", kd_whole(x), &zero, NULL));
  kd_garg w[] = {kd_g_value(kd_arg_u64(2000000)), kd_g_out(kd_whole(x)), kd_g_value(kd_arg_f32(1)),
                 kd_g_value(kd_arg_i32(1))};
  KDT_OK(kd_graph_kernel(g, "x = 1, slowly", f.slow, &one_pdl, w, 4, NULL));
  kd_garg r[] = {kd_g_in(kd_whole(x)), kd_g_out(kd_whole(out))};
  KDT_OK(kd_graph_kernel(g, "reads x before its wait", f.early, &one_pdl, r, 2, NULL));
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "out", out, &seen, sizeof seen, &sink));
  int stale = 0;
  for (int i = 0; i < rounds; ++i) {
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_sink_wait(sink));
    cr_assert(seen == 0 || seen == 1, "%s: the early read saw %g", mode_name(mode), seen);
    stale += seen == 0;
  }
  if (pdl) cr_assert_gt(programmatic(s), 0, "%s: no programmatic edge", mode_name(mode));
  else cr_assert_eq(programmatic(s), 0);
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, x));
  KDT_OK(kd_tensor_release(s, out));
  KDT_OK(kd_module_release(s, f.m));
  kd_session_destroy(s);
  return stale;
}

Test(gpu_pdl, a_planted_violation_is_seen_with_pdl_and_never_without) {
  kd_exec_mode modes[] = {KD_EXEC_EAGER, KD_EXEC_GRAPH};
  for (int m = 0; m < 2; ++m) {
    int with = stale_reads(modes[m], 1, 5), without = stale_reads(modes[m], 0, 5);
    cr_assert_gt(with, 0, "%s: a kernel that reads before its wait never overlapped its slow writer: the launch "
                 "was not programmatic", mode_name(modes[m]));
    cr_assert_eq(without, 0, "%s: without PDL the reader saw the old value %d times", mode_name(modes[m]), without);
  }
}

/* fill x, y = 0; x = v after 1 ms (slow, waits and triggers at once);
 * middle y = 2x (waiting or not); out = x + y after its wait. The reader's
 * edge from the writer is implied by writer -> middle -> reader and dropped:
 * it sees the writer's x through the middle alone. */
static void transitive(kd_exec_mode mode, int middle_waits) {
  fns f;
  kd_session *s = session(mode, 1, &f);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {1}};
  kd_tensor x, y, out;
  KDT_OK(kd_tensor_create(s, &d, &x));
  KDT_OK(kd_tensor_create(s, &d, &y));
  KDT_OK(kd_tensor_create(s, &d, &out));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  float zero = 0, got = -1;
  KDT_OK(kd_graph_op_fill(g, "x = 0", kd_whole(x), &zero, NULL));
  KDT_OK(kd_graph_op_fill(g, "y = 0", kd_whole(y), &zero, NULL));
  kd_garg w[] = {kd_g_value(kd_arg_u64(1000000)), kd_g_out(kd_whole(x)), kd_g_value(kd_arg_f32(3)),
                 kd_g_value(kd_arg_i32(1))};
  kd_node writer;
  KDT_OK(kd_graph_kernel(g, "x = 3, slowly", f.slow, &one_pdl, w, 4, &writer));
  kd_garg mid[] = {kd_g_in(kd_whole(x)), kd_g_out(kd_whole(y))};
  KDT_OK(kd_graph_kernel(g, "y = 2x", middle_waits ? f.pdl_double : f.plain_double,
                         middle_waits ? &one_pdl : &one_plain, mid, 2, NULL));
  kd_garg rd[] = {kd_g_in(kd_whole(x)), kd_g_in(kd_whole(y)), kd_g_out(kd_whole(out))};
  KDT_OK(kd_graph_kernel(g, "out = x + y", f.read_sum, &one_pdl, rd, 3, NULL));
  kd_graph_stats gs;
  KDT_OK(kd_graph_stats_get(g, &gs));
  cr_assert_geq(gs.edges_dropped, 1, "the writer -> reader edge is implied and dropped");
  kd_sink *sink;
  KDT_OK(kd_graph_sink(g, "out", out, &got, sizeof got, &sink));
  for (int i = 0; i < 20; ++i) {
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_sink_wait(sink));
    cr_assert_eq(got, 9.0f, "%s, middle %s: out = %g, want 9 (round %d)", mode_name(mode),
                 middle_waits ? "waiting" : "not waiting", got, i);
  }
  cr_assert_gt(programmatic(s), 0);
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, x));
  KDT_OK(kd_tensor_release(s, y));
  KDT_OK(kd_tensor_release(s, out));
  KDT_OK(kd_module_release(s, f.m));
  kd_session_destroy(s);
}

Test(gpu_pdl, a_waiting_reader_sees_writes_through_a_dropped_edge) {
  kd_exec_mode modes[] = {KD_EXEC_EAGER, KD_EXEC_GRAPH};
  for (int m = 0; m < 2; ++m) {
    transitive(modes[m], 0);
    transitive(modes[m], 1);
  }
}

enum { LEN = 4096 };

/* x = 1.5 (written slowly, over 4 blocks), then built-ins: x *= 2,
 * y = x + x, y += 0.5 x, z = y, s = sum z. Returns z and s. */
static uint64_t pipeline(kd_exec_mode mode, int pdl, float *z_out, float *s_out) {
  fns f;
  kd_session *s = session(mode, pdl, &f);
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  kd_tensor_desc d1 = {.dtype = KD_F32, .rank = 1, .shape = {1}};
  kd_tensor x, y, z, sum;
  KDT_OK(kd_tensor_create(s, &d, &x));
  KDT_OK(kd_tensor_create(s, &d, &y));
  KDT_OK(kd_tensor_create(s, &d, &z));
  KDT_OK(kd_tensor_create(s, &d1, &sum));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_launch_config four = {{4, 1, 1}, {256, 1, 1}, 0, KD_LAUNCH_PDL};
  kd_garg w[] = {kd_g_value(kd_arg_u64(300000)), kd_g_out(kd_whole(x)), kd_g_value(kd_arg_f32(1.5f)),
                 kd_g_value(kd_arg_i32(LEN))};
  KDT_OK(kd_graph_kernel(g, "x = 1.5, slowly", f.slow, &four, w, 4, NULL));
  KDT_OK(kd_graph_op_scale(g, "x *= 2", kd_whole(x), 2.0, NULL));
  KDT_OK(kd_graph_op_add(g, "y = x + x", kd_whole(y), kd_whole(x), kd_whole(x), NULL));
  KDT_OK(kd_graph_op_axpy(g, "y += 0.5 x", kd_whole(y), kd_whole(x), 0.5, NULL));
  KDT_OK(kd_graph_op_copy(g, "z = y", kd_whole(z), kd_whole(y), NULL));
  KDT_OK(kd_graph_op_sum(g, "s = sum z", kd_whole(sum), kd_whole(z), NULL));
  kd_sink *sz, *ss;
  KDT_OK(kd_graph_sink(g, "z", z, z_out, LEN * sizeof *z_out, &sz));
  KDT_OK(kd_graph_sink(g, "s", sum, s_out, sizeof *s_out, &ss));
  for (int i = 0; i < 10; ++i) {
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_sink_wait(sz));
    KDT_OK(kd_sink_wait(ss));
    for (int k = 0; k < LEN; ++k)
      cr_assert_eq(z_out[k], 7.5f, "%s, PDL %s: z[%d] = %g, want 7.5 (round %d)", mode_name(mode), pdl ? "on" : "off",
                   k, z_out[k], i);
    cr_assert_eq(*s_out, 7.5f * LEN, "%s: sum %g", mode_name(mode), *s_out);
  }
  uint64_t edges = programmatic(s);
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, x));
  KDT_OK(kd_tensor_release(s, y));
  KDT_OK(kd_tensor_release(s, z));
  KDT_OK(kd_tensor_release(s, sum));
  KDT_OK(kd_module_release(s, f.m));
  kd_session_destroy(s);
  return edges;
}

Test(gpu_pdl, built_ins_behind_a_spinning_writer_give_the_same_bits_with_and_without_pdl) {
  kd_exec_mode modes[] = {KD_EXEC_EAGER, KD_EXEC_GRAPH};
  static float z_on[LEN], z_off[LEN];
  for (int m = 0; m < 2; ++m) {
    float s_on, s_off;
    cr_assert_gt(pipeline(modes[m], 1, z_on, &s_on), 0, "%s: no programmatic edge", mode_name(modes[m]));
    cr_assert_eq(pipeline(modes[m], 0, z_off, &s_off), 0);
    cr_assert(memcmp(z_on, z_off, sizeof z_on) == 0 && memcmp(&s_on, &s_off, sizeof s_on) == 0,
              "%s: results differ with PDL", mode_name(modes[m]));
  }
}
