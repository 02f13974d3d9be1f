/* SPDX-License-Identifier: Apache-2.0 */
/* Communicators: one rank's membership, NCCL's on a CUDA session, the
 * shared-memory segment's on HOST (exec/comm_host.c), with the order
 * token its collective nodes share. */
#include "exec/comm.h"

#include <ck_pr.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "exec/exec.h"

/* The CUDA communicators alive in the process, whose sessions' waits ask
 * NCCL for errors it found after the fact (a peer lost on the network). A
 * leaf lock: nothing else is taken while it is held. */
static pthread_mutex_t g_live_mu = PTHREAD_MUTEX_INITIALIZER;
static kd_comm *g_live;
static atomic_int g_live_count;

static void live_add(kd_comm *c) {
  pthread_mutex_lock(&g_live_mu);
  c->next_live = g_live;
  g_live = c;
  atomic_fetch_add(&g_live_count, 1);
  pthread_mutex_unlock(&g_live_mu);
}

static void live_remove(kd_comm *c) {
  pthread_mutex_lock(&g_live_mu);
  for (kd_comm **p = &g_live; *p; p = &(*p)->next_live)
    if (*p == c) {
      *p = c->next_live;
      atomic_fetch_sub(&g_live_count, 1);
      break;
    }
  pthread_mutex_unlock(&g_live_mu);
}

kd_status kd_comm_poll(kd_session *s, const char *op) {
  if (!atomic_load_explicit(&g_live_count, memory_order_relaxed)) return KD_OK;
  char msg[512] = "";
  pthread_mutex_lock(&g_live_mu);
  for (kd_comm *c = g_live; c && !msg[0]; c = c->next_live) {
    kd_nccl_result err = 0;
    if (c->session != s || c->async_seen || c->nccl->CommGetAsyncError(c->nc, &err) || !err || err == 7) continue;
    c->async_seen = 1; /* 7: ncclInProgress, not an error */
    const char *text = c->nccl->GetErrorString(err);
    snprintf(msg, sizeof msg, "communicator rank %d of %d: NCCL reported %s (%d) after the fact", c->rank, c->nranks,
             text ? text : "an error", err);
  }
  pthread_mutex_unlock(&g_live_mu);
  if (!msg[0]) return KD_OK;
  kd_session_fail_async(s, KD_ERR_COMM_FAILED, msg);
  return kd_session_async_check(s, op);
}

void kd_comm_ref(kd_comm *c) { ck_pr_inc_32(&c->refs); }

void kd_comm_unref(kd_comm *c) {
  bool zero = false;
  ck_pr_dec_32_zero(&c->refs, &zero);
  if (!zero) return;
  if (c->nc) {
    live_remove(c);
    c->nccl->CommDestroy(c->nc); /* no submission uses it any more */
  }
  kd_shm_close(c->shm);
  if (c->group) {
    bool last = false;
    ck_pr_dec_32_zero(&c->group->refs, &last);
    if (last) free(c->group);
  }
  free(c);
}

static kd_status session_arg(kd_session *s, const char *op, const char *what) {
  kd_status st = kd_callback_check(op);
  if (!st && !s) st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument %s is NULL", op, what);
  return st;
}

kd_status kd_comm_id_create(kd_session *s, kd_comm_id *out) {
  static const char *op = "kd_comm_id_create";
  kd_status st = session_arg(s, op, "session");
  if (st) return st;
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_id is NULL", op);
  if (!s->has_device) return kd_shm_id_create(op, out);
  const kd_nccl_api *nccl;
  st = kd_nccl_load(op, &nccl);
  if (st) return st;
  kd_nccl_id id;
  kd_nccl_result r = nccl->GetUniqueId(&id);
  if (r) return kd_nccl_fail(nccl, NULL, r, op, "ncclGetUniqueId");
  _Static_assert(sizeof id == sizeof out->bytes, "an NCCL unique id fills a kd_comm_id");
  memcpy(out->bytes, &id, sizeof id);
  return KD_OK;
}

static kd_status check_ranks(const char *op, int nranks, int rank) {
  if (nranks < 1 || nranks > 65536)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument nranks is %d, not in [1, 65536]", op, nranks);
  if (rank < 0 || rank >= nranks)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument rank is %d, not in [0, %d)", op, rank, nranks);
  return KD_OK;
}

/* A communicator without its transport: the object and its token. */
static kd_status comm_new(kd_session *s, const char *op, int nranks, int rank, kd_comm **out) {
  kd_comm *c = calloc(1, sizeof *c);
  if (!c) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the communicator", op);
  c->refs = 1;
  c->session = s;
  c->rank = rank;
  c->nranks = nranks;
  kd_tensor_desc d = {.dtype = KD_U8, .rank = 1, .shape = {1}, .residency = KD_RESIDENCY_DEVICE};
  unsigned char zero = 0;
  kd_status st = kd_tensor_create(s, &d, &c->token);
  if (!st) st = kd_tensor_upload(s, c->token, &zero, 1); /* read by the first collective */
  if (st) {
    if (c->token.bits) kd_tensor_release(s, c->token);
    free(c);
    return kd_fail_context(st, "%s: the communicator's order token", op);
  }
  *out = c;
  return KD_OK;
}

/* Undoes comm_new (and whatever transport it got). */
static void comm_drop(kd_comm *c) {
  kd_tensor_release(c->session, c->token);
  kd_comm_unref(c);
}

/* c's rank joins NCCL's communicator id names (ncclCommInitRank), its
 * session's context made current on this thread without keeping the
 * session's lock: outside a group, NCCL blocks until every rank has
 * joined. */
