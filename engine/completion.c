/* The in-order completion ring: each piece of enqueued work records one
 * event and keeps what it uses alive until that event has fired. Reaping
 * polls only the oldest entry: the stream is in order, so if it is pending
 * so is everything after it. */
#include <ck_pr.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/status_internal.h"
#include "engine/exec.h"
#include "engine/session_impl.h"

kd_status kd_held_reserve(kd_held_set *set, uint32_t extra, const char *op) {
  if (set->count + extra <= set->cap) return KD_OK;
  uint32_t cap = set->cap ? set->cap : 8;
  while (cap < set->count + extra) cap *= 2;
  kd_held *grown = realloc(set->items, cap * sizeof *grown);
  if (!grown) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory to retain objects", op);
  set->items = grown;
  set->cap = cap;
  return KD_OK;
}

kd_status kd_held_add(kd_held_set *set, kd_held_kind kind, void *obj, const char *op) {
  kd_status st = kd_held_reserve(set, 1, op);
  if (st) return st;
  set->items[set->count].kind = kind;
  set->items[set->count].obj = obj;
  set->count++;
  return KD_OK;
}

void kd_held_release_all(kd_session *s, kd_held_set *set) {
  for (uint32_t i = 0; i < set->count; ++i) {
    kd_held *h = &set->items[i];
    switch (h->kind) {
      case KD_HELD_TENSOR: kd_tensor_unref(s, h->obj); break;
      case KD_HELD_MODULE: kd_module_unref(s, h->obj); break;
      case KD_HELD_STAGING: kd_staging_put(&s->dev, h->obj); break;
      case KD_HELD_EVENT: kd_event_release_to_pool(&s->dev, h->obj); break;
      case KD_HELD_DEVPTR: kd_device_free(&s->dev, (CUdeviceptr)(uintptr_t)h->obj); break;
      case KD_HELD_FOREIGN: kd_foreign_res_unref(h->obj); break;
      case KD_HELD_GEXEC: kd_gexec_unref(h->obj); break;
    }
  }
  free(set->items);
  memset(set, 0, sizeof *set);
}

kd_status kd_completion_ring_init(kd_session *s) {
  /* ck_ring needs a power-of-two size and keeps one slot empty; kdag holds
   * at most completion_ring_capacity entries (kd_completion_submit waits
   * before more), so twice that always fits. */
  uint32_t size = s->opts.completion_ring_capacity * 2;
  s->ring_buf = calloc(size, sizeof *s->ring_buf);
  if (!s->ring_buf)
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "kd_session_create: no memory for the completion ring");
  ck_ring_init(&s->ring, size);
  return KD_OK;
}

kd_status kd_held_tensor_once(kd_held_set *set, kd_tensor_obj *o, uint64_t stamp, const char *op) {
  if (o->held_by_scope == stamp) return KD_OK;
  kd_status st = kd_held_add(set, KD_HELD_TENSOR, o, op);
  if (st) return st;
  kd_tensor_ref(o);
  o->held_by_scope = stamp;
  return KD_OK;
}

kd_status kd_held_module_once(kd_held_set *set, kd_module_obj *o, uint64_t stamp, const char *op) {
  if (o->held_by_scope == stamp) return KD_OK;
  kd_status st = kd_held_add(set, KD_HELD_MODULE, o, op);
  if (st) return st;
  kd_module_ref(o);
  o->held_by_scope = stamp;
  return KD_OK;
}

kd_status kd_deferred_reserve(kd_session *s, uint32_t n, const char *op) {
  if (s->deferred_head == s->deferred_count) s->deferred_head = s->deferred_count = 0;
  if (s->deferred_count + n <= s->deferred_cap) return KD_OK;
  uint32_t live = s->deferred_count - s->deferred_head;
  if (s->deferred_head && live + n <= s->deferred_cap) { /* slide the live entries down */
    memmove(s->deferred, s->deferred + s->deferred_head, live * sizeof *s->deferred);
    s->deferred_head = 0, s->deferred_count = live;
    return KD_OK;
  }
  uint32_t cap = s->deferred_cap ? s->deferred_cap : 16;
  while (cap < s->deferred_count + n) cap *= 2;
  struct kd_deferred *grown = realloc(s->deferred, cap * sizeof *grown);
  if (!grown) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory to defer a tensor's release", op);
  s->deferred = grown;
  s->deferred_cap = cap;
  return KD_OK;
}

void kd_tensor_unref_after_inflight(kd_session *s, kd_tensor_obj *o) {
  if (s->retired_seq == s->next_seq || s->deferred_count >= s->deferred_cap) {
    /* Nothing in flight; or (a caller that could not reserve) no room. */
    if (s->retired_seq != s->next_seq) kd_completion_drain(s);
    kd_tensor_unref(s, o);
    return;
  }
  s->deferred[s->deferred_count].seq = s->next_seq - 1;
  s->deferred[s->deferred_count].obj = o;
  s->deferred_count++;
}

static void release_deferred(kd_session *s) {
  while (s->deferred_head < s->deferred_count && s->deferred[s->deferred_head].seq < s->retired_seq)
    kd_tensor_unref(s, s->deferred[s->deferred_head++].obj);
}

static void retire(kd_session *s, kd_completion *c) {
  kd_held_release_all(s, &c->held);
  if (c->event) kd_event_release_to_pool(&s->dev, c->event);
  if (c->run) kd_host_run_unref(c->run);
  s->retired_seq = c->seq + 1;
  release_deferred(s);
  for (uint32_t i = 0; i < s->orphan_count;) { /* sink copies of destroyed graphs */
    if (s->orphans[i].seq < s->retired_seq) {
      kd_event_release_to_pool(&s->dev, s->orphans[i].event);
      kd_staging_put(&s->dev, s->orphans[i].block);
      s->orphans[i] = s->orphans[--s->orphan_count];
    } else {
      ++i;
    }
  }
  s->counters.completions_retired++;
  s->counters.inflight--;
  free(c);
}

