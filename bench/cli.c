/* SPDX-License-Identifier: Apache-2.0 */
/* The kdag-bench command line (kb_main), reusable by any program that
 * registers its own suites on a harness. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness.h"

#define KB_MAX_FILTERS 64
#define KB_MAX_CLI_AXES 16

static const char usage[] =
    "usage: kdag-bench [options]\n"
    "       kdag-bench --compare OLD.json NEW.json [--min-change F] [--fail-on-regression]\n"
    "\n"
    "Runs the registered benchmark suites. Results go to stdout as a markdown\n"
    "table; progress goes to stderr. Suites that need a GPU are skipped, with\n"
    "the driver's reason, when there is none.\n"
    "\n"
    "selection:\n"
    "  --list                 list suites, their axes and cases, and exit\n"
    "  --suite S[,S...]       run only these suites (shell patterns; repeatable)\n"
    "  --case C[,C...]        run only these cases (shell patterns; repeatable)\n"
    "  --axis N=V1,V2,...     sweep axis N over these values in every selected\n"
    "                         suite that has it (repeatable)\n"
    "  --mode batch|cold|both batch: many iterations per sample, caches warm\n"
    "                         (default); cold: one iteration per sample with the\n"
    "                         L2 (or host caches) flushed before each\n"
    "measurement (the stopping rule):\n"
    "  --min-samples N        at least N samples before converging (default 10)\n"
    "  --max-samples N        stop at N samples (default 2000)\n"
    "  --min-time S           at least S timed seconds before converging (default 0.1)\n"
    "  --max-time S           stop sampling a case after S wall seconds (default 2)\n"
    "  --max-noise F          converged when the relative noise <= F (default 0.02)\n"
    "  --warmup S             warm-up seconds per case (default 0.05)\n"
    "  --batch-time S         batch mode grows a batch to S seconds (default 0.001)\n"
    "  --rounds R             the cases of a suite at one axis point take turns:\n"
    "                         R rounds, each with 1/R of the samples (at least 3)\n"
    "                         and of the time limits, each turn after an untimed\n"
    "                         batch, each round starting one case further on, so\n"
    "                         drift hits every case alike (suites that allow it:\n"
    "                         launch, fanout, rebind, oneshot, pipeline; default\n"
    "                         1: one case after another)\n"
    "your own kernel (suite \"user\": cu_launch, hand_graph, kdag_eager, kdag_graph):\n"
    "  --kernel FILE:NAME     CUDA C (.cu, compiled with NVRTC for the GPU), PTX,\n"
    "                         CUBIN or fatbin, and the kernel's name\n"
    "  --grid X[,Y,Z]         its grid and block (both required)\n"
    "  --block X[,Y,Z]\n"
    "  --shared BYTES         dynamic shared memory (default 0)\n"
    "  --arg SPEC             each parameter in order (repeatable): i32:V, u32:V,\n"
    "                         i64:V, u64:V, f32:V, f64:V, or a zero-filled device\n"
    "                         buffer buf:BYTES or buf:TYPE:COUNT (TYPE i8 u8 i32 u32\n"
    "                         i64 u64 f16 bf16 f32 f64) that every launch reads and\n"
    "                         writes; each submission is N launches (--axis N=...)\n"
    "output:\n"
    "  --json FILE            write the results as JSON (after each case, and at the end)\n"
    "  --csv FILE             write the results as CSV\n"
    "  --quiet                no progress on stderr\n"
    "compare:\n"
    "  --compare OLD NEW      per-case change from OLD to NEW and whether it exceeds\n"
    "                         the noise either run measured\n"
    "  --min-change F         also require |change| > F (default 0)\n"
    "  --fail-on-regression   exit 1 when a row regressed beyond noise\n"
    "  -h, --help             this text\n"
    "\n"
    "exit status: 0 ran (skips included), 1 a case failed (or a regression with\n"
    "--fail-on-regression), 2 usage or I/O error.\n";

typedef struct cli {
  char *filters[2][KB_MAX_FILTERS]; /* suites, cases */
  size_t filter_count[2];
  kb_axis axes[KB_MAX_CLI_AXES];
  size_t axis_count;
  const char *json, *csv, *compare_old, *compare_new;
  double min_change;
  int list, quiet, fail_on_regression;
} cli;

static int add_filters(cli *c, int which, const char *arg) {
  const char *p = arg;
  while (*p) {
    size_t n = strcspn(p, ",");
    if (n) {
      if (c->filter_count[which] == KB_MAX_FILTERS) {
        fprintf(stderr, "kdag-bench: at most %d --%s patterns\n", KB_MAX_FILTERS,
                which ? "case" : "suite");
        return -1;
      }
      char *s = strndup(p, n);
      if (!s) return -1;
      c->filters[which][c->filter_count[which]++] = s;
    }
    p += n;
    if (*p == ',') ++p;
  }
  return 0;
}

