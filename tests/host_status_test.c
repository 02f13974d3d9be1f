/* SPDX-License-Identifier: Apache-2.0 */
/* Host lane: status codes, messages, option and argument validation. */
#include <pthread.h>

#include "base/status_internal.h"
#include "kdag_test.h"

Test(host_status, every_code_has_a_distinct_name) {
  for (int a = KD_OK; a <= KD_ERR_COMM_FAILED; ++a) {
    cr_assert_str_neq(kd_status_name((kd_status)a), "KD_ERR_UNKNOWN", "code %d unnamed", a);
    for (int b = a + 1; b <= KD_ERR_COMM_FAILED; ++b)
      cr_assert_str_neq(kd_status_name((kd_status)a), kd_status_name((kd_status)b));
  }
  cr_assert_str_eq(kd_status_name((kd_status)999), "KD_ERR_UNKNOWN");
}

/* Every options struct is refused uninitialized (struct_size 0) and with
 * another size than this library's, naming the call and the field. */
Test(host_status, options_structs_check_their_size) {
  kd_session_options so;
  kd_session_options_init(&so);
  cr_assert_eq(so.struct_size, sizeof so);
  kd_session *s = NULL;
  so.struct_size = 0;
  KDT_FAILS(kd_session_create(&so, &s), KD_ERR_INVALID_ARGUMENT, "kd_session_create: options->struct_size is 0");
  so.struct_size = sizeof so + 8;
  KDT_FAILS(kd_session_create(&so, &s), KD_ERR_VERSION_MISMATCH, "kd_session_options of this kdag");
  cr_assert_null(s);

  kd_nvrtc_options no;
  kd_nvrtc_options_init(&no);
  cr_assert_eq(no.struct_size, sizeof no);
  no.arch = "compute_90";
  kd_binary *b = NULL;
  no.struct_size = 0;
  KDT_FAILS(kd_nvrtc_compile("__global__ void k() {}", &no, &b), KD_ERR_INVALID_ARGUMENT,
            "kd_nvrtc_options_init()");
  no.struct_size = sizeof no - 4;
  KDT_FAILS(kd_nvrtc_compile("__global__ void k() {}", &no, &b), KD_ERR_VERSION_MISMATCH,
            "compiled against the headers of another kdag version");
  cr_assert_null(b);

  kd_link_options lo;
  kd_link_options_init(&lo);
  lo.arch = "sm_90";
  static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n";
  kd_link_input in = {.kind = KD_BINARY_PTX, .data = ptx, .size = sizeof ptx, .name = "p"};
  lo.struct_size = 1;
  KDT_FAILS(kd_nvjitlink_link(&in, 1, &lo, &b), KD_ERR_VERSION_MISMATCH, "options->struct_size is 1");

  kd_build_recipe r;
  kd_build_recipe_init(&r);
  cr_assert_eq(r.nvrtc.struct_size, sizeof r.nvrtc);
  r.source = "__global__ void k() {}";
  r.nvrtc.arch = "sm_90";
  r.nvrtc.struct_size = 0;
  kd_module_key key;
  KDT_FAILS(kd_build_key(&r, &key), KD_ERR_INVALID_ARGUMENT, "recipe->nvrtc.struct_size is 0");
  cr_assert_eq(kd_version(), KD_VERSION);
  cr_assert_str_eq(kd_version_string(), "0.2.0");
}

Test(host_status, session_options_are_validated) {
  kd_session_options o;
  kd_session *s = (kd_session *)0x1;
  kd_session_options_init(&o);
  o.backend = (kd_backend)7;
  KDT_FAILS(kd_session_create(&o, &s), KD_ERR_INVALID_ARGUMENT, "options->backend");
  cr_assert_null(s);
  kd_session_options_init(&o);
  o.completion_ring_capacity = 1000;
  KDT_FAILS(kd_session_create(&o, &s), KD_ERR_INVALID_ARGUMENT, "completion_ring_capacity");
  kd_session_options_init(&o);
  o.device_ordinal = -1;
  KDT_FAILS(kd_session_create(&o, &s), KD_ERR_INVALID_ARGUMENT, "device_ordinal");
  kd_session_options_init(&o);
  o.flags = 1u << 30;
  KDT_FAILS(kd_session_create(&o, &s), KD_ERR_INVALID_ARGUMENT, "flags");
  kd_session_options_init(&o);
  cr_assert_eq(o.exec_mode, KD_EXEC_AUTO);
  cr_assert_eq(o.graph_after, 2);
  o.exec_mode = (kd_exec_mode)9;
  KDT_FAILS(kd_session_create(&o, &s), KD_ERR_INVALID_ARGUMENT, "options->exec_mode");
  KDT_FAILS(kd_session_create(NULL, NULL), KD_ERR_INVALID_ARGUMENT, "out_session");
}

