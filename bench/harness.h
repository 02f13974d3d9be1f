/* SPDX-License-Identifier: Apache-2.0 */
/* bench/harness.h — the kdag-bench harness: register suites of benchmark
 * cases over axes; the harness warms up, sizes batches, decides when to stop,
 * summarises, computes ratios against baselines and writes the outputs.
 *
 * The harness knows nothing about CUDA. A case measures one batch of
 * `iterations` repetitions and reports the host (submission) time and,
 * optionally, the GPU time (bench/gpu.h has the event helper for that). The
 * harness divides by iterations and by the items the case declared per
 * iteration, so metrics read "time per node", "time per copy", ...
 *
 * Measurement of one case at one axis point and one mode:
 *   warm-up   batches are run and discarded until warmup_s has passed; in
 *             batch mode they also grow `iterations` until one batch takes
 *             at least target_batch_s (from kb_run_min_batch, capped by
 *             kb_run_max_batch).
 *   samples   one batch per sample. Cold mode runs one iteration per sample
 *             and calls the suite's flush hook (GPU suites: an L2 flush;
 *             without a hook, a host-cache flush) before each sample,
 *             outside the timed region. Batch mode never flushes.
 *   stopping  kb_stop_check: stop when samples >= min_samples, measured time
 *             >= min_time_s and noise <= max_noise; or when the wall time of
 *             the sampling phase reaches max_time_s (honoured even before
 *             min_samples); or at max_samples.
 *   noise     relative robust spread: IQR / (1.349 * |median|), the
 *             interquartile range scaled so it equals the coefficient of
 *             variation for normally distributed samples, but unmoved by a
 *             few outliers (up to a quarter of the samples on each side).
 *             Unlike a MAD it does not collapse to 0 on a two-valued
 *             (quantised) series. NaN with fewer than 2 samples.
 * The stopping rule watches the GPU series when the case reports one, else
 * the host series.
 *
 * Rows (kb_result): one per metric: gpu_time_per_<item> and
 * host_time_per_<item> (ns), items_per_second and bytes_per_second where the
 * case declared traffic (kb_run_throughput), and bandwidth_share (bytes/s
 * over the run's bandwidth reference, a device-to-device copy measured in
 * the same run). ratios map every baseline case of the same suite, axes,
 * mode and metric to this row's median / the baseline's median. When the
 * cases took turns (kb_options.rounds > 1), each ratio is also paired by
 * round: the median over rounds of this row's median in a round / the
 * baseline's median in the same round, with the quartiles of those
 * ratios. A drift of the machine between rounds (a clock change, a
 * neighbour) moves both medians of a round alike and cancels in its ratio,
 * where it widens the pooled medians' ratio.
 *
 * Threads: a harness is used from one thread. Callbacks run on it.
 */
#ifndef KDAG_BENCH_HARNESS_H
#define KDAG_BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KB_NAME_MAX 64
#define KB_MAX_AXES 4
#define KB_MAX_AXIS_VALUES 32
#define KB_MAX_RATIOS 16
#define KB_MESSAGE_MAX 512
#define KB_MAX_ROUNDS 100 /* kb_options.rounds */
#define KB_MAX_COUNTS 4   /* kb_run_count names per case */

typedef enum kb_status {
  KB_OK = 0,
  KB_SKIP = 1, /* not applicable here (no GPU, no NVRTC): reported, not a failure */
  KB_FAIL = 2  /* a real failure: the case (or suite) is reported as failed */
} kb_status;

typedef enum kb_mode {
  KB_MODE_BATCH = 1u << 0, /* many iterations per sample, caches warm */
  KB_MODE_COLD = 1u << 1   /* one iteration per sample, caches flushed before it */
} kb_mode;

const char *kb_mode_name(kb_mode mode); /* "batch" / "cold" */

/* One named axis and its values. */
typedef struct kb_axis {
  char name[KB_NAME_MAX];
  size_t count;
  int64_t values[KB_MAX_AXIS_VALUES];
} kb_axis;