static int parse_double(const char *flag, const char *arg, double lo, double *out) {
  char *end;
  errno = 0;
  double v = strtod(arg, &end);
  if (errno || end == arg || *end || !(v >= lo) || !isfinite(v)) {
    fprintf(stderr, "kdag-bench: %s wants a number >= %g, not \"%s\"\n", flag, lo, arg);
    return -1;
  }
  *out = v;
  return 0;
}

static int parse_count(const char *flag, const char *arg, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(arg, &end, 10);
  if (errno || end == arg || *end || arg[0] == '-' || v == 0) {
    fprintf(stderr, "kdag-bench: %s wants a positive integer, not \"%s\"\n", flag, arg);
    return -1;
  }
  *out = (size_t)v;
  return 0;
}

enum {
  OPT_LIST = 256, OPT_SUITE, OPT_CASE, OPT_AXIS, OPT_MODE, OPT_JSON, OPT_CSV, OPT_COMPARE,
  OPT_MIN_CHANGE, OPT_FAIL, OPT_MIN_SAMPLES, OPT_MAX_SAMPLES, OPT_MIN_TIME, OPT_MAX_TIME,
  OPT_MAX_NOISE, OPT_WARMUP, OPT_BATCH_TIME, OPT_ROUNDS, OPT_QUIET
};

