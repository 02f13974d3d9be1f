/* SPDX-License-Identifier: Apache-2.0 */
/* Host lane: the kdag-bench harness. Statistics, the stopping rule (with a
 * fake clock, so the tests are exact), batching and cold mode, ratios and
 * bandwidth shares, the JSON / CSV / markdown outputs, and --compare. And
 * the built-in suites: what --list shows, their axes, how they skip without
 * a GPU, and the guard that keeps eager figures out of GRAPH rows. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/gpu.h"
#include "bench/harness.h"
#include "bench/kdag_session.h"
#include "bench/suites.h"
#include "kdag_test.h"

/* ---- statistics ---------------------------------------------------------- */

Test(host_bench, stats_on_known_data) {
  kb_stats s;
  const double odd[] = {5, 1, 4, 2, 3};
  cr_assert_eq(kb_stats_compute(odd, 5, &s), 0);
  cr_assert_eq(s.n, 5);
  cr_assert_float_eq(s.median, 3, 1e-12);
  cr_assert_float_eq(s.min, 1, 1e-12);
  cr_assert_float_eq(s.max, 5, 1e-12);
  cr_assert_float_eq(s.mean, 3, 1e-12);
  /* Quartiles 2 and 4: IQR 2. */
  cr_assert_float_eq(s.noise, 2 / (1.349 * 3), 1e-12);

  const double even[] = {10, 1, 3, 2};
  cr_assert_eq(kb_stats_compute(even, 4, &s), 0);
  cr_assert_float_eq(s.median, 2.5, 1e-12);
  /* Sorted {1,2,3,10}: Q1 at position 0.75 = 1.75, Q3 at 2.25 = 4.75. */
  cr_assert_float_eq(s.noise, 3 / (1.349 * 2.5), 1e-12);
  cr_assert_float_eq(s.min, 1, 1e-12);
  cr_assert_float_eq(s.max, 10, 1e-12);

  /* One outlier moves max, not the median or the noise. */
  const double outlier[] = {10, 10, 10, 10, 1000};
  cr_assert_eq(kb_stats_compute(outlier, 5, &s), 0);
  cr_assert_float_eq(s.median, 10, 1e-12);
  cr_assert_float_eq(s.noise, 0, 1e-12);
  cr_assert_float_eq(s.max, 1000, 1e-12);

  const double one[] = {7};
  cr_assert_eq(kb_stats_compute(one, 1, &s), 0);
  cr_assert(isnan(s.noise), "noise of one sample is undefined, got %g", s.noise);
  cr_assert_float_eq(s.median, 7, 1e-12);
  cr_assert_eq(kb_stats_compute(one, 0, &s), -1);
  /* A quantised two-valued series keeps its noise even when most samples
   * share one value (a MAD would say 0 here). */
  const double two[] = {1, 3, 1, 3, 3, 3, 1, 3, 1, 3, 3};
  cr_assert_eq(kb_stats_compute(two, 11, &s), 0);
  cr_assert_float_eq(s.median, 3, 1e-12);
  cr_assert(s.noise > 0.4, "noise %g", s.noise);
  /* The input is left alone. */
  cr_assert(odd[0] == 5 && odd[4] == 3);
}

Test(host_bench, stop_rule_as_a_function) {
  kb_stop_rule r = {.min_samples = 10, .max_samples = 100, .min_time_s = 0.5, .max_time_s = 2, .max_noise = 0.02};
  cr_assert_eq(kb_stop_check(&r, 9, 1, 1, 0.0), KB_CONTINUE);        /* too few samples */
  cr_assert_eq(kb_stop_check(&r, 10, 1, 1, 0.01), KB_STOP_CONVERGED);
  cr_assert_eq(kb_stop_check(&r, 10, 0.4, 1, 0.01), KB_CONTINUE);    /* too little time */
  cr_assert_eq(kb_stop_check(&r, 50, 1, 1, 0.05), KB_CONTINUE);      /* noisy */
  cr_assert_eq(kb_stop_check(&r, 50, 1, 1, NAN), KB_CONTINUE);       /* undefined noise */
  cr_assert_eq(kb_stop_check(&r, 50, 1, 2, 0.05), KB_STOP_MAX_TIME);
  cr_assert_eq(kb_stop_check(&r, 3, 0.1, 2.5, 0.0), KB_STOP_MAX_TIME); /* before min_samples */
  cr_assert_eq(kb_stop_check(&r, 100, 1, 1, 0.05), KB_STOP_MAX_SAMPLES);
  cr_assert_eq(kb_stop_check(&r, 0, 0, 5, 0), KB_CONTINUE); /* every row gets a sample */
  cr_assert_str_eq(kb_stop_name(KB_STOP_CONVERGED), "converged");
}

/* ---- fake suites over a fake clock -------------------------------------- */

static uint64_t fake_now;
static uint64_t fake_clock(void *user) {
  (void)user;
  return fake_now;
}

typedef struct fake_case {
  double per_iteration_ns; /* host ns per iteration */
  double gpu_fraction;     /* > 0: report gpu_ns = fraction * host */
  int noisy;               /* alternate 1x and 3x */
  double gpu_quiet_ns;     /* > 0: report this GPU time per iteration, noise-free, whatever the host's */
  double items;            /* kb_run_per_iteration */
  double bytes;            /* kb_run_throughput */
  int fail;
  uint64_t min_batch;      /* kb_run_min_batch when > 0 */
  int count;               /* kb_run_count "widgets": 2 per item, 4 every third batch; 2: more names */
  uint64_t batches, iterations, max_iterations_seen, min_iterations_seen;
} fake_case;

static int flushes;

static kb_status fake_setup(kb_run *run, void **state) {
  fake_case *c = kb_run_user(run);
  *state = c;
  if (c->items > 0) kb_run_per_iteration(run, c->items, "node");
  if (c->bytes > 0) kb_run_throughput(run, 0, c->bytes);
  if (c->min_batch) kb_run_min_batch(run, c->min_batch);
  return KB_OK;
}

static kb_status fake_batch(kb_run *run, void *state, uint64_t k, kb_timing *out) {
  fake_case *c = state;
  if (c->fail) return kb_run_fail(run, "deliberate failure %d", 42);
  double scale = c->noisy ? ((c->batches % 2) ? 3.0 : 1.0) : 1.0;
  /* An axis scales the work, so sweeps give distinct medians. */
  scale *= (double)kb_run_axis(run, "N", 1);
  out->host_ns = c->per_iteration_ns * scale * (double)k;
  out->gpu_ns = c->gpu_fraction > 0 ? out->host_ns * c->gpu_fraction : -1;
  if (c->gpu_quiet_ns > 0) out->gpu_ns = c->gpu_quiet_ns * (double)k;
  fake_now += (uint64_t)out->host_ns;
  if (c->count) kb_run_count(run, "widgets", c->batches % 3 == 2 ? 4.0 : 2.0);
  if (c->count > 1) { /* more names: each its own row, up to KB_MAX_COUNTS (4) */
    kb_run_count(run, "gadgets", 7.0);
    kb_run_count(run, "more", 1.0);
    kb_run_count(run, "extra", 1.0);
    kb_run_count(run, "overflow", 1.0); /* a fifth: no row */
  }
  c->batches++;
  c->iterations += k;
  if (k > c->max_iterations_seen) c->max_iterations_seen = k;
  if (!c->min_iterations_seen || k < c->min_iterations_seen) c->min_iterations_seen = k;
  return KB_OK;
}

static kb_status fake_flush(void *state, char *why, size_t cap) {
  (void)state, (void)why, (void)cap;
  flushes++;
  return KB_OK;
}

static kb_options fake_options(void) {
  kb_options o;
  kb_options_init(&o);
  o.clock_ns = fake_clock;
  o.warmup_s = 0;
  o.target_batch_s = 0; /* one iteration per batch unless a test asks */
  o.stop.min_samples = 10;
  o.stop.min_time_s = 0;
  o.stop.max_time_s = 10;
  o.stop.max_noise = 0.02;
  return o;
}

/* A harness with one suite "s" (axis N when given) and the cases passed. */
static int fake_host_cost; /* the suite's kb_suite_desc.host_cost */

static kb_harness *fake_harness(const int64_t *n_values, size_t n_count, fake_case *cases,
                                const char *const *names, const int *baselines, size_t count) {
  kb_harness *h = kb_harness_create();
  cr_assert(h);
  kb_suite_desc sd = {.name = "s", .description = "fake", .flush = fake_flush, .host_cost = fake_host_cost};
  kb_suite *s = kb_suite_add(h, &sd);
  cr_assert(s);
  if (n_count) cr_assert_eq(kb_suite_axis(s, "N", n_values, n_count), 0);
  for (size_t i = 0; i < count; ++i) {
    kb_case_desc cd = {.name = names[i], .baseline = baselines ? baselines[i] : 0,
                       .setup = fake_setup, .batch = fake_batch, .user = &cases[i]};
    cr_assert_eq(kb_case_add(s, &cd), 0);
  }
  return h;
}

