/* SPDX-License-Identifier: Apache-2.0 */
/* The report: rows, skips, ratios against baselines, bandwidth shares. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness.h"

void kb_report_init(kb_report *r) { memset(r, 0, sizeof *r); }

void kb_report_free(kb_report *r) {
  free(r->rows);
  free(r->skips);
  r->rows = NULL;
  r->skips = NULL;
  r->count = r->cap = r->skip_count = r->skip_cap = 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap * 2 : 16;
  while (n < need) n *= 2;
  void *q = realloc(*p, n * elem);
  if (!q) return -1;
  *p = q;
  *cap = n;
  return 0;
}

kb_result *kb_report_add(kb_report *r, const kb_result *row) {
  if (grow((void **)&r->rows, &r->cap, r->count + 1, sizeof *r->rows)) return NULL;
  r->rows[r->count] = *row;
  return &r->rows[r->count++];
}

int kb_report_add_skip(kb_report *r, const kb_skip *skip) {
  if (grow((void **)&r->skips, &r->skip_cap, r->skip_count + 1, sizeof *r->skips)) return -1;
  r->skips[r->skip_count++] = *skip;
  return 0;
}

void kb_result_axes_string(const kb_result *row, char *buf, size_t cap) {
  size_t used = 0;
  if (cap) buf[0] = '\0';
  for (size_t i = 0; i < row->axis_count && used < cap; ++i) {
    int k = snprintf(buf + used, cap - used, "%s%s=%lld", i ? ";" : "",
                     row->axis_names[i], (long long)row->axis_values[i]);
    if (k < 0) break;
    used += (size_t)k;
  }
}

int kb_result_same_axes(const kb_result *a, const kb_result *b) {
  if (a->axis_count != b->axis_count) return 0;
  for (size_t i = 0; i < a->axis_count; ++i) {
    /* Axis order may differ between producers: match by name. */
    size_t j = 0;
    while (j < b->axis_count && strcmp(a->axis_names[i], b->axis_names[j])) ++j;
    if (j == b->axis_count || a->axis_values[i] != b->axis_values[j]) return 0;
  }
  return 1;
}

static int same_point(const kb_result *a, const kb_result *b) {
  return !strcmp(a->suite, b->suite) && !strcmp(a->mode, b->mode) &&
         !strcmp(a->metric, b->metric) && kb_result_same_axes(a, b);
}

/* The ratio of row to b paired by round: both took the same turns. */
static void paired_ratio(const kb_result *row, const kb_result *b, kb_ratio *q) {
  q->paired = q->paired_q1 = q->paired_q3 = NAN;
  q->paired_rounds = 0;
  if (row->round_count < 2 || row->round_count != b->round_count) return;
  double x[KB_MAX_ROUNDS], quart[3];
  unsigned n = 0;
  for (unsigned k = 0; k < row->round_count; ++k)
    if (b->round_median[k] != 0 && isfinite(row->round_median[k] / b->round_median[k]))
      x[n++] = row->round_median[k] / b->round_median[k];
  if (n < 2 || kb_quartiles_inplace(x, n, quart)) return;
  q->paired_q1 = quart[0], q->paired = quart[1], q->paired_q3 = quart[2];
  q->paired_rounds = n;
}

static void compute_ratios(kb_report *r) {
  for (size_t i = 0; i < r->count; ++i) {
    kb_result *row = &r->rows[i];
    row->ratio_count = 0;
    for (size_t j = 0; j < r->count && row->ratio_count < KB_MAX_RATIOS; ++j) {
      const kb_result *b = &r->rows[j];
      if (!b->baseline || !same_point(row, b)) continue;
      kb_ratio *q = &row->ratios[row->ratio_count++];
      snprintf(q->baseline, sizeof q->baseline, "%s", b->case_name);
      q->value = b->median != 0 ? row->median / b->median : NAN;
      paired_ratio(row, b, q);
    }
  }
}

/* Highest bytes_per_second median of the reference case in mode (NULL: any). */
static double reference_bandwidth(const kb_report *r, const char *suite,
                                  const char *case_name, const char *mode) {
  double best = 0;
  for (size_t i = 0; i < r->count; ++i) {
    const kb_result *row = &r->rows[i];
    if (strcmp(row->suite, suite) || strcmp(row->case_name, case_name) ||
        strcmp(row->metric, "bytes_per_second") || (mode && strcmp(row->mode, mode)))
      continue;
    if (row->median > best) best = row->median;
  }
  return best;
}

void kb_report_finalize(kb_report *r, const char *ref_suite, const char *ref_case) {
  /* Drop share rows of an earlier finalize so it can be called again. */
  size_t kept = 0;
  for (size_t i = 0; i < r->count; ++i)
    if (strcmp(r->rows[i].metric, "bandwidth_share")) r->rows[kept++] = r->rows[i];
  r->count = kept;
  if (ref_suite && ref_case) {
    size_t n = r->count;
    for (size_t i = 0; i < n; ++i) {
      if (strcmp(r->rows[i].metric, "bytes_per_second")) continue;
      double ref = reference_bandwidth(r, ref_suite, ref_case, r->rows[i].mode);
      if (ref <= 0) ref = reference_bandwidth(r, ref_suite, ref_case, NULL);
      if (ref <= 0) continue;
      kb_result share = r->rows[i]; /* copy: kb_report_add may move rows */
      snprintf(share.metric, sizeof share.metric, "bandwidth_share");
      snprintf(share.unit, sizeof share.unit, "fraction");
      share.median /= ref;
      share.min /= ref;
      share.max /= ref;
      for (unsigned k = 0; k < share.round_count; ++k) share.round_median[k] /= ref;
      if (!kb_report_add(r, &share)) break;
    }
  }
  compute_ratios(r);
}
