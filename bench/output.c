/* SPDX-License-Identifier: Apache-2.0 */
/* Outputs: markdown table, CSV, JSON (jansson), and reading JSON back. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness.h"

#define KB_JSON_SCHEMA 1

/* ---- value formatting ---------------------------------------------------- */

static void fmt3(double v, const char *suffix, char *buf, size_t cap) {
  double a = fabs(v);
  const char *f = a >= 100 ? "%.1f %s" : a >= 10 ? "%.2f %s" : "%.3f %s";
  snprintf(buf, cap, f, v, suffix);
}

void kb_format_value(double v, const char *unit, char *buf, size_t cap) {
  if (!isfinite(v)) {
    snprintf(buf, cap, "-");
    return;
  }
  double a = fabs(v);
  if (!strcmp(unit, "ns")) {
    if (a < 1e3) fmt3(v, "ns", buf, cap);
    else if (a < 1e6) fmt3(v / 1e3, "us", buf, cap);
    else if (a < 1e9) fmt3(v / 1e6, "ms", buf, cap);
    else fmt3(v / 1e9, "s", buf, cap);
  } else if (!strcmp(unit, "B/s") || !strcmp(unit, "items/s")) {
    static const char *const bytes[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s", "PB/s"};
    static const char *const items[] = {"/s", "k/s", "M/s", "G/s", "T/s", "P/s"};
    const char *const *names = unit[0] == 'B' ? bytes : items;
    int i = 0;
    while (a >= 1000 && i < 5) a /= 1000, v /= 1000, ++i;
    fmt3(v, names[i], buf, cap);
  } else if (!strcmp(unit, "fraction")) {
    fmt3(v * 100, "%", buf, cap);
  } else if (!strcmp(unit, "count")) {
    snprintf(buf, cap, "%.4g", v);
  } else {
    fmt3(v, unit, buf, cap);
  }
}

static void version_string(int v, char *buf, size_t cap) {
  if (v > 0) snprintf(buf, cap, "%d.%d", v / 1000, (v % 1000) / 10);
  else snprintf(buf, cap, "unknown");
}

/* ---- markdown ------------------------------------------------------------ */

static void md_cell(FILE *out, const char *s) {
  fputs("| ", out);
  for (; *s; ++s) {
    if (*s == '|') fputc('\\', out);
    fputc(*s, out);
  }
  fputc(' ', out);
}

/* The ratios of a row: "name 1.06x (by round 1.03x, 1.01-1.05x)" for people,
 * "name=1.06" for a CSV field; paired: the by-round ratios alone, as
 * "name=median:q1:q3" (CSV). */
static void ratios_string(const kb_result *row, char *buf, size_t cap, const char *sep,
                          int skip_self, int human, int paired) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < row->ratio_count && used < cap; ++i) {
    const kb_ratio *q = &row->ratios[i];
    if (skip_self && !strcmp(q->baseline, row->case_name)) continue;
    if (paired && !q->paired_rounds) continue;
    int k;
    if (paired)
      k = snprintf(buf + used, cap - used, "%s%s=%.9g:%.9g:%.9g", used ? sep : "", q->baseline, q->paired,
                   q->paired_q1, q->paired_q3);
    else if (human && q->paired_rounds)
      k = snprintf(buf + used, cap - used, "%s%s %.3gx (by round %.3gx, %.3g-%.3gx)", used ? sep : "",
                   q->baseline, q->value, q->paired, q->paired_q1, q->paired_q3);
    else
      k = snprintf(buf + used, cap - used, human ? "%s%s %.3gx" : "%s%s=%.9g", used ? sep : "", q->baseline,
                   q->value);
    if (k < 0) break;
    used += (size_t)k;
  }
}

static void md_machine(const kb_machine *m, FILE *out) {
  char drv[16], tk[16];
  version_string(m->driver_version, drv, sizeof drv);
  version_string(m->toolkit_version, tk, sizeof tk);
  if (m->has_gpu)
    fprintf(out, "GPU: %s (%d SMs, sm_%d%d, %d MHz, memory %d MHz), driver %s, toolkit %s, NVRTC %s\n\n",
            m->gpu_name, m->sm_count, m->cc_major, m->cc_minor, m->sm_clock_khz / 1000,
            m->memory_clock_khz / 1000, drv, tk, m->nvrtc_version[0] ? m->nvrtc_version : "unknown");
  else
    fprintf(out, "GPU: none, toolkit %s, NVRTC %s\n\n", tk,
            m->nvrtc_version[0] ? m->nvrtc_version : "unknown");
  fprintf(out, "Host: %s (%d threads), %s%s%s\n\n", m->host_cpu[0] ? m->host_cpu : "unknown",
          m->host_threads, m->os, m->notes[0] ? "; " : "", m->notes);
}

