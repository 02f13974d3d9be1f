/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: a trace of a session's run (kd_session_options.trace_path,
 * KDAG_TRACE), written as Chrome trace-event JSON, which the Perfetto UI
 * and chrome://tracing open, at kd_session_destroy.
 *
 * Host spans: each submission (named after its graph) and each host wait
 * kdag makes at the caller's request, on the calling thread. GPU spans:
 * each submission's work on the session's stream (EAGER or GRAPH), and in
 * EAGER each node: timing events recorded before and after, read when the
 * submission retires (a batch held by its completion), so tracing adds no
 * host wait. GPU times come from cuEventElapsedTime against anchor events
 * whose host time is known: the first recorded at session creation on the
 * idle stream (its host time is when the record returns: GPU times lag by
 * the launch latency, never lead), each later one timed from the one before, a new one every few
 * seconds so the float milliseconds of cuEventElapsedTime keep microsecond
 * precision. Under the session lock, but for the file written at destroy. */
#ifndef KDAG_SESSION_TRACE_H
#define KDAG_SESSION_TRACE_H

#include <stdint.h>

#include "cuda/device.h"

typedef struct kd_session kd_session;
typedef struct kd_trace kd_trace;

/* Starts a trace of s into path ("{session}" and "{pid}" replaced). */
kd_status kd_trace_open(kd_session *s, const char *path, const char *op);
/* Writes the file and frees the trace: after every completion retired. A
 * failure to write is logged (WARN), not returned: destroy cannot fail. */
void kd_trace_close(kd_session *s);

/* The host's monotonic clock, in nanoseconds. */
uint64_t kd_trace_now(void);
/* A host span [t0, now) named name (copied) on the calling thread. */
void kd_trace_host(kd_session *s, const char *name, const char *cat, uint64_t t0);

/* A host wait kdag makes at the caller's request (op names it), as an
 * NVTX range (base/nvtx.h) and, in a traced session, a span: begin returns
 * what end takes. */
uint64_t kd_wait_begin(kd_session *s, const char *op);
void kd_wait_end(kd_session *s, const char *op, uint64_t begin);

/* GPU spans of one submission: begin and end events for each, recorded by
 * the executor around the work, read when the submission retires. */
typedef struct kd_trace_batch kd_trace_batch;
/* A batch of n spans (events taken from the trace's pool) into *out.
 * Errors: KD_ERR_OUT_OF_MEMORY, and the event creation's; *out NULL. An
 * EAGER submission then runs untraced; a traced CUDA graph's launch, whose
 * trace nodes need the events, fails. */
kd_status kd_trace_batch_new(kd_session *s, uint32_t n, const char *op, kd_trace_batch **out);
/* Span i: its name (copied) and category, and the two events to record
 * before and after its work. */
void kd_trace_batch_span(kd_trace_batch *b, uint32_t i, const char *name, const char *cat, CUevent *begin,
                         CUevent *end);
/* Spans whose events were recorded (the first `used`); the rest are left
 * out. */
void kd_trace_batch_used(kd_trace_batch *b, uint32_t used);
/* The batch as a held resource: its destroy reads the events and adds the
 * spans to the trace. */
struct kd_resource *kd_trace_batch_resource(kd_trace_batch *b);
/* Destroys a batch never handed to a completion. */
void kd_trace_batch_drop(kd_trace_batch *b);

#endif
