/* SPDX-License-Identifier: Apache-2.0 */
/* Sessions: backend choice, the lock every entry point takes, counters,
 * teardown. */
#include <ck_pr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/options.h"
#include "base/status_internal.h"
#include "base/serial.h"
#include "session/env.h"
#include "session/trace.h"
#include "session/session_impl.h"

void kd_session_options_init(kd_session_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->backend = KD_BACKEND_AUTO;
  o->device_ordinal = 0;
  o->pool_release_threshold = UINT64_MAX;
  o->completion_ring_capacity = 1024;
  o->flags = 0;
  o->exec_mode = KD_EXEC_AUTO;
  o->graph_after = 2;
  o->unload_cap = 64;
  o->idle_staging_cap = (uint64_t)1 << 30;
  o->flags_set = 0;
  o->log_level = KD_LOG_DEFAULT;
  o->log = NULL;
  o->log_user = NULL;
  o->trace_path = NULL;
}

static void *ht_malloc(size_t n) { return malloc(n); }
static void ht_free(void *p, size_t n, bool defer) {
  (void)n;
  (void)defer;
  free(p);
}
static void *ht_realloc(void *p, size_t old, size_t n, bool defer) {
  (void)old;
  (void)defer;
  return realloc(p, n);
}
static struct ck_malloc g_ht_allocator = {.malloc = ht_malloc, .realloc = ht_realloc, .free = ht_free};

static kd_status validate_options(const kd_session_options *o) {
  static const char *op = "kd_session_create";
  if (o->backend != KD_BACKEND_AUTO && o->backend != KD_BACKEND_CUDA && o->backend != KD_BACKEND_HOST)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->backend %d is not a kd_backend", op,
                   (int)o->backend);
  if (o->device_ordinal < 0)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->device_ordinal %d is negative", op,
                   o->device_ordinal);
  uint32_t c = o->completion_ring_capacity;
  if (c == 0 || (c & (c - 1)) || c > (1u << 20))
    return kd_fail(KD_ERR_INVALID_ARGUMENT,
                   "%s: options->completion_ring_capacity %u must be a power of two in [1, 2^20]",
                   op, c);
  const uint32_t known = KD_SESSION_POISON_ALLOCATIONS | KD_SESSION_VERBOSE | KD_SESSION_HOST_JITTER | KD_SESSION_DEBUG_NODES |
                         KD_SESSION_NO_PDL;
  if (o->flags & ~known)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->flags 0x%x has unknown bits", op, o->flags);
  if (o->flags_set & ~known)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->flags_set 0x%x has unknown bits", op, o->flags_set);
  if (o->log_level < KD_LOG_DEFAULT || o->log_level > KD_LOG_DEBUG)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->log_level %d is not a kd_log_level", op,
                   (int)o->log_level);
  if (o->exec_mode != KD_EXEC_AUTO && o->exec_mode != KD_EXEC_EAGER && o->exec_mode != KD_EXEC_GRAPH)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->exec_mode %d is not a kd_exec_mode", op,
                   (int)o->exec_mode);
  return KD_OK;
}

/* The user's log callback, marked as a callback that must not call kdag. */
static void log_callback(void *user, kd_log_level level, const char *message) {
  kd_session *s = user;
  const char *was = kd_callback_enter("a log callback");
  s->opts.log(s->opts.log_user, level, message);
  kd_callback_leave(was);
}

