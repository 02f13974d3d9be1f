/* SPDX-License-Identifier: Apache-2.0 */
/* The in-order completion ring: each piece of enqueued work records one
 * event (or, a HOST run, is a fence: session/fence.h) and keeps what it
 * uses alive until that event has fired.
 *
 * The session's stream runs in order (and HOST runs start only after the
 * one before has finished), so the finished entries are always a prefix of
 * the ring. A reap polls the oldest entry and stops if it is pending (the
 * common case while the GPU is behind); otherwise it polls the newest and,
 * if that is pending too, binary-searches between them. Retiring k
 * finished entries then costs at most 2 + log2(k) queries instead of k + 1:
 * an event query costs about as much as the rest of a CUDA-graph launch,
 * and after a sink wait a whole batch has finished at once. */
#include <ck_pr.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "cuda/cu_status.h"
#include "session/session_impl.h"

/* The ring starts small and doubles as work piles up, so a session with a
 * large capacity pays for the depth it uses. */
#define KD_RING_INITIAL 64

kd_status kd_completion_ring_init(kd_session *s) {
  uint32_t size = s->opts.completion_ring_capacity < KD_RING_INITIAL ? s->opts.completion_ring_capacity
                                                                      : KD_RING_INITIAL;
  s->ring = calloc(size, sizeof *s->ring);
  if (!s->ring) return kd_fail(KD_ERR_OUT_OF_MEMORY, "kd_session_create: no memory for the completion ring");
  s->ring_size = size;
  return KD_OK;
}

static kd_completion *slot(kd_session *s, uint64_t seq) { return &s->ring[seq & (s->ring_size - 1)]; }

/* Doubles the ring; entries keep their seq, so each moves to its new slot. */
static int grow_ring(kd_session *s) {
  uint32_t size = s->ring_size * 2;
  kd_completion *ring = calloc(size, sizeof *ring);
  if (!ring) return 0;
  for (uint64_t q = s->retired_seq; q < s->next_seq; ++q) ring[q & (size - 1)] = *slot(s, q);
  free(s->ring);
  s->ring = ring;
  s->ring_size = size;
  return 1;
}

int kd_deferred_room(kd_session *s, uint32_t n) {
  if (s->deferred_head == s->deferred_count) s->deferred_head = s->deferred_count = 0;
  if (s->deferred_count + n <= s->deferred_cap) return 1;
  uint32_t live = s->deferred_count - s->deferred_head;
  if (s->deferred_head && live + n <= s->deferred_cap) { /* slide the live entries down */
    memmove(s->deferred, s->deferred + s->deferred_head, live * sizeof *s->deferred);
    s->deferred_head = 0, s->deferred_count = live;
    return 1;
  }
  uint32_t cap = s->deferred_cap ? s->deferred_cap : 16;
  while (cap < s->deferred_count + n) cap *= 2;
  struct kd_deferred *grown = realloc(s->deferred, cap * sizeof *grown);
  if (!grown) return 0;
  s->deferred = grown;
  s->deferred_cap = cap;
  return 1;
}

kd_status kd_deferred_reserve(kd_session *s, uint32_t n, const char *op) {
  return kd_deferred_room(s, n) ? KD_OK : kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory to defer a release", op);
}

void kd_release_after_inflight(kd_session *s, kd_held_kind kind, void *obj) {
  kd_held h = {kind, obj};
  if (s->retired_seq == s->next_seq || s->deferred_count >= s->deferred_cap) {
    /* Nothing in flight; or (a caller that could not reserve) no room. */
    if (s->retired_seq != s->next_seq) kd_completion_drain(s);
    kd_held_release_one(s, &h);
    return;
  }
  s->deferred[s->deferred_count].seq = s->next_seq - 1;
  s->deferred[s->deferred_count].item = h;
  s->deferred_count++;
}

static void release_deferred(kd_session *s) {
  while (s->deferred_head < s->deferred_count && s->deferred[s->deferred_head].seq < s->retired_seq)
    kd_held_release_one(s, &s->deferred[s->deferred_head++].item);
}

void kd_orphans_release(kd_session *s, uint64_t before) {
  for (uint32_t i = 0; i < s->orphan_count;) {
    if (s->orphans[i].seq < before) {
      kd_copy_put(s, s->orphans[i].block, s->orphans[i].event);
      s->orphans[i] = s->orphans[--s->orphan_count];
    } else {
      ++i;
    }
  }
}

