/* SPDX-License-Identifier: Apache-2.0 */
/* tests/null_nccl.c — a null NCCL for the null driver (tests/null_driver.c):
 * a shared library with the entry points kdag resolves (src/cuda/nccl.c),
 * loaded through KDAG_NCCL_PATH, so the host lane runs kdag's CUDA side of
 * kdag/comm.h: ranks joined in a group, collectives enqueued (EAGER) and
 * captured (GRAPH), the thread-per-rank rule, NCCL's refusals, and every
 * communicator destroyed. It proves nothing about NCCL or a GPU.
 *
 * Each collective is a host function on the stream (cuLaunchHostFunc of
 * the driver kdag loaded, found through KDAG_CUDA_DRIVER_PATH): the null
 * driver runs it at its enqueue, or at each launch of a graph that
 * captured it. Like NCCL's kernels it waits for its peers, so ranks need a
 * thread each; a wait gives up after KDAG_NULL_NCCL_WAIT_MS (default
 * 10000) and leaves the data unmoved. Device memory is host memory there.
 * Reductions: f32 sums only (anything else is ncclInvalidArgument, so the
 * tests see NCCL refuse a call). */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

enum { OK = 0, INVALID_ARGUMENT = 4, INVALID_USAGE = 5, TIMEOUT = 8 };
enum { K_ALL_REDUCE, K_REDUCE_SCATTER, K_ALL_GATHER, K_BROADCAST };
#define MAX_RANKS 8
#define MAX_GROUP 16

typedef struct { char internal[128]; } nccl_id;

/* The ranks of one id: a rendezvous for collectives and mailboxes for
 * sends. */
typedef struct shared {
  uint64_t key;
  int nranks, joined, refs;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t generation;     /* collectives completed */
  int arrived;
  struct op *slot[MAX_RANKS];
  /* posted sends, per (from, to): one at a time */
  const void *post[MAX_RANKS][MAX_RANKS];
  size_t post_bytes[MAX_RANKS][MAX_RANKS];
  int taken[MAX_RANKS][MAX_RANKS];
  struct shared *next;
} shared;

typedef struct comm {
  shared *sh;
  int rank;
  struct op *ops;          /* every op made for it (captured ones run later): freed with it */
} comm;

/* One enqueued operation: a collective, or a group's sends and receives. */
typedef struct op {
  comm *c;
  int kind;
  const void *send;
  void *recv;
  size_t count;
  int root;
  int p2p;                 /* sends and receives */
  int nsend, nrecv;
  const void *sbuf[MAX_GROUP];
  size_t sbytes[MAX_GROUP];
  int speer[MAX_GROUP];
  void *rbuf[MAX_GROUP];
  size_t rbytes[MAX_GROUP];
  int rpeer[MAX_GROUP];
  struct op *next;
} op;

/* What it exports (NCCL's names, and the tests' count). */
EXPORT int kdag_null_nccl_live(void);
EXPORT void kdag_null_nccl_fail_async(int code);
EXPORT int ncclGetVersion(int *v);
EXPORT const char *ncclGetErrorString(int r);
EXPORT const char *ncclGetLastError(void *c);
EXPORT int ncclGetUniqueId(nccl_id *id);
EXPORT int ncclCommInitRank(comm **out, int nranks, nccl_id id, int rank);
EXPORT int ncclCommDestroy(comm *c);
EXPORT int ncclCommAbort(comm *c);
EXPORT int ncclCommGetAsyncError(comm *c, int *err);
EXPORT int ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int redop, comm *c, CUstream s);
EXPORT int ncclReduceScatter(const void *send, void *recv, size_t count, int dtype, int redop, comm *c, CUstream s);
EXPORT int ncclAllGather(const void *send, void *recv, size_t count, int dtype, comm *c, CUstream s);
EXPORT int ncclBroadcast(const void *send, void *recv, size_t count, int dtype, int root, comm *c, CUstream s);
EXPORT int ncclSend(const void *send, size_t count, int dtype, int peer, comm *c, CUstream s);
EXPORT int ncclRecv(void *recv, size_t count, int dtype, int peer, comm *c, CUstream s);
EXPORT int ncclGroupStart(void);
EXPORT int ncclGroupEnd(void);

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static shared *g_shared;
static uint64_t g_next_key = 1;
static int g_live;         /* communicators initialized and not yet destroyed */

EXPORT int kdag_null_nccl_live(void) {
  pthread_mutex_lock(&g_mu);
  int n = g_live;
  pthread_mutex_unlock(&g_mu);
  return n;
}