static kd_status nccl_join(kd_comm *c, const kd_comm_id *id, const char *op) {
  kd_status st = kd_session_enter(c->session, op);
  if (st) return st;
  kd_session_leave(c->session);
  kd_nccl_id nid;
  memcpy(&nid, id->bytes, sizeof nid);
  kd_nccl_result r = c->nccl->CommInitRank(&c->nc, c->nranks, nid, c->rank);
  return r ? kd_nccl_fail(c->nccl, NULL, r, op, "ncclCommInitRank") : KD_OK;
}

kd_status kd_comm_create(kd_session *s, const kd_comm_id *id, int nranks, int rank, kd_comm **out) {
  static const char *op = "kd_comm_create";
  kd_status st = session_arg(s, op, "session");
  if (st) return st;
  if (!id) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument id is NULL", op);
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_comm is NULL", op);
  st = check_ranks(op, nranks, rank);
  if (st) return st;
  const kd_nccl_api *nccl = NULL;
  if (s->has_device) st = kd_nccl_load(op, &nccl);
  kd_comm *c = NULL;
  if (!st) st = comm_new(s, op, nranks, rank, &c);
  if (st) return st;
  if (!s->has_device) {
    st = kd_shm_open(op, id, nranks, rank, &c->shm);
  } else {
    c->nccl = nccl;
    st = nccl_join(c, id, op);
    if (st) c->nc = NULL;
  }
  if (st) {
    comm_drop(c);
    return st;
  }
  if (c->nc) live_add(c);
  *out = c;
  return KD_OK;
}

kd_status kd_comm_create_all(kd_session *const *sessions, int count, kd_comm **out) {
  static const char *op = "kd_comm_create_all";
  kd_status st = kd_callback_check(op);
  if (st) return st;
  if (!sessions) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument sessions is NULL", op);
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_comms is NULL", op);
  if (count < 1 || count > 65536)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument count is %d, not in [1, 65536]", op, count);
  for (int i = 0; i < count; ++i) {
    if (!sessions[i]) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: sessions[%d] is NULL", op, i);
    if (sessions[i]->has_device != sessions[0]->has_device)
      return kd_fail(KD_ERR_WRONG_BACKEND, "%s: sessions[%d] is of another backend than sessions[0]", op, i);
    for (int j = 0; j < i; ++j)
      if (sessions[j] == sessions[i])
        return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: sessions[%d] is sessions[%d]: one session per rank", op, i, j);
  }
  kd_comm **made = calloc((size_t)count, sizeof *made);
  if (!made) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for %d communicators", op, count);
  kd_comm_id id;
  if (!sessions[0]->has_device) { /* HOST: nothing waits, so rank after rank */
    st = kd_shm_id_create(op, &id);
    for (int i = 0; !st && i < count; ++i) {
      st = kd_comm_create(sessions[i], &id, count, i, &made[i]);
      if (st) st = kd_fail_context(st, "%s: sessions[%d]", op, i);
    }
  } else {
    const kd_nccl_api *nccl = NULL;
    kd_comm_group *group = NULL;
    st = kd_comm_id_create(sessions[0], &id);
    if (!st) st = kd_nccl_load(op, &nccl);
    static uint64_t serials;
    if (!st && !(group = calloc(1, sizeof *group)))
      st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the group", op);
    if (group) group->serial = ck_pr_faa_64(&serials, 1) + 1;
    for (int i = 0; !st && i < count; ++i) {
      st = comm_new(sessions[i], op, count, i, &made[i]);
      if (st) st = kd_fail_context(st, "%s: sessions[%d]", op, i);
      else {
        made[i]->nccl = nccl;
        made[i]->group = group;
        group->refs++;
      }
    }
    if (!st) { /* NCCL's group: one thread initializes every rank */
      kd_nccl_result r = nccl->GroupStart();
      int started = !r;
      if (r) st = kd_nccl_fail(nccl, NULL, r, op, "ncclGroupStart");
      for (int i = 0; !st && i < count; ++i) {
        st = nccl_join(made[i], &id, op);
        if (st) st = kd_fail_context(st, "%s: sessions[%d]", op, i);
      }
      if (started) { /* ends the group even after a failure inside it */
        kd_nccl_result e = nccl->GroupEnd();
        if (e && !st) st = kd_nccl_fail(nccl, NULL, e, op, "ncclGroupEnd (initializing the ranks)");
      }
      if (st)
        for (int i = 0; i < count; ++i)
          if (made[i] && made[i]->nc) {
            nccl->CommAbort(made[i]->nc);
            made[i]->nc = NULL;
          }
    }
    if (!group || !group->refs) free(group);
  }
  if (st) {
    for (int i = 0; i < count; ++i)
      if (made[i]) comm_drop(made[i]);
    free(made);
    return st;
  }
  for (int i = 0; i < count; ++i)
    if (made[i]->nc) live_add(made[i]);
  memcpy(out, made, (size_t)count * sizeof *made);
  free(made);
  return KD_OK;
}

void kd_comm_destroy(kd_comm *c) {
  if (!c || kd_callback_check("kd_comm_destroy")) return;
  comm_drop(c);
}

kd_status kd_comm_info(kd_comm *c, int *out_rank, int *out_nranks) {
  static const char *op = "kd_comm_info";
  if (!c) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument comm is NULL", op);
  if (!out_rank || !out_nranks)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument %s is NULL", op, out_rank ? "out_nranks" : "out_rank");
  *out_rank = c->rank;
  *out_nranks = c->nranks;
  return KD_OK;
}