kd_status kd_session_open(const kd_session_options *options, kd_session **out) {
  static const char *op = "kd_session_create";
  kd_session_options o;
  kd_session_options_init(&o);
  if (options) {
    kd_status st = kd_options_check(op, "options->", "kd_session_options", options->struct_size, sizeof o);
    if (st) return st;
    o = *options;
  }
  kd_status st = validate_options(&o);
  if (st) return st;
  char env_bad[256];
  int trace_in_code = o.trace_path != NULL;
  kd_session_env_apply(&o, env_bad, sizeof env_bad);
  uint32_t serial;
  st = kd_serial_take(&serial, op); /* tells this session's handles from every other live session's */
  if (st) return st;
  kd_session *s = calloc(1, sizeof *s);
  if (!s) {
    kd_serial_give(serial);
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the session", op);
  }
  s->opts = o;
  /* VERBOSE asks for the reasons, which are INFO lines. */
  kd_log_level level = (o.flags & KD_SESSION_VERBOSE) && o.log_level < KD_LOG_INFO ? KD_LOG_INFO : o.log_level;
  s->log = (kd_logger){o.log ? log_callback : NULL, s, level};
  if (env_bad[0]) kd_log(&s->log, KD_LOG_WARN, "kd_session_create: %s", env_bad);
  pthread_mutex_init(&s->lock, NULL); /* not recursive: see kd_session_lock */
  kd_handle_table_init(&s->handles, serial);
  static uint32_t sessions_made; /* process-wide; 0 is no session's */
  do s->ticket_id = ck_pr_faa_32(&sessions_made, 1) + 1;
  while (!s->ticket_id);
  if (o.backend == KD_BACKEND_HOST) {
    s->backend = KD_BACKEND_HOST;
    snprintf(s->reason, sizeof s->reason, "HOST requested");
  } else {
    st = kd_device_open(&o, &s->log, &s->dev);
    if (st == KD_OK) {
      s->has_device = 1;
      s->backend = KD_BACKEND_CUDA;
      char name[48];
      snprintf(name, sizeof name, "kdag session #%u", s->ticket_id);
      kd_device_name_stream(&s->dev, name);
      snprintf(s->reason, sizeof s->reason, "%s: %s (sm_%d)",
               o.backend == KD_BACKEND_AUTO ? "AUTO chose CUDA" : "CUDA requested",
               s->dev.info.name, s->dev.sm);
    } else if (o.backend == KD_BACKEND_AUTO &&
               (st == KD_ERR_DRIVER_MISSING || st == KD_ERR_NO_DEVICE)) {
      s->backend = KD_BACKEND_HOST;
      snprintf(s->reason, sizeof s->reason, "AUTO chose HOST: %s", kd_last_error());
      kd_log(&s->log, KD_LOG_INFO, "%s", s->reason);
    } else {
      kd_handle_table_fini(&s->handles);
      pthread_mutex_destroy(&s->lock);
      free(s);
      kd_serial_give(serial);
      return st;
    }
  }
  st = kd_completion_ring_init(s);
  if (st) {
    kd_session_destroy(s);
    return st;
  }
  if (!ck_ht_init(&s->module_cache, CK_HT_MODE_BYTESTRING, NULL, &g_ht_allocator, 16,
                  (uint64_t)s->handles.serial * 0x9E3779B97F4A7C15ull)) {
    kd_session_destroy(s);
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the module cache", op);
  }
  s->module_cache_ready = 1;
  if (s->has_device) { /* a failure is the first built-in node's to report */
    kd_fail_keep keep;
    kd_fail_keep_begin(&keep);
    kd_builtins_load(s, op);
    kd_fail_keep_end(&keep);
  }
  if (o.trace_path && *o.trace_path) {
    st = kd_trace_open(s, o.trace_path, op);
    if (st && trace_in_code) { /* asked for in code: the caller must hear of it */
      kd_session_destroy(s);
      return st;
    }
    if (st) kd_log(&s->log, KD_LOG_WARN, "KDAG_TRACE ignored: %s", kd_last_error());
  }
  s->opts.trace_path = NULL; /* the caller's string is not kept */
  *out = s;
  return KD_OK;
}

void kd_session_release_idle(kd_session *s) {
  if (!s->has_device) return;
  kd_modules_unload_deferred(s);
  if (s->dev.staging_idle_bytes) {
    kd_session_device(s);
    kd_staging_trim(&s->dev);
  }
}

void kd_session_waited(kd_session *s) {
  if (s->unloads_waiting > s->opts.unload_cap || (s->has_device && s->dev.staging_idle_bytes > s->opts.idle_staging_cap))
    kd_session_release_idle(s);
}

kd_status kd_session_trim(kd_session *s) {
  static const char *op = "kd_session_trim";
  kd_status st = kd_session_enter_release(s, op); /* after a fault too: what waits is released all the same */
  if (st) return st;
  /* What finished work held goes first, so its modules unload too. After
   * a fault the work will never be seen to finish (kd_session_destroy
   * lets it go), and the unloads fail harmlessly in the poisoned context. */
  st = s->fault ? kd_fail(s->fault, "%s: the session is unusable after %s: %s", op, kd_session_fault_what(s),
                          s->fault_msg)
                : kd_completion_reap(s, op);
  s->unload_now = 1;
  uint64_t t0 = kd_wait_begin(s, op);
  kd_session_release_idle(s);
  kd_wait_end(s, op, t0);
  s->unload_now = 0;
  kd_session_leave(s);
  return st;
}

static void cache_clear(kd_session *s) {
  if (!s->module_cache_ready) return;
  ck_ht_iterator_t it = CK_HT_ITERATOR_INITIALIZER;
  ck_ht_entry_t *e;
  while (ck_ht_next(&s->module_cache, &it, &e)) {
    kd_module_obj *m = ck_ht_entry_value(e);
    free(ck_ht_entry_key(e));
    kd_module_unref(s, m);
  }
  ck_ht_destroy(&s->module_cache);
  s->module_cache_ready = 0;
}

