/* SPDX-License-Identifier: Apache-2.0 */
/* A trace of a session's run (session/trace.h). */
#include "session/trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/nvtx.h"
#include "base/status_internal.h"
#include "kdag/version.h"
#include "session/session_impl.h"

/* Spans kept at most (about 64 MB); later ones are counted as dropped. */
#define KD_TRACE_MAX_SPANS (1u << 20)
/* A new anchor after this long: cuEventElapsedTime's float milliseconds
 * keep a precision of 2^-24 of the interval, 0.24 us over 4 s. */
#define KD_TRACE_ANCHOR_NS 4000000000ull
/* The GPU's row among the process's threads. */
#define KD_TRACE_GPU_TID 0

typedef struct span {
  char *name;
  const char *cat;   /* static */
  uint64_t ts_ns;    /* from the trace's start */
  uint64_t dur_ns;
  long tid;
} span;

typedef struct anchor {
  CUevent event;
  int64_t host_ns;   /* -1 until resolved from the one before */
} anchor;

struct kd_trace {
  char *path;
  uint64_t start_ns; /* host time of the trace's start: ts 0 */
  span *spans;
  size_t count, cap;
  uint64_t dropped;
  anchor *anchors;
  size_t anchor_count, anchor_cap;
  uint64_t anchor_made_ns; /* host time the newest anchor was recorded */
  CUevent *pool;     /* idle timing events */
  size_t pool_count, pool_cap;
  char gpu_name[320];
};

struct kd_trace_batch {
  kd_resource res;   /* first: the held resource */
  kd_session *s;
  uint32_t n, used;
  size_t anchor;
  CUevent *events;   /* 2n: begin, end */
  char **names;
  const char **cats;
};

uint64_t kd_trace_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static long thread_id(void) { return (long)syscall(SYS_gettid); }

/* Keeps a span named by name, which the trace takes over (NULL, a name
 * that could not be copied, counts as dropped). */
static void add_span(kd_trace *t, char *name, const char *cat, uint64_t ts, uint64_t dur, long tid) {
  if (name && t->count == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 1024;
    span *grown = t->count < KD_TRACE_MAX_SPANS ? realloc(t->spans, cap * sizeof *grown) : NULL;
    if (grown) {
      t->spans = grown;
      t->cap = cap;
    }
  }
  if (!name || t->count == t->cap) {
    free(name);
    t->dropped++;
    return;
  }
  t->spans[t->count++] = (span){name, cat, ts, dur, tid};
}

void kd_trace_host(kd_session *s, const char *name, const char *cat, uint64_t t0) {
  kd_trace *t = s->trace;
  if (!t) return;
  uint64_t t1 = kd_trace_now();
  add_span(t, strdup(name), cat, t0 > t->start_ns ? t0 - t->start_ns : 0, t1 - t0, thread_id());
}

uint64_t kd_wait_begin(kd_session *s, const char *op) {
  kd_nvtx_push(NULL, op, KD_NVTX_WAIT);
  return s->trace ? kd_trace_now() : 0;
}

void kd_wait_end(kd_session *s, const char *op, uint64_t begin) {
  kd_nvtx_pop();
  if (s->trace) kd_trace_host(s, op, "wait", begin);
}

/* ---- timing events and anchors ------------------------------------------ */

static kd_status event_take(kd_session *s, const char *op, CUevent *out) {
  kd_trace *t = s->trace;
  if (t->pool_count) {
    *out = t->pool[--t->pool_count];
    return KD_OK;
  }
  return kd_device_timing_event_create(&s->dev, op, out);
}

static void event_give(kd_session *s, CUevent e) {
  kd_trace *t = s->trace;
  if (t->pool_count == t->pool_cap) {
    size_t cap = t->pool_cap ? 2 * t->pool_cap : 64;
    CUevent *grown = realloc(t->pool, cap * sizeof *grown);
    if (!grown) {
      kd_device_event_destroy(&s->dev, e);
      return;
    }
    t->pool = grown;
    t->pool_cap = cap;
  }
  t->pool[t->pool_count++] = e;
}

/* Records a new anchor on the stream: 0, or -1 (the trace goes on with
 * the one before). first: the stream is idle, so the anchor's host time is
 * when its record returns (the GPU passes it a launch latency later: GPU
 * times lag by that much, never lead); otherwise it is timed from the
 * anchor before. */