static const kb_result *find_row(const kb_report *r, const char *case_name, const char *metric,
                                 int64_t n) {
  for (size_t i = 0; i < r->count; ++i) {
    const kb_result *row = &r->rows[i];
    if (strcmp(row->case_name, case_name) || strcmp(row->metric, metric)) continue;
    if (n >= 0 && (row->axis_count != 1 || row->axis_values[0] != n)) continue;
    return row;
  }
  return NULL;
}

static double ratio_of(const kb_result *row, const char *baseline) {
  for (size_t i = 0; i < row->ratio_count; ++i)
    if (!strcmp(row->ratios[i].baseline, baseline)) return row->ratios[i].value;
  return NAN;
}

static const kb_result *run_single(fake_case *c, kb_options *o, kb_harness **out) {
  const char *names[] = {"c"};
  kb_harness *h = fake_harness(NULL, 0, c, names, NULL, 1);
  char why[256];
  cr_assert_eq(kb_harness_run(h, o, why, sizeof why), 0, "%s", why);
  *out = h;
  const kb_result *row = find_row(kb_harness_report(h), "c", "host_time_per_iteration", -1);
  cr_assert(row, "no host_time_per_iteration row");
  return row;
}

Test(host_bench, stops_at_min_samples_when_quiet) {
  fake_case c = {.per_iteration_ns = 1e6};
  kb_options o = fake_options();
  kb_harness *h;
  const kb_result *row = run_single(&c, &o, &h);
  cr_assert_eq(row->samples, 10, "quiet series should stop at min_samples, took %zu", row->samples);
  cr_assert_str_eq(row->stop, "converged");
  cr_assert_float_eq(row->median, 1e6, 1e-6);
  cr_assert_float_eq(row->noise, 0, 1e-12);
  cr_assert_eq(row->batch, 1);
  kb_harness_destroy(h);
}

Test(host_bench, min_time_keeps_sampling) {
  fake_case c = {.per_iteration_ns = 1e6};
  kb_options o = fake_options();
  o.stop.min_time_s = 0.05; /* 50 samples of 1 ms */
  kb_harness *h;
  const kb_result *row = run_single(&c, &o, &h);
  cr_assert(row->samples >= 50 && row->samples <= 51, "min_time 50 ms at 1 ms per sample: %zu", row->samples);
  cr_assert_str_eq(row->stop, "converged");
  kb_harness_destroy(h);
}

Test(host_bench, noisy_series_runs_to_max_time) {
  fake_case c = {.per_iteration_ns = 1e6, .noisy = 1};
  kb_options o = fake_options();
  o.stop.max_time_s = 0.1; /* samples take 1 or 3 ms: about 50 fit */
  kb_harness *h;
  const kb_result *row = run_single(&c, &o, &h);
  cr_assert_str_eq(row->stop, "max_time");
  cr_assert(row->samples >= 45 && row->samples <= 55, "expected ~50 samples, got %zu", row->samples);
  cr_assert(row->noise > 0.5, "alternating 1x/3x is noisy, noise %g", row->noise);
  cr_assert_float_eq(row->min, 1e6, 1e-6);
  cr_assert_float_eq(row->max, 3e6, 1e-6);
  kb_harness_destroy(h);
}

/* The GPU series is quiet and the host series noisy: an ordinary suite
 * stops on the GPU's noise; a host_cost one keeps sampling for the host. */
Test(host_bench, host_cost_suites_judge_the_host_noise_too) {
  fake_case c = {.per_iteration_ns = 1e6, .noisy = 1, .gpu_quiet_ns = 5e5};
  kb_options o = fake_options();
  o.stop.max_samples = 40;
  kb_harness *h;
  const kb_result *row = run_single(&c, &o, &h);
  cr_assert_eq(row->samples, 10, "GPU judged alone: stops at min_samples, took %zu", row->samples);
  cr_assert_str_eq(row->stop, "converged");
  kb_harness_destroy(h);
  fake_host_cost = 1;
  c = (fake_case){.per_iteration_ns = 1e6, .noisy = 1, .gpu_quiet_ns = 5e5};
  row = run_single(&c, &o, &h);
  fake_host_cost = 0;
  cr_assert_eq(row->samples, 40, "host judged too: the noisy host series runs to max_samples, took %zu", row->samples);
  cr_assert_str_eq(row->stop, "max_samples");
  const kb_result *gpu = find_row(kb_harness_report(h), "c", "gpu_time_per_iteration", -1);
  cr_assert(gpu, "the GPU row is still reported");
  cr_assert_float_eq(gpu->median, 5e5, 1e-6);
  kb_harness_destroy(h);
}

Test(host_bench, max_time_wins_over_min_samples) {
  fake_case c = {.per_iteration_ns = 1e6};
  kb_options o = fake_options();
  o.stop.min_samples = 1000;
  o.stop.max_time_s = 0.02;
  kb_harness *h;
  const kb_result *row = run_single(&c, &o, &h);
  cr_assert_str_eq(row->stop, "max_time");
  cr_assert(row->samples >= 19 && row->samples <= 21, "20 ms of 1 ms samples: %zu", row->samples);
  kb_harness_destroy(h);
}

Test(host_bench, max_samples_caps) {
  fake_case c = {.per_iteration_ns = 1e6, .noisy = 1};
  kb_options o = fake_options();
  o.stop.max_samples = 25;
  kb_harness *h;
  const kb_result *row = run_single(&c, &o, &h);
  cr_assert_str_eq(row->stop, "max_samples");
  cr_assert_eq(row->samples, 25);
  kb_harness_destroy(h);
}

Test(host_bench, batch_mode_grows_batches_and_normalises) {
  fake_case c = {.per_iteration_ns = 1e5, .items = 10, .gpu_fraction = 0.5};
  kb_options o = fake_options();
  o.target_batch_s = 0.002; /* 2 ms: at least 40 iterations of 50 us GPU time */
  kb_harness *h;
  const char *names[] = {"c"};
  h = fake_harness(NULL, 0, &c, names, NULL, 1);
  char why[256];
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "%s", why);
  const kb_report *r = kb_harness_report(h);
  const kb_result *gpu = find_row(r, "c", "gpu_time_per_node", -1);
  const kb_result *host = find_row(r, "c", "host_time_per_node", -1);
  cr_assert(gpu && host, "rows per node, GPU and host");
  cr_assert(gpu->batch >= 40, "batch should grow to the target, got %llu", (unsigned long long)gpu->batch);
  /* Per node: 1e5 ns per iteration of 10 nodes; GPU half of it. */
  cr_assert_float_eq(host->median, 1e4, 1e-6);
  cr_assert_float_eq(gpu->median, 5e3, 1e-6);
  cr_assert_eq(flushes, 0, "batch mode never flushes");
  kb_harness_destroy(h);
}

Test(host_bench, min_batch_holds_in_batch_mode_only) {
  /* Each iteration is far past the 1 us target: without a minimum every
   * batch would be one iteration. */
  fake_case c = {.per_iteration_ns = 1e6, .min_batch = 16};
  kb_options o = fake_options();
  o.target_batch_s = 1e-6;
  kb_harness *h;
  const kb_result *row = run_single(&c, &o, &h);
  cr_assert_eq(row->batch, 16);
  cr_assert_eq(c.min_iterations_seen, 16, "warm-up batches hold the minimum too");
  cr_assert_float_eq(row->median, 1e6, 1e-6);
  kb_harness_destroy(h);
  fake_case cold = {.per_iteration_ns = 1e6, .min_batch = 16};
  o.modes = KB_MODE_COLD;
  row = run_single(&cold, &o, &h);
  cr_assert_eq(row->batch, 1, "cold mode runs one iteration per sample");
  cr_assert_eq(cold.max_iterations_seen, 1);
  kb_harness_destroy(h);
}

/* Which case ran each batch, for the turn-taking test. */
static char turn_log[4096];
static size_t turn_len;

static kb_status logged_batch(kb_run *run, void *state, uint64_t k, kb_timing *out) {
  if (turn_len + 1 < sizeof turn_log) turn_log[turn_len++] = kb_run_case_name(run)[0];
  /* Time drifts up as the (fake) clock runs: a case measured later reads slower. */
  out->host_ns = (1000.0 + (double)fake_now * 1e-6) * (double)k;
  out->gpu_ns = -1;
  fake_now += (uint64_t)out->host_ns;
  (void)state;
  return KB_OK;
}

static size_t switches(void) {
  size_t n = 0;
  for (size_t i = 1; i < turn_len; ++i) n += turn_log[i] != turn_log[i - 1];
  return n;
}

/* A harness of one suite "s" whose cases "a" (a baseline or not) and "b"
 * both run batch. */