void kd_copy_put(kd_session *s, kd_staging_block *block, CUevent event) {
  if (event) kd_event_release_to_pool(&s->dev, event);
  if (block) kd_staging_put(&s->dev, block);
}

void kd_copy_release(kd_session *s, uint64_t seq, kd_staging_block *block, CUevent event) {
  if (seq < s->retired_seq) {
    kd_copy_put(s, block, event);
    return;
  }
  struct kd_orphan *grown = s->orphan_count == s->orphan_cap
                                ? realloc(s->orphans, (s->orphan_cap ? s->orphan_cap * 2 : 8) * sizeof *grown)
                                : s->orphans;
  if (grown) {
    if (s->orphan_count == s->orphan_cap) s->orphan_cap = s->orphan_cap ? s->orphan_cap * 2 : 8;
    s->orphans = grown;
    s->orphans[s->orphan_count++] = (struct kd_orphan){seq, block, event};
  } else { /* no memory to defer: waiting on this copy alone is the safe fallback */
    s->counters.event_waits++;
    (void)kd_event_wait(&s->dev, event);
    kd_copy_put(s, block, event);
  }
}

/* Retires the oldest entry: its work is done. */
static void retire_oldest(kd_session *s) {
  kd_completion *c = slot(s, s->retired_seq);
  kd_held_release_all(s, &c->held); /* leaves the set empty */
  if (c->event) kd_event_release_to_pool(&s->dev, c->event);
  if (c->fence) c->fence->ops->release(c->fence);
  c->event = NULL; /* the rest is written by the next enqueue into this slot */
  c->fence = NULL;
  s->retired_seq++;
  release_deferred(s);
  kd_orphans_release(s, s->retired_seq);
  s->counters.completions_retired++;
  s->counters.inflight--;
}

void kd_completion_retire_before(kd_session *s, uint64_t seq) {
  while (s->retired_seq < s->next_seq && s->retired_seq < seq) retire_oldest(s);
}

/* Retires every entry up to and including seq (< next_seq). */
static void retire_through(kd_session *s, uint64_t seq) { kd_completion_retire_before(s, seq + 1); }

/* Blocks until a completion's work is done: its fence, or its event. */
static CUresult wait_for(kd_session *s, kd_completion *c) {
  if (c->fence) {
    c->fence->ops->wait(c->fence);
    return CUDA_SUCCESS;
  }
  return kd_event_wait(&s->dev, c->event);
}

/* Polls one entry without blocking: CUDA_SUCCESS when its work is done,
 * CUDA_ERROR_NOT_READY while pending, or the error the work faulted with. */
static CUresult poll(kd_session *s, kd_completion *c) {
  s->counters.event_queries++;
  if (c->fence) return c->fence->ops->done(c->fence) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  return kd_event_query(&s->dev, c->event);
}

/* A poll or wait reported an error: the work of the oldest entry not known
 * to be done, or of one after it, faulted. A fault is sticky (every later
 * query fails too), so that entry is the earliest the error can name. */
static kd_status fault_of(kd_session *s, CUresult r, const char *op, const char *call) {
  const kd_completion *c = slot(s, s->retired_seq);
  kd_status st = kd_fail_cu(r, op, call);
  st = kd_fail_context(st, "%s: device fault in the work of ticket %llu (%s)", op, (unsigned long long)c->seq,
                       c->what ? c->what : "?");
  return kd_session_note(s, st);
}

static kd_status wait_retire_oldest(kd_session *s, const char *op) {
  if (s->retired_seq == s->next_seq) return KD_OK;
  s->counters.event_waits++;
  CUresult r = wait_for(s, slot(s, s->retired_seq));
  if (r != CUDA_SUCCESS) return fault_of(s, r, op, "cuEventSynchronize");
  retire_oldest(s);
  return KD_OK;
}

static kd_status enqueue(kd_session *s, const char *op, kd_held_set *set, CUevent event, kd_fence *fence,
                         const char *what);

kd_status kd_completion_submit(kd_session *s, const char *op, kd_held_set *set, CUevent event, const char *what) {
  kd_status st = kd_event_record(&s->dev, op, event);
  if (st) {
    kd_event_release_to_pool(&s->dev, event);
    return kd_session_note(s, st);
  }
  s->counters.event_records++;
  return enqueue(s, op, set, event, NULL, what);
}