/* Blocks until a completion's work is done: its host run, or its event. */
static CUresult wait_for(kd_session *s, kd_completion *c) {
  if (c->run) {
    kd_host_run_wait(c->run);
    return CUDA_SUCCESS;
  }
  return s->dev.cu->cuEventSynchronize(c->event);
}

/* A completion's event reported an error: the work it follows faulted. */
static kd_status fault_of(kd_session *s, const kd_completion *c, CUresult r, const char *op, const char *call) {
  kd_status st = kd_fail_cu(r, op, call);
  st = kd_fail_context(st, "%s: device fault in the work of ticket %llu (%s)", op, (unsigned long long)c->seq,
                       c->what ? c->what : "?");
  return kd_session_note(s, st);
}

/* The oldest in-flight entry, or NULL. */
static kd_completion *oldest(kd_session *s) {
  if (!s->ring_head) {
    void *p = NULL;
    if (ck_ring_dequeue_spsc(&s->ring, s->ring_buf, &p)) s->ring_head = p;
  }
  return s->ring_head;
}

static kd_status wait_retire_oldest(kd_session *s, const char *op) {
  kd_completion *c = oldest(s);
  if (!c) return KD_OK;
  s->counters.event_waits++;
  CUresult r = wait_for(s, c);
  if (r != CUDA_SUCCESS) return fault_of(s, c, r, op, "cuEventSynchronize");
  s->ring_head = NULL;
  retire(s, c);
  return KD_OK;
}

static kd_status enqueue(kd_session *s, const char *op, kd_held_set *set, kd_completion *c);

kd_status kd_completion_submit(kd_session *s, const char *op, kd_held_set *set, const char *what) {
  kd_completion *c = calloc(1, sizeof *c);
  if (!c) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for a completion", op);
  c->what = what;
  kd_status st = kd_event_acquire(&s->dev, op, &c->event);
  if (!st) st = kd_event_record(&s->dev, op, c->event);
  if (st) {
    if (c->event) kd_event_release_to_pool(&s->dev, c->event);
    free(c);
    return kd_session_note(s, st);
  }
  s->counters.event_records++;
  return enqueue(s, op, set, c);
}

kd_status kd_completion_submit_host(kd_session *s, const char *op, kd_held_set *set, kd_host_run *run) {
  kd_completion *c = calloc(1, sizeof *c);
  if (!c) {
    /* The run is already going: wait for it so its objects can go. */
    kd_host_run_wait(run);
    kd_host_run_unref(run);
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for a completion", op);
  }
  c->run = run;
  c->what = "a HOST graph submission";
  return enqueue(s, op, set, c);
}

static kd_status enqueue(kd_session *s, const char *op, kd_held_set *set, kd_completion *c) {
  kd_status st;
  /* A full ring is defined behaviour: wait for the oldest entry (counted in
   * ring_full_waits), which bounds host memory held by in-flight work. */
  while (s->counters.inflight >= s->opts.completion_ring_capacity) {
    s->counters.ring_full_waits++;
    st = wait_retire_oldest(s, op);
    if (st) {
      /* Keep the new entry's objects alive until its work is done. */
      (void)wait_for(s, c);
      if (c->run) kd_host_run_unref(c->run);
      else kd_event_release_to_pool(&s->dev, c->event);
      free(c);
      return st;
    }
  }
  c->seq = s->next_seq++;
  c->held = *set;
  memset(set, 0, sizeof *set);
  ck_ring_enqueue_spsc(&s->ring, s->ring_buf, c);
  s->counters.inflight++;
  /* The work and its objects now belong to the ring, so the submit has
   * succeeded; a fault the reap finds is recorded on the session and
   * returned by the next call. Submitting polls every KD_REAP_EVERY-th
   * completion (or when the ring is half full): one event query costs about
   * as much as the rest of a CUDA-graph submission, and a poll retires
   * everything that finished since the last one. */
  if ((c->seq % KD_REAP_EVERY) == 0 || s->counters.inflight * 2 >= s->opts.completion_ring_capacity)
    (void)kd_completion_reap(s, op);
  return KD_OK;
}

kd_status kd_completion_reap(kd_session *s, const char *op) {
  kd_completion *c;
  while ((c = oldest(s))) {
    s->counters.event_queries++;
    if (c->run) {
      if (!kd_host_run_done(c->run)) return KD_OK;
    } else {
      CUresult r = s->dev.cu->cuEventQuery(c->event);
      if (r == CUDA_ERROR_NOT_READY) return KD_OK;
      if (r != CUDA_SUCCESS) return fault_of(s, c, r, op, "cuEventQuery");
    }
    s->ring_head = NULL;
    retire(s, c);
  }
  return KD_OK;
}

void kd_completion_retire_before(kd_session *s, uint64_t seq) {
  kd_completion *c;
  while ((c = oldest(s)) && c->seq < seq) {
    s->ring_head = NULL;
    retire(s, c);
  }
}

void kd_completion_drain(kd_session *s) {
  kd_completion *c;
  while ((c = oldest(s))) {
    s->counters.event_waits++;
    /* After a fault the event may never report success; the objects are
     * freed anyway, as the context is unusable for the work that held them. */
    (void)wait_for(s, c);
    s->ring_head = NULL;
    retire(s, c);
  }
}

void kd_completion_ring_fini(kd_session *s) {
  free(s->ring_buf);
  s->ring_buf = NULL;
}