static kb_harness *pair_harness(int interleave, kb_batch_fn batch, int a_baseline) {
  kb_harness *h = kb_harness_create();
  cr_assert(h);
  kb_suite_desc sd = {.name = "s", .description = "turns", .interleave = interleave};
  kb_suite *s = kb_suite_add(h, &sd);
  cr_assert(s);
  kb_case_desc a = {.name = "a", .baseline = a_baseline, .batch = batch}, b = {.name = "b", .batch = batch};
  cr_assert_eq(kb_case_add(s, &a), 0);
  cr_assert_eq(kb_case_add(s, &b), 0);
  return h;
}

static kb_harness *turn_harness(int interleave) { return pair_harness(interleave, logged_batch, 0); }

/* What a writer prints for report, as a string the caller frees. */
static char *markdown_of(const kb_report *r) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cr_assert(f);
  kb_write_markdown(r, f);
  fclose(f);
  return buf;
}

static char *csv_of(const kb_report *r) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cr_assert(f);
  cr_assert_eq(kb_write_csv(r, f), 0);
  fclose(f);
  return buf;
}

Test(host_bench, rounds_make_the_cases_of_a_point_take_turns) {
  kb_options o = fake_options();
  o.stop.min_samples = 12;
  o.stop.max_noise = 1e9; /* converge on the sample count alone */
  char why[256];
  /* One after another: a, then b, one switch; b reads the later, slower clock. */
  turn_len = 0;
  fake_now = 0;
  kb_harness *h = turn_harness(1);
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "%s", why);
  cr_assert_eq(switches(), 1, "rounds 1 keeps the cases apart: %.*s", (int)turn_len, turn_log);
  const kb_result *ra = find_row(kb_harness_report(h), "a", "host_time_per_iteration", -1);
  const kb_result *rb = find_row(kb_harness_report(h), "b", "host_time_per_iteration", -1);
  cr_assert(ra && rb && rb->median > ra->median, "drift makes the later case slower");
  double apart = rb->median / ra->median;
  kb_harness_destroy(h);
  /* Four rounds: warm-ups a, b, then a b, b a, a b, b a (each round starts
   * one case further on), each turn an untimed batch and 3 samples. */
  o.rounds = 4;
  turn_len = 0;
  fake_now = 0;
  h = turn_harness(1);
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "%s", why);
  cr_assert_eq(switches(), 6, "turns: %.*s", (int)turn_len, turn_log);
  cr_assert_eq(turn_len, 2 + 2 * 4 * 4, "a warm-up batch each, then 4 batches a turn: %.*s", (int)turn_len, turn_log);
  ra = find_row(kb_harness_report(h), "a", "host_time_per_iteration", -1);
  rb = find_row(kb_harness_report(h), "b", "host_time_per_iteration", -1);
  cr_assert(ra && rb);
  cr_assert_eq(ra->samples, 12);
  cr_assert_eq(rb->samples, 12);
  cr_assert(rb->median / ra->median < apart, "taking turns shares the drift: %g vs %g apart",
            rb->median / ra->median, apart);
  kb_harness_destroy(h);
  /* A suite that does not allow it keeps one case after another. */
  turn_len = 0;
  fake_now = 0;
  h = turn_harness(0);
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "%s", why);
  cr_assert_eq(switches(), 1, "no interleave: %.*s", (int)turn_len, turn_log);
  kb_harness_destroy(h);
}

Test(host_bench, cold_mode_flushes_every_sample_one_iteration_each) {
  fake_case c = {.per_iteration_ns = 1e5};
  kb_options o = fake_options();
  o.modes = KB_MODE_COLD;
  o.target_batch_s = 0.01; /* ignored in cold mode */
  kb_harness *h;
  const kb_result *row = run_single(&c, &o, &h);
  cr_assert_str_eq(row->mode, "cold");
  cr_assert_eq(row->batch, 1);
  cr_assert_eq(c.max_iterations_seen, 1);
  cr_assert_eq((uint64_t)flushes, c.batches, "one flush per batch: %d flushes, %llu batches", flushes,
               (unsigned long long)c.batches);
  kb_harness_destroy(h);
}

Test(host_bench, throughput_rows) {
  fake_case c = {.per_iteration_ns = 1e6, .bytes = 4e6}; /* 4 MB per ms */
  kb_options o = fake_options();
  kb_harness *h;
  run_single(&c, &o, &h);
  const kb_result *bw = find_row(kb_harness_report(h), "c", "bytes_per_second", -1);
  cr_assert(bw);
  cr_assert_float_eq(bw->median, 4e9, 1e-3);
  cr_assert_str_eq(bw->unit, "B/s");
  cr_assert(bw->higher_is_better);
  kb_harness_destroy(h);
}

Test(host_bench, count_rows_give_mean_least_and_greatest) {
  fake_case c = {.per_iteration_ns = 1e6, .items = 10, .count = 2};
  kb_options o = fake_options();
  kb_harness *h = fake_harness(NULL, 0, &c, (const char *[]){"c"}, NULL, 1);
  char why[256];
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "%s", why);
  const kb_result *row = find_row(kb_harness_report(h), "c", "widgets_per_node", -1);
  cr_assert(row, "no widgets_per_node row");
  cr_assert_str_eq(row->unit, "count");
  cr_assert_eq(row->samples, c.batches, "every report counts, warm-up included");
  double mean = 0;
  for (uint64_t b = 0; b < c.batches; ++b) mean += b % 3 == 2 ? 4.0 : 2.0;
  mean /= (double)c.batches;
  cr_assert_float_eq(row->median, mean, 1e-12);
  cr_assert_eq(row->min, 2.0);
  cr_assert_eq(row->max, c.batches >= 3 ? 4.0 : 2.0);
  cr_assert(!row->higher_is_better);
  char text[32];
  kb_format_value(row->median, row->unit, text, sizeof text);
  cr_assert(strstr(text, "count") == NULL, "a count prints as a number: %s", text);
  cr_assert(find_row(kb_harness_report(h), "c", "host_time_per_node", -1), "the time row stays");
  const kb_result *gadgets = find_row(kb_harness_report(h), "c", "gadgets_per_node", -1);
  cr_assert(gadgets && gadgets->median == 7.0, "a second name has its own row");
  cr_assert(find_row(kb_harness_report(h), "c", "more_per_node", -1) &&
            find_row(kb_harness_report(h), "c", "extra_per_node", -1), "up to KB_MAX_COUNTS names");
  cr_assert_null(find_row(kb_harness_report(h), "c", "overflow_per_node", -1), "a fifth name has no row");
  kb_harness_destroy(h);
}

/* After each case the report so far, its ratios computed, goes to
 * on_case: what kdag-bench --json writes, so a run cut off keeps it. */
typedef struct seen_report {
  int calls;
  size_t rows[3];
  double fast_ratio;
} seen_report;

static void on_case(kb_report *r, void *user) {
  seen_report *s = user;
  if (s->calls < 3) s->rows[s->calls] = r->count;
  for (size_t i = 0; i < r->count; ++i)
    if (!strcmp(r->rows[i].case_name, "fast") && r->rows[i].ratio_count) s->fast_ratio = r->rows[i].ratios[0].value;
  s->calls++;
}

Test(host_bench, each_finished_case_hands_the_report_so_far_on) {
  fake_case c[3] = {{.per_iteration_ns = 2e6}, {.per_iteration_ns = 1e6}, {.per_iteration_ns = 4e6}};
  const char *names[] = {"base", "fast", "slow"};
  const int baselines[] = {1, 0, 0};
  kb_harness *h = fake_harness(NULL, 0, c, names, baselines, 3);
  kb_options o = fake_options();
  seen_report seen = {0};
  o.on_case = on_case;
  o.on_case_user = &seen;
  char why[256];
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "%s", why);
  cr_assert_eq(seen.calls, 3);
  cr_assert(seen.rows[0] > 0 && seen.rows[1] > seen.rows[0] && seen.rows[2] > seen.rows[1], "%zu %zu %zu",
            seen.rows[0], seen.rows[1], seen.rows[2]);
  cr_assert_float_eq(seen.fast_ratio, 0.5, 1e-12, "the report handed on had its ratios");
  kb_harness_destroy(h);
}

/* ---- ratios, axes, skips, failures --------------------------------------- */

