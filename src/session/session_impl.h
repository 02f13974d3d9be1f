/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: the session and how every entry point enters it
 * (session/session.c); with it the headers of the objects it owns, so a
 * file above includes this one. Every field is guarded by kd_session.lock. */
#ifndef KDAG_SESSION_SESSION_IMPL_H
#define KDAG_SESSION_SESSION_IMPL_H

#include <ck_ht.h>
#include <ck_pr.h>
#include <pthread.h>
#include <stdatomic.h>

#include "cuda/device.h"
#include "cuda/module.h"
#include "base/stamp.h"
#include "session/backend.h"
#include "session/borrow.h"
#include "session/completion.h"
#include "session/fence.h"
#include "session/held.h"
#include "session/module_impl.h"
#include "session/raw_impl.h"
#include "session/tensor_impl.h"
#include "session/view.h"
#include "base/handle.h"
#include "kdag/raw.h"

struct kd_session {
  pthread_mutex_t lock;
  kd_backend backend;
  char reason[1024];
  kd_session_options opts;  /* as resolved: the environment applied (session/env.h) */
  kd_logger log;             /* opts.log through log_callback, or stderr; opts.log_level */
  struct kd_trace *trace;    /* opts.trace_path's trace (session/trace.h), or NULL */
  kd_handle_table handles;
  kd_device dev;
  int has_device;
  kd_session_stats counters;
  /* In-order completion ring, indexed by sequence number: completion seq
   * is ring[seq & (ring_size - 1)] while retired_seq <= seq < next_seq.
   * Entries live in the ring (no allocation per submission), and indexing
   * by seq lets a reap binary-search for the newest finished entry, as
   * finished entries are always a prefix (session/completion.c). Doubles
   * on demand up to opts.completion_ring_capacity entries. */
  kd_completion *ring;
  uint32_t ring_size;
  uint64_t next_seq;
  uint64_t retired_seq;     /* every completion with seq < this has retired */
  kd_raw raw;
  kd_stamps stamps;         /* kd_stamp_next: one per holding pass */
  uint32_t ticket_id;       /* names the session in its tickets: unlike the serial, not reused by a
                               later session (for 2^32 - 1 sessions) */
  /* Sink copies orphaned by a destroyed graph: each goes back to the
   * staging pool when the completion it belongs to (seq) retires. */
  struct kd_orphan { uint64_t seq; kd_staging_block *block; CUevent event; } *orphans; /* kd_orphans_release */
  uint32_t orphan_count, orphan_cap;
  /* What a graph let go of while work that may use it was in flight (a
   * tensor rebound or unbound, an executable graph replaced, either of a
   * destroyed graph): each is released once every completion up to seq
   * has retired. A FIFO, as seq never decreases; so a GRAPH-mode launch
   * holds no reference per tensor, nor one to its executable graph
   * (session/completion.c). */
  struct kd_deferred { uint64_t seq; kd_held item; } *deferred;
  uint32_t deferred_head, deferred_count, deferred_cap;
  /* Held arrays of retired completions, kept for the next submissions
   * (kd_held_reserve_warm): a warm pipeline allocates none. As many as a
   * reap retires at once, as a rule (one every KD_REAP_EVERY submits). */
#define KD_HELD_SPARE_MAX 4096 /* entries (64 KiB): a larger array is freed, not kept */
  struct kd_held_spare { kd_held *items; uint32_t cap; } held_spares[KD_REAP_EVERY];
  uint32_t held_spare_count;
  ck_ht_t module_cache;     /* key string -> kd_module_obj * */
  int module_cache_ready;
  int destroy_requested;    /* kd_session_destroy called inside a raw callback */
  const kd_backend_ops *ops; /* what runs the work (session/backend.h); NULL until kd_session_create sets it */
  void *exec;               /* the backend's state: its own */
  kd_module_obj *builtins;  /* CUDA sessions: kdag's built-in kernels, loaded by kd_session_create */
  kd_status builtins_status; /* the load's failure, which a built-in node then reports */
  char builtins_error[512];
  kd_module_obj *loops;     /* CUDA sessions: the kernels of GRAPH-mode loops (kernels/loop.cu) */
  kd_status loops_status;   /* their load's failure (a driver without conditional nodes) */
  char loops_error[512];
  /* Modules whose last reference went, not yet unloaded: unloading waits
   * for all work in the context (tools/wait-probe), so it waits for a
   * call that waits (session/module.c). unload_now: the session is being
   * destroyed or trimmed, and unloads at once. */
  kd_module_obj *unloads;
  uint32_t unloads_waiting;
  uint64_t unload_bytes;
  int unload_now;
  /* External tensors done with, whose release callbacks run once the lock
   * is let go (kd_session_leave, kd_session_destroy): a callback may take
   * a lock of its own (a Python deleter takes the GIL) that a thread
   * waiting for this session holds. */
  kd_tensor_obj *releases;
  /* Live DLPack exports (session/dlpack.c), whose deleters may come after
   * the session is gone: kd_session_destroy cuts them loose first. */
  struct kd_dl_export *exports;
  kd_status fault;          /* sticky device fault, KD_OK when healthy */
  char fault_msg[768];
  /* A failure found off the session's lock, on a HOST worker (a
   * collective whose peers never came): the first one is kept here and
   * becomes the session's fault at the next call that enters. 0 none, 1
   * being written, 2 written (kd_session_fail_async). */
  _Atomic int async_fault;
  kd_status async_code;
  char async_msg[512];
  /* Whether the call holding the lock has made the context current on its
   * thread: every enter clears it, and it is set where the context is made
   * current (kd_session_enter and _release, kd_session_device, the
   * destroys, which take the lock themselves). */
  int ctx_current;
};