static int anchor_add(kd_session *s, const char *op, int first) {
  kd_trace *t = s->trace;
  if (t->anchor_count == t->anchor_cap) {
    size_t cap = t->anchor_cap ? 2 * t->anchor_cap : 16;
    anchor *grown = realloc(t->anchors, cap * sizeof *grown);
    if (!grown) return -1;
    t->anchors = grown;
    t->anchor_cap = cap;
  }
  CUevent e;
  kd_fail_keep keep; /* a trace's trouble is no failure of the call */
  kd_fail_keep_begin(&keep);
  int ok = event_take(s, op, &e) == KD_OK;
  if (ok && kd_event_record(&s->dev, op, e) != KD_OK) {
    event_give(s, e);
    ok = 0;
  }
  kd_fail_keep_end(&keep);
  if (!ok) return -1;
  t->anchor_made_ns = kd_trace_now();
  t->anchors[t->anchor_count++] = (anchor){e, first ? (int64_t)t->anchor_made_ns : -1};
  return 0;
}

/* Host time of anchor i (resolving those before it in turn), or -1 while
 * it cannot be known (not complete, or after a fault). */
static int64_t anchor_time(kd_session *s, size_t i) {
  kd_trace *t = s->trace;
  size_t first = i;
  while (t->anchors[first].host_ns < 0) --first; /* anchor 0 is always known */
  for (size_t k = first + 1; k <= i; ++k) {
    float ms;
    if (kd_event_elapsed_ms(&s->dev, t->anchors[k - 1].event, t->anchors[k].event, &ms) != CUDA_SUCCESS) return -1;
    t->anchors[k].host_ns = t->anchors[k - 1].host_ns + (int64_t)((double)ms * 1e6);
  }
  return t->anchors[i].host_ns;
}

/* ---- batches ------------------------------------------------------------ */

static void batch_free(kd_trace_batch *b) {
  for (uint32_t i = 0; i < b->n; ++i) free(b->names[i]);
  free(b->names);
  free(b->cats);
  free(b->events);
  free(b);
}

/* At retire: the spans into the trace, the events back to its pool. */
static void batch_retire(kd_resource *r) {
  kd_trace_batch *b = (kd_trace_batch *)r;
  kd_session *s = b->s;
  kd_trace *t = s->trace;
  int64_t base = b->used ? anchor_time(s, b->anchor) : -1;
  CUevent a = t->anchors[b->anchor].event;
  for (uint32_t i = 0; i < b->used; ++i) {
    float begin, end;
    if (base < 0 || kd_event_elapsed_ms(&s->dev, a, b->events[2 * i], &begin) != CUDA_SUCCESS ||
        kd_event_elapsed_ms(&s->dev, a, b->events[2 * i + 1], &end) != CUDA_SUCCESS) {
      t->dropped++; /* the work never completed: a fault */
      continue;
    }
    int64_t ts = base + (int64_t)((double)begin * 1e6) - (int64_t)t->start_ns;
    add_span(t, b->names[i], b->cats[i], ts > 0 ? (uint64_t)ts : 0,
             end > begin ? (uint64_t)((double)(end - begin) * 1e6) : 0, KD_TRACE_GPU_TID);
    b->names[i] = NULL; /* the trace's now: the batch copied it already */
  }
  for (uint32_t i = 0; i < 2 * b->n; ++i) event_give(s, b->events[i]);
  batch_free(b);
}

kd_status kd_trace_batch_new(kd_session *s, uint32_t n, const char *op, kd_trace_batch **out) {
  kd_trace *t = s->trace;
  *out = NULL;
  if (kd_trace_now() - t->anchor_made_ns > KD_TRACE_ANCHOR_NS) (void)anchor_add(s, op, 0);
  kd_trace_batch *b = calloc(1, sizeof *b);
  if (b) {
    b->res.destroy = batch_retire;
    b->s = s;
    b->anchor = t->anchor_count - 1;
    b->names = calloc(n ? n : 1, sizeof *b->names);
    b->cats = calloc(n ? n : 1, sizeof *b->cats);
    b->events = calloc(2 * (size_t)(n ? n : 1), sizeof *b->events);
  }
  if (!b || !b->names || !b->cats || !b->events) {
    if (b) batch_free(b);
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory to trace the submission", op);
  }
  for (uint32_t i = 0; i < 2 * n; ++i) {
    kd_status st = event_take(s, op, &b->events[i]);
    if (st) {
      for (uint32_t k = 0; k < i; ++k) event_give(s, b->events[k]);
      batch_free(b);
      return kd_fail_context(st, "%s: an event to trace the submission", op);
    }
  }
  b->n = n;
  *out = b;
  return KD_OK;
}

void kd_trace_batch_span(kd_trace_batch *b, uint32_t i, const char *name, const char *cat, CUevent *begin,
                         CUevent *end) {
  if (!b->names[i]) b->names[i] = strdup(name); /* NULL without memory: the span is named "?" */
  b->cats[i] = cat;
  *begin = b->events[2 * i];
  *end = b->events[2 * i + 1];
}

void kd_trace_batch_used(kd_trace_batch *b, uint32_t used) {
  b->used = used;
  for (uint32_t i = 0; i < used; ++i)
    if (!b->names[i]) b->names[i] = strdup("?");
}