Test(host_bench, ratios_against_baselines_per_axis_point) {
  fake_case c[3] = {{.per_iteration_ns = 2e6}, {.per_iteration_ns = 1e6}, {.per_iteration_ns = 4e6}};
  const char *names[] = {"base", "fast", "slow"};
  const int baselines[] = {1, 0, 0};
  const int64_t n[] = {1, 2};
  kb_harness *h = fake_harness(n, 2, c, names, baselines, 3);
  kb_options o = fake_options();
  char why[256];
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "%s", why);
  const kb_report *r = kb_harness_report(h);
  for (int64_t v = 1; v <= 2; ++v) {
    const kb_result *fast = find_row(r, "fast", "host_time_per_iteration", v);
    const kb_result *slow = find_row(r, "slow", "host_time_per_iteration", v);
    const kb_result *base = find_row(r, "base", "host_time_per_iteration", v);
    cr_assert(fast && slow && base);
    cr_assert_float_eq(fast->median, 1e6 * (double)v, 1e-6);
    cr_assert_eq(fast->ratio_count, 1, "only one baseline ran");
    cr_assert_float_eq(ratio_of(fast, "base"), 0.5, 1e-12);
    cr_assert_float_eq(ratio_of(slow, "base"), 2.0, 1e-12);
    cr_assert_float_eq(ratio_of(base, "base"), 1.0, 1e-12);
  }
  /* Filtering the baseline out leaves no ratio. */
  kb_harness_destroy(h);
  memset(c, 0, sizeof c);
  c[0].per_iteration_ns = 2e6, c[1].per_iteration_ns = 1e6, c[2].per_iteration_ns = 4e6;
  h = fake_harness(n, 2, c, names, baselines, 3);
  const char *only[] = {"fast"};
  o.cases = only, o.case_count = 1;
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "%s", why);
  const kb_result *fast = find_row(kb_harness_report(h), "fast", "host_time_per_iteration", 1);
  cr_assert(fast);
  cr_assert_eq(fast->ratio_count, 0);
  cr_assert_null(find_row(kb_harness_report(h), "base", "host_time_per_iteration", 1));
  kb_harness_destroy(h);
}

Test(host_bench, axis_override_and_errors) {
  fake_case c = {.per_iteration_ns = 1e3};
  const char *names[] = {"c"};
  const int64_t n[] = {1};
  kb_harness *h = fake_harness(n, 1, &c, names, NULL, 1);
  kb_options o = fake_options();
  kb_axis ax;
  char why[256];
  cr_assert_eq(kb_axis_parse("N=3,5,7", &ax, why, sizeof why), 0, "%s", why);
  cr_assert_eq(ax.count, 3);
  cr_assert_eq(kb_axis_parse("N=3,x", &ax, why, sizeof why), -1);
  cr_assert_eq(kb_axis_parse("=3", &ax, why, sizeof why), -1);
  cr_assert_eq(kb_axis_parse("N=10,20,10", &ax, why, sizeof why), -1);
  cr_assert(strstr(why, "the value 10 is given twice"), "%s", why);
  cr_assert_eq(kb_axis_parse("N=3,5,7", &ax, why, sizeof why), 0);
  o.axes = &ax, o.axis_count = 1;
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "%s", why);
  const kb_report *r = kb_harness_report(h);
  cr_assert_not_null(find_row(r, "c", "host_time_per_iteration", 3));
  cr_assert_not_null(find_row(r, "c", "host_time_per_iteration", 7));
  cr_assert_null(find_row(r, "c", "host_time_per_iteration", 1), "the override replaces the default");
  cr_assert_float_eq(find_row(r, "c", "host_time_per_iteration", 7)->median, 7e3, 1e-6);

  kb_axis bad;
  cr_assert_eq(kb_axis_parse("Q=1", &bad, why, sizeof why), 0);
  o.axes = &bad;
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), -1);
  cr_assert(strstr(why, "Q"), "%s", why);
  o.axes = NULL, o.axis_count = 0;
  const char *nothing[] = {"nope*"};
  o.suites = nothing, o.suite_count = 1;
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), -1);
  kb_harness_destroy(h);
}

static kb_status no_gpu_init(kb_harness *h, void *user, void **state, char *why, size_t cap) {
  (void)h, (void)user, (void)state;
  snprintf(why, cap, "no driver on this machine");
  return KB_SKIP;
}

Test(host_bench, gpu_suite_skip_and_case_failure_are_reported) {
  fake_case c[2] = {{.per_iteration_ns = 1e3}, {.per_iteration_ns = 1e3, .fail = 1}};
  const char *names[] = {"ok", "broken"};
  kb_harness *h = fake_harness(NULL, 0, c, names, NULL, 2);
  kb_suite_desc gd = {.name = "gpu", .needs_gpu = 1, .init = no_gpu_init};
  kb_suite *g = kb_suite_add(h, &gd);
  kb_case_desc gc = {.name = "never", .batch = fake_batch, .user = &c[0]};
  cr_assert_eq(kb_case_add(g, &gc), 0);
  cr_assert_null(kb_suite_add(h, &gd), "duplicate suite names are refused");
  kb_options o = fake_options();
  char why[256];
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 1, "one failed case");
  const kb_report *r = kb_harness_report(h);
  cr_assert_not_null(find_row(r, "ok", "host_time_per_iteration", -1));
  cr_assert_null(find_row(r, "broken", "host_time_per_iteration", -1));
  char *buf = markdown_of(r);
  cr_assert(strstr(buf, "GPU suites skipped: no driver on this machine"), "%s", buf);
  cr_assert(strstr(buf, "FAILED s/broken"), "%s", buf);
  cr_assert(strstr(buf, "deliberate failure 42"), "%s", buf);
  cr_assert(strstr(buf, "| s | ok |"), "%s", buf);
  free(buf);
  kb_harness_destroy(h);
}

static kb_status only_n1_setup(kb_run *run, void **state) {
  if (kb_run_axis(run, "N", 0) != 1) return kb_run_not_applicable(run, "runs at N=1 only");
  return fake_setup(run, state);
}

/* A case that does not apply at an axis value is a skip marked as such
 * (the GPU lane's KDAG_REQUIRE_GPU check ignores those), not a failure. */
Test(host_bench, not_applicable_axis_points_are_marked) {
  fake_case c = {.per_iteration_ns = 1e3};
  const int64_t n[] = {1, 2};
  kb_harness *h = kb_harness_create();
  kb_suite_desc sd = {.name = "gpu", .needs_gpu = 1};
  kb_suite *s = kb_suite_add(h, &sd);
  cr_assert_eq(kb_suite_axis(s, "N", n, 2), 0);
  kb_case_desc cd = {.name = "one", .setup = only_n1_setup, .batch = fake_batch, .user = &c};
  cr_assert_eq(kb_case_add(s, &cd), 0);
  kb_options o = fake_options();
  char why[256];
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "not applicable is no failure: %s", why);
  const kb_report *r = kb_harness_report(h);
  cr_assert_not_null(find_row(r, "one", "host_time_per_iteration", 1));
  cr_assert_eq(r->skip_count, 1);
  cr_assert(r->skips[0].not_applicable && !r->skips[0].failed && r->skips[0].needs_gpu);
  cr_assert(strstr(r->skips[0].reason, "N=1 only"), "%s", r->skips[0].reason);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cr_assert_eq(kb_write_json(r, f, why, sizeof why), 0, "%s", why);
  fclose(f);
  cr_assert(strstr(buf, "\"not_applicable\": true"), "%s", buf);
  free(buf);
  kb_harness_destroy(h);
}

Test(host_bench, bandwidth_share_against_reference) {
  kb_report r;
  kb_report_init(&r);
  kb_result row;
  memset(&row, 0, sizeof row);
  snprintf(row.suite, sizeof row.suite, "copy");
  snprintf(row.case_name, sizeof row.case_name, "d2d_copy");
  snprintf(row.mode, sizeof row.mode, "batch");
  snprintf(row.metric, sizeof row.metric, "bytes_per_second");
  snprintf(row.unit, sizeof row.unit, "B/s");
  row.median = 4e12, row.min = 3e12, row.max = 5e12, row.noise = 0.01, row.samples = 10;
  row.baseline = 1;
  cr_assert(kb_report_add(&r, &row));
  snprintf(row.suite, sizeof row.suite, "kernels");
  snprintf(row.case_name, sizeof row.case_name, "stream");
  row.median = 2e12, row.min = 1e12, row.max = 3e12, row.baseline = 0;
  cr_assert(kb_report_add(&r, &row));
  kb_report_finalize(&r, "copy", "d2d_copy");
  kb_report_finalize(&r, "copy", "d2d_copy"); /* idempotent */
  cr_assert_eq(r.count, 4, "two share rows, got %zu rows", r.count);
  const kb_result *share = find_row(&r, "stream", "bandwidth_share", -1);
  cr_assert(share);
  cr_assert_float_eq(share->median, 0.5, 1e-12);
  cr_assert_float_eq(share->max, 0.75, 1e-12);
  cr_assert_str_eq(share->unit, "fraction");
  /* Ratios only within a suite: the other suite has no baseline. */
  cr_assert_eq(share->ratio_count, 0);
  cr_assert_float_eq(find_row(&r, "d2d_copy", "bandwidth_share", -1)->median, 1.0, 1e-12);
  kb_report_free(&r);
}

/* ---- outputs --------------------------------------------------------------- */

