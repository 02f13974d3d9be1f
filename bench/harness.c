/* SPDX-License-Identifier: Apache-2.0 */
/* The harness: registry of suites and cases, and the measurement loop
 * (warm-up, batch sizing, flushing, sampling, the stopping rule). */
#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/harness.h"

typedef struct kb_case {
  kb_case_desc desc;
  char name[KB_NAME_MAX];
} kb_case;

struct kb_suite {
  kb_suite_desc desc;
  char name[KB_NAME_MAX];
  char description[256];
  kb_axis axes[KB_MAX_AXES];
  size_t axis_count;
  kb_case *cases;
  size_t case_count;
};

struct kb_harness {
  kb_suite **suites;
  size_t suite_count;
  kb_report report;
  char ref_suite[KB_NAME_MAX], ref_case[KB_NAME_MAX];
  unsigned char *host_flush;
  size_t host_flush_bytes;
};

struct kb_run {
  kb_harness *h;
  kb_suite *suite;
  kb_case *kcase;
  void *suite_state;
  kb_mode mode;
  size_t axis_count;
  const char *axis_names[KB_MAX_AXES];
  int64_t axis_values[KB_MAX_AXES];
  double items;          /* per iteration, for per-item times */
  char item[32];         /* metric names are <which>_time_per_<item> */
  double tp_items, tp_bytes;
  uint64_t max_batch;
  uint64_t min_batch;      /* batch mode: never fewer iterations per batch */
  char message[KB_MESSAGE_MAX];
  int not_applicable; /* the KB_SKIP came from kb_run_not_applicable */
  struct kb_count {       /* kb_run_count, by name, in the order first reported */
    char name[32];
    double sum, min, max;
    uint64_t n;
  } counts[KB_MAX_COUNTS];
  unsigned count_names;
};

const char *kb_mode_name(kb_mode mode) { return mode == KB_MODE_COLD ? "cold" : "batch"; }

uint64_t kb_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void kb_options_init(kb_options *o) {
  memset(o, 0, sizeof *o);
  o->stop.min_samples = 10;
  o->stop.max_samples = 2000;
  o->stop.min_time_s = 0.1;
  o->stop.max_time_s = 2.0;
  o->stop.max_noise = 0.02;
  o->warmup_s = 0.05;
  o->target_batch_s = 0.001;
  o->max_batch = 1u << 20;
  o->modes = KB_MODE_BATCH;
  o->rounds = 1;
  o->host_flush_bytes = 64u << 20;
}

static int valid_name(const char *s) {
  if (!s || !*s || strlen(s) >= KB_NAME_MAX) return 0;
  for (; *s; ++s)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '_' || *s == '-' || *s == '.'))
      return 0;
  return 1;
}

int kb_axis_parse(const char *text, kb_axis *out, char *why, size_t cap) {
  memset(out, 0, sizeof *out);
  const char *eq = text ? strchr(text, '=') : NULL;
  if (!eq || eq == text || (size_t)(eq - text) >= KB_NAME_MAX) {
    snprintf(why, cap, "axis \"%s\": expected NAME=V1,V2,...", text ? text : "(null)");
    return -1;
  }
  memcpy(out->name, text, (size_t)(eq - text));
  if (!valid_name(out->name)) {
    snprintf(why, cap, "axis \"%s\": the name may hold letters, digits, '_', '-', '.'", text);
    return -1;
  }
  const char *p = eq + 1;
  for (;;) {
    char *end;
    if (out->count == KB_MAX_AXIS_VALUES) {
      snprintf(why, cap, "axis \"%s\": at most %d values", text, KB_MAX_AXIS_VALUES);
      return -1;
    }
    long long v = strtoll(p, &end, 10);
    if (end == p || (*end && *end != ',')) {
      snprintf(why, cap, "axis \"%s\": \"%s\" is not a list of integers", text, p);
      return -1;
    }
    for (size_t i = 0; i < out->count; ++i)
      if (out->values[i] == (int64_t)v) { /* two runs of one point: rows no ratio or comparison can tell apart */
        snprintf(why, cap, "axis \"%s\": the value %lld is given twice", text, v);
        return -1;
      }
    out->values[out->count++] = (int64_t)v;
    if (!*end) break;
    p = end + 1;
  }
  return 0;
}

kb_harness *kb_harness_create(void) {
  kb_harness *h = calloc(1, sizeof *h);
  if (h) kb_report_init(&h->report);
  return h;
}

void kb_harness_destroy(kb_harness *h) {
  if (!h) return;
  for (size_t i = 0; i < h->suite_count; ++i) {
    free(h->suites[i]->cases);
    free(h->suites[i]);
  }
  free(h->suites);
  kb_report_free(&h->report);
  free(h->host_flush);
  free(h);
}

kb_report *kb_harness_report(kb_harness *h) { return &h->report; }
kb_machine *kb_harness_machine(kb_harness *h) { return &h->report.machine; }

