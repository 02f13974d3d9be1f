/* SPDX-License-Identifier: Apache-2.0 */
/* Host lane: every public function that takes pointers refuses a NULL one
 * (where NULL is not documented as allowed) with KD_ERR_INVALID_ARGUMENT
 * and a message naming the function, instead of crashing, and the session
 * stays usable. One test per header, each with a live HOST session, graph
 * and tensor, so every other argument is valid. */
#include "kdag_test.h"

/* Asserts a refusal whose message names the function and the argument
 * that is NULL (each call passes one NULL where NULL is not allowed). */
#define REFUSED(arg, fn, ...)                                                                     \
  do {                                                                                            \
    KDT_FAILS(fn(__VA_ARGS__), KD_ERR_INVALID_ARGUMENT, #fn);                                    \
    cr_assert(strstr(kd_last_error(), "argument " arg " "), "%s does not name argument %s: %s", #fn, arg, \
              kd_last_error());                                                                   \
  } while (0)

typedef struct fixture {
  kd_session *s;
  kd_graph *g;
  kd_tensor t;
} fixture;

static fixture setup(void) {
  fixture f;
  f.s = kdt_host_session();
  int32_t v[4] = {1, 2, 3, 4};
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {4}};
  KDT_OK(kd_tensor_from_host(f.s, &d, v, sizeof v, &f.t));
  KDT_OK(kd_graph_create(f.s, &f.g));
  return f;
}

/* The session took every refusal and still works. */
static void still_works_then_done(fixture *f) {
  int32_t back[4];
  KDT_OK(kd_tensor_download(f->s, f->t, back, sizeof back));
  cr_assert_eq(back[3], 4);
  kd_graph_destroy(f->g);
  kd_session_destroy(f->s);
}

Test(host_api_null, session_and_tensor_functions_refuse_null_pointers) {
  fixture f = setup();
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {4}};
  int32_t v[4] = {0};
  kd_tensor t;
  kd_view view;
  REFUSED("out_session", kd_session_create, NULL, NULL);
  REFUSED("session", kd_session_device_info, NULL, &(kd_device_info){0});
  REFUSED("out_info", kd_session_device_info, f.s, NULL);
  REFUSED("session", kd_session_stats_get, NULL, &(kd_session_stats){0});
  REFUSED("out_stats", kd_session_stats_get, f.s, NULL);
  REFUSED("session", kd_session_reap, NULL, NULL);
  REFUSED("session", kd_tensor_create, NULL, &d, &t);
  REFUSED("desc", kd_tensor_create, f.s, NULL, &t);
  REFUSED("out_tensor", kd_tensor_create, f.s, &d, NULL);
  REFUSED("session", kd_tensor_from_host, NULL, &d, v, sizeof v, &t);
  REFUSED("desc", kd_tensor_from_host, f.s, NULL, v, sizeof v, &t);
  REFUSED("host", kd_tensor_from_host, f.s, &d, NULL, sizeof v, &t);
  REFUSED("out_tensor", kd_tensor_from_host, f.s, &d, v, sizeof v, NULL);
  REFUSED("session", kd_tensor_upload, NULL, f.t, v, sizeof v);
  REFUSED("host", kd_tensor_upload, f.s, f.t, NULL, sizeof v);
  REFUSED("session", kd_tensor_download, NULL, f.t, v, sizeof v);
  REFUSED("host", kd_tensor_download, f.s, f.t, NULL, sizeof v);
  REFUSED("session", kd_tensor_retain, NULL, f.t);
  REFUSED("session", kd_tensor_release, NULL, f.t);
  REFUSED("session", kd_tensor_info, NULL, f.t, &d);
  REFUSED("out_desc", kd_tensor_info, f.s, f.t, NULL);
  REFUSED("session", kd_view_whole, NULL, f.t, &view);
  REFUSED("out_view", kd_view_whole, f.s, f.t, NULL);
  REFUSED("session", kd_view_check, NULL, &view);
  REFUSED("view", kd_view_check, f.s, NULL);
  cr_assert_eq(kd_view_is_compact(NULL), 0);
  still_works_then_done(&f);
}

static void nothing(void *user) { (void)user; }

