/* SPDX-License-Identifier: Apache-2.0 */
/* Status names, the per-thread message buffer, CUresult conversion. */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"

/* The message grows to fit compiler logs; one buffer per thread, like errno. */
static _Thread_local char *tls_msg;
static _Thread_local size_t tls_cap;
static _Thread_local unsigned long tls_generation; /* messages set on this thread */
/* Frees a thread's buffer when the thread exits: the HOST pool's workers and
 * any caller's threads come and go, and a TLS pointer alone would leak. */
static pthread_key_t msg_key;
static pthread_once_t msg_once = PTHREAD_ONCE_INIT;
static int msg_key_ok;

/* The thread's TLS is still there while key destructors run, and another
 * destructor may yet make a failing kdag call: forget the buffer too (a
 * later message allocates and registers a new one). */
static void msg_free(void *p) {
  free(p);
  tls_msg = NULL;
  tls_cap = 0;
}

static void msg_key_make(void) { msg_key_ok = pthread_key_create(&msg_key, msg_free) == 0; }

const char *kd_status_name(kd_status status) {
  switch (status) {
#define KD_NAME(c) case c: return #c;
    KD_NAME(KD_OK)
    KD_NAME(KD_ERR_INVALID_ARGUMENT)
    KD_NAME(KD_ERR_NO_DEVICE)
    KD_NAME(KD_ERR_DRIVER_MISSING)
    KD_NAME(KD_ERR_LIBRARY_MISSING)
    KD_NAME(KD_ERR_COMPILE_FAILED)
    KD_NAME(KD_ERR_LINK_FAILED)
    KD_NAME(KD_ERR_BORROW_CONFLICT)
    KD_NAME(KD_ERR_NOT_RESIDENT)
    KD_NAME(KD_ERR_NOT_COMPACT)
    KD_NAME(KD_ERR_WRONG_SESSION)
    KD_NAME(KD_ERR_WRONG_BACKEND)
    KD_NAME(KD_ERR_RELEASED)
    KD_NAME(KD_ERR_SCOPE_ENDED)
    KD_NAME(KD_ERR_LAUNCH_CONFIG)
    KD_NAME(KD_ERR_ARGUMENT_MISMATCH)
    KD_NAME(KD_ERR_NO_BINARY_FOR_GPU)
    KD_NAME(KD_ERR_UNSUPPORTED_PTX)
    KD_NAME(KD_ERR_NOT_FOUND)
    KD_NAME(KD_ERR_DEVICE_FAULT)
    KD_NAME(KD_ERR_OUT_OF_MEMORY)
    KD_NAME(KD_ERR_UNINITIALIZED)
    KD_NAME(KD_ERR_DRIVER)
    KD_NAME(KD_ERR_BUSY)
    KD_NAME(KD_ERR_RESOURCE_EXHAUSTED)
    KD_NAME(KD_ERR_OUT_OF_BOUNDS)
    KD_NAME(KD_ERR_ALIASING)
    KD_NAME(KD_ERR_CYCLE)
    KD_NAME(KD_ERR_NO_HOST_IMPL)
    KD_NAME(KD_ERR_LTO_VERSION)
    KD_NAME(KD_ERR_VERSION_MISMATCH)
    KD_NAME(KD_ERR_WRONG_DEVICE)
    KD_NAME(KD_ERR_MISALIGNED)
    KD_NAME(KD_ERR_COMM_FAILED)
#undef KD_NAME
  }
  return "KD_ERR_UNKNOWN";
}

const char *kd_last_error(void) { return tls_msg ? tls_msg : ""; }

static void set_message(const char *prefix, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int body = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (body < 0) body = 0;
  size_t plen = prefix ? strlen(prefix) : 0;
  size_t need = plen + (size_t)body + 1;
  if (need > tls_cap) {
    char *grown = realloc(tls_msg, need);
    if (!grown) return; /* keep the old message rather than lose both */
    tls_msg = grown;
    tls_cap = need;
    pthread_once(&msg_once, msg_key_make);
    if (msg_key_ok) pthread_setspecific(msg_key, grown);
  }
  tls_generation++;
  /* prefix may point into tls_msg itself: move it first. */
  if (plen) memmove(tls_msg, prefix, plen);
  vsnprintf(tls_msg + plen, (size_t)body + 1, fmt, ap);
}

unsigned long kd_fail_mark(void) { return tls_generation; }

void kd_fail_keep_begin(kd_fail_keep *k) {
  *k = (kd_fail_keep){tls_msg, tls_cap, tls_generation};
  tls_msg = NULL; /* a message written meanwhile gets a buffer of its own */
  tls_cap = 0;
}

void kd_fail_keep_end(kd_fail_keep *k) {
  if (tls_msg) { /* written meanwhile: its buffer goes, and the thread-exit free is the kept one's again */
    free(tls_msg);
    if (msg_key_ok) pthread_setspecific(msg_key, k->msg);
  }
  tls_msg = k->msg;
  tls_cap = k->cap;
  tls_generation = k->generation;
}

kd_status kd_fail_unexplained(kd_status st, unsigned long mark, const char *who) {
  if (st && tls_generation == mark)
    kd_fail(st, "%s returned %s without a message (it made no failing kdag call)", who, kd_status_name(st));
  return st;
}

kd_status kd_fail(kd_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_message(NULL, fmt, ap);
  va_end(ap);
  return code;
}

/* Length of the kdag call a text starts with ("kd_graph_op_add"), 0 if none.
 * In a message the name is followed by ": "; a context may also be the
 * name alone or go on with " (" or "(". */
static size_t call_name(const char *text, int context) {
  if (strncmp(text, "kd_", 3) != 0) return 0;
  size_t n = 3;
  while (isalnum((unsigned char)text[n]) || text[n] == '_') ++n;
  if (text[n] == ':' && text[n + 1] == ' ') return n;
  return context && (!text[n] || text[n] == '(' || (text[n] == ' ' && text[n + 1] == '(')) ? n : 0;
}

kd_status kd_fail_context(kd_status code, const char *fmt, ...) {
  char *old = tls_msg ? strdup(tls_msg) : strdup("");
  va_list ap;
  va_start(ap, fmt);
  char *ctx = NULL; /* as long as it is: a JIT log can be kilobytes */
  if (vasprintf(&ctx, fmt, ap) < 0) ctx = NULL;
  va_end(ap);
  if (old) {
    /* The message keeps the call it names first: "kd_graph_op_add: " +
     * context + the rest, the call named once. A context that names
     * another call (or none, when the message names none) goes first. */
    const char *c = ctx ? ctx : "(no memory for the context)";
    size_t op = call_name(old, 0), cop = call_name(c, 1);
    if (op && !cop) kd_fail(code, "%.*s: %s: %s", (int)op, old, c, old + op + 2);
    else if (op && op == cop && strncmp(old, c, op) == 0) kd_fail(code, "%s: %s", c, old + op + 2);
    else kd_fail(code, "%s: %s", c, old);
  }
  free(ctx);
  free(old);
  return code;
}