kd_resource *kd_trace_batch_resource(kd_trace_batch *b) { return &b->res; }

void kd_trace_batch_drop(kd_trace_batch *b) {
  kd_session *s = b->s;
  /* Events recorded for work still queued may be recorded again: the
   * next user's record orders after this one on the one stream. */
  for (uint32_t i = 0; i < 2 * b->n; ++i) event_give(s, b->events[i]);
  s->trace->dropped += b->used;
  batch_free(b);
}

/* ---- open and close ----------------------------------------------------- */

static char *expand_path(const char *path, unsigned session) {
  char out[4096];
  size_t n = 0;
  for (const char *p = path; *p && n + 1 < sizeof out; ++p) {
    int w = 0;
    if (strncmp(p, "{session}", 9) == 0) {
      w = snprintf(out + n, sizeof out - n, "%u", session);
      p += 8;
    } else if (strncmp(p, "{pid}", 5) == 0) {
      w = snprintf(out + n, sizeof out - n, "%ld", (long)getpid());
      p += 4;
    } else {
      out[n] = *p;
      w = 1;
    }
    if (w < 0 || (size_t)w >= sizeof out - n) break;
    n += (size_t)w;
  }
  out[n] = 0;
  return strdup(out);
}

kd_status kd_trace_open(kd_session *s, const char *path, const char *op) {
  kd_trace *t = calloc(1, sizeof *t);
  if (!t || !(t->path = expand_path(path, s->ticket_id))) {
    free(t);
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the trace", op);
  }
  /* Written at destroy: a path that cannot be written fails now. */
  FILE *f = fopen(t->path, "w");
  if (!f) {
    kd_status st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: cannot write the trace to %s: %s", op, t->path,
                           strerror(errno));
    free(t->path);
    free(t);
    return st;
  }
  fclose(f);
  t->start_ns = kd_trace_now();
  s->trace = t;
  if (s->has_device) {
    snprintf(t->gpu_name, sizeof t->gpu_name, "GPU %d: %s, kdag session #%u stream", s->dev.info.ordinal,
             s->dev.info.name, s->ticket_id);
    /* Anchor 0, on the idle stream: it runs as it is recorded. */
    if (anchor_add(s, op, 1) != 0) {
      kd_trace_close(s);
      return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no event for the trace's anchor", op);
    }
  }
  return KD_OK;
}

static void json_string(FILE *f, const char *text) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)text; *p; ++p) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

static int write_file(const kd_trace *t, const char *process) {
  FILE *f = fopen(t->path, "w");
  if (!f) return -1;
  long pid = (long)getpid();
  fprintf(f, "{\"displayTimeUnit\": \"ns\", \"otherData\": {\"kdag\": \"%s\", \"dropped_spans\": %llu},\n"
             " \"traceEvents\": [\n", kd_version_string(), (unsigned long long)t->dropped);
  fprintf(f, "  {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %ld, \"args\": {\"name\": ", pid);
  json_string(f, process);
  fprintf(f, "}}");
  if (*t->gpu_name) {
    fprintf(f, ",\n  {\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %ld, \"tid\": %d, \"args\": {\"name\": ", pid,
            KD_TRACE_GPU_TID);
    json_string(f, t->gpu_name);
    fprintf(f, "}}");
  }
  for (size_t i = 0; i < t->count; ++i) {
    const span *sp = &t->spans[i];
    fprintf(f, ",\n  {\"ph\": \"X\", \"name\": ");
    json_string(f, sp->name);
    fprintf(f, ", \"cat\": \"%s\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": %ld, \"tid\": %ld}", sp->cat,
            (double)sp->ts_ns / 1e3, (double)sp->dur_ns / 1e3, pid, sp->tid);
  }
  fprintf(f, "\n]}\n");
  int bad = ferror(f);
  return fclose(f) == 0 && !bad ? 0 : -1;
}

void kd_trace_close(kd_session *s) {
  kd_trace *t = s->trace;
  if (!t) return;
  char process[64];
  snprintf(process, sizeof process, "kdag session #%u", s->ticket_id);
  if (write_file(t, process) != 0)
    kd_log(&s->log, KD_LOG_WARN, "kd_session_destroy: could not write the trace to %s: %s", t->path, strerror(errno));
  for (size_t i = 0; i < t->count; ++i) free(t->spans[i].name);
  free(t->spans);
  if (s->has_device) {
    for (size_t i = 0; i < t->anchor_count; ++i) kd_device_event_destroy(&s->dev, t->anchors[i].event);
    for (size_t i = 0; i < t->pool_count; ++i) kd_device_event_destroy(&s->dev, t->pool[i]);
  }
  free(t->anchors);
  free(t->pool);
  free(t->path);
  free(t);
  s->trace = NULL;
}