Test(host_api_null, graph_functions_refuse_null_pointers) {
  fixture f = setup();
  kd_graph *g;
  kd_sink *sink;
  int32_t v[4], one = 1;
  kd_garg acc = kd_g_in(kd_whole(f.t));
  kd_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0, 0};
  kd_function fn = {{0}, 0};
  REFUSED("session", kd_graph_create, NULL, &g);
  REFUSED("out_graph", kd_graph_create, f.s, NULL);
  REFUSED("graph", kd_graph_op_fill, NULL, "n", kd_whole(f.t), &one, NULL);
  REFUSED("name", kd_graph_op_fill, f.g, NULL, kd_whole(f.t), &one, NULL);
  REFUSED("value", kd_graph_op_fill, f.g, "n", kd_whole(f.t), NULL, NULL);
  REFUSED("graph", kd_graph_op_copy, NULL, "n", kd_whole(f.t), kd_whole(f.t), NULL);
  REFUSED("graph", kd_graph_op_transpose, NULL, "n", kd_whole(f.t), kd_whole(f.t), NULL);
  REFUSED("graph", kd_graph_op_add, NULL, "n", kd_whole(f.t), kd_whole(f.t), kd_whole(f.t), NULL);
  REFUSED("graph", kd_graph_op_axpy, NULL, "n", kd_whole(f.t), kd_whole(f.t), 1.0, NULL);
  REFUSED("graph", kd_graph_op_scale, NULL, "n", kd_whole(f.t), 1.0, NULL);
  REFUSED("graph", kd_graph_op_sum, NULL, "n", kd_whole(f.t), kd_whole(f.t), NULL);
  REFUSED("graph", kd_graph_upload, NULL, "n", f.t, v, sizeof v, NULL);
  REFUSED("host", kd_graph_upload, f.g, "n", f.t, NULL, sizeof v, NULL);
  REFUSED("graph", kd_graph_sink, NULL, "n", f.t, v, sizeof v, &sink);
  REFUSED("host", kd_graph_sink, f.g, "n", f.t, NULL, sizeof v, &sink);
  REFUSED("out_sink", kd_graph_sink, f.g, "n", f.t, v, sizeof v, NULL);
  REFUSED("graph", kd_graph_host, NULL, "n", nothing, NULL, &acc, 1, NULL);
  REFUSED("fn", kd_graph_host, f.g, "n", NULL, NULL, &acc, 1, NULL);
  REFUSED("accesses", kd_graph_host, f.g, "n", nothing, NULL, NULL, 1, NULL);
  REFUSED("graph", kd_graph_kernel, NULL, "n", fn, &cfg, NULL, 0, NULL);
  REFUSED("graph", kd_graph_foreign, NULL, "n", NULL, NULL, NULL, 0, 0, NULL, NULL, NULL);
  REFUSED("graph", kd_graph_edge, NULL, 0, 1);
  REFUSED("graph", kd_graph_rebind, NULL, f.t, f.t);
  REFUSED("graph", kd_graph_set_arg, NULL, 0, 0, kd_arg_i32(1));
  REFUSED("graph", kd_graph_write_dot, NULL, stderr);
  REFUSED("file", kd_graph_write_dot, f.g, NULL);
  REFUSED("graph", kd_graph_stats_get, NULL, &(kd_graph_stats){0});
  REFUSED("out_stats", kd_graph_stats_get, f.g, NULL);
  REFUSED("graph", kd_graph_set_exec_mode, NULL, KD_EXEC_EAGER);
  REFUSED("graph", kd_graph_submit, NULL, NULL);
  REFUSED("session", kd_ticket_done, NULL, (kd_ticket){0}, &one);
  REFUSED("out_done", kd_ticket_done, f.s, (kd_ticket){0}, NULL);
  REFUSED("sink", kd_sink_wait, NULL);
  kd_graph_destroy(NULL); /* documented: ignored */
  kd_graph_stats st;
  KDT_OK(kd_graph_stats_get(f.g, &st));
  cr_assert_eq(st.nodes, 0, "no refusal added a node");
  still_works_then_done(&f);
}

static kd_status never_called(kd_raw *raw, void *user) {
  (void)raw;
  (void)user;
  return KD_ERR_INVALID_ARGUMENT;
}