static kb_suite *find_suite(const kb_harness *h, const char *name) {
  for (size_t i = 0; i < h->suite_count; ++i)
    if (!strcmp(h->suites[i]->name, name)) return h->suites[i];
  return NULL;
}

kb_suite *kb_suite_add(kb_harness *h, const kb_suite_desc *desc) {
  if (!h || !desc || !valid_name(desc->name) || find_suite(h, desc->name)) return NULL;
  kb_suite **v = realloc(h->suites, (h->suite_count + 1) * sizeof *v);
  if (!v) return NULL;
  h->suites = v;
  kb_suite *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->desc = *desc;
  snprintf(s->name, sizeof s->name, "%s", desc->name);
  snprintf(s->description, sizeof s->description, "%s", desc->description ? desc->description : "");
  s->desc.name = s->name;
  s->desc.description = s->description;
  h->suites[h->suite_count++] = s;
  return s;
}

int kb_suite_axis(kb_suite *s, const char *name, const int64_t *values, size_t count) {
  if (!s || !valid_name(name) || !values || count == 0 || count > KB_MAX_AXIS_VALUES ||
      s->axis_count == KB_MAX_AXES)
    return -1;
  for (size_t i = 0; i < s->axis_count; ++i)
    if (!strcmp(s->axes[i].name, name)) return -1;
  kb_axis *a = &s->axes[s->axis_count++];
  snprintf(a->name, sizeof a->name, "%s", name);
  a->count = count;
  memcpy(a->values, values, count * sizeof *values);
  return 0;
}

int kb_case_add(kb_suite *s, const kb_case_desc *desc) {
  if (!s || !desc || !valid_name(desc->name) || !desc->batch) return -1;
  for (size_t i = 0; i < s->case_count; ++i)
    if (!strcmp(s->cases[i].name, desc->name)) return -1;
  kb_case *v = realloc(s->cases, (s->case_count + 1) * sizeof *v);
  if (!v) return -1;
  s->cases = v;
  kb_case *c = &s->cases[s->case_count++];
  c->desc = *desc;
  snprintf(c->name, sizeof c->name, "%s", desc->name);
  c->desc.name = c->name;
  c->desc.description = desc->description ? desc->description : "";
  return 0;
}

void kb_harness_bandwidth_reference(kb_harness *h, const char *suite, const char *case_name) {
  snprintf(h->ref_suite, sizeof h->ref_suite, "%s", suite ? suite : "");
  snprintf(h->ref_case, sizeof h->ref_case, "%s", case_name ? case_name : "");
}

/* ---- run context -------------------------------------------------------- */

int64_t kb_run_axis(const kb_run *run, const char *name, int64_t fallback) {
  for (size_t i = 0; i < run->axis_count; ++i)
    if (!strcmp(run->axis_names[i], name)) return run->axis_values[i];
  return fallback;
}
void *kb_run_suite_state(const kb_run *run) { return run->suite_state; }
void *kb_run_user(const kb_run *run) { return run->kcase->desc.user; }
kb_mode kb_run_mode(const kb_run *run) { return run->mode; }
const char *kb_run_case_name(const kb_run *run) { return run->kcase->name; }

/* Copies a valid name that fits into dst[cap] (1), or leaves dst as it was
 * (0). memcpy, not snprintf: GCC's -O3 truncation check cannot see the
 * length test and fails a -Werror build. */
static int name_copy(char *dst, size_t cap, const char *src) {
  if (!valid_name(src) || strlen(src) >= cap) return 0;
  memcpy(dst, src, strlen(src) + 1);
  return 1;
}

void kb_run_per_iteration(kb_run *run, double items, const char *item) {
  if (items > 0) run->items = items;
  name_copy(run->item, sizeof run->item, item);
}
void kb_run_throughput(kb_run *run, double items, double bytes) {
  run->tp_items = items > 0 ? items : 0;
  run->tp_bytes = bytes > 0 ? bytes : 0;
}
void kb_run_count(kb_run *run, const char *name, double per_item) {
  unsigned k = 0;
  while (k < run->count_names && strcmp(run->counts[k].name, name ? name : "")) ++k;
  struct kb_count *c = &run->counts[k];
  if (k == run->count_names) { /* a new name */
    if (k == KB_MAX_COUNTS || !name_copy(c->name, sizeof c->name, name)) return; /* no row for a bad name */
    run->count_names++;
    c->min = c->max = per_item;
  }
  c->sum += per_item;
  c->min = per_item < c->min ? per_item : c->min;
  c->max = per_item > c->max ? per_item : c->max;
  c->n++;
}

void kb_run_max_batch(kb_run *run, uint64_t iterations) {
  run->max_batch = iterations ? iterations : 1;
}
void kb_run_min_batch(kb_run *run, uint64_t iterations) { run->min_batch = iterations; }