void kd_session_destroy(kd_session *s) {
  if (!s || kd_callback_check("kd_session_destroy")) return; /* from a callback: refused, nothing destroyed */
  if (kd_raw_open_here(&s->raw)) {
    /* Called from the session's own raw callback, which holds the lock:
     * the scope still uses the session, so the destroy happens when
     * kd_with_raw returns. */
    s->destroy_requested = 1;
    return;
  }
  pthread_mutex_lock(&s->lock);
  if (s->has_device) s->ctx_current = !kd_device_make_current(&s->dev, "kd_session_destroy");
  s->unload_now = 1; /* a documented wait: modules go as their last reference does */
  if (s->ring) kd_completion_drain(s);
  /* Sink copies of destroyed graphs left after the drain belong to a
   * submission that issued no completion (its record failed, and the
   * stream was waited for instead): done, like everything else now. */
  kd_orphans_release(s, UINT64_MAX);
  if (s->ops) s->ops->destroy(s);
  s->ops = NULL;
  if (s->builtins) kd_module_unref(s, s->builtins);
  s->builtins = NULL;
  if (s->loops) kd_module_unref(s, s->loops);
  s->loops = NULL;
  cache_clear(s);
  kd_module_destroy_all(s);
  kd_modules_unload_deferred(s);
  kd_dl_exports_orphan(s); /* their references go with every other below */
  kd_tensor_destroy_all(s);
  kd_completion_ring_fini(s);
  kd_trace_close(s); /* every traced submission has retired: its spans are in */
  if (s->has_device) kd_device_close(&s->dev);
  uint32_t serial = s->handles.serial;
  kd_handle_table_fini(&s->handles);
  free(s->raw.held.heap);
  free(s->orphans);
  free(s->deferred); /* empty: the drain above retired everything */
  kd_held_spares_free(s);
  kd_tensor_obj *done = s->releases; /* every external tensor's, now */
  pthread_mutex_unlock(&s->lock);
  pthread_mutex_destroy(&s->lock);
  free(s);
  kd_serial_give(serial); /* no handle of this session is valid any more */
  kd_tensor_releases_run(done);
}

/* Initial-exec: the check runs on every call, and a dynamic TLS lookup
 * would cost a call into the loader each time. */
static _Thread_local const char *tls_callback __attribute__((tls_model("initial-exec")));

const char *kd_callback_enter(const char *what) {
  const char *was = tls_callback;
  tls_callback = what;
  return was;
}

void kd_callback_leave(const char *was) { tls_callback = was; }

const char kd_release_callback_name[] = "an external tensor's release callback";

int kd_callback_lock_free(void) { return !tls_callback || tls_callback == kd_release_callback_name; }

kd_status kd_callback_check(const char *op) {
  if (__builtin_expect(tls_callback == NULL, 1)) return KD_OK;
  return kd_fail(KD_ERR_BUSY, "%s: called from inside %s, which must not call kdag (it runs inside a kdag call or "
                 "on a worker a kdag call may be waiting for)", op, tls_callback);
}

/* refuse_fault 0: the release calls, which stay possible after a device
 * fault and then succeed without a word (kd_last_error keeps the message of
 * the last call that failed). */
static int async_take(kd_session *s);

static kd_status enter(kd_session *s, const char *op, int refuse_fault, int device) {
  kd_status st = kd_callback_check(op);
  if (st) return st;
  if (!s) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument session is NULL", op);
  kd_session_lock(s);
  s->ctx_current = 0;
  if (!s->fault && s->has_device && kd_device_fault_get(&s->dev, s->fault_msg, sizeof s->fault_msg))
    s->fault = KD_ERR_DEVICE_FAULT; /* another session of this device faulted */
  (void)async_take(s); /* without a word here: the release calls stay silent, the others say it below */
  if (s->fault && !refuse_fault) return KD_OK; /* locked; the context is past use */
  if (s->fault) {
    st = kd_fail(s->fault, "%s: the session is unusable after %s: %s", op, kd_session_fault_what(s),
                 s->fault_msg);
    kd_session_unlock(s);
    return st;
  }
  if (s->has_device && device) {
    st = kd_device_make_current(&s->dev, op);
    if (st) {
      kd_session_unlock(s);
      return st;
    }
    s->ctx_current = 1;
  }
  return KD_OK;
}

kd_status kd_session_enter(kd_session *s, const char *op) { return enter(s, op, 1, 1); }

kd_status kd_session_enter_release(kd_session *s, const char *op) { return enter(s, op, 0, 1); }

