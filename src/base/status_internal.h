/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: setting the per-thread error message (CUDA results become
 * statuses in cuda/cu_status.h). */
#ifndef KDAG_BASE_STATUS_INTERNAL_H
#define KDAG_BASE_STATUS_INTERNAL_H

#include <stddef.h>

#include "kdag/status.h"

/* Sets this thread's message to the formatted text and returns code. */
kd_status kd_fail(kd_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Adds "context: " to the current message (errors gain context as they pass
 * up) and returns code unchanged. Messages start with the call that failed
 * ("kd_graph_op_add: ..."), and keep it first: the context goes after the
 * call's name when it names none, and a context that starts with the same
 * call replaces it rather than naming it twice. */
kd_status kd_fail_context(kd_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Around a user callback that returns a kd_status: mark = kd_fail_mark()
 * before it, then kd_fail_unexplained(st, mark, who) after it gives a
 * callback that failed without setting a message (it made no failing kdag
 * call) one naming who and the code, instead of leaving whatever older,
 * unrelated message this thread had. Returns st. */
unsigned long kd_fail_mark(void);
kd_status kd_fail_unexplained(kd_status st, unsigned long mark, const char *who);

/* Around work whose failure the calling kdag call survives (a reap that
 * finds a fault for the next call to report, a cache entry rejected and
 * rebuilt): kd_fail_keep_begin(&k) sets the thread's message aside, and
 * kd_fail_keep_end(&k) puts it back, dropping whatever was written in
 * between, so a call that succeeds leaves the message as status.h
 * promises. Allocates nothing unless a message is written in between. */
typedef struct kd_fail_keep {
  char *msg;
  size_t cap;
  unsigned long generation;
} kd_fail_keep;
void kd_fail_keep_begin(kd_fail_keep *k);
void kd_fail_keep_end(kd_fail_keep *k);

#endif