static kb_status run_message(kb_run *run, kb_status st, const char *fmt, va_list ap) {
  vsnprintf(run->message, sizeof run->message, fmt, ap);
  return st;
}
kb_status kb_run_fail(kb_run *run, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kb_status st = run_message(run, KB_FAIL, fmt, ap);
  va_end(ap);
  return st;
}
kb_status kb_run_skip(kb_run *run, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kb_status st = run_message(run, KB_SKIP, fmt, ap);
  va_end(ap);
  return st;
}
kb_status kb_run_not_applicable(kb_run *run, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kb_status st = run_message(run, KB_SKIP, fmt, ap);
  va_end(ap);
  run->not_applicable = 1;
  return st;
}

/* ---- selection ---------------------------------------------------------- */

static int matches(const char *name, const char *const *patterns, size_t n) {
  if (n == 0) return 1;
  for (size_t i = 0; i < n; ++i)
    if (fnmatch(patterns[i], name, 0) == 0) return 1;
  return 0;
}

static int suite_selected(const kb_suite *s, const kb_options *o) {
  if (!matches(s->name, o->suites, o->suite_count)) return 0;
  for (size_t i = 0; i < s->case_count; ++i)
    if (matches(s->cases[i].name, o->cases, o->case_count)) return 1;
  return 0;
}

/* The suite's axes with the options' overrides applied. */
static void effective_axes(const kb_suite *s, const kb_options *o, kb_axis *out) {
  for (size_t i = 0; i < s->axis_count; ++i) {
    out[i] = s->axes[i];
    for (size_t j = 0; j < o->axis_count; ++j)
      if (!strcmp(o->axes[j].name, s->axes[i].name)) out[i] = o->axes[j];
  }
}

/* ---- measurement -------------------------------------------------------- */

typedef struct series {
  double *host, *gpu; /* per item, ns */
  size_t n, cap;
  int has_gpu;
} series;

static int series_push(series *s, double host, double gpu) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    double *h = realloc(s->host, cap * sizeof *h);
    if (!h) return -1;
    s->host = h;
    double *g = realloc(s->gpu, cap * sizeof *g);
    if (!g) return -1;
    s->gpu = g;
    s->cap = cap;
  }
  s->host[s->n] = host;
  s->gpu[s->n] = gpu;
  s->n++;
  return 0;
}

/* The noise the stopping rule judges: the GPU series' when there is one;
 * for a suite that also reports host cost, the larger of both. */
static double series_noise(const series *s, int host_cost) {
  kb_stats ps;
  if (kb_stats_compute(s->has_gpu ? s->gpu : s->host, s->n, &ps)) return NAN;
  if (!s->has_gpu || !host_cost) return ps.noise;
  double gpu = ps.noise;
  if (kb_stats_compute(s->host, s->n, &ps)) return NAN;
  return ps.noise > gpu ? ps.noise : gpu;
}

static uint64_t clock_of(const kb_options *o) {
  return o->clock_ns ? o->clock_ns(o->clock_user) : kb_now_ns();
}

static kb_status flush_caches(kb_harness *h, kb_run *run, const kb_options *o) {
  if (run->suite->desc.flush)
    return run->suite->desc.flush(run->suite_state, run->message, sizeof run->message);
  /* A host-cache flush: write, then read, a buffer larger than the caches. */
  size_t bytes = o->host_flush_bytes ? o->host_flush_bytes : (64u << 20);
  if (h->host_flush_bytes < bytes) {
    free(h->host_flush);
    h->host_flush = malloc(bytes);
    h->host_flush_bytes = h->host_flush ? bytes : 0;
    if (!h->host_flush) return kb_run_fail(run, "cold mode: no memory for a %zu-byte cache flush", bytes);
  }
  memset(h->host_flush, (int)(bytes & 0x7f), bytes);
  volatile unsigned char sink = 0;
  for (size_t i = 0; i < bytes; i += 64) sink ^= h->host_flush[i];
  (void)sink;
  return KB_OK;
}

/* One batch: flush (cold), run, validate. *primary is the batch's time that
 * batch sizing and min_time use (GPU when reported). */
static kb_status one_batch(kb_harness *h, kb_run *run, void *state, const kb_options *o,
                           uint64_t k, kb_timing *t, double *primary) {
  kb_status st;
  if (run->mode == KB_MODE_COLD && (st = flush_caches(h, run, o)) != KB_OK) return st;
  t->host_ns = -1;
  t->gpu_ns = -1;
  st = run->kcase->desc.batch(run, state, k, t);
  if (st != KB_OK) return st;
  if (!(t->host_ns >= 0) || !isfinite(t->host_ns) || (t->gpu_ns >= 0 && !isfinite(t->gpu_ns)))
    return kb_run_fail(run, "the batch reported no valid host time (host %g ns, gpu %g ns)",
                       t->host_ns, t->gpu_ns);
  *primary = t->gpu_ns >= 0 ? t->gpu_ns : t->host_ns;
  return KB_OK;
}

