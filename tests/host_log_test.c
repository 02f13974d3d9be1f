/* SPDX-License-Identifier: Apache-2.0 */
/* A session's log and the environment's say in its options: levels, the
 * user's callback (and KD_ERR_BUSY from inside it), stderr without one,
 * KDAG_LOG_LEVEL, KDAG_VERBOSE and KDAG_DEBUG_NODES filling only what code
 * left unset (options.log_level KD_LOG_DEFAULT, options.flags_set), and
 * unreadable values ignored with a warning. Criterion runs each test in a
 * process of its own, so setenv here touches no other test. */
#include <unistd.h>

#include "kdag_test.h"
#include "null_driver.h"

typedef struct line {
  kd_log_level level;
  char text[512];
} line;

static line lines[64];
static int line_count;
static kd_session *logged_session; /* for the callback's own kdag calls */
static kd_status busy_status = KD_OK;

static void keep(void *user, kd_log_level level, const char *message) {
  cr_assert_eq(user, (void *)&lines, "log_user passed as is");
  if (logged_session) busy_status = kd_session_trim(logged_session);
  if (line_count < 64) {
    lines[line_count].level = level;
    snprintf(lines[line_count].text, sizeof lines[line_count].text, "%s", message);
    line_count++;
  }
}

/* The lines containing needle at level. */
static int said(kd_log_level level, const char *needle) {
  int n = 0;
  for (int i = 0; i < line_count; ++i) n += lines[i].level == level && strstr(lines[i].text, needle) != NULL;
  return n;
}

static int said_above(kd_log_level level) {
  int n = 0;
  for (int i = 0; i < line_count; ++i) n += lines[i].level > level;
  return n;
}

/* An AUTO session on a machine without a driver: HOST, with the reason
 * at INFO. */
static kd_session *auto_session(kd_log_level level, uint32_t flags, uint32_t flags_set) {
  setenv("KDAG_CUDA_DRIVER_PATH", "/nonexistent/libcuda.so.1", 1);
  kd_session_options o;
  kd_session_options_init(&o);
  cr_assert_eq(o.log_level, KD_LOG_DEFAULT);
  cr_assert_eq(o.flags_set, 0u);
  o.log_level = level;
  o.flags = flags;
  o.flags_set = flags_set;
  o.log = keep;
  o.log_user = lines;
  kd_session *s;
  KDT_OK(kd_session_create(&o, &s));
  cr_assert_eq(kd_session_backend(s), KD_BACKEND_HOST);
  return s;
}

static void submit_one(kd_session *s) {
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_set_name(g, "logged"));
  kd_tensor t;
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {16}};
  KDT_OK(kd_tensor_create(s, &d, &t));
  float one = 1;
  KDT_OK(kd_graph_op_fill(g, "fill", kd_whole(t), &one, NULL));
  KDT_OK(kd_graph_submit(g, NULL));
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, t));
}

Test(log, code_sets_the_level_and_the_callback_gets_each_line) {
  kd_session *s = auto_session(KD_LOG_INFO, 0, 0);
  cr_assert_eq(said(KD_LOG_INFO, "AUTO chose HOST"), 1, "the fallback's reason at INFO");
  cr_assert_eq(said(KD_LOG_INFO, "HOST pool:"), 1, "where the workers went, at INFO");
  submit_one(s);
  cr_assert_eq(said_above(KD_LOG_INFO), 0, "no DEBUG line at INFO");
  kd_session_destroy(s);
  line_count = 0;
  s = auto_session(KD_LOG_WARN, 0, 0);
  cr_assert_eq(line_count, 0, "nothing at WARN here");
  kd_session_destroy(s);
  line_count = 0;
  s = auto_session(KD_LOG_DEBUG, 0, 0);
  submit_one(s);
  cr_assert_eq(said(KD_LOG_DEBUG, "graph 'logged': planned 1 nodes"), 1);
  kd_session_destroy(s);
  cr_assert_str_eq(kd_log_level_name(KD_LOG_WARN), "warn");
  cr_assert_str_eq(kd_log_level_name(KD_LOG_DEFAULT), "?");
}

Test(log, environment_fills_what_code_left_unset) {
  setenv("KDAG_LOG_LEVEL", "debug", 1);
  kd_session *s = auto_session(KD_LOG_DEFAULT, 0, 0);
  submit_one(s);
  cr_assert_eq(said(KD_LOG_INFO, "AUTO chose HOST"), 1);
  cr_assert_eq(said(KD_LOG_DEBUG, "planned"), 1, "KDAG_LOG_LEVEL=debug applies");
  kd_session_destroy(s);
  line_count = 0;
  s = auto_session(KD_LOG_WARN, 0, 0); /* decided in code */
  submit_one(s);
  cr_assert_eq(line_count, 0, "code's WARN wins over KDAG_LOG_LEVEL=debug");
  kd_session_destroy(s);
}

