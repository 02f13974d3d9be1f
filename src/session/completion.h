/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: the in-order completion ring (session/completion.c): what
 * enqueued work keeps alive until it is done, deferred releases, and
 * orphaned sink copies. Under the session lock. */
#ifndef KDAG_SESSION_COMPLETION_H
#define KDAG_SESSION_COMPLETION_H

#include "cuda/device.h"
#include "session/fence.h"
#include "session/held.h"

typedef struct kd_session kd_session;

/* One completion: the event recorded after a piece of work (or the fence
 * its work signals), and what that work keeps alive until then. */
typedef struct kd_completion {
  CUevent event;            /* work on the stream */
  kd_fence *fence;          /* work elsewhere (a HOST run) */
  uint64_t seq;
  const char *what;         /* static: the kind of work, for fault messages */
  kd_held_set held;
} kd_completion;

/* Submissions poll the ring every this many completions (see enqueue):
 * what finished in between stays held at most that many submissions
 * longer, and a poll costs a graph launch's worth of host time. */
#define KD_REAP_EVERY 64

kd_status kd_completion_ring_init(kd_session *s);
void kd_completion_ring_fini(kd_session *s);
/* Records event (taken from the pool with kd_event_acquire before the
 * work was enqueued, so that no event creation can fail after it; owned
 * from here on) after the work enqueued so far and hands the set to the
 * ring (which then owns it; set is emptied). On failure nothing was queued,
 * the event is back in the pool and the set is still the caller's. */
kd_status kd_completion_submit(kd_session *s, const char *op, kd_held_set *set, CUevent event, const char *what);
/* The same for work a fence stands for (a HOST run): done when the fence
 * is; the ring takes the reference the caller holds on it. */
kd_status kd_completion_submit_fence(kd_session *s, const char *op, kd_held_set *set, kd_fence *fence,
                                     const char *what);
/* Gives back the orphaned sink copies of submissions before seq `before`
 * (all with UINT64_MAX: at destroy, once everything is done). */
void kd_orphans_release(kd_session *s, uint64_t before);
/* Gives a copy's staging block and event (a sink's) back once submission
 * seq, whose work wrote the block and recorded the event after it, has
 * retired: at once if it has, else kept as an orphan (without memory to
 * keep it: after waiting for the event). Never fails. */
void kd_copy_release(kd_session *s, uint64_t seq, kd_staging_block *block, CUevent event);
/* The same for a copy known to be done (either may be NULL). */
void kd_copy_put(kd_session *s, kd_staging_block *block, CUevent event);
/* Retires every finished completion without blocking. */
kd_status kd_completion_reap(kd_session *s, const char *op);
/* Polls the completion of ticket seq (< next_seq) alone; if it is done,
 * retires it and everything before it. */
kd_status kd_completion_poll_ticket(kd_session *s, uint64_t seq, const char *op, int *done);
/* After a host wait on an event recorded when next_seq was seq: retire every
 * earlier completion without querying (the stream is in order). */
void kd_completion_retire_before(kd_session *s, uint64_t seq);
void kd_completion_drain(kd_session *s);
/* Releases one held object (a tensor a graph no longer binds, say) once
 * all work submitted so far has completed: at once when none is in
 * flight. Room comes from kd_deferred_reserve (an error for the caller to
 * report) or kd_deferred_room (0 without memory, no error: for callers that
 * cannot fail); without it, this waits for the work in flight first, so it
 * cannot fail. */
kd_status kd_deferred_reserve(kd_session *s, uint32_t n, const char *op);
int kd_deferred_room(kd_session *s, uint32_t n);
void kd_release_after_inflight(kd_session *s, kd_held_kind kind, void *obj);

#endif