/* Parses "N=10,100,1000": a name, '=', comma-separated decimal integers.
 * Returns 0, or -1 with a message in why. */
int kb_axis_parse(const char *text, kb_axis *out, char *why, size_t why_cap);

/* ---- machine description (filled by the program, written to JSON) ---- */

typedef struct kb_machine {
  int has_gpu;
  char gpu_name[256];
  int gpu_ordinal;
  int sm_count;
  int cc_major, cc_minor;
  int sm_clock_khz, memory_clock_khz; /* 0: unknown */
  int memory_bus_bits;
  long long l2_bytes, memory_bytes;
  int driver_version;  /* e.g. 13000; 0 unknown */
  int toolkit_version; /* CUDA_VERSION of the headers, e.g. 13000 */
  char nvrtc_version[32];
  char host_cpu[256];
  int host_threads;
  char hostname[128];
  char os[256];
  char notes[256]; /* e.g. "PTX JIT cache disabled" */
} kb_machine;

/* Fills the host fields (CPU model from /proc/cpuinfo, threads, host name,
 * kernel) and leaves the others alone. */
void kb_machine_fill_host(kb_machine *m);

/* ---- results ---------------------------------------------------------- */

typedef struct kb_ratio {
  char baseline[KB_NAME_MAX];
  double value; /* this row's median / the baseline's median */
  /* Paired by round (see the top of this file): the median and quartiles
   * of the per-round ratios over paired_rounds rounds; NaN and 0 rounds
   * when the cases did not take turns. */
  double paired, paired_q1, paired_q3;
  unsigned paired_rounds;
} kb_ratio;

typedef struct kb_result {
  char suite[KB_NAME_MAX];
  char case_name[KB_NAME_MAX];
  char mode[8];
  char metric[KB_NAME_MAX];
  char unit[16];           /* "ns", "items/s", "B/s", "fraction", "count" */
  int higher_is_better;    /* 1 for throughput, 0 for times */
  int baseline;            /* the case is a baseline of its suite */
  size_t axis_count;
  char axis_names[KB_MAX_AXES][KB_NAME_MAX];
  int64_t axis_values[KB_MAX_AXES];
  double median, min, max, noise; /* noise: NaN when undefined */
  size_t samples;
  uint64_t batch;          /* iterations per sample */
  char stop[16];           /* "converged", "max_time", "max_samples", "" */
  size_t ratio_count;
  kb_ratio ratios[KB_MAX_RATIOS];
  /* The median of each round's samples when the case took turns
   * (kb_options.rounds > 1), in round order; round_count 0 otherwise. */
  unsigned round_count;
  double round_median[KB_MAX_ROUNDS];
} kb_result;

typedef struct kb_skip {
  char suite[KB_NAME_MAX];
  char case_name[KB_NAME_MAX]; /* "" for the whole suite */
  int needs_gpu;
  int failed;                  /* 1: a failure, not a skip */
  int not_applicable;          /* 1: kb_run_not_applicable (not at these axes) */
  char reason[KB_MESSAGE_MAX];
} kb_skip;

/* A run's report: what the outputs write and --compare reads. */
typedef struct kb_report {
  kb_machine machine;
  kb_result *rows;
  size_t count, cap;
  kb_skip *skips;
  size_t skip_count, skip_cap;
} kb_report;

void kb_report_init(kb_report *r);
void kb_report_free(kb_report *r); /* frees the arrays; r can be reused after init */
/* Appends a copy of row; returns the stored row or NULL (out of memory). */
kb_result *kb_report_add(kb_report *r, const kb_result *row);
int kb_report_add_skip(kb_report *r, const kb_skip *skip);
/* 1 when two rows have the same axes with the same values (in any order). */
int kb_result_same_axes(const kb_result *a, const kb_result *b);
/* Axes as "N=10;M=2" ("" without axes). */
void kb_result_axes_string(const kb_result *row, char *buf, size_t cap);

