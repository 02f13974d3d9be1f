/* SPDX-License-Identifier: Apache-2.0 */
/* Ordering with other streams without a host wait: waiting for another
 * library's event or another session's submission on the device, and a
 * submission's completion as an event. */
#include "base/status_internal.h"
#include "exec/exec.h"
#include "session/completion.h"

/* Enqueues the wait, the session entered and on a device. */
static kd_status wait_event_locked(kd_session *s, const char *op, CUevent e) {
  kd_status st = kd_session_note(s, kd_device_wait_event(&s->dev, op, e));
  if (!st) s->counters.stream_event_waits++;
  return st;
}

static kd_status cuda_only(kd_session *s, const char *op) {
  if (s->has_device) return KD_OK;
  return kd_fail(KD_ERR_WRONG_BACKEND, "%s: backend session is not CUDA (%s): HOST work orders by host waits", op,
                 s->reason);
}

kd_status kd_session_wait_event(kd_session *s, void *event) {
  static const char *op = "kd_session_wait_event";
  if (!event) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument event is NULL", op);
  kd_status st = kd_session_enter(s, op);
  if (st) return st;
  st = cuda_only(s, op);
  if (!st) st = wait_event_locked(s, op, (CUevent)event);
  kd_session_leave(s);
  return st;
}

/* kd_ticket_event's work, its errors naming op. A retired ticket gets an
 * event never recorded, or none (*out NULL) when none_if_done. */
static kd_status ticket_event(kd_session *s, const char *op, kd_ticket t, int none_if_done, CUevent *out) {
  kd_status st = kd_session_enter(s, op);
  if (st) return st;
  st = cuda_only(s, op);
  if (!st) st = kd_ticket_check(s, t, op);
  int done = 0;
  if (!st) st = kd_completion_poll_ticket(s, t.seq, op, &done);
  if (!st && !(done && none_if_done))
    st = kd_session_note(s, done ? kd_device_event_new(&s->dev, op, out) : kd_device_event_export(&s->dev, op, out));
  kd_session_leave(s);
  return st;
}

kd_status kd_ticket_event(kd_session *s, kd_ticket t, void **out_event) {
  static const char *op = "kd_ticket_event";
  if (!out_event) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_event is NULL", op);
  CUevent e = NULL;
  kd_status st = ticket_event(s, op, t, 0, &e);
  if (!st) *out_event = e;
  return st;
}

kd_status kd_session_wait_ticket(kd_session *s, kd_session *other, kd_ticket t) {
  static const char *op = "kd_session_wait_ticket";
  if (!other) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument other is NULL", op);
  if (!s) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument session is NULL", op);
  kd_status st = cuda_only(s, op); /* the backend never changes: no lock needed */
  if (st) return st;
  if (other == s) { /* one stream: in order already; the ticket still checked */
    int done;
    return kd_ticket_done(s, t, &done);
  }
  CUevent e = NULL;
  st = ticket_event(other, op, t, 1, &e);
  if (st || !e) return st; /* retired: nothing to wait for */
  st = kd_session_enter(s, op);
  if (!st) {
    st = cuda_only(s, op);
    if (!st) st = wait_event_locked(s, op, e);
    kd_session_leave(s);
  }
  /* The wait holds what it needs of the event: it can go now. */
  kd_device_event_destroy(&other->dev, e);
  return st;
}