Test(log, verbose_from_the_environment_unless_code_decided) {
  setenv("KDAG_VERBOSE", "1", 1);
  kd_session *s = auto_session(KD_LOG_DEFAULT, 0, 0);
  cr_assert_eq(said(KD_LOG_INFO, "AUTO chose HOST"), 1, "KDAG_VERBOSE=1 raises the default WARN to INFO");
  kd_session_destroy(s);
  line_count = 0;
  s = auto_session(KD_LOG_DEFAULT, 0, KD_SESSION_VERBOSE); /* forced off in code */
  cr_assert_eq(line_count, 0, "flags_set keeps VERBOSE off");
  kd_session_destroy(s);
}

Test(log, debug_nodes_from_the_environment_unless_code_decided) {
  setenv("KDAG_DEBUG_NODES", "yes", 1);
  for (int forced_off = 0; forced_off < 2; ++forced_off) {
    setenv("KDAG_CUDA_DRIVER_PATH", KDAG_NULL_DRIVER, 1);
    kd_session_options o;
    kd_session_options_init(&o);
    o.backend = KD_BACKEND_CUDA;
    o.exec_mode = KD_EXEC_EAGER;
    o.flags_set = forced_off ? KD_SESSION_DEBUG_NODES : 0;
    kd_session *s;
    KDT_OK(kd_session_create(&o, &s));
    kd_session_stats before, after;
    KDT_OK(kd_session_stats_get(s, &before));
    kd_graph *g;
    KDT_OK(kd_graph_create(s, &g));
    kd_tensor t;
    kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {16}};
    KDT_OK(kd_tensor_create(s, &d, &t));
    float one = 1;
    for (int i = 0; i < 3; ++i) KDT_OK(kd_graph_op_fill(g, "fill", kd_whole(t), &one, NULL));
    KDT_OK(kd_graph_submit(g, NULL));
    KDT_OK(kd_session_stats_get(s, &after));
    cr_assert_eq(after.event_waits - before.event_waits, forced_off ? 0u : 3u,
                 "per-node waits %s (%llu)", forced_off ? "off" : "from KDAG_DEBUG_NODES",
                 (unsigned long long)(after.event_waits - before.event_waits));
    kd_graph_destroy(g);
    KDT_OK(kd_tensor_release(s, t));
    kd_session_destroy(s);
  }
}

Test(log, unreadable_values_are_ignored_with_a_warning) {
  setenv("KDAG_LOG_LEVEL", "loud", 1);
  setenv("KDAG_VERBOSE", "maybe", 1);
  kd_session *s = auto_session(KD_LOG_DEFAULT, 0, 0);
  cr_assert_eq(said(KD_LOG_WARN, "KDAG_LOG_LEVEL=\"loud\" ignored"), 1);
  cr_assert_eq(said(KD_LOG_WARN, "KDAG_VERBOSE=\"maybe\" ignored"), 1);
  cr_assert_eq(said(KD_LOG_INFO, "AUTO chose HOST"), 0, "the level stays WARN");
  kd_session_destroy(s);
}

Test(log, bad_options_are_refused) {
  kd_session_options o;
  kd_session *s;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  o.log_level = (kd_log_level)7;
  KDT_FAILS(kd_session_create(&o, &s), KD_ERR_INVALID_ARGUMENT, "options->log_level 7");
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  o.flags_set = 1u << 20;
  KDT_FAILS(kd_session_create(&o, &s), KD_ERR_INVALID_ARGUMENT, "options->flags_set");
}

Test(log, the_callback_must_not_call_kdag) {
  kd_session *s = auto_session(KD_LOG_DEBUG, 0, 0);
  logged_session = s;
  submit_one(s);
  logged_session = NULL;
  cr_assert_eq(busy_status, KD_ERR_BUSY, "a kdag call from the log callback: %s", kd_status_name(busy_status));
  kd_session_destroy(s);
}

Test(log, without_a_callback_lines_go_to_stderr) {
  char path[] = "/tmp/kdag-log-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  setenv("KDAG_CUDA_DRIVER_PATH", "/nonexistent/libcuda.so.1", 1);
  kd_session_options o;
  kd_session_options_init(&o);
  o.log_level = KD_LOG_INFO;
  kd_session *s;
  KDT_OK(kd_session_create(&o, &s));
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  kd_session_destroy(s);
  char text[4096] = {0};
  FILE *f = fopen(path, "r");
  cr_assert(f);
  size_t got = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  close(fd);
  unlink(path);
  cr_assert_gt(got, 0u);
  cr_assert(strstr(text, "kdag: [info] AUTO chose HOST") != NULL, "stderr: %s", text);
}