/* Recomputes every row's ratios from the rows marked baseline (same suite,
 * axes, mode, metric), then replaces the bandwidth_share rows: one per
 * bytes_per_second row, relative to the highest bytes_per_second median of
 * the rows of reference_case (per mode when that mode has one). With
 * reference_suite/case NULL or absent from the report, no share rows. */
void kb_report_finalize(kb_report *r, const char *reference_suite,
                        const char *reference_case);

/* ---- statistics and the stopping rule --------------------------------- */

typedef struct kb_stats {
  size_t n;
  double median, min, max, mean;
  double noise; /* IQR / (1.349 |median|), quartiles by linear interpolation;
                   NaN for n < 2; 0 when the middle half is equal */
} kb_stats;

/* Summarises x[0..n) (not modified). Returns 0, or -1 for n == 0 / no memory. */
int kb_stats_compute(const double *x, size_t n, kb_stats *out);
/* Median of x[0..n), sorting x in place. */
double kb_median_inplace(double *x, size_t n);
/* First quartile, median and third quartile of x[0..n) into q[0..3),
 * sorting x in place (linear interpolation, as the noise uses). Returns 0,
 * or -1 for n == 0. */
int kb_quartiles_inplace(double *x, size_t n, double q[3]);

typedef struct kb_stop_rule {
  size_t min_samples;   /* default 10 */
  size_t max_samples;   /* default 2000 */
  double min_time_s;    /* measured (timed) seconds before converging; default 0.1 */
  double max_time_s;    /* wall seconds of the sampling phase; default 2 */
  double max_noise;     /* relative; default 0.02 */
} kb_stop_rule;

typedef enum kb_stop_reason {
  KB_CONTINUE = 0,
  KB_STOP_CONVERGED,
  KB_STOP_MAX_TIME,
  KB_STOP_MAX_SAMPLES
} kb_stop_reason;

const char *kb_stop_name(kb_stop_reason reason);
/* The rule, as a pure function. noise NaN never converges. */
kb_stop_reason kb_stop_check(const kb_stop_rule *rule, size_t samples,
                             double measured_s, double elapsed_s, double noise);

/* ---- the harness ------------------------------------------------------ */

typedef struct kb_harness kb_harness;
typedef struct kb_suite kb_suite;
typedef struct kb_run kb_run; /* one case at one axis point and mode */

/* A batch's timing. gpu_ns < 0: not measured. */
typedef struct kb_timing {
  double host_ns;
  double gpu_ns;
} kb_timing;

/* Suite hooks (all optional). init may return KB_SKIP or KB_FAIL with a
 * reason in why; the suite's cases are then reported as skipped/failed.
 * flush runs before each cold sample, outside the timed region. */
typedef kb_status (*kb_suite_init_fn)(kb_harness *h, void *user, void **state,
                                      char *why, size_t why_cap);
typedef void (*kb_suite_fini_fn)(void *state);
typedef kb_status (*kb_suite_flush_fn)(void *state, char *why, size_t why_cap);

typedef struct kb_suite_desc {
  const char *name;
  const char *description;
  int needs_gpu;  /* listed as a GPU suite; its skips are "GPU suites skipped" */
  kb_suite_init_fn init;
  kb_suite_fini_fn fini;
  kb_suite_flush_fn flush;
  void *user;
  /* Its cases may be set up side by side and measured in turns
   * (kb_options.rounds): no case's setup disturbs another's state. */
  int interleave;
  /* Its targets include host time: the stopping rule judges the noise of
   * the host series too when the cases report GPU time (whose noise is far
   * lower, and alone would stop sampling before the host medians settle). */
  int host_cost;
} kb_suite_desc;

/* Case hooks. setup runs once per axis point and mode, before warm-up, and
 * declares what an iteration is (kb_run_per_iteration, kb_run_throughput,
 * kb_run_max_batch); batch runs `iterations` repetitions and fills *out;
 * teardown (optional) runs after the last sample, also after a failed batch,
 * but not after a failed setup (setup cleans up after itself). */
typedef kb_status (*kb_setup_fn)(kb_run *run, void **state);
typedef kb_status (*kb_batch_fn)(kb_run *run, void *state, uint64_t iterations,
                                 kb_timing *out);