kd_status kd_session_enter_host(kd_session *s, const char *op) { return enter(s, op, 1, 0); }

void kd_session_device(kd_session *s) {
  if (!s->has_device || s->ctx_current || s->fault) return; /* after a fault: as the release calls */
  s->ctx_current = kd_device_try_current(&s->dev);
}

void kd_session_leave(kd_session *s) {
  /* External tensors' release callbacks run after the lock is let go,
   * which a raw callback's own calls do not (its scope holds the lock):
   * theirs wait for the scope's end. */
  kd_tensor_obj *done = NULL;
  if (s->releases && !(ck_pr_load_int(&s->raw.active) && kd_raw_open_here(&s->raw))) {
    done = s->releases;
    s->releases = NULL;
  }
  kd_session_unlock(s);
  if (done) kd_tensor_releases_run(done);
}

kd_status kd_session_note(kd_session *s, kd_status st) {
  if (st == KD_ERR_DEVICE_FAULT && !s->fault) {
    s->fault = st;
    snprintf(s->fault_msg, sizeof s->fault_msg, "%s", kd_last_error());
    kd_log(&s->log, KD_LOG_ERROR, "%s", s->fault_msg);
    if (s->has_device) kd_device_fault_report(&s->dev, s->fault_msg);
  }
  return st;
}

void kd_session_fail_async(kd_session *s, kd_status code, const char *msg) {
  int none = 0;
  if (!atomic_compare_exchange_strong(&s->async_fault, &none, 1)) return; /* the first failure is the one kept */
  s->async_code = code;
  snprintf(s->async_msg, sizeof s->async_msg, "%s", msg);
  kd_log(&s->log, KD_LOG_ERROR, "%s", s->async_msg);
  atomic_store_explicit(&s->async_fault, 2, memory_order_release);
}

/* Makes a failure kd_session_fail_async recorded the session's fault, the
 * lock held; 1 when it did. */
static int async_take(kd_session *s) {
  if (s->fault || atomic_load_explicit(&s->async_fault, memory_order_acquire) != 2) return 0;
  s->fault = s->async_code;
  snprintf(s->fault_msg, sizeof s->fault_msg, "%s", s->async_msg);
  return 1;
}

kd_status kd_session_async_check(kd_session *s, const char *op) {
  if (!async_take(s)) return KD_OK;
  return kd_fail(s->fault, "%s: the work waited for failed, and the session with it: %s", op, s->fault_msg);
}

const char *kd_session_fault_what(const kd_session *s) {
  return s->fault == KD_ERR_COMM_FAILED ? "a communicator failed" : "a device fault";
}

kd_backend kd_session_backend(kd_session *s) { return s ? s->backend : KD_BACKEND_AUTO; }

const char *kd_session_backend_reason(kd_session *s) { return s ? s->reason : ""; }

kd_status kd_session_device_info(kd_session *s, kd_device_info *out) {
  static const char *op = "kd_session_device_info";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_info is NULL", op);
  kd_status st = kd_session_enter_host(s, op);
  if (st) return st;
  if (!s->has_device) st = kd_fail(KD_ERR_WRONG_BACKEND, "%s: backend session is not CUDA (%s)", op, s->reason);
  else *out = s->dev.info;
  kd_session_leave(s);
  return st;
}

kd_status kd_session_stats_get(kd_session *s, kd_session_stats *out) {
  kd_status st = kd_callback_check("kd_session_stats_get");
  if (st) return st;
  if (!s || !out)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "kd_session_stats_get: argument %s is NULL",
                   s ? "out_stats" : "session");
  kd_session_lock(s);
  *out = s->counters;
  out->bytes_staging = s->has_device ? s->dev.staging_bytes : 0;
  out->staging_grows = s->has_device ? s->dev.staging_grows : 0;
  out->context_waits = s->has_device ? s->dev.context_waits : 0;
  out->modules_deferred = s->unloads_waiting;
  out->module_bytes_deferred = s->unload_bytes;
  out->staging_blocks = s->has_device ? s->dev.staging_blocks : 0;
  out->staging_idle_bytes = s->has_device ? s->dev.staging_idle_bytes : 0;
  if (s->ops && s->ops->stats) s->ops->stats(s, out);
  kd_session_unlock(s);
  return KD_OK;
}

kd_status kd_session_reap(kd_session *s, uint32_t *out_pending) {
  static const char *op = "kd_session_reap";
  kd_status st = kd_session_enter(s, op);
  if (st) return st;
  st = kd_completion_reap(s, op);
  if (out_pending) *out_pending = (uint32_t)s->counters.inflight;
  kd_session_leave(s);
  return st;
}