/* kd_session_create's first half (exec/backend.c starts the backend):
 * validates the options, opens the device (or finds none) and sets up
 * everything but the backend. On failure nothing is left. */
kd_status kd_session_open(const kd_session_options *options, kd_session **out);

/* Locks the session, checks it is healthy, makes its context current.
 * Every public entry point starts with it and ends with kd_session_leave. */
kd_status kd_session_enter(kd_session *s, const char *op);
/* kd_session_enter for the release calls: after a device fault it takes
 * the lock and returns KD_OK, writing no message. */
kd_status kd_session_enter_release(kd_session *s, const char *op);
/* kd_session_enter for calls whose work is on host structures only
 * (declaring nodes and edges, rebinding, queries): it does not ask the
 * driver for the thread's current context, which costs a driver call
 * (4-15 ns on the GPU lane's H100 host, measured in a loop of rebinds;
 * twice per node declared with its edge). A driver call such a call may
 * still reach (a session's first built-in node loads kdag's kernels, a
 * kernel node may raise a shared-memory limit, a release may free) comes
 * after kd_session_device. */
kd_status kd_session_enter_host(kd_session *s, const char *op);
/* Makes the context current on the calling thread if the call holding the
 * lock has not yet (entered by kd_session_enter_host): before any driver
 * call, or any foreign release callback, a host-only call may reach. It
 * writes no message: on failure the driver call that follows fails as it
 * would have (a load reports it; a release, as ever, goes on). */
void kd_session_device(kd_session *s);
void kd_session_leave(kd_session *s);
/* The session lock itself, for the entry points that take it without
 * entering (destroys, counters). The thread running the session's raw
 * callback holds it already (kd_with_raw took it for the scope), and raw.h
 * lets the callback call the session (look up functions, release handles,
 * download): on that thread alone locking is skipped, so the mutex need
 * not be recursive and any other re-entry shows as the deadlock it would
 * be. Inline, and the owner asked only while a scope is open: every entry
 * point takes it. */
static inline void kd_session_lock(kd_session *s) {
  if (!ck_pr_load_int(&s->raw.active) || !kd_raw_open_here(&s->raw)) pthread_mutex_lock(&s->lock);
}
static inline void kd_session_unlock(kd_session *s) {
  if (!ck_pr_load_int(&s->raw.active) || !kd_raw_open_here(&s->raw)) pthread_mutex_unlock(&s->lock);
}

/* User callbacks that must not call kdag (foreign node functions and
 * resource releases, host function nodes on a HOST pool worker) run between
 * was = kd_callback_enter(what) and kd_callback_leave(was); meanwhile every
 * kdag call on that thread is refused with KD_ERR_BUSY naming what, instead
 * of re-entering an executor mid-walk or waiting for itself. */
const char *kd_callback_enter(const char *what);
void kd_callback_leave(const char *was);
/* KD_OK, or KD_ERR_BUSY naming op and the callback it was called from. */
kd_status kd_callback_check(const char *op);
/* What kd_callback_enter names while an external tensor's release
 * callback runs (kd_tensor_releases_run): no session lock is held then. */
extern const char kd_release_callback_name[];
/* 1 when the thread runs no callback, or only an external tensor's
 * release callback: no kdag lock is held on it, so taking one is safe. */
int kd_callback_lock_free(void);
/* Records a device fault (if st is one) so later calls fail with it. */
kd_status kd_session_note(kd_session *s, kd_status st);
/* Records a failure found without the session's lock (any thread): the
 * first one becomes the session's fault at its next call. */
void kd_session_fail_async(kd_session *s, kd_status code, const char *msg);
/* After a wait (the session locked): the failure kd_session_fail_async
 * recorded, made the session's fault and returned (naming op), or KD_OK. */
kd_status kd_session_async_check(kd_session *s, const char *op);
/* What the session's fault is, for "unusable after ..." messages. */
const char *kd_session_fault_what(const kd_session *s);

/* The tensor of handle t (op and what name it in the error); inline: it
 * runs for every access declared. */
static inline kd_status kd_tensor_lookup(kd_session *s, kd_tensor t, kd_tensor_obj **out, const char *op,
                                         const char *what) {
  return kd_handle_get(&s->handles, t.bits, KD_HANDLE_TENSOR, (void **)out, op, what);
}

/* Unloads the deferred modules and frees the staging no transfer holds:
 * waits for all work in the context. Past the session's caps
 * (kd_session_options.unload_cap, idle_staging_cap) after a wait the
 * caller asked for (kd_session_waited), else only in kd_session_trim and
 * kd_session_destroy. */
void kd_session_release_idle(kd_session *s);
void kd_session_waited(kd_session *s);

#endif