static char tmpdir[64];
static void make_tmpdir(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/kdag_bench_test_XXXXXX");
  cr_assert(mkdtemp(tmpdir), "mkdtemp");
}
static void remove_tmpdir(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

/* A report from a real (fake-clock) run: base/fast over N = 1, 2, GPU time. */
static kb_harness *sample_run(fake_case *c) {
  const char *names[] = {"base", "fast"};
  const int baselines[] = {1, 0};
  const int64_t n[] = {1, 2};
  c[0] = (fake_case){.per_iteration_ns = 2e6, .gpu_fraction = 0.5, .items = 4, .bytes = 1e6};
  c[1] = (fake_case){.per_iteration_ns = 1e6, .gpu_fraction = 0.5, .items = 4, .bytes = 1e6};
  kb_harness *h = fake_harness(n, 2, c, names, baselines, 2);
  kb_machine *m = kb_harness_machine(h);
  snprintf(m->gpu_name, sizeof m->gpu_name, "Fake GPU");
  m->has_gpu = 1, m->sm_count = 132, m->sm_clock_khz = 1980000, m->memory_clock_khz = 2619000;
  m->driver_version = 13000, m->toolkit_version = 13000;
  kb_options o = fake_options();
  char why[256];
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "%s", why);
  return h;
}

/* The machine of the paired-ratio test: round r runs at 2^r of its first
 * speed, and case b costs 1.1x case a in every round but for a transient
 * 5x in its first round. */
static int paired_turns[2];
static unsigned paired_batches[2];
static char paired_last;

static kb_status paired_batch(kb_run *run, void *state, uint64_t k, kb_timing *out) {
  char who = kb_run_case_name(run)[0];
  int i = who == 'b';
  if (who != paired_last) paired_turns[i]++; /* turn 1: the warm-up; then the rounds */
  paired_last = who;
  /* After the warm-up, 4 batches a round: the untimed one and 3 samples
   * (turns of one case may follow each other: rounds start in turn). */
  int round = paired_turns[i] < 2 ? 0 : (int)(paired_batches[i]++ / 4);
  double cost = 1000.0 * (double)(1 << round);
  if (i) cost *= 1.1 * (round == 0 ? 5.0 : 1.0);
  out->host_ns = cost * (double)k;
  out->gpu_ns = -1;
  fake_now += (uint64_t)out->host_ns;
  (void)state;
  return KB_OK;
}

Test(host_bench, rounds_pair_each_ratio_by_round, .init = make_tmpdir, .fini = remove_tmpdir) {
  kb_options o = fake_options();
  o.stop.min_samples = 12;
  o.stop.max_noise = 1e9;
  o.rounds = 4; /* 3 samples a round */
  paired_turns[0] = paired_turns[1] = 0;
  paired_batches[0] = paired_batches[1] = 0;
  paired_last = 0;
  kb_harness *h = pair_harness(1, paired_batch, 1);
  char why[256];
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "%s", why);
  const kb_report *r = kb_harness_report(h);
  const kb_result *rb = find_row(r, "b", "host_time_per_iteration", -1);
  cr_assert(rb);
  cr_assert_eq(rb->round_count, 4);
  static const double want_b[] = {5500, 2200, 4400, 8800};
  for (unsigned k = 0; k < 4; ++k)
    cr_assert_float_eq(rb->round_median[k], want_b[k], 1e-9, "round %u: %g", k, rb->round_median[k]);
  /* Pooled: b's samples 5500 x3, 2200 x3, 4400 x3, 8800 x3 against a's
   * 1000, 2000, 4000, 8000 x3: medians 4950 and 3000, 1.65x. By round: the
   * ratios 5.5, 1.1, 1.1, 1.1 have the median 1.1. */
  const kb_ratio *q = &rb->ratios[0];
  cr_assert_eq(rb->ratio_count, 1);
  cr_assert_float_eq(q->value, 1.65, 1e-9, "pooled %g", q->value);
  cr_assert_eq(q->paired_rounds, 4);
  cr_assert_float_eq(q->paired, 1.1, 1e-9, "by round %g", q->paired);
  cr_assert_float_eq(q->paired_q1, 1.1, 1e-9);
  cr_assert_float_eq(q->paired_q3, 1.1 + 0.25 * (5.5 - 1.1), 1e-9, "q3 %g", q->paired_q3);

  /* Every output carries them; JSON reads back with them. */
  char *buf = markdown_of(r);
  cr_assert(strstr(buf, "a 1.65x (by round 1.1x, 1.1-2.2x)"), "%s", buf);
  free(buf);
  buf = csv_of(r);
  cr_assert(strstr(buf, "a=1.65,a=1.1:1.1:2.2\n"), "%s", buf);
  free(buf);
  char path[128];
  snprintf(path, sizeof path, "%s/paired.json", tmpdir);
  cr_assert_eq(kb_write_json_file(r, path, why, sizeof why), 0, "%s", why);
  kb_report back;
  kb_report_init(&back);
  cr_assert_eq(kb_read_json_file(path, &back, why, sizeof why), 0, "%s", why);
  const kb_result *bb = find_row(&back, "b", "host_time_per_iteration", -1);
  cr_assert(bb);
  cr_assert_eq(bb->round_count, 4);
  cr_assert_float_eq(bb->round_median[1], 2200, 1e-9);
  cr_assert_eq(bb->ratios[0].paired_rounds, 4);
  cr_assert_float_eq(bb->ratios[0].paired, 1.1, 1e-9);
  kb_report_free(&back);
  kb_harness_destroy(h);

  /* More rounds than a row keeps medians for: refused up front. */
  o.rounds = KB_MAX_ROUNDS + 1;
  h = pair_harness(1, paired_batch, 1);
  cr_assert_neq(kb_harness_run(h, &o, why, sizeof why), 0);
  cr_assert(strstr(why, "give 1 to 100"), "%s", why);
  kb_harness_destroy(h);
  /* Without turns there is nothing to pair. */
  o.rounds = 1;
  fake_case c[2] = {{.per_iteration_ns = 2e6}, {.per_iteration_ns = 1e6}};
  h = fake_harness(NULL, 0, c, (const char *[]){"base", "fast"}, (const int[]){1, 0}, 2);
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "%s", why);
  const kb_result *fast = find_row(kb_harness_report(h), "fast", "host_time_per_iteration", -1);
  cr_assert(fast);
  cr_assert_eq(fast->round_count, 0);
  cr_assert_eq(fast->ratios[0].paired_rounds, 0);
  cr_assert(isnan(fast->ratios[0].paired));
  kb_harness_destroy(h);
}

Test(host_bench, json_has_every_required_field, .init = make_tmpdir, .fini = remove_tmpdir) {
  fake_case c[2];
  kb_harness *h = sample_run(c);
  char path[128], why[256];
  snprintf(path, sizeof path, "%s/out.json", tmpdir);
  cr_assert_eq(kb_write_json_file(kb_harness_report(h), path, why, sizeof why), 0, "%s", why);

  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  cr_assert(root, "JSON does not parse: line %d: %s", err.line, err.text);
  cr_assert(json_is_object(root));
  json_t *m = json_object_get(root, "machine");
  cr_assert(json_is_object(m));
  static const char *const machine_keys[] = {"gpu_name", "sm_count", "sm_clock_mhz", "memory_clock_mhz",
                                             "driver_version", "toolkit_version", "host_cpu"};
  for (size_t i = 0; i < sizeof machine_keys / sizeof *machine_keys; ++i)
    cr_assert(json_object_get(m, machine_keys[i]), "machine lacks %s", machine_keys[i]);
  cr_assert_str_eq(json_string_value(json_object_get(m, "gpu_name")), "Fake GPU");
  cr_assert_eq(json_integer_value(json_object_get(m, "sm_count")), 132);
  cr_assert_str_eq(json_string_value(json_object_get(m, "driver_version")), "13.0");
  cr_assert(json_is_string(json_object_get(m, "host_cpu")));

  json_t *rows = json_object_get(root, "results");
  cr_assert(json_is_array(rows));
  /* 2 cases x 2 points x {gpu, host, bytes_per_second} */
  cr_assert_eq(json_array_size(rows), 12, "rows: %zu", json_array_size(rows));
  static const char *const row_keys[] = {"suite", "case", "axes", "metric", "median", "min",
                                         "max", "noise", "unit", "samples", "ratios"};
  size_t i;
  json_t *row;
  int found = 0;
  json_array_foreach(rows, i, row) {
    for (size_t k = 0; k < sizeof row_keys / sizeof *row_keys; ++k)
      cr_assert(json_object_get(row, row_keys[k]), "results[%zu] lacks %s", i, row_keys[k]);
    cr_assert(json_is_object(json_object_get(row, "axes")));
    cr_assert(json_is_object(json_object_get(row, "ratios")));
    cr_assert(json_is_number(json_object_get(row, "median")));
    cr_assert(json_is_integer(json_object_get(row, "samples")));
    const char *cs = json_string_value(json_object_get(row, "case"));
    const char *metric = json_string_value(json_object_get(row, "metric"));
    json_int_t nv = json_integer_value(json_object_get(json_object_get(row, "axes"), "N"));
    if (!strcmp(cs, "fast") && !strcmp(metric, "gpu_time_per_node") && nv == 2) {
      found = 1;
      /* 1e6 ns x N=2 per iteration of 4 nodes, GPU half: 2.5e5 ns. */
      cr_assert_float_eq(json_number_value(json_object_get(row, "median")), 2.5e5, 1e-3);
      cr_assert_str_eq(json_string_value(json_object_get(row, "unit")), "ns");
      json_t *ratio = json_object_get(json_object_get(row, "ratios"), "base");
      cr_assert(json_is_number(ratio));
      cr_assert_float_eq(json_number_value(ratio), 0.5, 1e-9);
    }
  }
  cr_assert(found, "no fast/gpu_time_per_node/N=2 row");
  json_decref(root);

  /* Read back for --compare: the same rows. */
  kb_report back;
  kb_report_init(&back);
  cr_assert_eq(kb_read_json_file(path, &back, why, sizeof why), 0, "%s", why);
  cr_assert_eq(back.count, kb_harness_report(h)->count);
  for (size_t k = 0; k < back.count; ++k) {
    cr_assert_float_eq(back.rows[k].median, kb_harness_report(h)->rows[k].median,
                       1e-6 * fabs(back.rows[k].median));
    cr_assert_eq(back.rows[k].ratio_count, kb_harness_report(h)->rows[k].ratio_count);
  }
  kb_report_free(&back);
  kb_harness_destroy(h);
}