void kb_write_markdown(const kb_report *r, FILE *out) {
  fprintf(out, "# kdag-bench\n\n");
  md_machine(&r->machine, out);
  if (r->count) {
    fprintf(out, "| suite | case | axes | mode | metric | median | min | max | noise | samples | vs baselines |\n");
    fprintf(out, "|---|---|---|---|---|---:|---:|---:|---:|---:|---|\n");
    for (size_t i = 0; i < r->count; ++i) {
      const kb_result *row = &r->rows[i];
      char axes[256], med[32], mn[32], mx[32], noise[32], samples[48], ratios[2048];
      kb_result_axes_string(row, axes, sizeof axes);
      kb_format_value(row->median, row->unit, med, sizeof med);
      kb_format_value(row->min, row->unit, mn, sizeof mn);
      kb_format_value(row->max, row->unit, mx, sizeof mx);
      if (isfinite(row->noise)) snprintf(noise, sizeof noise, "%.2f%%", row->noise * 100);
      else snprintf(noise, sizeof noise, "-");
      snprintf(samples, sizeof samples, "%zu x %llu", row->samples, (unsigned long long)row->batch);
      ratios_string(row, ratios, sizeof ratios, ", ", 1, 1, 0);
      char name[KB_NAME_MAX + 16];
      snprintf(name, sizeof name, "%s%s", row->case_name, row->baseline ? " (baseline)" : "");
      md_cell(out, row->suite), md_cell(out, name), md_cell(out, axes[0] ? axes : "-");
      md_cell(out, row->mode), md_cell(out, row->metric), md_cell(out, med), md_cell(out, mn);
      md_cell(out, mx), md_cell(out, noise), md_cell(out, samples), md_cell(out, ratios);
      fputs("|\n", out);
    }
    fputc('\n', out);
  } else {
    fprintf(out, "No results.\n\n");
  }
  /* Whole GPU suites skipped, grouped by reason: one line per reason. */
  for (size_t i = 0; i < r->skip_count; ++i) {
    const kb_skip *k = &r->skips[i];
    if (!k->needs_gpu || k->failed || k->case_name[0]) continue;
    int seen = 0;
    for (size_t j = 0; j < i && !seen; ++j)
      seen = r->skips[j].needs_gpu && !r->skips[j].failed && !r->skips[j].case_name[0] &&
             !strcmp(r->skips[j].reason, k->reason);
    if (seen) continue;
    fprintf(out, "GPU suites skipped: %s\n", k->reason);
    fprintf(out, "(suites:");
    const char *sep = " ";
    for (size_t j = i; j < r->skip_count; ++j)
      if (r->skips[j].needs_gpu && !r->skips[j].failed && !r->skips[j].case_name[0] &&
          !strcmp(r->skips[j].reason, k->reason)) {
        fprintf(out, "%s%s", sep, r->skips[j].suite);
        sep = ", ";
      }
    fprintf(out, ")\n\n");
  }
  for (size_t i = 0; i < r->skip_count; ++i) {
    const kb_skip *k = &r->skips[i];
    if (k->needs_gpu && !k->failed && !k->case_name[0]) continue;
    fprintf(out, "- %s %s%s%s: %s\n", k->failed ? "FAILED" : k->not_applicable ? "not applicable:" : "skipped", k->suite,
            k->case_name[0] ? "/" : "", k->case_name, k->reason);
  }
}

/* ---- CSV ----------------------------------------------------------------- */

static void csv_field(FILE *out, const char *s, int last) {
  if (strpbrk(s, ",\"\n\r")) {
    fputc('"', out);
    for (; *s; ++s) {
      if (*s == '"') fputc('"', out);
      fputc(*s, out);
    }
    fputc('"', out);
  } else {
    fputs(s, out);
  }
  fputc(last ? '\n' : ',', out);
}

static void num(double v, char *buf, size_t cap) {
  if (isfinite(v)) snprintf(buf, cap, "%.9g", v);
  else buf[0] = '\0';
}