Test(host_api_null, raw_and_compile_functions_refuse_null_pointers) {
  fixture f = setup();
  kd_launch_config cfg;
  kd_module m = {0};
  kd_function fn = {{0}, 0};
  kd_span span;
  kd_span_mut span_mut;
  kd_tensor t;
  int64_t shape[1] = {4};
  size_t count;
  kd_binary *bin;
  int major, minor;
  void *stream;
  REFUSED("fn", kd_with_raw, f.s, "op", NULL, NULL);
  REFUSED("session", kd_with_raw, NULL, "op", never_called, NULL);
  REFUSED("out_config", kd_launch_config_flat, 16, 16, 0, NULL);
  REFUSED("raw", kd_raw_load_ptx, NULL, ".version 8.0", 12, &m);
  REFUSED("raw", kd_raw_load_image, NULL, "x", 1, &m);
  REFUSED("raw", kd_raw_compile_nvrtc, NULL, "x", NULL, &m);
  REFUSED("raw", kd_raw_load_binary, NULL, NULL, &m);
  REFUSED("session", kd_module_function, NULL, m, "f", &fn);
  REFUSED("session", kd_function_params, NULL, fn, &count, NULL, 0);
  REFUSED("session", kd_module_release, NULL, m);
  REFUSED("raw", kd_raw_cached_module, NULL, "k", NULL, NULL, &m);
  REFUSED("raw", kd_raw_tensor, NULL, f.t, &span);
  REFUSED("raw", kd_raw_tensor_mut, NULL, f.t, &span_mut);
  kd_view whole = {.tensor = f.t, .rank = 1, .shape = {4}, .strides = {1}};
  REFUSED("raw", kd_raw_view, NULL, NULL, &span); /* the scope is checked first */
  REFUSED("raw", kd_raw_view_mut, NULL, NULL, &span_mut);
  REFUSED("raw", kd_raw_view, NULL, &whole, &span);
  REFUSED("raw", kd_raw_view_mut, NULL, &whole, &span_mut);
  REFUSED("raw", kd_raw_alloc_output, NULL, KD_I32, 1, shape, &t);
  REFUSED("raw", kd_raw_launch, NULL, fn, &cfg, NULL, 0);
  REFUSED("raw", kd_raw_synchronize, NULL);
  REFUSED("raw", kd_raw_stream, NULL, &stream);
  cr_assert_null(kd_raw_session(NULL));
  REFUSED("source", kd_nvrtc_compile, NULL, NULL, &bin);
  REFUSED("out_binary", kd_nvrtc_compile, "extern \"C\" __global__ void k() {}", NULL, NULL);
  REFUSED("data", kd_binary_from_memory, KD_BINARY_PTX, NULL, 1, "sm_90", 0, &bin);
  REFUSED("out_binary", kd_binary_from_memory, KD_BINARY_PTX, "x", 1, "sm_90", 0, NULL);
  REFUSED("cubin", kd_binary_read_global, NULL, "g", &major, sizeof major);
  REFUSED("inputs", kd_nvjitlink_link, NULL, 1, NULL, &bin);
  kd_link_input in = {.kind = KD_BINARY_PTX, .data = "x", .size = 2, .name = "x"};
  REFUSED("options", kd_nvjitlink_link, &in, 1, NULL, &bin);
  REFUSED("out_binary", kd_nvjitlink_link, &in, 1, &(kd_link_options){.struct_size = sizeof(kd_link_options), .arch = "sm_90"}, NULL);
  REFUSED("major", kd_nvrtc_version, NULL, &minor);
  REFUSED("minor", kd_nvjitlink_version, &major, NULL);
  REFUSED("out_cache", kd_cubin_cache_create, NULL, NULL);
  kd_module_key key;
  REFUSED("out_key", kd_build_key, NULL, NULL);
  REFUSED("recipe", kd_build_key, NULL, &key);
  REFUSED("recipe", kd_build_cubin, NULL, NULL, &bin, NULL);
  REFUSED("cache", kd_cubin_cache_stats_get, NULL, NULL);
  REFUSED("out_info", kd_mathdx_find, NULL);
  kd_nvrtc_options no;
  kd_mathdx_info info;
  memset(&info, 0, sizeof info);
  REFUSED("info", kd_mathdx_nvrtc_options, NULL, &no);
  REFUSED("o", kd_mathdx_nvrtc_options, &info, NULL);
  kd_binary_destroy(NULL);        /* documented: ignored */
  kd_cubin_cache_destroy(NULL); /* as free */
  still_works_then_done(&f);
}