static size_t count_fields(const char *line) {
  size_t n = 1;
  int quoted = 0;
  for (; *line && *line != '\n'; ++line) {
    if (*line == '"') quoted = !quoted;
    else if (*line == ',' && !quoted) ++n;
  }
  return n;
}

Test(host_bench, csv_header_and_rows) {
  fake_case c[2];
  kb_harness *h = sample_run(c);
  char *buf = csv_of(kb_harness_report(h));
  const char *header =
      "suite,case,axes,mode,metric,median,min,max,noise,unit,samples,batch,stop,baseline,ratios,paired_ratios\n";
  cr_assert(!strncmp(buf, header, strlen(header)), "header: %.*s", (int)strcspn(buf, "\n"), buf);
  size_t lines = 0;
  for (const char *p = buf; *p; p = strchr(p, '\n') + 1) {
    cr_assert_eq(count_fields(p), 16, "line %zu has %zu fields: %.*s", lines, count_fields(p),
                 (int)strcspn(p, "\n"), p);
    ++lines;
    if (!strchr(p, '\n')) break;
  }
  cr_assert_eq(lines, 1 + kb_harness_report(h)->count);
  cr_assert(strstr(buf, "s,fast,N=2,batch,gpu_time_per_node,250000,"), "%s", buf);
  cr_assert(strstr(buf, "base=0.5"), "ratios column: %s", buf);
  free(buf);
  kb_harness_destroy(h);
}

/* ---- compare --------------------------------------------------------------- */

#define ROW(c, metric, median, noise, unit, hib)                                          \
  "{\"suite\":\"launch\",\"case\":\"" c "\",\"axes\":{\"N\":100},\"mode\":\"batch\","     \
  "\"metric\":\"" metric "\",\"median\":" #median ",\"min\":" #median ",\"max\":" #median \
  ",\"noise\":" #noise ",\"unit\":\"" unit "\",\"samples\":20,\"higher_is_better\":" hib \
  ",\"ratios\":{}}"

Test(host_bench, compare_flags_changes_beyond_noise_only, .init = make_tmpdir, .fini = remove_tmpdir) {
  char old_path[128], new_path[128], why[256];
  snprintf(old_path, sizeof old_path, "%s/old.json", tmpdir);
  snprintf(new_path, sizeof new_path, "%s/new.json", tmpdir);
  kdt_write_file(old_path,
             "{\"machine\":{\"gpu_name\":\"A\",\"host_cpu\":\"x\"},\"results\":["
             ROW("slower", "gpu_time_per_node", 100.0, 0.01, "ns", "false") ","
             ROW("jitter", "gpu_time_per_node", 100.0, 0.05, "ns", "false") ","
             ROW("faster", "gpu_time_per_node", 100.0, 0.02, "ns", "false") ","
             ROW("wider", "bytes_per_second", 1e12, 0.01, "B/s", "true") ","
             ROW("gone", "gpu_time_per_node", 100.0, 0.01, "ns", "false") "]}");
  kdt_write_file(new_path,
             "{\"machine\":{\"gpu_name\":\"A\",\"host_cpu\":\"x\"},\"results\":["
             ROW("slower", "gpu_time_per_node", 120.0, 0.01, "ns", "false") ","  /* +20% vs 1% noise */
             ROW("jitter", "gpu_time_per_node", 104.0, 0.01, "ns", "false") ","  /* +4% vs 5% noise */
             ROW("faster", "gpu_time_per_node", 90.0, 0.02, "ns", "false") ","   /* -10% */
             ROW("wider", "bytes_per_second", 1.2e12, 0.01, "B/s", "true") ","   /* +20%, higher is better */
             ROW("added", "gpu_time_per_node", 50.0, 0.01, "ns", "false") "]}");
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  kb_compare_summary s;
  cr_assert_eq(kb_compare_files(old_path, new_path, 0, out, &s, why, sizeof why), 0, "%s", why);
  fclose(out);
  cr_assert_eq(s.compared, 4);
  cr_assert_eq(s.regressed, 1, "%s", buf);
  cr_assert_eq(s.improved, 2, "%s", buf);
  cr_assert_eq(s.within_noise, 1, "%s", buf);
  cr_assert_eq(s.only_old, 1);
  cr_assert_eq(s.only_new, 1);
  /* The text names each verdict on its row. */
  const char *slower = strstr(buf, "| slower |");
  cr_assert(slower && strstr(slower, "+20.00%") && strstr(slower, "REGRESSED"), "%s", buf);
  const char *jitter = strstr(buf, "| jitter |");
  cr_assert(jitter, "%s", buf);
  size_t line = strcspn(jitter, "\n");
  cr_assert(memmem(jitter, line, "within noise", 12), "%.*s", (int)line, jitter);
  free(buf);

  /* A floor above the change turns the regression into noise. */
  cr_assert_eq(kb_compare_files(old_path, new_path, 0.25, NULL, &s, why, sizeof why), 0, "%s", why);
  cr_assert_eq(s.regressed, 0);
  cr_assert_eq(s.within_noise, 4);

  /* Not judged: a row of one sample (no noise: a 10 s cold build) and a
   * workload count, however far they moved. */
  kdt_write_file(old_path,
             "{\"machine\":{\"gpu_name\":\"A\",\"host_cpu\":\"x\"},\"results\":["
             "{\"suite\":\"dx\",\"case\":\"cold\",\"axes\":{},\"mode\":\"batch\",\"metric\":\"host_time_per_module\","
             "\"median\":8e9,\"min\":8e9,\"max\":8e9,\"noise\":null,\"unit\":\"ns\",\"samples\":1,"
             "\"higher_is_better\":false,\"ratios\":{}},"
             ROW("edges", "edges_per_node", 4.0, 0.0, "count", "false") "]}");
  kdt_write_file(new_path,
             "{\"machine\":{\"gpu_name\":\"A\",\"host_cpu\":\"x\"},\"results\":["
             "{\"suite\":\"dx\",\"case\":\"cold\",\"axes\":{},\"mode\":\"batch\",\"metric\":\"host_time_per_module\","
             "\"median\":1e10,\"min\":1e10,\"max\":1e10,\"noise\":null,\"unit\":\"ns\",\"samples\":1,"
             "\"higher_is_better\":false,\"ratios\":{}},"
             ROW("edges", "edges_per_node", 6.0, 0.0, "count", "false") "]}");
  cr_assert_eq(kb_compare_files(old_path, new_path, 0, NULL, &s, why, sizeof why), 0, "%s", why);
  cr_assert_eq(s.compared, 2);
  cr_assert_eq(s.undetermined, 2, "%zu regressed, %zu within noise", s.regressed, s.within_noise);
  cr_assert_eq(s.regressed, 0);

  /* A file that is not a report is an error with a message. */
  kdt_write_file(new_path, "{\"results\": 3}");
  cr_assert_eq(kb_compare_files(old_path, new_path, 0, NULL, &s, why, sizeof why), -1);
  cr_assert(strstr(why, "results"), "%s", why);
  kdt_write_file(new_path, "not json");
  cr_assert_eq(kb_compare_files(old_path, new_path, 0, NULL, &s, why, sizeof why), -1);
  cr_assert(strstr(why, "not valid JSON"), "%s", why);
}