int kb_write_csv(const kb_report *r, FILE *out) {
  fputs("suite,case,axes,mode,metric,median,min,max,noise,unit,samples,batch,stop,baseline,ratios,paired_ratios\n",
        out);
  for (size_t i = 0; i < r->count; ++i) {
    const kb_result *row = &r->rows[i];
    char axes[256], med[32], mn[32], mx[32], noise[32], samples[32], batch[32], ratios[1024], paired[2048];
    kb_result_axes_string(row, axes, sizeof axes);
    num(row->median, med, sizeof med), num(row->min, mn, sizeof mn), num(row->max, mx, sizeof mx);
    num(row->noise, noise, sizeof noise);
    snprintf(samples, sizeof samples, "%zu", row->samples);
    snprintf(batch, sizeof batch, "%llu", (unsigned long long)row->batch);
    ratios_string(row, ratios, sizeof ratios, ";", 0, 0, 0);
    ratios_string(row, paired, sizeof paired, ";", 0, 0, 1);
    csv_field(out, row->suite, 0), csv_field(out, row->case_name, 0), csv_field(out, axes, 0);
    csv_field(out, row->mode, 0), csv_field(out, row->metric, 0), csv_field(out, med, 0);
    csv_field(out, mn, 0), csv_field(out, mx, 0), csv_field(out, noise, 0);
    csv_field(out, row->unit, 0), csv_field(out, samples, 0), csv_field(out, batch, 0);
    csv_field(out, row->stop, 0), csv_field(out, row->baseline ? "1" : "0", 0);
    csv_field(out, ratios, 0), csv_field(out, paired, 1);
  }
  return ferror(out) ? -1 : 0;
}

/* ---- JSON ---------------------------------------------------------------- */

static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }
static json_t *jint_or_null(long long v) { return v > 0 ? json_integer(v) : json_null(); }
static json_t *jstr_or_null(const char *s) { return s && *s ? json_string(s) : json_null(); }

static json_t *machine_json(const kb_machine *m) {
  json_t *o = json_object();
  char buf[32];
  json_object_set_new(o, "gpu", json_boolean(m->has_gpu));
  json_object_set_new(o, "gpu_name", m->has_gpu ? json_string(m->gpu_name) : json_null());
  json_object_set_new(o, "gpu_ordinal", m->has_gpu ? json_integer(m->gpu_ordinal) : json_null());
  json_object_set_new(o, "sm_count", m->has_gpu ? json_integer(m->sm_count) : json_null());
  snprintf(buf, sizeof buf, "%d.%d", m->cc_major, m->cc_minor);
  json_object_set_new(o, "compute_capability", m->has_gpu ? json_string(buf) : json_null());
  json_object_set_new(o, "sm_clock_mhz", m->sm_clock_khz > 0 ? json_real(m->sm_clock_khz / 1000.0) : json_null());
  json_object_set_new(o, "memory_clock_mhz",
                      m->memory_clock_khz > 0 ? json_real(m->memory_clock_khz / 1000.0) : json_null());
  json_object_set_new(o, "memory_bus_bits", jint_or_null(m->memory_bus_bits));
  json_object_set_new(o, "l2_bytes", jint_or_null(m->l2_bytes));
  json_object_set_new(o, "memory_bytes", jint_or_null(m->memory_bytes));
  version_string(m->driver_version, buf, sizeof buf);
  json_object_set_new(o, "driver_version", m->driver_version > 0 ? json_string(buf) : json_null());
  json_object_set_new(o, "driver_version_code", jint_or_null(m->driver_version));
  version_string(m->toolkit_version, buf, sizeof buf);
  json_object_set_new(o, "toolkit_version", m->toolkit_version > 0 ? json_string(buf) : json_null());
  json_object_set_new(o, "toolkit_version_code", jint_or_null(m->toolkit_version));
  json_object_set_new(o, "nvrtc_version", jstr_or_null(m->nvrtc_version));
  json_object_set_new(o, "host_cpu", jstr_or_null(m->host_cpu));
  json_object_set_new(o, "host_threads", jint_or_null(m->host_threads));
  json_object_set_new(o, "hostname", jstr_or_null(m->hostname));
  json_object_set_new(o, "os", jstr_or_null(m->os));
  json_object_set_new(o, "notes", jstr_or_null(m->notes));
  return o;
}