typedef struct measured {
  series s;
  uint64_t batch;
  kb_stop_reason stop;  /* the last turn's */
  kb_stop_reason worst; /* what the row reports: a turn that did not converge, if any did not */
  double elapsed_s;     /* wall seconds of sampling, all rounds */
  unsigned rounds;      /* rounds sampled */
  size_t round_start[KB_MAX_ROUNDS + 1]; /* round k's samples: [round_start[k], round_start[k + 1]) */
} measured;

/* Warm-up and batch sizing: m->batch. Bounded by warmup_s, by max_time_s
 * and by a batch count, so a clock that does not move cannot hang it. */
static kb_status warm_up(kb_harness *h, kb_run *run, void *state, const kb_options *o, measured *m) {
  kb_status st;
  kb_timing t;
  double primary = 0; /* set by one_batch on KB_OK; gcc -O3 cannot see that */
  uint64_t cap = run->max_batch ? run->max_batch : o->max_batch;
  if (cap > o->max_batch) cap = o->max_batch;
  if (run->mode == KB_MODE_COLD) cap = 1;
  uint64_t k = run->min_batch > 1 ? run->min_batch : 1;
  if (k > cap) k = cap;
  double target_ns = o->target_batch_s * 1e9;
  uint64_t w0 = clock_of(o);
  for (unsigned i = 0; i < 10000; ++i) {
    if ((st = one_batch(h, run, state, o, k, &t, &primary)) != KB_OK) return st;
    double warm = (double)(clock_of(o) - w0) * 1e-9;
    if (primary < target_ns && k < cap && warm < o->stop.max_time_s) {
      double grow = primary > 0 ? 1.25 * target_ns / primary : 64;
      if (grow < 2) grow = 2;
      if (grow > 64) grow = 64;
      double next = (double)k * grow;
      k = next >= (double)cap ? cap : (uint64_t)next;
      continue;
    }
    if (warm >= o->warmup_s || warm >= o->stop.max_time_s) break;
  }
  m->batch = k;
  return KB_OK;
}

/* A turn takes at least this many samples (within its max_samples), but
 * for a batch that alone outlasts the turn's time budget (a 10000-node
 * launch chain's 16 launches with --rounds 16): the report's samples
 * column (samples x batch) shows where a round's figure is one batch. */
#define KB_TURN_MIN_SAMPLES 3

/* The stopping rule of one of `rounds` turns: limits split evenly, the
 * noise still judged on every sample so far. */
static kb_stop_rule round_rule(const kb_stop_rule *r, unsigned rounds) {
  kb_stop_rule q = *r;
  if (rounds <= 1) return q;
  q.min_samples = (r->min_samples + rounds - 1) / rounds;
  q.max_samples = r->max_samples / rounds ? r->max_samples / rounds : 1;
  if (q.min_samples < KB_TURN_MIN_SAMPLES) q.min_samples = KB_TURN_MIN_SAMPLES;
  if (q.min_samples > q.max_samples) q.min_samples = q.max_samples;
  q.min_time_s = r->min_time_s / rounds;
  q.max_time_s = r->max_time_s / rounds;
  return q;
}

/* Samples (one batch each) onto m->s until rule stops this turn; a turn
 * among other cases' turns (rewarm) starts with one untimed batch. */
static kb_status sample(kb_harness *h, kb_run *run, void *state, const kb_options *o, const kb_stop_rule *rule,
                        int rewarm, measured *m) {
  kb_status st;
  kb_timing t;
  double primary = 0; /* as in warm_up */
  uint64_t k = m->batch;
  size_t first = m->s.n, next_check = m->s.n + 1;
  double measured_s = 0, elapsed_s = 0, noise = NAN;
  /* A turn among other cases' starts where they left the machine (their
   * caches, their streams, sleeping threads): one untimed batch re-warms
   * this case first, outside the turn's time budget. */
  if (rewarm && (st = one_batch(h, run, state, o, k, &t, &primary)) != KB_OK) return st;
  uint64_t t0 = clock_of(o);
  for (;;) {
    if ((st = one_batch(h, run, state, o, k, &t, &primary)) != KB_OK) return st;
    double per = (double)k * run->items;
    if (m->s.n == 0) m->s.has_gpu = t.gpu_ns >= 0;
    else if (m->s.has_gpu != (t.gpu_ns >= 0))
      return kb_run_fail(run, "the case reported GPU time in some batches only");
    if (series_push(&m->s, t.host_ns / per, m->s.has_gpu ? t.gpu_ns / per : -1))
      return kb_run_fail(run, "no memory for samples");
    measured_s += primary * 1e-9;
    elapsed_s = (double)(clock_of(o) - t0) * 1e-9;
    size_t taken = m->s.n - first;
    /* Recompute the noise every sample while few, then every ~3% more
     * samples, so long runs do not sort the series each time. */
    int fresh = 0;
    if (m->s.n >= next_check || taken == rule->min_samples) {
      noise = series_noise(&m->s, run->suite->desc.host_cost);
      next_check = m->s.n < 64 ? m->s.n + 1 : m->s.n + m->s.n / 32;
      fresh = 1;
    }
    m->stop = kb_stop_check(rule, taken, measured_s, elapsed_s, noise);
    if (m->stop == KB_STOP_CONVERGED && !fresh) /* confirm on the current series */
      m->stop = kb_stop_check(rule, taken, measured_s, elapsed_s, series_noise(&m->s, run->suite->desc.host_cost));
    if (m->stop != KB_CONTINUE) break;
  }
  m->elapsed_s += elapsed_s;
  if (m->rounds == 0 || m->stop != KB_STOP_CONVERGED) m->worst = m->stop;
  if (m->rounds < KB_MAX_ROUNDS) {
    m->round_start[m->rounds] = first;
    m->round_start[m->rounds + 1] = m->s.n;
  }
  m->rounds++;
  return KB_OK;
}