typedef void (*kb_teardown_fn)(kb_run *run, void *state);

typedef struct kb_case_desc {
  const char *name;
  const char *description;
  int baseline;  /* other cases of the suite get a ratio to it */
  kb_setup_fn setup; /* optional */
  kb_batch_fn batch; /* required */
  kb_teardown_fn teardown;
  void *user;
} kb_case_desc;

kb_harness *kb_harness_create(void);
void kb_harness_destroy(kb_harness *h);

/* Registration. Names are copied; the desc's pointers (user) must outlive
 * the harness. Returns NULL / -1 on a duplicate name, bad argument or no
 * memory. */
kb_suite *kb_suite_add(kb_harness *h, const kb_suite_desc *desc);
int kb_suite_axis(kb_suite *s, const char *name, const int64_t *values,
                  size_t count);
int kb_case_add(kb_suite *s, const kb_case_desc *desc);
/* The case whose bytes/s is the bandwidth reference (bandwidth_share). */
void kb_harness_bandwidth_reference(kb_harness *h, const char *suite,
                                    const char *case_name);

/* Inside callbacks. */
int64_t kb_run_axis(const kb_run *run, const char *name, int64_t fallback);
void *kb_run_suite_state(const kb_run *run);
void *kb_run_user(const kb_run *run);
kb_mode kb_run_mode(const kb_run *run);
const char *kb_run_case_name(const kb_run *run);
/* One iteration is `items` units called item ("node"): times are per item. */
void kb_run_per_iteration(kb_run *run, double items, const char *item);
/* Traffic per iteration for items_per_second / bytes_per_second (0: none). */
void kb_run_throughput(kb_run *run, double items, double bytes);
/* A quantity the case counted per item (edges per node, say), reported
 * from inside batch: the run gets a row "<name>_per_<item>" (unit
 * "count") with the mean, least and greatest of every report, warm-up
 * included. It says what work a time was for, where that work depends on
 * the axis. Up to KB_MAX_COUNTS names per case (later ones are ignored);
 * name is copied (a name that is not a valid metric word of under 32
 * characters is ignored, with its report). */
void kb_run_count(kb_run *run, const char *name, double per_item);
/* At most this many iterations per batch (e.g. 1 for one-shot work). */
void kb_run_max_batch(kb_run *run, uint64_t iterations);
/* Batch mode: at least this many iterations per batch (the max still
 * caps it; cold mode stays at one), for host time measured over several
 * submissions even when one takes longer than the target batch time. */