static json_t *row_json(const kb_result *row) {
  json_t *o = json_object(), *axes = json_object(), *ratios = json_object(), *paired = json_object();
  for (size_t i = 0; i < row->axis_count; ++i)
    json_object_set_new(axes, row->axis_names[i], json_integer((json_int_t)row->axis_values[i]));
  for (size_t i = 0; i < row->ratio_count; ++i) {
    const kb_ratio *q = &row->ratios[i];
    json_object_set_new(ratios, q->baseline, jnum(q->value));
    if (q->paired_rounds)
      json_object_set_new(paired, q->baseline,
                          json_pack("{s:o, s:o, s:o, s:I}", "median", jnum(q->paired), "q1", jnum(q->paired_q1),
                                    "q3", jnum(q->paired_q3), "rounds", (json_int_t)q->paired_rounds));
  }
  json_object_set_new(o, "suite", json_string(row->suite));
  json_object_set_new(o, "case", json_string(row->case_name));
  json_object_set_new(o, "axes", axes);
  json_object_set_new(o, "mode", json_string(row->mode));
  json_object_set_new(o, "metric", json_string(row->metric));
  json_object_set_new(o, "median", jnum(row->median));
  json_object_set_new(o, "min", jnum(row->min));
  json_object_set_new(o, "max", jnum(row->max));
  json_object_set_new(o, "noise", jnum(row->noise));
  json_object_set_new(o, "unit", json_string(row->unit));
  json_object_set_new(o, "samples", json_integer((json_int_t)row->samples));
  json_object_set_new(o, "batch", json_integer((json_int_t)row->batch));
  json_object_set_new(o, "stop", json_string(row->stop));
  json_object_set_new(o, "baseline", json_boolean(row->baseline));
  json_object_set_new(o, "higher_is_better", json_boolean(row->higher_is_better));
  json_object_set_new(o, "ratios", ratios);
  /* With turns: each ratio paired by round, and each round's median. */
  json_object_set_new(o, "paired_ratios", paired);
  if (row->round_count) {
    json_t *rm = json_array();
    for (unsigned k = 0; k < row->round_count; ++k) json_array_append_new(rm, jnum(row->round_median[k]));
    json_object_set_new(o, "round_medians", rm);
  }
  return o;
}

static json_t *report_json(const kb_report *r) {
  json_t *root = json_object(), *rows = json_array(), *skips = json_array();
  json_object_set_new(root, "tool", json_string("kdag-bench"));
  json_object_set_new(root, "schema", json_integer(KB_JSON_SCHEMA));
  json_object_set_new(root, "machine", machine_json(&r->machine));
  for (size_t i = 0; i < r->count; ++i) json_array_append_new(rows, row_json(&r->rows[i]));
  json_object_set_new(root, "results", rows);
  for (size_t i = 0; i < r->skip_count; ++i) {
    const kb_skip *k = &r->skips[i];
    json_t *o = json_object();
    json_object_set_new(o, "suite", json_string(k->suite));
    json_object_set_new(o, "case", jstr_or_null(k->case_name));
    json_object_set_new(o, "gpu", json_boolean(k->needs_gpu));
    json_object_set_new(o, "failed", json_boolean(k->failed));
    json_object_set_new(o, "not_applicable", json_boolean(k->not_applicable));
    json_object_set_new(o, "reason", json_string(k->reason));
    json_array_append_new(skips, o);
  }
  json_object_set_new(root, "skipped", skips);
  return root;
}