static kb_status measure(kb_harness *h, kb_run *run, void *state, const kb_options *o, measured *m) {
  kb_status st = warm_up(h, run, state, o, m);
  return st ? st : sample(h, run, state, o, &o->stop, 0, m);
}

static void base_row(const kb_run *run, const measured *m, kb_result *row) {
  memset(row, 0, sizeof *row);
  snprintf(row->suite, sizeof row->suite, "%s", run->suite->name);
  snprintf(row->case_name, sizeof row->case_name, "%s", run->kcase->name);
  snprintf(row->mode, sizeof row->mode, "%s", kb_mode_name(run->mode));
  row->baseline = run->kcase->desc.baseline != 0;
  row->axis_count = run->axis_count;
  for (size_t i = 0; i < run->axis_count; ++i) {
    snprintf(row->axis_names[i], sizeof row->axis_names[i], "%s", run->axis_names[i]);
    row->axis_values[i] = run->axis_values[i];
  }
  row->samples = m->s.n;
  row->batch = m->batch;
  snprintf(row->stop, sizeof row->stop, "%s", kb_stop_name(m->worst));
}

/* Each round's median of x, or with amount > 0 the rate amount / (that
 * median) (per second, as the pooled rate row), into row->round_median;
 * only when the case took turns. */
static int round_medians(const measured *m, const double *x, double amount, kb_result *row) {
  row->round_count = 0;
  if (m->rounds < 2) return 0;
  double *tmp = malloc(m->s.n * sizeof *tmp);
  if (!tmp) return -1;
  for (unsigned k = 0; k < m->rounds; ++k) {
    size_t a = m->round_start[k], n = m->round_start[k + 1] - a;
    memcpy(tmp, x + a, n * sizeof *tmp);
    double med = kb_median_inplace(tmp, n);
    row->round_median[k] = amount == 0 ? med : med > 0 ? amount / (med * 1e-9) : 0;
  }
  row->round_count = m->rounds;
  free(tmp);
  return 0;
}

static int add_time_row(kb_harness *h, const kb_run *run, const measured *m, const double *x,
                        const char *which) {
  kb_result row;
  kb_stats st;
  base_row(run, m, &row);
  if (kb_stats_compute(x, m->s.n, &st) || round_medians(m, x, 0, &row)) return -1;
  snprintf(row.metric, sizeof row.metric, "%s_time_per_%s", which, run->item);
  snprintf(row.unit, sizeof row.unit, "ns");
  row.median = st.median, row.min = st.min, row.max = st.max, row.noise = st.noise;
  return kb_report_add(&h->report, &row) ? 0 : -1;
}

/* Throughput per sample is amount / time: the row's median is the rate of
 * the median time, and min and max those of the longest and shortest
 * times (with an even count the median of the rates would average two
 * rates, not two times, and the rate row would not invert the time row);
 * the noise is the rates' own. */
static int add_rate_row(kb_harness *h, const kb_run *run, const measured *m, const double *x,
                        double amount_per_item, const char *metric, const char *unit) {
  kb_result row;
  kb_stats st;
  base_row(run, m, &row);
  double *rate = malloc(m->s.n * sizeof *rate);
  if (!rate) return -1;
  for (size_t i = 0; i < m->s.n; ++i) rate[i] = x[i] > 0 ? amount_per_item / (x[i] * 1e-9) : 0;
  kb_stats ns; /* of the times per item */
  int rc = kb_stats_compute(rate, m->s.n, &st) || kb_stats_compute(x, m->s.n, &ns);
  free(rate);
  if (rc || round_medians(m, x, amount_per_item, &row)) return -1;
  st.median = ns.median > 0 ? amount_per_item / (ns.median * 1e-9) : 0;
  st.min = ns.max > 0 ? amount_per_item / (ns.max * 1e-9) : 0;
  st.max = ns.min > 0 ? amount_per_item / (ns.min * 1e-9) : 0;
  snprintf(row.metric, sizeof row.metric, "%s", metric);
  snprintf(row.unit, sizeof row.unit, "%s", unit);
  row.higher_is_better = 1;
  row.median = st.median, row.min = st.min, row.max = st.max, row.noise = st.noise;
  return kb_report_add(&h->report, &row) ? 0 : -1;
}