/* Asserts a refusal with code whose message names the function. */
#define REFUSED_AS(code, fn, ...) KDT_FAILS(fn(__VA_ARGS__), code, #fn)

/* Every function taking a tensor handle refuses a zero handle, a released
 * one and another session's, each with its own code, naming the function. */
Test(host_api_null, tensor_handles_are_checked_everywhere) {
  fixture f = setup();
  kd_session *other = kdt_host_session();
  int32_t v[4] = {0};
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {4}};
  kd_tensor dead, foreign, zero = {0};
  KDT_OK(kd_tensor_from_host(f.s, &d, v, sizeof v, &dead));
  KDT_OK(kd_tensor_release(f.s, dead));
  KDT_OK(kd_tensor_from_host(other, &d, v, sizeof v, &foreign));
  kd_sink *sink;
  kd_view view;
  struct {
    kd_tensor t;
    kd_status code;
  } bad[] = {{zero, KD_ERR_INVALID_ARGUMENT}, {dead, KD_ERR_RELEASED}, {foreign, KD_ERR_WRONG_SESSION}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    kd_tensor t = bad[i].t;
    kd_status c = bad[i].code;
    REFUSED_AS(c, kd_tensor_upload, f.s, t, v, sizeof v);
    REFUSED_AS(c, kd_tensor_download, f.s, t, v, sizeof v);
    REFUSED_AS(c, kd_tensor_retain, f.s, t);
    REFUSED_AS(c, kd_tensor_release, f.s, t);
    REFUSED_AS(c, kd_tensor_info, f.s, t, &d);
    REFUSED_AS(c, kd_view_whole, f.s, t, &view);
    kd_view v1 = {.tensor = t, .rank = 1, .shape = {1}, .strides = {1}};
    REFUSED_AS(c, kd_view_check, f.s, &v1);
    REFUSED_AS(c, kd_graph_upload, f.g, "n", t, v, sizeof v, NULL);
    REFUSED_AS(c, kd_graph_sink, f.g, "n", t, v, sizeof v, &sink);
    REFUSED_AS(c, kd_graph_op_copy, f.g, "n", kd_whole(f.t), kd_whole(t), NULL);
    REFUSED_AS(c, kd_graph_rebind, f.g, f.t, t);
  }
  kd_graph_stats st;
  KDT_OK(kd_graph_stats_get(f.g, &st));
  cr_assert_eq(st.nodes, 0, "no refusal added a node");
  kd_session_destroy(other);
  still_works_then_done(&f);
}

/* The previous release's names still compile and call the same functions
 * (kdag/kdag.h: one release of macros). */
Test(host_api_null, the_previous_names_still_work) {
  fixture f = setup();
  int32_t one = 1, got[4];
  kd_node n = 99;
  KDT_OK(kd_graph_fill(f.g, "old.fill", kd_whole(f.t), &one, &n));
  cr_assert_eq(n, 0);
  kd_tensor u;
  kd_tensor_desc d = {.dtype = KD_I32, .rank = 1, .shape = {4}};
  KDT_OK(kd_tensor_create(f.s, &d, &u));
  KDT_OK(kd_graph_add(f.g, "old.add", kd_whole(u), kd_whole(f.t), kd_whole(f.t), NULL));
  kd_sink *sink;
  KDT_OK(kd_graph_sink(f.g, "out", u, got, sizeof got, &sink));
  KDT_OK(kd_graph_submit(f.g, NULL));
  KDT_OK(kd_sink_wait(sink));
  cr_assert_eq(got[3], 2);
  kd_counters c;
  KDT_OK(kd_session_counters(f.s, &c));
  cr_assert_eq(c.submissions, 1);
  kd_binary *b;
  KDT_OK(kd_binary_from_memory(KD_BINARY_PTX, "x", 2, "sm_90", 0, &b));
  kd_binary_free(b);
  KDT_OK(kd_tensor_release(f.s, u));
  kd_graph_destroy(f.g);
  kd_session_destroy(f.s);
}