static int parse(int argc, char **argv, cli *c, kb_options *o) {
  static const struct option longs[] = {
      {"help", no_argument, NULL, 'h'},
      {"list", no_argument, NULL, OPT_LIST},
      {"suite", required_argument, NULL, OPT_SUITE},
      {"case", required_argument, NULL, OPT_CASE},
      {"axis", required_argument, NULL, OPT_AXIS},
      {"mode", required_argument, NULL, OPT_MODE},
      {"json", required_argument, NULL, OPT_JSON},
      {"csv", required_argument, NULL, OPT_CSV},
      {"compare", required_argument, NULL, OPT_COMPARE},
      {"min-change", required_argument, NULL, OPT_MIN_CHANGE},
      {"fail-on-regression", no_argument, NULL, OPT_FAIL},
      {"min-samples", required_argument, NULL, OPT_MIN_SAMPLES},
      {"max-samples", required_argument, NULL, OPT_MAX_SAMPLES},
      {"min-time", required_argument, NULL, OPT_MIN_TIME},
      {"max-time", required_argument, NULL, OPT_MAX_TIME},
      {"max-noise", required_argument, NULL, OPT_MAX_NOISE},
      {"warmup", required_argument, NULL, OPT_WARMUP},
      {"batch-time", required_argument, NULL, OPT_BATCH_TIME},
      {"rounds", required_argument, NULL, OPT_ROUNDS},
      {"quiet", no_argument, NULL, OPT_QUIET},
      {NULL, 0, NULL, 0}};
  char why[KB_MESSAGE_MAX];
  optind = 1;
  opterr = 1;
  int ch;
  while ((ch = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
    switch (ch) {
      case 'h': fputs(usage, stdout); return 1;
      case OPT_LIST: c->list = 1; break;
      case OPT_SUITE: if (add_filters(c, 0, optarg)) return -1; break;
      case OPT_CASE: if (add_filters(c, 1, optarg)) return -1; break;
      case OPT_AXIS: {
        kb_axis a;
        if (kb_axis_parse(optarg, &a, why, sizeof why)) {
          fprintf(stderr, "kdag-bench: --%s\n", why);
          return -1;
        }
        size_t i = 0; /* a later --axis of the same name replaces the earlier */
        while (i < c->axis_count && strcmp(c->axes[i].name, a.name)) ++i;
        if (i == KB_MAX_CLI_AXES) {
          fprintf(stderr, "kdag-bench: at most %d --axis flags\n", KB_MAX_CLI_AXES);
          return -1;
        }
        c->axes[i] = a;
        if (i == c->axis_count) c->axis_count++;
        break;
      }
      case OPT_MODE:
        if (!strcmp(optarg, "batch")) o->modes = KB_MODE_BATCH;
        else if (!strcmp(optarg, "cold")) o->modes = KB_MODE_COLD;
        else if (!strcmp(optarg, "both")) o->modes = KB_MODE_BATCH | KB_MODE_COLD;
        else {
          fprintf(stderr, "kdag-bench: --mode is batch, cold or both, not \"%s\"\n", optarg);
          return -1;
        }
        break;
      case OPT_JSON: c->json = optarg; break;
      case OPT_CSV: c->csv = optarg; break;
      case OPT_COMPARE:
        if (optind >= argc || argv[optind][0] == '-') {
          fprintf(stderr, "kdag-bench: --compare wants two files: OLD.json NEW.json\n");
          return -1;
        }
        c->compare_old = optarg;
        c->compare_new = argv[optind++];
        break;
      case OPT_MIN_CHANGE: if (parse_double("--min-change", optarg, 0, &c->min_change)) return -1; break;
      case OPT_FAIL: c->fail_on_regression = 1; break;
      case OPT_MIN_SAMPLES: if (parse_count("--min-samples", optarg, &o->stop.min_samples)) return -1; break;
      case OPT_MAX_SAMPLES: if (parse_count("--max-samples", optarg, &o->stop.max_samples)) return -1; break;
      case OPT_MIN_TIME: if (parse_double("--min-time", optarg, 0, &o->stop.min_time_s)) return -1; break;
      case OPT_MAX_TIME: if (parse_double("--max-time", optarg, 0, &o->stop.max_time_s)) return -1; break;
      case OPT_MAX_NOISE: if (parse_double("--max-noise", optarg, 0, &o->stop.max_noise)) return -1; break;
      case OPT_WARMUP: if (parse_double("--warmup", optarg, 0, &o->warmup_s)) return -1; break;
      case OPT_BATCH_TIME: if (parse_double("--batch-time", optarg, 0, &o->target_batch_s)) return -1; break;
      case OPT_ROUNDS: {
        size_t r;
        if (parse_count("--rounds", optarg, &r)) return -1;
        if (r < 1 || r > KB_MAX_ROUNDS) {
          fprintf(stderr, "kdag-bench: --rounds %s: give 1 to %d\n", optarg, KB_MAX_ROUNDS);
          return -1;
        }
        o->rounds = (unsigned)r;
        break;
      }
      case OPT_QUIET: c->quiet = 1; break;
      default: fprintf(stderr, "run kdag-bench --help for the options\n"); return -1;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "kdag-bench: unexpected argument \"%s\" (see --help)\n", argv[optind]);
    return -1;
  }
  if (o->stop.max_samples < o->stop.min_samples) {
    fprintf(stderr, "kdag-bench: --max-samples is below --min-samples\n");
    return -1;
  }
  if (o->stop.max_samples < o->rounds) { /* every turn takes a sample at least */
    fprintf(stderr, "kdag-bench: --max-samples %zu is below --rounds %u: each round takes a sample at least\n",
            (size_t)o->stop.max_samples, o->rounds);
    return -1;
  }
  return 0;
}

static int run_compare(const cli *c) {
  kb_compare_summary sum;
  char why[KB_MESSAGE_MAX];
  if (kb_compare_files(c->compare_old, c->compare_new, c->min_change, stdout, &sum, why, sizeof why)) {
    fprintf(stderr, "kdag-bench: --compare: %s\n", why);
    return 2;
  }
  return c->fail_on_regression && sum.regressed ? 1 : 0;
}

/* --json after each case: what a run cut off at a time limit measured stays. */
static void write_json_so_far(kb_report *r, void *user) {
  char why[KB_MESSAGE_MAX];
  (void)kb_write_json_file(r, (const char *)user, why, sizeof why); /* the final write reports a failure */
}

static int run_suites(kb_harness *h, const cli *c, kb_options *o) {
  char why[KB_MESSAGE_MAX];
  if (c->json) {
    o->on_case = write_json_so_far;
    o->on_case_user = (void *)c->json; /* read only: write_json_so_far takes it as the path */
  }
  o->suites = (const char *const *)c->filters[0];
  o->suite_count = c->filter_count[0];
  o->cases = (const char *const *)c->filters[1];
  o->case_count = c->filter_count[1];
  o->axes = c->axes;
  o->axis_count = c->axis_count;
  o->progress = c->quiet ? NULL : stderr;
  int failures = kb_harness_run(h, o, why, sizeof why);
  if (failures < 0) {
    fprintf(stderr, "kdag-bench: %s\n", why);
    return 2;
  }
  const kb_report *r = kb_harness_report(h);
  kb_write_markdown(r, stdout);
  fflush(stdout);
  int status = failures ? 1 : 0;
  if (c->json) {
    if (kb_write_json_file(r, c->json, why, sizeof why)) {
      fprintf(stderr, "kdag-bench: --json: %s\n", why);
      status = 2;
    } else if (!c->quiet) {
      fprintf(stderr, "kdag-bench: wrote %s\n", c->json);
    }
  }
  if (c->csv) {
    FILE *f = fopen(c->csv, "w");
    int bad = !f || kb_write_csv(r, f) != 0;
    if (f && fclose(f) != 0) bad = 1;
    if (bad) {
      fprintf(stderr, "kdag-bench: --csv: cannot write %s: %s\n", c->csv, strerror(errno));
      status = 2;
    } else if (!c->quiet) {
      fprintf(stderr, "kdag-bench: wrote %s\n", c->csv);
    }
  }
  if (failures && !c->quiet) fprintf(stderr, "kdag-bench: %d case(s) failed\n", failures);
  return status;
}

int kb_main(kb_harness *h, int argc, char **argv) {
  cli c;
  memset(&c, 0, sizeof c);
  kb_options o;
  kb_options_init(&o);
  int rc = parse(argc, argv, &c, &o);
  int status;
  if (rc > 0) status = 0;           /* --help */
  else if (rc < 0) status = 2;
  else if (c.compare_old) status = run_compare(&c);
  else if (c.list) kb_harness_list(h, stdout), status = 0;
  else status = run_suites(h, &c, &o);
  for (int w = 0; w < 2; ++w)
    for (size_t i = 0; i < c.filter_count[w]; ++i) free(c.filters[w][i]);
  return status;
}