void kb_run_min_batch(kb_run *run, uint64_t iterations);
/* Record a message; return the status to hand back from the callback. */
kb_status kb_run_fail(kb_run *run, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
kb_status kb_run_skip(kb_run *run, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A skip because the case does not apply at these axis values (a dtype it
 * has no kernel for): reported as such, and never a failure, not even on
 * the GPU lane (KDAG_REQUIRE_GPU=1), where other GPU skips are. */
kb_status kb_run_not_applicable(kb_run *run, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Monotonic clock (CLOCK_MONOTONIC) in ns. */
uint64_t kb_now_ns(void);

typedef struct kb_options {
  kb_stop_rule stop;
  double warmup_s;        /* default 0.05 */
  double target_batch_s;  /* batch mode: grow a batch to this; default 0.001 */
  uint64_t max_batch;     /* default 1 << 20 */
  unsigned modes;         /* KB_MODE_* bits; default KB_MODE_BATCH */
  unsigned rounds;        /* > 1: the cases of a suite that allows it (interleave) take
                             turns, this many rounds each, at every axis point; default 1,
                             at most KB_MAX_ROUNDS */
  const char *const *suites; size_t suite_count; /* fnmatch patterns; none: all */
  const char *const *cases; size_t case_count;   /* fnmatch patterns; none: all */
  const kb_axis *axes; size_t axis_count;        /* override suites' axes of that name */
  FILE *progress;         /* NULL: silent */
  /* The clock the harness uses for warm-up and max_time (tests fake it);
   * NULL: kb_now_ns. */
  uint64_t (*clock_ns)(void *clock_user);
  void *clock_user;
  size_t host_flush_bytes; /* cold mode without a flush hook; default 64 MiB */
  /* Called after each case's rows are in, with the report as it stands
   * (ratios computed): a run that is cut off keeps what it measured
   * (kdag-bench --json rewrites its file here). NULL: none. */
  void (*on_case)(kb_report *report, void *user);
  void *on_case_user;
} kb_options;

void kb_options_init(kb_options *o);

/* Runs every selected case. Returns the number of failed cases (0: all ran
 * or were skipped); -1 on an option error (message in why: an axis or a
 * filter that matches nothing). Results accumulate in kb_harness_report. */
int kb_harness_run(kb_harness *h, const kb_options *o, char *why, size_t why_cap);

/* Prints the suites, their axes and cases. */
void kb_harness_list(const kb_harness *h, FILE *out);

kb_report *kb_harness_report(kb_harness *h);
kb_machine *kb_harness_machine(kb_harness *h);

/* ---- outputs ------------------------------------------------------------ */

/* Markdown: a header line about the machine, one table of all rows, and the
 * skipped / failed suites and cases. */
void kb_write_markdown(const kb_report *r, FILE *out);
/* CSV with header suite,case,axes,mode,metric,median,min,max,noise,unit,
 * samples,batch,stop,baseline,ratios,paired_ratios; axes "N=10;M=2", ratios
 * "a=1.5;b=2", paired_ratios "a=median:q1:q3". */
int kb_write_csv(const kb_report *r, FILE *out);
/* JSON object {"tool","schema","machine","results","skipped"}. Returns 0 or
 * -1 (message in why). */
int kb_write_json(const kb_report *r, FILE *out, char *why, size_t why_cap);
int kb_write_json_file(const kb_report *r, const char *path, char *why, size_t why_cap);
/* Reads a file written by kb_write_json into an initialised report. */
int kb_read_json_file(const char *path, kb_report *out, char *why, size_t why_cap);

/* Value with a scaled unit, e.g. "1.52 us", "3.91 TB/s", "87.1 %". */
void kb_format_value(double v, const char *unit, char *buf, size_t cap);

/* ---- compare ------------------------------------------------------------ */

typedef enum kb_verdict {
  KB_WITHIN_NOISE = 0,
  KB_IMPROVED = 1,   /* beyond noise, in the good direction */
  KB_REGRESSED = 2,  /* beyond noise, in the bad direction */
  KB_UNDETERMINED = 3 /* not judged: a row of fewer than 3 samples or without a finite noise
                         (nothing to hold the change against), or a workload count (unit "count") */
} kb_verdict;

typedef struct kb_compare_summary {
  size_t compared, within_noise, improved, regressed, undetermined, only_old, only_new;
} kb_compare_summary;

/* change = new/old - 1; beyond noise when |change| > max(old noise, new
 * noise, min_change); KB_UNDETERMINED as described there. */
kb_verdict kb_compare_rows(const kb_result *old_row, const kb_result *new_row,
                           double min_change, double *change, double *threshold);
/* Matches rows by suite, case, axes, mode and metric; prints a markdown
 * table of every pair and a summary line to out (may be NULL). */
void kb_compare_reports(const kb_report *old_r, const kb_report *new_r,
                        double min_change, FILE *out, kb_compare_summary *sum);
/* Reads both files and compares. Returns 0, or -1 (message in why). */
int kb_compare_files(const char *old_path, const char *new_path, double min_change,
                     FILE *out, kb_compare_summary *sum, char *why, size_t why_cap);

/* ---- the command line --------------------------------------------------- */

/* The kdag-bench command line over a harness with registered suites:
 * --help, --list, --suite, --case, --axis, --mode, stopping-rule flags,
 * --json, --csv, --compare OLD NEW. Returns the process exit status. */
int kb_main(kb_harness *h, int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif /* KDAG_BENCH_HARNESS_H */