Test(host_bench, compare_own_output_is_within_noise, .init = make_tmpdir, .fini = remove_tmpdir) {
  fake_case c[2];
  kb_harness *h = sample_run(c);
  char path[128], why[256];
  snprintf(path, sizeof path, "%s/same.json", tmpdir);
  cr_assert_eq(kb_write_json_file(kb_harness_report(h), path, why, sizeof why), 0, "%s", why);
  kb_compare_summary s;
  cr_assert_eq(kb_compare_files(path, path, 0, NULL, &s, why, sizeof why), 0, "%s", why);
  cr_assert_eq(s.compared, kb_harness_report(h)->count);
  cr_assert_eq(s.within_noise, s.compared);
  /* The same output with every median three times as large (rates too):
   * each row read back moves past its noise, worse for a time and better
   * for a rate, so the round trip keeps the values and their direction. */
  kb_report *r = kb_harness_report(h);
  size_t times = 0, rates = 0;
  for (size_t i = 0; i < r->count; ++i) {
    if (!(r->rows[i].noise < 1)) continue; /* undetermined rows are counted apart */
    r->rows[i].median *= 3;
    r->rows[i].higher_is_better ? ++rates : ++times;
  }
  cr_assert_gt(times, 0);
  char slower[128];
  snprintf(slower, sizeof slower, "%s/slower.json", tmpdir);
  cr_assert_eq(kb_write_json_file(r, slower, why, sizeof why), 0, "%s", why);
  cr_assert_eq(kb_compare_files(path, slower, 0, NULL, &s, why, sizeof why), 0, "%s", why);
  cr_assert_eq(s.regressed, times, "%zu regressed, %zu improved, %zu within noise", s.regressed, s.improved,
               s.within_noise);
  cr_assert_eq(s.improved, rates);
  kb_harness_destroy(h);
}

Test(host_bench, format_values) {
  char b[32];
  kb_format_value(1520, "ns", b, sizeof b);
  cr_assert_str_eq(b, "1.520 us");
  kb_format_value(3.91e12, "B/s", b, sizeof b);
  cr_assert_str_eq(b, "3.910 TB/s");
  kb_format_value(0.871, "fraction", b, sizeof b);
  cr_assert_str_eq(b, "87.10 %");
  kb_format_value(NAN, "ns", b, sizeof b);
  cr_assert_str_eq(b, "-");
}

/* ---- the built-in suites ------------------------------------------------ */

static kb_harness *builtin_harness(void) {
  kb_harness *h = kb_harness_create();
  cr_assert(h);
  cr_assert_eq(kb_register_builtin_suites(h), 0);
  return h;
}

/* What --list prints (kb_main's --list is kb_harness_list on stdout). */
static void list_of(const kb_harness *h, char **buf, size_t *len) {
  FILE *f = open_memstream(buf, len);
  cr_assert(f);
  kb_harness_list(h, f);
  fclose(f);
}

Test(host_bench, builtin_suites_are_listed_with_their_axes_and_cases) {
  kb_harness *h = builtin_harness();
  char *list = NULL;
  size_t len = 0;
  list_of(h, &list, &len);
  static const char *expected[] = {
      "copy [GPU]", "launch [GPU]", "fanout [GPU]", "rebind [GPU]", "oneshot [GPU]", "pipeline [GPU]",
      "module [GPU]", "nvrtc [CPU]", "graph [CPU]",
      "axis N = 10,100,1000,10000", "axis W = 4,16,64", "axis iters = 2048", "axis N = 100", "axis log2n = 26",
      "case raw_loop (baseline)", "case kdag_graph", "case serial_stream (baseline)",
      "case relaunch (baseline)", "case rebind_one", "case rebind_all", "case d2d_copy (baseline)",
      "CUDASTF graph_ctx ~28 us per task at N=1000"};
  for (size_t i = 0; i < sizeof expected / sizeof expected[0]; ++i)
    cr_assert(strstr(list, expected[i]), "--list lacks \"%s\":\n%s", expected[i], list);
  /* The launch suite's cases in order (kdag_graph right after hand_graph,
   * kdag_eager last), and kdag_graph in fanout. */
  const char *launch = strstr(list, "launch [GPU]"), *fanout = strstr(list, "fanout [GPU]");
  const char *rebind = strstr(list, "rebind [GPU]");
  const char *order[] = {"case raw_loop", "case hand_graph (baseline)", "case kdag_graph", "case hand_graph_upload",
                         "case hand_graph_events", "case hand_graph_session", "case kdag_eager"};
  const char *at = launch;
  for (size_t i = 0; i < sizeof order / sizeof order[0]; ++i) {
    at = strstr(at, order[i]);
    cr_assert(at && at < fanout, "launch suite: %s missing or out of order", order[i]);
  }
  const char *fg = strstr(fanout, "case kdag_graph");
  cr_assert(fg && fg < rebind, "fanout has a kdag_graph case");
  const char *hg = strstr(rebind, "case hand_graph (baseline)");
  cr_assert(hg && hg < strstr(list, "oneshot [GPU]"), "rebind has a hand_graph baseline");
  const char *oneshot = strstr(list, "oneshot [GPU]"), *pipeline = strstr(list, "pipeline [GPU]");
  const char *oh = strstr(oneshot, "case hand_graph (baseline)");
  cr_assert(oh && oh < pipeline, "oneshot has a hand_graph baseline");
  free(list);
  kb_harness_destroy(h);
}

/* 1 when this machine has a usable GPU (then the skip tests do not apply). */
static int have_gpu(void) {
  kb_gpu *g;
  char why[KB_MESSAGE_MAX];
  kb_status st = kb_gpu_acquire(&g, why, sizeof why);
  kb_gpu_shutdown();
  return st == KB_OK;
}

static kb_options quick_options(void) {
  kb_options o;
  kb_options_init(&o);
  o.warmup_s = 0;
  o.stop.min_samples = 2;
  o.stop.min_time_s = 0;
  o.stop.max_time_s = 0.05;
  return o;
}

Test(host_bench, gpu_suites_skip_without_a_gpu_and_say_so) {
  if (have_gpu()) cr_skip_test("a GPU is present: the suites run instead of skipping");
  kb_harness *h = builtin_harness();
  kb_options o = quick_options();
  const char *suites[] = {"launch", "fanout", "rebind", "oneshot", "pipeline", "copy"};
  o.suites = suites, o.suite_count = 6;
  o.modes = KB_MODE_BATCH | KB_MODE_COLD;
  char why[256];
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "a skip is no failure: %s", why);
  const kb_report *r = kb_harness_report(h);
  cr_assert_eq(r->count, 0, "no figures without a GPU, got %zu rows", r->count);
  cr_assert_eq(r->skip_count, 6);
  for (size_t i = 0; i < r->skip_count; ++i) {
    cr_assert(r->skips[i].needs_gpu && !r->skips[i].failed && !r->skips[i].case_name[0],
              "%s: a whole-suite GPU skip", r->skips[i].suite);
    cr_assert(r->skips[i].reason[0], "%s: a reason", r->skips[i].suite);
  }
  char *buf = markdown_of(r);
  cr_assert(strstr(buf, "GPU suites skipped: "), "%s", buf);
  cr_assert(strstr(buf, "(suites: copy, launch, fanout, rebind, oneshot, pipeline)"), "%s", buf);
  cr_assert(strstr(buf, "No results."), "%s", buf);
  free(buf);
  kb_harness_destroy(h);
}

/* On a GPU the launch, rebind and copy suites give figures that hold
 * together: every row finite and positive, GPU time per node the same for
 * the graphs of one chain (kdag's and the hand-built one run the same
 * kernels), a relaunch dearer than rebinding alone, and the copy's
 * bandwidth within what an HBM GPU moves. The GPU lane runs this; kdag-bench
 * itself fails only on errors, not on figures. */
Test(host_bench, gpu_suites_give_consistent_figures_on_a_gpu) {
  if (!have_gpu()) {
    if (kdt_require_gpu()) cr_assert_fail("KDAG_REQUIRE_GPU=1 but kdag-bench finds no usable GPU");
    cr_skip_test("GPU lane: no usable CUDA device for kdag-bench");
  }
  kb_harness *h = builtin_harness();
  kb_options o = quick_options();
  const char *suites[] = {"launch", "rebind", "copy"};
  o.suites = suites, o.suite_count = 3;
  kb_axis axes[2];
  char why[256];
  cr_assert_eq(kb_axis_parse("N=100", &axes[0], why, sizeof why), 0, "%s", why);
  cr_assert_eq(kb_axis_parse("MiB=64", &axes[1], why, sizeof why), 0, "%s", why);
  o.axes = axes, o.axis_count = 2;
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "%s", why);
  const kb_report *r = kb_harness_report(h);
  cr_assert_eq(r->skip_count, 0, "%s skipped: %s", r->skip_count ? r->skips[0].suite : "",
               r->skip_count ? r->skips[0].reason : "");
  double gpu_hand = NAN, gpu_kdag = NAN, relaunch = NAN, rebind_only = NAN, copy_bw = NAN;
  for (size_t i = 0; i < r->count; ++i) {
    const kb_result *x = &r->rows[i];
    cr_assert(isfinite(x->median) && x->median > 0 && x->samples > 0, "%s/%s %s: median %g, %zu samples", x->suite,
              x->case_name, x->metric, x->median, x->samples);
    if (!strcmp(x->suite, "launch") && !strcmp(x->metric, "gpu_time_per_node")) {
      if (!strcmp(x->case_name, "hand_graph")) gpu_hand = x->median;
      if (!strcmp(x->case_name, "kdag_graph")) gpu_kdag = x->median;
    }
    if (!strcmp(x->suite, "rebind") && !strcmp(x->metric, "host_time_per_submission")) {
      if (!strcmp(x->case_name, "relaunch")) relaunch = x->median;
      if (!strcmp(x->case_name, "rebind_only")) rebind_only = x->median;
    }
    if (!strcmp(x->suite, "copy") && !strcmp(x->case_name, "d2d_copy") && !strcmp(x->metric, "bytes_per_second"))
      copy_bw = x->median;
  }
  cr_assert(gpu_kdag > 0.8 * gpu_hand && gpu_kdag < 1.25 * gpu_hand, "GPU time per node: kdag %g ns, hand %g ns",
            gpu_kdag, gpu_hand);
  cr_assert(rebind_only < relaunch, "kd_graph_rebind alone %g ns, a relaunch %g ns", rebind_only, relaunch);
  cr_assert(copy_bw > 1e11 && copy_bw < 2e13, "device-to-device copy at %g B/s", copy_bw);
  kb_harness_destroy(h);
}