typedef CUresult (*launch_host_fn)(CUstream, CUhostFn, void *);
static launch_host_fn launch_host(void) {
  static launch_host_fn fn;
  if (fn) return fn;
  const char *path = getenv("KDAG_CUDA_DRIVER_PATH");
  void *lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  typedef CUresult (*get_proc)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
  get_proc get = lib ? (get_proc)dlsym(lib, "cuGetProcAddress_v2") : NULL;
  void *p = NULL;
  if (get) get("cuLaunchHostFunc", &p, 12000, 0, NULL);
  if (lib) dlclose(lib); /* kdag holds its own handle */
  fn = (launch_host_fn)p;
  return fn;
}

static long wait_ms(void) {
  const char *e = getenv("KDAG_NULL_NCCL_WAIT_MS");
  return e && atol(e) > 0 ? atol(e) : 10000;
}

static struct timespec deadline(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  long ms = wait_ms();
  t.tv_sec += ms / 1000;
  t.tv_nsec += (ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec++;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

/* ---- the library's own ---- */

EXPORT int ncclGetVersion(int *v) {
  *v = 22306;
  return OK;
}
EXPORT const char *ncclGetErrorString(int r) {
  switch (r) {
    case OK: return "no error";
    case INVALID_ARGUMENT: return "invalid argument (null NCCL)";
    case INVALID_USAGE: return "invalid usage (null NCCL)";
    case TIMEOUT: return "timeout (null NCCL)";
    case 6: return "remote process exited or there was a network error (null NCCL)";
    default: return "unknown result (null NCCL)";
  }
}
static _Thread_local char t_last[256];
EXPORT const char *ncclGetLastError(void *c) {
  (void)c;
  return t_last;
}
static int refuse(int r, const char *why) {
  snprintf(t_last, sizeof t_last, "%s", why);
  return r;
}

EXPORT int ncclGetUniqueId(nccl_id *id) {
  memset(id, 0, sizeof *id);
  pthread_mutex_lock(&g_mu);
  uint64_t key = g_next_key++;
  pthread_mutex_unlock(&g_mu);
  memcpy(id->internal, &key, sizeof key);
  return OK;
}

/* Inits inside a group wait for their peers at its end. */
static _Thread_local int t_group;
static _Thread_local shared *t_pending[MAX_GROUP];
static _Thread_local int t_npending;
static _Thread_local op *t_p2p; /* the group's sends and receives, by stream */
static _Thread_local CUstream t_p2p_stream;

static int wait_joined(shared *sh) {
  struct timespec t = deadline();
  pthread_mutex_lock(&sh->mu);
  int r = OK;
  while (sh->joined < sh->nranks && r == OK)
    if (pthread_cond_timedwait(&sh->cv, &sh->mu, &t) == ETIMEDOUT) r = TIMEOUT;
  pthread_mutex_unlock(&sh->mu);
  return r == OK ? OK : refuse(TIMEOUT, "ranks missing at initialization");
}

EXPORT int ncclCommInitRank(comm **out, int nranks, nccl_id id, int rank) {
  uint64_t key;
  memcpy(&key, id.internal, sizeof key);
  if (nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks || !key)
    return refuse(INVALID_ARGUMENT, "bad nranks, rank or id");
  pthread_mutex_lock(&g_mu);
  shared *sh = g_shared;
  while (sh && sh->key != key) sh = sh->next;
  if (!sh && (sh = calloc(1, sizeof *sh))) {
    sh->key = key;
    sh->nranks = nranks;
    pthread_mutex_init(&sh->mu, NULL);
    pthread_cond_init(&sh->cv, NULL);
    sh->next = g_shared;
    g_shared = sh;
  }
  comm *c = sh ? calloc(1, sizeof *c) : NULL;
  if (c) {
    c->sh = sh;
    c->rank = rank;
    sh->refs++;
    g_live++;
  }
  pthread_mutex_unlock(&g_mu);
  if (!c) return refuse(INVALID_USAGE, "out of memory");
  pthread_mutex_lock(&sh->mu);
  sh->joined++;
  pthread_cond_broadcast(&sh->cv);
  pthread_mutex_unlock(&sh->mu);
  *out = c;
  if (t_group) {
    t_pending[t_npending++ % MAX_GROUP] = sh;
    return OK;
  }
  return wait_joined(sh);
}

static void comm_free(comm *c) {
  pthread_mutex_lock(&g_mu);
  g_live--;
  shared *sh = c->sh;
  if (--sh->refs == 0) {
    shared **p = &g_shared;
    while (*p != sh) p = &(*p)->next;
    *p = sh->next;
    pthread_mutex_destroy(&sh->mu);
    pthread_cond_destroy(&sh->cv);
    free(sh);
  }
  pthread_mutex_unlock(&g_mu);
  while (c->ops) {
    op *o = c->ops;
    c->ops = o->next;
    free(o);
  }
  free(c);
}
EXPORT int ncclCommDestroy(comm *c) {
  if (!c) return refuse(INVALID_ARGUMENT, "NULL communicator");
  comm_free(c);
  return OK;
}
EXPORT int ncclCommAbort(comm *c) { return ncclCommDestroy(c); }
/* What ncclCommGetAsyncError reports from now on (a test's lost peer). */
static int g_async;
EXPORT void kdag_null_nccl_fail_async(int code) {
  pthread_mutex_lock(&g_mu);
  g_async = code;
  pthread_mutex_unlock(&g_mu);
}
EXPORT int ncclCommGetAsyncError(comm *c, int *err) {
  (void)c;
  pthread_mutex_lock(&g_mu);
  *err = g_async;
  pthread_mutex_unlock(&g_mu);
  return OK;
}

/* ---- running operations ---- */

/* Every rank's op of one collective in slot[]: the last to arrive does
 * them all (device memory is host memory), the others wait for it. */
static void run_collective(op *o) {
  shared *sh = o->c->sh;
  struct timespec t = deadline();
  pthread_mutex_lock(&sh->mu);
  uint64_t gen = sh->generation;
  sh->slot[o->c->rank] = o;
  if (++sh->arrived == sh->nranks) {
    int n = sh->nranks;
    /* Results into scratch first: a rank's buffer may be another's input
     * (in place), and every input is read before any output is written. */
    float *tmp[MAX_RANKS] = {0};
    for (int r = 0; r < n; ++r) {
      op *me = sh->slot[r];
      if (me->kind != K_ALL_REDUCE && me->kind != K_REDUCE_SCATTER) continue;
      if (!(tmp[r] = malloc(me->count * sizeof(float) + 1))) continue;
      size_t base = me->kind == K_REDUCE_SCATTER ? (size_t)r * me->count : 0;
      for (size_t i = 0; i < me->count; ++i) {
        float v = 0;
        for (int k = 0; k < n; ++k) v += ((const float *)sh->slot[k]->send)[base + i];
        tmp[r][i] = v;
      }
    }
    for (int r = 0; r < n; ++r) {
      op *me = sh->slot[r];
      if (tmp[r]) memcpy(me->recv, tmp[r], me->count * sizeof(float));
      free(tmp[r]);
      if (me->kind == K_ALL_GATHER)
        for (int k = 0; k < n; ++k) memcpy((char *)me->recv + (size_t)k * me->count, sh->slot[k]->send, me->count);
      if (me->kind == K_BROADCAST && r != me->root) memcpy(me->recv, sh->slot[me->root]->send, me->count);
    }
    sh->arrived = 0;
    sh->generation++;
    pthread_cond_broadcast(&sh->cv);
  } else {
    while (sh->generation == gen)
      if (pthread_cond_timedwait(&sh->cv, &sh->mu, &t) == ETIMEDOUT) { /* given up: the data stays */
        sh->arrived--;
        sh->slot[o->c->rank] = NULL;
        break;
      }
  }
  pthread_mutex_unlock(&sh->mu);
}

/* A group's sends and receives: post every send, take every receive,
 * then wait until the peers took the sends. */
static void run_p2p(op *o) {
  shared *sh = o->c->sh;
  int me = o->c->rank;
  struct timespec t = deadline();
  pthread_mutex_lock(&sh->mu);
  for (int i = 0; i < o->nsend; ++i) {
    while (sh->post[me][o->speer[i]])
      if (pthread_cond_timedwait(&sh->cv, &sh->mu, &t) == ETIMEDOUT) goto out;
    sh->post[me][o->speer[i]] = o->sbuf[i];
    sh->post_bytes[me][o->speer[i]] = o->sbytes[i];
    sh->taken[me][o->speer[i]] = 0;
  }
  pthread_cond_broadcast(&sh->cv);
  for (int i = 0; i < o->nrecv; ++i) {
    int from = o->rpeer[i];
    while (!sh->post[from][me] || sh->taken[from][me])
      if (pthread_cond_timedwait(&sh->cv, &sh->mu, &t) == ETIMEDOUT) goto out;
    size_t n = sh->post_bytes[from][me] < o->rbytes[i] ? sh->post_bytes[from][me] : o->rbytes[i];
    memcpy(o->rbuf[i], sh->post[from][me], n);
    sh->taken[from][me] = 1;
    pthread_cond_broadcast(&sh->cv);
  }
  for (int i = 0; i < o->nsend; ++i) {
    while (!sh->taken[me][o->speer[i]])
      if (pthread_cond_timedwait(&sh->cv, &sh->mu, &t) == ETIMEDOUT) goto out;
    sh->post[me][o->speer[i]] = NULL;
  }
  pthread_cond_broadcast(&sh->cv);
out:
  pthread_mutex_unlock(&sh->mu);
}

static void CUDA_CB run(void *p) {
  op *o = p;
  if (o->p2p) run_p2p(o);
  else run_collective(o);
}

static op *op_new(comm *c) {
  op *o = calloc(1, sizeof *o);
  if (!o) return NULL;
  o->c = c;
  o->next = c->ops;
  c->ops = o;
  return o;
}

static int enqueue(op *o, CUstream s) {
  launch_host_fn fn = launch_host();
  if (!fn) return refuse(INVALID_USAGE, "no null driver (KDAG_CUDA_DRIVER_PATH) to enqueue on");
  return fn(s, run, o) == CUDA_SUCCESS ? OK : refuse(INVALID_USAGE, "cuLaunchHostFunc failed");
}

static int collective(comm *c, int kind, const void *send, void *recv, size_t count, int root, CUstream s) {
  if (!c) return refuse(INVALID_ARGUMENT, "NULL communicator");
  op *o = op_new(c);
  if (!o) return refuse(INVALID_USAGE, "out of memory");
  o->kind = kind;
  o->send = send;
  o->recv = recv;
  o->count = count;
  o->root = root;
  return enqueue(o, s);
}

EXPORT int ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int redop, comm *c, CUstream s) {
  if (dtype != 7 || redop != 0) return refuse(INVALID_ARGUMENT, "the null NCCL reduces f32 sums only");
  return collective(c, K_ALL_REDUCE, send, recv, count, 0, s);
}
EXPORT int ncclReduceScatter(const void *send, void *recv, size_t count, int dtype, int redop, comm *c, CUstream s) {
  if (dtype != 7 || redop != 0) return refuse(INVALID_ARGUMENT, "the null NCCL reduces f32 sums only");
  return collective(c, K_REDUCE_SCATTER, send, recv, count, 0, s);
}
EXPORT int ncclAllGather(const void *send, void *recv, size_t count, int dtype, comm *c, CUstream s) {
  if (dtype != 1) return refuse(INVALID_ARGUMENT, "the null NCCL gathers bytes only");
  return collective(c, K_ALL_GATHER, send, recv, count, 0, s);
}
EXPORT int ncclBroadcast(const void *send, void *recv, size_t count, int dtype, int root, comm *c, CUstream s) {
  if (dtype != 1 || send != recv) return refuse(INVALID_ARGUMENT, "the null NCCL broadcasts bytes in place only");
  return collective(c, K_BROADCAST, send, recv, count, root, s);
}

static int p2p(comm *c, CUstream s, const void *sbuf, void *rbuf, size_t bytes, int dtype, int peer) {
  if (!c || dtype != 1 || peer < 0 || peer >= c->sh->nranks) return refuse(INVALID_ARGUMENT, "bad send or receive");
  if (!t_group) return refuse(INVALID_USAGE, "the null NCCL sends and receives inside a group only");
  if (t_p2p && (t_p2p->c != c || t_p2p_stream != s)) return refuse(INVALID_USAGE, "one communicator a group");
  if (!t_p2p && !(t_p2p = op_new(c))) return refuse(INVALID_USAGE, "out of memory");
  t_p2p->p2p = 1;
  t_p2p_stream = s;
  if (sbuf && t_p2p->nsend < MAX_GROUP) {
    t_p2p->sbuf[t_p2p->nsend] = sbuf;
    t_p2p->sbytes[t_p2p->nsend] = bytes;
    t_p2p->speer[t_p2p->nsend++] = peer;
  } else if (rbuf && t_p2p->nrecv < MAX_GROUP) {
    t_p2p->rbuf[t_p2p->nrecv] = rbuf;
    t_p2p->rbytes[t_p2p->nrecv] = bytes;
    t_p2p->rpeer[t_p2p->nrecv++] = peer;
  }
  return OK;
}
EXPORT int ncclSend(const void *send, size_t count, int dtype, int peer, comm *c, CUstream s) {
  return p2p(c, s, send, NULL, count, dtype, peer);
}
EXPORT int ncclRecv(void *recv, size_t count, int dtype, int peer, comm *c, CUstream s) {
  return p2p(c, s, NULL, recv, count, dtype, peer);
}

EXPORT int ncclGroupStart(void) {
  t_group++;
  return OK;
}
EXPORT int ncclGroupEnd(void) {
  if (!t_group) return refuse(INVALID_USAGE, "ncclGroupEnd without ncclGroupStart");
  if (--t_group) return OK;
  int r = OK;
  for (int i = 0; i < t_npending && i < MAX_GROUP && r == OK; ++i) r = wait_joined(t_pending[i]);
  t_npending = 0;
  if (t_p2p) {
    op *o = t_p2p;
    t_p2p = NULL;
    if (r == OK) r = enqueue(o, t_p2p_stream);
  }
  return r;
}