kd_status kd_completion_submit_fence(kd_session *s, const char *op, kd_held_set *set, kd_fence *fence,
                                     const char *what) {
  return enqueue(s, op, set, NULL, fence, what);
}

/* The work behind event (or fence) is enqueued already: on failure, wait
 * for it, so the caller can release what it holds, and let event or fence
 * go. */
static kd_status abandon(kd_session *s, CUevent event, kd_fence *fence, kd_status st) {
  kd_completion tmp = {.event = event, .fence = fence};
  (void)wait_for(s, &tmp);
  if (fence) fence->ops->release(fence);
  else kd_event_release_to_pool(&s->dev, event);
  return st;
}

static kd_status enqueue(kd_session *s, const char *op, kd_held_set *set, CUevent event, kd_fence *fence,
                         const char *what) {
  kd_status st;
  /* A full ring is defined behaviour: wait for the oldest entry (counted in
   * ring_full_waits), which bounds host memory held by in-flight work. */
  while (s->counters.inflight >= s->opts.completion_ring_capacity) {
    s->counters.ring_full_waits++;
    st = wait_retire_oldest(s, op);
    if (st) return abandon(s, event, fence, st); /* keep the objects alive until the work is done */
  }
  if (s->counters.inflight == s->ring_size && !grow_ring(s)) {
    /* No memory for a deeper ring: make room the way a full one does. */
    s->counters.ring_full_waits++;
    st = wait_retire_oldest(s, op);
    if (st) return abandon(s, event, fence, st);
  }
  kd_completion *c = slot(s, s->next_seq);
  c->event = event;
  c->fence = fence;
  c->what = what;
  c->seq = s->next_seq++;
  c->held = *set;
  set->heap = NULL;
  set->count = set->cap = 0;
  s->counters.inflight++;
  /* The work and its objects now belong to the ring, so the submit has
   * succeeded; a fault the reap finds is recorded on the session and
   * returned by the next call (this one leaves the thread's message
   * alone). Submitting polls every KD_REAP_EVERY-th completion (or when
   * the ring is half full), not every time: one event query costs about
   * as much as the rest of a CUDA-graph submission. */
  if ((c->seq % KD_REAP_EVERY) == 0 || s->counters.inflight * 2 >= s->opts.completion_ring_capacity) {
    kd_fail_keep keep;
    kd_fail_keep_begin(&keep);
    (void)kd_completion_reap(s, op);
    kd_fail_keep_end(&keep);
  }
  return KD_OK;
}

kd_status kd_completion_reap(kd_session *s, const char *op) {
  if (s->retired_seq == s->next_seq) return KD_OK;
  uint64_t done = s->retired_seq, pending = s->next_seq; /* done has finished; pending, if < next_seq, has not */
  CUresult r = poll(s, slot(s, done));
  if (r == CUDA_ERROR_NOT_READY) return KD_OK;
  if (r != CUDA_SUCCESS) return fault_of(s, r, op, "cuEventQuery");
  /* Then the newest, and between the two by halves. */
  uint64_t probe = s->next_seq - 1;
  while (probe > done) {
    r = poll(s, slot(s, probe));
    if (r == CUDA_SUCCESS) {
      done = probe;
    } else if (r == CUDA_ERROR_NOT_READY) {
      pending = probe;
    } else {
      retire_through(s, done);
      return fault_of(s, r, op, "cuEventQuery");
    }
    probe = done + (pending - done) / 2;
  }
  retire_through(s, done);
  return KD_OK;
}

kd_status kd_completion_poll_ticket(kd_session *s, uint64_t seq, const char *op, int *done) {
  *done = seq < s->retired_seq;
  if (*done) return KD_OK;
  CUresult r = poll(s, slot(s, seq));
  if (r == CUDA_ERROR_NOT_READY) return KD_OK;
  if (r != CUDA_SUCCESS) return fault_of(s, r, op, "cuEventQuery");
  retire_through(s, seq); /* everything before it has finished too */
  *done = 1;
  return KD_OK;
}

void kd_completion_drain(kd_session *s) {
  while (s->retired_seq < s->next_seq) {
    s->counters.event_waits++;
    /* After a fault the event may never report success; the objects are
     * freed anyway, as the context is unusable for the work that held them. */
    (void)wait_for(s, slot(s, s->retired_seq));
    retire_oldest(s);
  }
}

void kd_completion_ring_fini(kd_session *s) {
  free(s->ring);
  s->ring = NULL;
  s->ring_size = 0;
}