Test(host_status, launch_config_flat_rejects_bad_shapes) {
  kd_launch_config c;
  KDT_FAILS(kd_launch_config_flat(8, 0, 0, &c), KD_ERR_LAUNCH_CONFIG, "block 0");
  KDT_FAILS(kd_launch_config_flat(8, 1025, 0, &c), KD_ERR_LAUNCH_CONFIG, "block 1025");
  KDT_FAILS(kd_launch_config_flat(0, 128, 0, &c), KD_ERR_LAUNCH_CONFIG, "n is 0");
  KDT_FAILS(kd_launch_config_flat(1ull << 42, 1, 0, &c), KD_ERR_LAUNCH_CONFIG, "2^31-1");
  KDT_FAILS(kd_launch_config_flat(UINT64_MAX, 1024, 0, &c), KD_ERR_LAUNCH_CONFIG, "2^31-1"); /* n + block - 1 wrapped to 0 blocks */
  KDT_FAILS(kd_launch_config_flat(8, 128, 0, NULL), KD_ERR_INVALID_ARGUMENT, "kd_launch_config_flat: argument out_config is NULL");
  KDT_OK(kd_launch_config_flat(1000, 128, 64, &c));
  cr_assert_eq(c.grid[0], 8);
  cr_assert_eq(c.block[0], 128);
  cr_assert_eq(c.grid[1] * c.grid[2] * c.block[1] * c.block[2], 1);
  cr_assert_eq(c.shared_bytes, 64);
}

Test(host_status, dtypes_have_sizes_and_names) {
  cr_assert_eq(kd_dtype_size(KD_F32), 4);
  cr_assert_eq(kd_dtype_size(KD_F64), 8);
  cr_assert_eq(kd_dtype_size(KD_I32), 4);
  cr_assert_eq(kd_dtype_size(KD_I64), 8);
  cr_assert_eq(kd_dtype_size(KD_U8), 1);
  cr_assert_eq(kd_dtype_size(KD_C32), 8);
  cr_assert_eq(kd_dtype_size(KD_C64), 16);
  cr_assert_eq(kd_dtype_size(KD_F16), 2);
  cr_assert_eq(kd_dtype_size(KD_BF16), 2);
  cr_assert_eq(kd_dtype_size(KD_I8), 1);
  cr_assert_eq(kd_dtype_size((kd_dtype)99), 0);
  cr_assert_eq(kd_dtype_size(KD_DTYPE_COUNT_), 0);
  cr_assert_str_eq(kd_dtype_name(KD_C64), "c64");
  cr_assert_str_eq(kd_dtype_name(KD_BF16), "bf16");
  cr_assert_str_eq(kd_dtype_name((kd_dtype)99), "invalid");
}

/* Another thread's failure, with its own message there. */
static void *fail_elsewhere(void *p) {
  char *seen = p;
  kd_session *s = NULL;
  kd_session_options o;
  kd_session_options_init(&o);
  o.flags = 1u << 30; /* not a flag */
  (void)kd_session_create(&o, &s);
  snprintf(seen, 256, "%s", kd_last_error());
  return NULL;
}

Test(host_status, message_is_per_thread_and_survives_success) {
  kd_launch_config c;
  kd_launch_config_flat(8, 0, 0, &c);
  const char *first = kd_last_error();
  cr_assert(strstr(first, "kd_launch_config_flat") != NULL);
  KDT_OK(kd_launch_config_flat(8, 8, 0, &c));
  cr_assert(strstr(kd_last_error(), "kd_launch_config_flat: block 0") != NULL);
  char seen[256] = {0};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, fail_elsewhere, seen), 0);
  pthread_join(t, NULL);
  cr_assert(strstr(seen, "kd_session_create") != NULL, "the other thread's message: %s", seen);
  cr_assert(strstr(kd_last_error(), "kd_launch_config_flat: block 0") != NULL,
            "another thread's failure reached this thread's message: %s", kd_last_error());
}