int kb_write_json(const kb_report *r, FILE *out, char *why, size_t cap) {
  json_t *root = report_json(r);
  int rc = json_dumpf(root, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
  json_decref(root);
  if (rc == 0) fputc('\n', out);
  if (rc != 0 || ferror(out)) {
    snprintf(why, cap, "writing JSON failed");
    return -1;
  }
  return 0;
}

int kb_write_json_file(const kb_report *r, const char *path, char *why, size_t cap) {
  FILE *f = fopen(path, "w");
  if (!f) {
    snprintf(why, cap, "cannot open %s for writing: %s", path, strerror(errno));
    return -1;
  }
  int rc = kb_write_json(r, f, why, cap);
  if (fclose(f) != 0 && rc == 0) {
    snprintf(why, cap, "writing %s failed: %s", path, strerror(errno));
    rc = -1;
  }
  return rc;
}

/* ---- reading JSON back --------------------------------------------------- */

static double get_num(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

static void get_str(const json_t *o, const char *key, char *buf, size_t cap) {
  const json_t *v = json_object_get(o, key);
  snprintf(buf, cap, "%s", json_is_string(v) ? json_string_value(v) : "");
}

static int read_row(const json_t *o, kb_result *row, char *why, size_t cap, size_t index) {
  memset(row, 0, sizeof *row);
  if (!json_is_object(o) || !json_is_string(json_object_get(o, "suite")) ||
      !json_is_string(json_object_get(o, "case")) || !json_is_string(json_object_get(o, "metric")) ||
      !json_is_object(json_object_get(o, "axes"))) {
    snprintf(why, cap, "results[%zu]: needs string suite, case, metric and an axes object", index);
    return -1;
  }
  get_str(o, "suite", row->suite, sizeof row->suite);
  get_str(o, "case", row->case_name, sizeof row->case_name);
  get_str(o, "metric", row->metric, sizeof row->metric);
  get_str(o, "mode", row->mode, sizeof row->mode);
  if (!row->mode[0]) snprintf(row->mode, sizeof row->mode, "batch");
  get_str(o, "unit", row->unit, sizeof row->unit);
  get_str(o, "stop", row->stop, sizeof row->stop);
  row->median = get_num(o, "median");
  row->min = get_num(o, "min");
  row->max = get_num(o, "max");
  row->noise = get_num(o, "noise");
  double samples = get_num(o, "samples"), batch = get_num(o, "batch");
  row->samples = samples > 0 ? (size_t)samples : 0;
  row->batch = batch > 0 ? (uint64_t)batch : 0;
  row->baseline = json_is_true(json_object_get(o, "baseline"));
  const json_t *hib = json_object_get(o, "higher_is_better");
  /* Older or foreign files: throughput units are higher-is-better. */
  row->higher_is_better = hib ? json_is_true(hib) : strstr(row->unit, "/s") != NULL;
  const char *key;
  json_t *v;
  json_object_foreach(json_object_get(o, "axes"), key, v) {
    if (row->axis_count == KB_MAX_AXES || !json_is_number(v)) {
      snprintf(why, cap, "results[%zu]: axes must be at most %d numbers", index, KB_MAX_AXES);
      return -1;
    }
    snprintf(row->axis_names[row->axis_count], KB_NAME_MAX, "%s", key);
    row->axis_values[row->axis_count++] = (int64_t)json_number_value(v);
  }
  json_t *ratios = json_object_get(o, "ratios");
  if (json_is_object(ratios)) {
    json_object_foreach(ratios, key, v) {
      if (row->ratio_count == KB_MAX_RATIOS) break;
      snprintf(row->ratios[row->ratio_count].baseline, KB_NAME_MAX, "%s", key);
      kb_ratio *q = &row->ratios[row->ratio_count++];
      q->value = json_is_number(v) ? json_number_value(v) : NAN;
      const json_t *p = json_object_get(json_object_get(o, "paired_ratios"), key);
      double rounds = get_num(p, "rounds");
      q->paired = get_num(p, "median"), q->paired_q1 = get_num(p, "q1"), q->paired_q3 = get_num(p, "q3");
      q->paired_rounds = rounds >= 2 && rounds <= KB_MAX_ROUNDS ? (unsigned)rounds : 0;
    }
  }
  const json_t *rm = json_object_get(o, "round_medians");
  if (json_is_array(rm) && json_array_size(rm) <= KB_MAX_ROUNDS) {
    size_t k;
    json_array_foreach(rm, k, v) row->round_median[k] = json_is_number(v) ? json_number_value(v) : NAN;
    row->round_count = (unsigned)json_array_size(rm);
  }
  return 0;
}

int kb_read_json_file(const char *path, kb_report *out, char *why, size_t cap) {
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  if (!root) {
    snprintf(why, cap, "%s: not valid JSON (line %d: %s)", path, err.line, err.text);
    return -1;
  }
  int rc = -1;
  json_t *rows = json_object_get(root, "results");
  if (!json_is_object(root) || !json_is_array(rows)) {
    snprintf(why, cap, "%s: expected an object with a \"results\" array", path);
    goto done;
  }
  json_t *m = json_object_get(root, "machine");
  if (json_is_object(m)) {
    out->machine.has_gpu = json_is_true(json_object_get(m, "gpu"));
    get_str(m, "gpu_name", out->machine.gpu_name, sizeof out->machine.gpu_name);
    get_str(m, "host_cpu", out->machine.host_cpu, sizeof out->machine.host_cpu);
    get_str(m, "nvrtc_version", out->machine.nvrtc_version, sizeof out->machine.nvrtc_version);
    double sm = get_num(m, "sm_count"), drv = get_num(m, "driver_version_code"),
           tk = get_num(m, "toolkit_version_code");
    out->machine.sm_count = sm > 0 ? (int)sm : 0;
    out->machine.driver_version = drv > 0 ? (int)drv : 0;
    out->machine.toolkit_version = tk > 0 ? (int)tk : 0;
  }
  size_t i;
  json_t *o;
  json_array_foreach(rows, i, o) {
    kb_result row;
    char msg[KB_MESSAGE_MAX];
    if (read_row(o, &row, msg, sizeof msg, i)) {
      snprintf(why, cap, "%s: %s", path, msg);
      goto done;
    }
    if (!kb_report_add(out, &row)) {
      snprintf(why, cap, "%s: out of memory", path);
      goto done;
    }
  }
  rc = 0;
done:
  json_decref(root);
  return rc;
}
