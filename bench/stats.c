/* SPDX-License-Identifier: Apache-2.0 */
/* Statistics of a sample series and the stopping rule. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double kb_median_inplace(double *x, size_t n) {
  if (n == 0) return NAN;
  qsort(x, n, sizeof *x, cmp_double);
  return (n % 2) ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Quantile p of sorted x by linear interpolation between order statistics
 * (position (n-1)p, Hyndman-Fan type 7). */
static double quantile_sorted(const double *x, size_t n, double p) {
  double h = (double)(n - 1) * p;
  size_t lo = (size_t)h;
  if (lo + 1 >= n) return x[n - 1];
  return x[lo] + (h - (double)lo) * (x[lo + 1] - x[lo]);
}

int kb_quartiles_inplace(double *x, size_t n, double q[3]) {
  if (n == 0) return -1;
  qsort(x, n, sizeof *x, cmp_double);
  q[0] = quantile_sorted(x, n, 0.25);
  q[1] = quantile_sorted(x, n, 0.5);
  q[2] = quantile_sorted(x, n, 0.75);
  return 0;
}

int kb_stats_compute(const double *x, size_t n, kb_stats *out) {
  if (!x || !out || n == 0) return -1;
  double *tmp = malloc(n * sizeof *tmp);
  if (!tmp) return -1;
  memcpy(tmp, x, n * sizeof *tmp);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += x[i];
  out->n = n;
  out->mean = sum / (double)n;
  out->median = kb_median_inplace(tmp, n); /* sorts tmp */
  out->min = tmp[0];
  out->max = tmp[n - 1];
  if (n < 2) {
    out->noise = NAN;
  } else {
    double iqr = quantile_sorted(tmp, n, 0.75) - quantile_sorted(tmp, n, 0.25);
    if (iqr == 0)
      out->noise = 0;
    else if (out->median == 0)
      out->noise = INFINITY;
    else
      out->noise = iqr / (1.349 * fabs(out->median));
  }
  free(tmp);
  return 0;
}

const char *kb_stop_name(kb_stop_reason reason) {
  switch (reason) {
    case KB_CONTINUE: return "";
    case KB_STOP_CONVERGED: return "converged";
    case KB_STOP_MAX_TIME: return "max_time";
    case KB_STOP_MAX_SAMPLES: return "max_samples";
  }
  return "";
}

kb_stop_reason kb_stop_check(const kb_stop_rule *rule, size_t samples,
                             double measured_s, double elapsed_s, double noise) {
  if (samples == 0) return KB_CONTINUE; /* every row needs one sample */
  if (elapsed_s >= rule->max_time_s) return KB_STOP_MAX_TIME;
  if (rule->max_samples && samples >= rule->max_samples) return KB_STOP_MAX_SAMPLES;
  /* !(noise > max) would let NaN through; spell it so NaN never converges. */
  if (samples >= rule->min_samples && measured_s >= rule->min_time_s &&
      noise <= rule->max_noise)
    return KB_STOP_CONVERGED;
  return KB_CONTINUE;
}
