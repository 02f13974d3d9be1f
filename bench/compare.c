/* SPDX-License-Identifier: Apache-2.0 */
/* --compare: per-case change between two JSON reports, against the noise
 * both runs measured. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/harness.h"

static double noise_or_zero(double x) { return isfinite(x) && x > 0 ? x : 0; }

/* A row whose change can be held against its noise: a timing or rate of a
 * few samples at least, with a finite noise. */
static int judged(const kb_result *r) {
  return strcmp(r->unit, "count") != 0 && r->samples >= 3 && isfinite(r->noise);
}

kb_verdict kb_compare_rows(const kb_result *o, const kb_result *n, double min_change,
                           double *change, double *threshold) {
  double c = o->median != 0 ? n->median / o->median - 1 : (n->median == 0 ? 0 : INFINITY);
  double t = noise_or_zero(o->noise);
  if (noise_or_zero(n->noise) > t) t = noise_or_zero(n->noise);
  if (min_change > t) t = min_change;
  if (change) *change = c;
  if (threshold) *threshold = t;
  if (!judged(o) || !judged(n)) return KB_UNDETERMINED;
  if (!(fabs(c) > t)) return KB_WITHIN_NOISE; /* NaN: no evidence of change */
  int up = c > 0;
  return up == (n->higher_is_better != 0) ? KB_IMPROVED : KB_REGRESSED;
}

static int same_row(const kb_result *a, const kb_result *b) {
  return !strcmp(a->suite, b->suite) && !strcmp(a->case_name, b->case_name) &&
         !strcmp(a->mode, b->mode) && !strcmp(a->metric, b->metric) && kb_result_same_axes(a, b);
}

static const kb_result *find(const kb_report *r, const kb_result *key) {
  for (size_t i = 0; i < r->count; ++i)
    if (same_row(&r->rows[i], key)) return &r->rows[i];
  return NULL;
}

static const char *verdict_text(kb_verdict v) {
  switch (v) {
    case KB_WITHIN_NOISE: return "within noise";
    case KB_IMPROVED: return "improved (beyond noise)";
    case KB_REGRESSED: return "REGRESSED (beyond noise)";
    case KB_UNDETERMINED: return "not judged (a count, or too few samples for a noise)";
  }
  return "";
}

void kb_compare_reports(const kb_report *old_r, const kb_report *new_r, double min_change,
                        FILE *out, kb_compare_summary *sum) {
  kb_compare_summary s;
  memset(&s, 0, sizeof s);
  if (out) {
    fprintf(out, "# kdag-bench compare\n\nold: %s, %s\nnew: %s, %s\n\n",
            old_r->machine.gpu_name[0] ? old_r->machine.gpu_name : "no GPU", old_r->machine.host_cpu,
            new_r->machine.gpu_name[0] ? new_r->machine.gpu_name : "no GPU", new_r->machine.host_cpu);
    fprintf(out, "| suite | case | axes | mode | metric | old | new | change | noise | verdict |\n");
    fprintf(out, "|---|---|---|---|---|---:|---:|---:|---:|---|\n");
  }
  for (size_t i = 0; i < old_r->count; ++i) {
    const kb_result *o = &old_r->rows[i];
    const kb_result *n = find(new_r, o);
    if (!n) {
      s.only_old++;
      continue;
    }
    double change, threshold;
    kb_verdict v = kb_compare_rows(o, n, min_change, &change, &threshold);
    s.compared++;
    if (v == KB_WITHIN_NOISE) s.within_noise++;
    else if (v == KB_IMPROVED) s.improved++;
    else if (v == KB_UNDETERMINED) s.undetermined++;
    else s.regressed++;
    if (out) {
      char axes[256], ov[32], nv[32];
      kb_result_axes_string(o, axes, sizeof axes);
      kb_format_value(o->median, o->unit, ov, sizeof ov);
      kb_format_value(n->median, n->unit, nv, sizeof nv);
      fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %+.2f%% | %.2f%% | %s |\n", o->suite,
              o->case_name, axes[0] ? axes : "-", o->mode, o->metric, ov, nv, change * 100,
              threshold * 100, verdict_text(v));
    }
  }
  for (size_t i = 0; i < new_r->count; ++i)
    if (!find(old_r, &new_r->rows[i])) s.only_new++;
  if (out)
    fprintf(out, "\n%zu compared: %zu regressed beyond noise, %zu improved beyond noise, "
                 "%zu within noise, %zu not judged; %zu only in old, %zu only in new\n",
            s.compared, s.regressed, s.improved, s.within_noise, s.undetermined, s.only_old, s.only_new);
  if (sum) *sum = s;
}

int kb_compare_files(const char *old_path, const char *new_path, double min_change, FILE *out,
                     kb_compare_summary *sum, char *why, size_t cap) {
  kb_report a, b;
  kb_report_init(&a);
  kb_report_init(&b);
  int rc = -1;
  if (kb_read_json_file(old_path, &a, why, cap) == 0 && kb_read_json_file(new_path, &b, why, cap) == 0) {
    kb_compare_reports(&a, &b, min_change, out, sum);
    rc = 0;
  }
  kb_report_free(&a);
  kb_report_free(&b);
  return rc;
}