/* What the case counted (kb_run_count): the mean over the reports, beside
 * their least and greatest; no noise, it is a count, not a time. */
static int add_count_row(kb_harness *h, const kb_run *run, const measured *m, const struct kb_count *c) {
  kb_result row;
  base_row(run, m, &row);
  snprintf(row.metric, sizeof row.metric, "%.24s_per_%.31s", c->name, run->item);
  snprintf(row.unit, sizeof row.unit, "count");
  row.median = c->sum / (double)c->n;
  row.min = c->min, row.max = c->max, row.noise = 0;
  row.samples = (size_t)c->n;
  return kb_report_add(&h->report, &row) ? 0 : -1;
}

static int add_rows(kb_harness *h, const kb_run *run, const measured *m) {
  for (unsigned k = 0; k < run->count_names; ++k)
    if (add_count_row(h, run, m, &run->counts[k])) return -1;
  const double *primary = m->s.has_gpu ? m->s.gpu : m->s.host;
  if (m->s.has_gpu && add_time_row(h, run, m, m->s.gpu, "gpu")) return -1;
  if (add_time_row(h, run, m, m->s.host, "host")) return -1;
  /* Series are per item; throughput amounts are per iteration. */
  if (run->tp_items > 0 &&
      add_rate_row(h, run, m, primary, run->tp_items / run->items, "items_per_second", "items/s"))
    return -1;
  if (run->tp_bytes > 0 &&
      add_rate_row(h, run, m, primary, run->tp_bytes / run->items, "bytes_per_second", "B/s"))
    return -1;
  return 0;
}

static void note_skip(kb_harness *h, const kb_suite *s, const char *case_name, int failed,
                      int not_applicable, const char *reason, FILE *progress) {
  kb_skip k;
  memset(&k, 0, sizeof k);
  snprintf(k.suite, sizeof k.suite, "%s", s->name);
  snprintf(k.case_name, sizeof k.case_name, "%s", case_name ? case_name : "");
  k.needs_gpu = s->desc.needs_gpu;
  k.failed = failed;
  k.not_applicable = !failed && not_applicable;
  snprintf(k.reason, sizeof k.reason, "%s", reason && *reason ? reason : "no reason given");
  kb_report_add_skip(&h->report, &k);
  if (progress)
    fprintf(progress, "kdag-bench: %s%s%s %s: %s\n", s->name, case_name ? "/" : "",
            case_name ? case_name : "", failed ? "FAILED" : "skipped", k.reason);
}

static void axes_label(const kb_run *run, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < run->axis_count && used < cap; ++i) {
    int k = snprintf(buf + used, cap - used, " %s=%lld", run->axis_names[i],
                     (long long)run->axis_values[i]);
    if (k < 0) break;
    used += (size_t)k;
  }
}

/* How many of the suite's cases the --case filters select. */
static size_t selected_cases(const kb_suite *s, const kb_options *o) {
  size_t n = 0;
  for (size_t j = 0; j < s->case_count; ++j) n += matches(s->cases[j].name, o->cases, o->case_count);
  return n;
}

/* One case at one axis point and mode, from setup to its rows. */
typedef struct case_run {
  kb_run run;
  void *state;
  measured m;
  kb_status st;
  int set_up;           /* setup succeeded: teardown is owed */
  char label[160];
  size_t ordinal;
} case_run;

static void case_begin(kb_harness *h, kb_suite *s, void *suite_state, kb_case *c, const kb_axis *axes,
                       const size_t *idx, kb_mode mode, size_t ordinal, case_run *r) {
  memset(r, 0, sizeof *r);
  kb_run *run = &r->run;
  run->h = h, run->suite = s, run->kcase = c, run->suite_state = suite_state, run->mode = mode;
  run->axis_count = s->axis_count;
  for (size_t i = 0; i < s->axis_count; ++i) {
    run->axis_names[i] = axes[i].name;
    run->axis_values[i] = axes[i].values[idx[i]];
  }
  run->items = 1;
  snprintf(run->item, sizeof run->item, "iteration");
  axes_label(run, r->label, sizeof r->label);
  r->ordinal = ordinal;
  r->st = c->desc.setup ? c->desc.setup(run, &r->state) : KB_OK;
  r->set_up = r->st == KB_OK;
}

static void progress_head(const case_run *r, const kb_options *o, size_t total) {
  if (o->progress)
    fprintf(o->progress, "[%zu/%zu] %s/%s%s %s ...", r->ordinal, total, r->run.suite->name, r->run.kcase->name,
            r->label, kb_mode_name(r->run.mode)), fflush(o->progress);
}