/* The dx suite: listed as a GPU suite with its dtype axis and six cases
 * (three baselines), and skipped as a whole, with a reason, without a GPU. */
Test(host_bench, dx_suite_is_listed_and_skips_without_a_gpu) {
  kb_harness *h = builtin_harness();
  char *list = NULL;
  size_t len = 0;
  list_of(h, &list, &len);
  const char *dx = strstr(list, "dx [GPU]");
  cr_assert(dx, "--list lacks the dx suite:\n%s", list);
  static const char *expected[] = {"axis dtype = 32,64", "case cublas_gemm_batched (baseline)", "case kdag_dx_gemm",
                                   "case cusolver_potrf_batched (baseline)", "case kdag_dx_potrf",
                                   "case module_warm (baseline)", "case module_cold"};
  for (size_t i = 0; i < sizeof expected / sizeof expected[0]; ++i)
    cr_assert(strstr(dx, expected[i]), "dx suite lacks \"%s\":\n%s", expected[i], dx);
  free(list);
  if (have_gpu()) {
    kb_harness_destroy(h);
    cr_skip_test("a GPU is present: the dx suite runs instead of skipping");
  }
  kb_options o = quick_options();
  const char *suites[] = {"dx"};
  o.suites = suites, o.suite_count = 1;
  char why[256];
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "a skip is no failure: %s", why);
  const kb_report *r = kb_harness_report(h);
  cr_assert_eq(r->count, 0, "no figures without a GPU, got %zu rows", r->count);
  cr_assert_eq(r->skip_count, 1);
  cr_assert_str_eq(r->skips[0].suite, "dx");
  cr_assert(r->skips[0].needs_gpu && !r->skips[0].failed && !r->skips[0].case_name[0], "a whole-suite GPU skip");
  cr_assert(r->skips[0].reason[0], "a reason");
  kb_harness_destroy(h);
}

Test(host_bench, fanout_width_axis_parses_and_overrides) {
  kb_axis w;
  char why[256];
  cr_assert_eq(kb_axis_parse("W=4,16,64", &w, why, sizeof why), 0, "%s", why);
  cr_assert_str_eq(w.name, "W");
  cr_assert_eq(w.count, 3);
  cr_assert(w.values[0] == 4 && w.values[1] == 16 && w.values[2] == 64);
  cr_assert_eq(kb_axis_parse("W=4,,64", &w, why, sizeof why), -1);
  cr_assert_eq(kb_axis_parse("W=2,8", &w, why, sizeof why), 0);

  kb_harness *h = builtin_harness();
  kb_options o = quick_options();
  o.axes = &w, o.axis_count = 1;
  /* W belongs to fanout: selecting only the CPU suites makes it an error. */
  const char *cpu[] = {"graph", "nvrtc"};
  o.suites = cpu, o.suite_count = 2;
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), -1);
  cr_assert(strstr(why, "--axis W"), "%s", why);
  if (!have_gpu()) {
    /* With fanout selected the override is accepted (and the suite skips). */
    const char *fan[] = {"fanout"};
    o.suites = fan, o.suite_count = 1;
    cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "%s", why);
    const kb_report *r = kb_harness_report(h);
    cr_assert_eq(r->skip_count, 1);
    cr_assert_str_eq(r->skips[0].suite, "fanout");
  }
  kb_harness_destroy(h);
}

/* The GRAPH guard: a case in GRAPH mode whose submission launched no CUDA
 * graph is skipped with the reason, never measured. */
typedef struct mode_probe {
  kd_exec_mode mode;
  uint64_t launches_before, launches_after;
} mode_probe;

static kb_status probe_setup(kb_run *run, void **state) {
  const mode_probe *p = kb_run_user(run);
  kb_kdag k;
  memset(&k, 0, sizeof k);
  k.mode = p->mode;
  kd_session_stats before, after;
  memset(&before, 0, sizeof before);
  memset(&after, 0, sizeof after);
  before.graph_launches = p->launches_before;
  after.graph_launches = p->launches_after;
  after.launches = 10;
  *state = NULL;
  return kb_kdag_check_mode(run, &k, &before, &after);
}

static kb_status probe_batch(kb_run *run, void *state, uint64_t k, kb_timing *out) {
  (void)run, (void)state;
  out->host_ns = 1000.0 * (double)k;
  out->gpu_ns = -1;
  return KB_OK;
}

Test(host_bench, graph_mode_without_graph_launches_is_skipped_not_measured) {
  kb_harness *h = kb_harness_create();
  kb_suite_desc sd = {.name = "modes", .needs_gpu = 1};
  kb_suite *s = kb_suite_add(h, &sd);
  static const mode_probe eager = {KD_EXEC_EAGER, 0, 0}, fake_graph = {KD_EXEC_GRAPH, 0, 0},
                          real_graph = {KD_EXEC_GRAPH, 3, 4};
  kb_case_desc cases[] = {
      {.name = "eager", .setup = probe_setup, .batch = probe_batch, .user = (void *)&eager},
      {.name = "graph_missing", .setup = probe_setup, .batch = probe_batch, .user = (void *)&fake_graph},
      {.name = "graph_real", .setup = probe_setup, .batch = probe_batch, .user = (void *)&real_graph}};
  for (size_t i = 0; i < 3; ++i) cr_assert_eq(kb_case_add(s, &cases[i]), 0);
  kb_options o = fake_options();
  char why[256];
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "a skip is no failure: %s", why);
  const kb_report *r = kb_harness_report(h);
  cr_assert_not_null(find_row(r, "eager", "host_time_per_iteration", -1));
  cr_assert_not_null(find_row(r, "graph_real", "host_time_per_iteration", -1));
  cr_assert_null(find_row(r, "graph_missing", "host_time_per_iteration", -1), "no GRAPH row from eager work");
  cr_assert_eq(r->skip_count, 1);
  cr_assert(strstr(r->skips[0].case_name, "graph_missing"), "%s", r->skips[0].case_name);
  cr_assert(!r->skips[0].failed);
  cr_assert(strstr(r->skips[0].reason, "did not launch a CUDA graph"), "%s", r->skips[0].reason);
  kb_harness_destroy(h);
}

/* A rate row is the rate of the median time: with an even count of samples
 * (here 2, at 1x and 3x) the median of the rates would average the two
 * rates (2/3 of the 1x rate), not the two times (1/2 of it). */
Test(host_bench, a_rate_row_is_the_rate_of_the_median_time) {
  fake_case c[1] = {{.per_iteration_ns = 1000, .noisy = 1, .bytes = 1e6}};
  const char *names[] = {"only"};
  const int baselines[] = {1};
  kb_harness *h = fake_harness(NULL, 0, c, names, baselines, 1);
  kb_options o = fake_options();
  o.stop.min_samples = o.stop.max_samples = 2;
  char why[256];
  cr_assert_eq(kb_harness_run(h, &o, why, sizeof why), 0, "%s", why);
  const kb_result *t = find_row(kb_harness_report(h), "only", "host_time_per_iteration", -1);
  const kb_result *r = find_row(kb_harness_report(h), "only", "bytes_per_second", -1);
  cr_assert(t && r);
  cr_assert_eq(t->samples, 2);
  cr_assert_float_eq(t->median, 2000, 1e-9, "the two times' mean: %g", t->median);
  cr_assert_float_eq(r->median, 1e6 / 2e-6, 1e-3, "bytes per second at the median time: %g", r->median);
  cr_assert_float_eq(r->max, 1e6 / 1e-6, 1e-3, "the shortest time's rate: %g", r->max);
  kb_harness_destroy(h);
}