/* Context is kept whole however long (a PTX JIT log in it was cut at 512
 * bytes), and the earlier message follows it. */
Test(host_status, a_long_context_is_kept_whole) {
  char log[3000];
  memset(log, 'x', sizeof log - 2);
  log[sizeof log - 2] = 'y';
  log[sizeof log - 1] = '\0';
  kd_fail(KD_ERR_DRIVER, "inner: the driver said no");
  cr_assert_eq(kd_fail_context(KD_ERR_DRIVER, "outer: %s", log), KD_ERR_DRIVER);
  const char *m = kd_last_error();
  cr_assert(strstr(m, "xy: inner: the driver said no"), "%.80s ... %s", m, m + strlen(m) - 40);
  cr_assert_eq(strncmp(m, "outer: xxx", 10), 0);
}

/* Messages start with the call that failed, and context keeps it first,
 * named once (the graph fuzzer holds every refusal to that). */
Test(host_status, context_keeps_the_call_first_and_names_it_once) {
  static const struct {
    const char *inner, *context, *want;
  } cases[] = {
      {"kd_graph_op_add: view rank -2 is outside [0, 8]", "node 'n' (#0), argument 0",
       "kd_graph_op_add: node 'n' (#0), argument 0: view rank -2 is outside [0, 8]"},
      {"kd_graph_submit: cuLaunchKernel: CUDA_ERROR_INVALID_VALUE", "kd_graph_submit: node 'k' (#3)",
       "kd_graph_submit: node 'k' (#3): cuLaunchKernel: CUDA_ERROR_INVALID_VALUE"},
      {"kd_tensor_info: argument session is NULL", "kd_view_whole",
       "kd_view_whole: kd_tensor_info: argument session is NULL"},
      {"kd_nvrtc_compile: no arch", "kd_build_cubin (key 00ff)", "kd_build_cubin (key 00ff): kd_nvrtc_compile: no arch"},
      {"cublas: status 7", "kd_graph_submit: foreign node 'f' (#2)", "kd_graph_submit: foreign node 'f' (#2): cublas: status 7"},
      {"the callback failed", "raw scope 'r'", "raw scope 'r': the callback failed"},
      {"kd_graph_addx no colon", "node 'n'", "node 'n': kd_graph_addx no colon"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    kd_fail(KD_ERR_INVALID_ARGUMENT, "%s", cases[i].inner);
    cr_assert_eq(kd_fail_context(KD_ERR_INVALID_ARGUMENT, "%s", cases[i].context), KD_ERR_INVALID_ARGUMENT);
    cr_assert_str_eq(kd_last_error(), cases[i].want, "case %zu", i);
  }
}

/* What a call that succeeds after surviving an inner failure leaves:
 * the message it found, whatever was written in between, on this thread
 * and with no allocation when nothing was. */
Test(host_status, a_kept_message_survives_what_is_written_meanwhile) {
  kd_fail(KD_ERR_DRIVER, "kd_graph_submit: the caller's failure");
  unsigned long mark = kd_fail_mark();
  const char *before = kd_last_error();
  kd_fail_keep keep;
  kd_fail_keep_begin(&keep);
  kd_fail_keep_end(&keep);
  cr_assert_eq(kd_last_error(), before, "nothing written: the same buffer");
  kd_fail_keep_begin(&keep);
  char big[5000];
  memset(big, 'z', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  kd_fail(KD_ERR_DEVICE_FAULT, "kd_graph_submit: a fault found by a reap %s", big);
  cr_assert(strstr(kd_last_error(), "a fault found by a reap"), "written meanwhile");
  kd_fail_keep_end(&keep);
  cr_assert_str_eq(kd_last_error(), "kd_graph_submit: the caller's failure");
  cr_assert_eq(kd_fail_mark(), mark, "the message counts as unchanged");
  cr_assert_eq(kd_fail_unexplained(KD_ERR_DRIVER, mark, "cb"), KD_ERR_DRIVER);
  cr_assert(strstr(kd_last_error(), "cb returned KD_ERR_DRIVER without a message"), "%s", kd_last_error());
}