/* Teardown, progress line, rows or the skip/failure note: 1 on failure. */
static int case_end(kb_harness *h, case_run *r, const kb_options *o) {
  kb_run *run = &r->run;
  measured *m = &r->m;
  if (r->set_up && run->kcase->desc.teardown) run->kcase->desc.teardown(run, r->state);
  if (o->progress && r->set_up) {
    if (r->st == KB_OK) {
      kb_stats ps;
      int gpu = m->s.has_gpu;
      kb_stats_compute(gpu ? m->s.gpu : m->s.host, m->s.n, &ps);
      double noise = series_noise(&m->s, run->suite->desc.host_cost); /* what the rule judged */
      char v[32], turns[32] = "";
      kb_format_value(ps.median, "ns", v, sizeof v);
      if (m->rounds > 1) snprintf(turns, sizeof turns, " in %u rounds", m->rounds);
      fprintf(o->progress, " %s/%s (%s), %zu samples x %llu%s, %.2f s, noise %.2f%%, %s\n", v, run->item,
              gpu ? "gpu" : "host", m->s.n, (unsigned long long)m->batch, turns, m->elapsed_s,
              noise * 100, kb_stop_name(m->worst));
    } else {
      fprintf(o->progress, "\n");
    }
  }
  kb_status st = r->st;
  if (st == KB_OK && add_rows(h, run, m)) {
    st = KB_FAIL;
    snprintf(run->message, sizeof run->message, "no memory for the results");
  }
  int failed = 0;
  if (st != KB_OK) {
    char name[KB_NAME_MAX + 200];
    snprintf(name, sizeof name, "%s%s %s", run->kcase->name, r->label, kb_mode_name(run->mode));
    note_skip(h, run->suite, name, st == KB_FAIL, run->not_applicable, run->message, o->progress);
    failed = st == KB_FAIL;
  }
  free(m->s.host);
  free(m->s.gpu);
  if (o->on_case) {
    kb_report_finalize(&h->report, h->ref_suite[0] ? h->ref_suite : NULL, h->ref_case[0] ? h->ref_case : NULL);
    o->on_case(&h->report, o->on_case_user);
  }
  return failed;
}

static int run_one(kb_harness *h, kb_suite *s, void *suite_state, kb_case *c, const kb_axis *axes,
                   const size_t *idx, kb_mode mode, const kb_options *o, size_t ordinal, size_t total) {
  case_run r;
  case_begin(h, s, suite_state, c, axes, idx, mode, ordinal, &r);
  if (r.set_up) {
    progress_head(&r, o, total);
    r.st = measure(h, &r.run, r.state, o, &r.m);
  }
  return case_end(h, &r, o);
}

/* The selected cases of one axis point and mode, measured in turns: all
 * set up, each warmed up and sized, then o->rounds rounds in which every
 * case takes its share of the samples, so a slow drift of the machine (a
 * clock change, a neighbour) falls on every case alike instead of on
 * whichever ran last. A case that fails leaves
 * the others running. */
static int run_turns(kb_harness *h, kb_suite *s, void *suite_state, const kb_axis *axes, const size_t *idx,
                     kb_mode mode, const kb_options *o, size_t *ordinal, size_t total) {
  size_t n = selected_cases(s, o);
  case_run *r = calloc(n ? n : 1, sizeof *r);
  if (!r) { /* no memory to hold them together: one after another */
    int failed = 0;
    for (size_t j = 0; j < s->case_count; ++j)
      if (matches(s->cases[j].name, o->cases, o->case_count))
        failed += run_one(h, s, suite_state, &s->cases[j], axes, idx, mode, o, ++*ordinal, total);
    return failed;
  }
  for (size_t j = 0, i = 0; j < s->case_count; ++j) {
    if (!matches(s->cases[j].name, o->cases, o->case_count)) continue;
    case_begin(h, s, suite_state, &s->cases[j], axes, idx, mode, ++*ordinal, &r[i]);
    if (r[i].set_up) r[i].st = warm_up(h, &r[i].run, r[i].state, o, &r[i].m);
    ++i;
  }
  /* Each round starts one case further on, so no case always follows the
   * same one (what a case leaves behind, a busy stream or a cold cache,
   * then falls on each case in turn). */
  kb_stop_rule turn = round_rule(&o->stop, o->rounds);
  for (unsigned k = 0; k < o->rounds; ++k)
    for (size_t j = 0; j < n; ++j) {
      size_t i = (j + k) % n;
      if (r[i].st == KB_OK) r[i].st = sample(h, &r[i].run, r[i].state, o, &turn, 1, &r[i].m);
    }
  int failed = 0;
  for (size_t i = 0; i < n; ++i) {
    if (r[i].set_up) progress_head(&r[i], o, total);
    failed += case_end(h, &r[i], o);
  }
  free(r);
  return failed;
}

static size_t points_of(const kb_axis *axes, size_t n) {
  size_t p = 1;
  for (size_t i = 0; i < n; ++i) p *= axes[i].count;
  return p;
}

int kb_harness_run(kb_harness *h, const kb_options *o, char *why, size_t cap) {
  /* Validate the options and the selection before running anything. */
  if (o->rounds < 1 || o->rounds > KB_MAX_ROUNDS) {
    snprintf(why, cap, "rounds %u: give 1 to %d", o->rounds, KB_MAX_ROUNDS);
    return -1;
  }
  size_t selected = 0, total = 0;
  for (size_t i = 0; i < h->suite_count; ++i) {
    const kb_suite *s = h->suites[i];
    if (!suite_selected(s, o)) continue;
    ++selected;
    kb_axis axes[KB_MAX_AXES];
    effective_axes(s, o, axes);
    size_t cases = selected_cases(s, o);
    unsigned modes = (o->modes & KB_MODE_BATCH ? 1u : 0u) + (o->modes & KB_MODE_COLD ? 1u : 0u);
    total += cases * points_of(axes, s->axis_count) * modes;
  }
  if (selected == 0) {
    snprintf(why, cap, "no registered suite and case match the --suite/--case filters");
    return -1;
  }
  if (!(o->modes & (KB_MODE_BATCH | KB_MODE_COLD))) {
    snprintf(why, cap, "no mode selected (batch, cold)");
    return -1;
  }
  for (size_t j = 0; j < o->axis_count; ++j) {
    int found = 0;
    for (size_t i = 0; i < h->suite_count && !found; ++i) {
      if (!suite_selected(h->suites[i], o)) continue;
      for (size_t a = 0; a < h->suites[i]->axis_count; ++a)
        found |= !strcmp(h->suites[i]->axes[a].name, o->axes[j].name);
    }
    if (!found) {
      snprintf(why, cap, "--axis %s: no selected suite has an axis of that name", o->axes[j].name);
      return -1;
    }
  }
  kb_machine_fill_host(&h->report.machine);

  int failures = 0;
  size_t ordinal = 0;
  for (size_t i = 0; i < h->suite_count; ++i) {
    kb_suite *s = h->suites[i];
    if (!suite_selected(s, o)) continue;
    kb_axis axes[KB_MAX_AXES];
    effective_axes(s, o, axes);
    size_t cases = selected_cases(s, o);
    size_t runs = cases * points_of(axes, s->axis_count) *
                  ((o->modes & KB_MODE_BATCH ? 1u : 0u) + (o->modes & KB_MODE_COLD ? 1u : 0u));
    void *state = NULL;
    char reason[KB_MESSAGE_MAX] = "";
    kb_status st = s->desc.init ? s->desc.init(h, s->desc.user, &state, reason, sizeof reason) : KB_OK;
    if (st != KB_OK) {
      note_skip(h, s, NULL, st == KB_FAIL, 0, reason, o->progress);
      failures += st == KB_FAIL ? (int)runs : 0;
      ordinal += runs;
      continue;
    }
    size_t idx[KB_MAX_AXES] = {0};
    size_t points = points_of(axes, s->axis_count);
    for (size_t p = 0; p < points; ++p) {
      size_t rest = p; /* the last axis varies fastest */
      for (size_t a = s->axis_count; a-- > 0;) {
        idx[a] = rest % axes[a].count;
        rest /= axes[a].count;
      }
      static const kb_mode order[] = {KB_MODE_BATCH, KB_MODE_COLD};
      if (o->rounds > 1 && s->desc.interleave) {
        for (size_t mi = 0; mi < 2; ++mi)
          if (o->modes & order[mi]) failures += run_turns(h, s, state, axes, idx, order[mi], o, &ordinal, total);
        continue;
      }
      for (size_t j = 0; j < s->case_count; ++j) {
        kb_case *c = &s->cases[j];
        if (!matches(c->name, o->cases, o->case_count)) continue;
        for (size_t mi = 0; mi < 2; ++mi) {
          if (!(o->modes & order[mi])) continue;
          failures += run_one(h, s, state, c, axes, idx, order[mi], o, ++ordinal, total);
        }
      }
    }
    if (s->desc.fini) s->desc.fini(state);
  }
  kb_report_finalize(&h->report, h->ref_suite[0] ? h->ref_suite : NULL,
                     h->ref_case[0] ? h->ref_case : NULL);
  return failures;
}

void kb_harness_list(const kb_harness *h, FILE *out) {
  for (size_t i = 0; i < h->suite_count; ++i) {
    const kb_suite *s = h->suites[i];
    fprintf(out, "%s%s — %s\n", s->name, s->desc.needs_gpu ? " [GPU]" : " [CPU]", s->description);
    for (size_t a = 0; a < s->axis_count; ++a) {
      fprintf(out, "  axis %s =", s->axes[a].name);
      for (size_t v = 0; v < s->axes[a].count; ++v)
        fprintf(out, "%s%lld", v ? "," : " ", (long long)s->axes[a].values[v]);
      fprintf(out, "\n");
    }
    for (size_t j = 0; j < s->case_count; ++j)
      fprintf(out, "  case %s%s — %s\n", s->cases[j].name,
              s->cases[j].desc.baseline ? " (baseline)" : "", s->cases[j].desc.description);
  }
}
