/* SPDX-License-Identifier: Apache-2.0 */
/* The HOST backend's collectives: every rank maps one POSIX shared-memory
 * segment holding a slot per rank, a mailbox per ordered pair of ranks,
 * and a pair of counters per rank. A collective moves the data through
 * the slots a chunk at a time, each chunk between two counter barriers
 * (all slots written; all slots read), and every rank reduces the slots
 * in rank order, so every rank gets the same bits. Sends and receives go
 * through the pair's mailbox, one chunk in flight. Waits spin, then
 * yield, then sleep: ranks may share few cores. */
#include "exec/comm_host.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/status_internal.h"
#include "session/trace.h"
#include "kernels/strided.h"

#define SLOT_BYTES ((size_t)256 << 10)
#define BOX_BYTES ((size_t)64 << 10)
#define ID_MAGIC "kdag-shm-1"

typedef struct line {
  _Atomic uint64_t v;
  char pad[56];
} line;

/* What each rank says it is doing, compared before any data moves. */
typedef struct meta {
  uint32_t kind, dtype, op;
  int32_t root;
  uint64_t count;
} meta;

typedef struct hdr {
  uint32_t nranks;
  _Atomic uint32_t joined;
  _Atomic uint32_t failed;   /* a rank failed: every wait stops */
  line arrive[KD_COMM_HOST_MAX_RANKS], leave[KD_COMM_HOST_MAX_RANKS];
  meta meta[KD_COMM_HOST_MAX_RANKS];
} hdr;

typedef struct box {
  _Atomic uint64_t put, taken; /* chunks put and taken: full while put > taken */
  uint64_t bytes, total;       /* this chunk's, and the whole message's */
  char pad[32];
} box;

struct kd_shm_comm {
  hdr *h;
  size_t size;
  int nranks, rank;
  uint64_t phase;            /* barriers passed: the same on every rank */
  double timeout_s;
};

enum { K_ALL_REDUCE = 1, K_REDUCE_SCATTER, K_ALL_GATHER, K_BROADCAST };
static const char *const kind_names[] = {"", "all_reduce", "reduce_scatter", "all_gather", "broadcast"};

static unsigned char *slot(kd_shm_comm *c, int r) { return (unsigned char *)(c->h + 1) + (size_t)r * SLOT_BYTES; }
static box *mailbox(kd_shm_comm *c, int from, int to) {
  size_t each = sizeof(box) + BOX_BYTES;
  return (box *)(slot(c, c->nranks) + ((size_t)from * (size_t)c->nranks + (size_t)to) * each);
}
static unsigned char *box_data(box *b) { return (unsigned char *)(b + 1); }

static size_t segment_size(int nranks) {
  return sizeof(hdr) + (size_t)nranks * SLOT_BYTES + (size_t)nranks * (size_t)nranks * (sizeof(box) + BOX_BYTES);
}

static const char *id_name(const kd_comm_id *id) { return (const char *)id->bytes + sizeof ID_MAGIC; }

kd_status kd_shm_id_create(const char *op, kd_comm_id *out) {
  static _Atomic unsigned counter;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  memset(out, 0, sizeof *out);
  memcpy(out->bytes, ID_MAGIC, sizeof ID_MAGIC);
  int n = snprintf((char *)out->bytes + sizeof ID_MAGIC, sizeof out->bytes - sizeof ID_MAGIC, "/kdag-%ld-%u-%lx",
                   (long)getpid(), atomic_fetch_add(&counter, 1), (unsigned long)(ts.tv_nsec ^ ts.tv_sec));
  if (n <= 0 || (size_t)n >= sizeof out->bytes - sizeof ID_MAGIC)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: no room for the segment's name", op);
  return KD_OK;
}

kd_status kd_shm_open(const char *op, const kd_comm_id *id, int nranks, int rank, kd_shm_comm **out) {
  if (memcmp(id->bytes, ID_MAGIC, sizeof ID_MAGIC) || !memchr(id_name(id), 0, sizeof id->bytes - sizeof ID_MAGIC))
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument id was not made by kd_comm_id_create on a HOST session",
                   op);
  if (nranks > KD_COMM_HOST_MAX_RANKS)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument nranks is %d; a HOST communicator has at most %d", op,
                   nranks, KD_COMM_HOST_MAX_RANKS);
  kd_shm_comm *c = calloc(1, sizeof *c);
  if (!c) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the communicator", op);
  c->nranks = nranks;
  c->rank = rank;
  c->size = segment_size(nranks);
  const char *env = getenv("KDAG_COMM_TIMEOUT_S");
  c->timeout_s = env && atof(env) > 0 ? atof(env) : 600.0;
  const char *name = id_name(id);
  int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
  if (fd < 0) {
    int e = errno;
    free(c);
    return kd_fail(KD_ERR_COMM_FAILED, "%s: shm_open(\"%s\") failed: %s", op, name, strerror(e));
  }
  /* Every rank sets the same size: whoever comes first creates it zeroed. */
  int e = ftruncate(fd, (off_t)c->size) ? errno : 0;
  void *p = e ? MAP_FAILED : mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (!e && p == MAP_FAILED) e = errno;
  close(fd);
  if (e) {
    free(c);
    return kd_fail(KD_ERR_COMM_FAILED, "%s: mapping the %zu-byte segment \"%s\" failed: %s", op,
                   segment_size(nranks), name, strerror(e));
  }
  c->h = p;
  if (atomic_fetch_add(&c->h->joined, 1) + 1 == (uint32_t)nranks) shm_unlink(name); /* all have it mapped */
  *out = c;
  return KD_OK;
}

void kd_shm_close(kd_shm_comm *c) {
  if (!c) return;
  munmap(c->h, c->size);
  free(c);
}

/* Marks the communicator failed for every rank, and says why. */
static kd_status broke(kd_shm_comm *c, kd_status st) {
  atomic_store(&c->h->failed, 1);
  return st;
}

/* One step of a wait: spin first, then give the core away. 1 to go on,
 * 0 when the time is up or a peer failed (then *st says why). */
typedef struct waiter {
  uint32_t spins;
  double start;
} waiter;

static int wait_step(kd_shm_comm *c, waiter *w, const char *what, const char *for_what, int peer, kd_status *st) {
  if (atomic_load_explicit(&c->h->failed, memory_order_acquire)) {
    *st = kd_fail(KD_ERR_COMM_FAILED, "%s: rank %d of %d: another rank failed before %s", what, c->rank, c->nranks,
                  for_what);
    return 0;
  }
  ++w->spins;
  if (w->spins < 64) return 1;
  if (w->spins == 64) w->start = 1e-9 * (double)kd_trace_now();
  if (w->spins < 4096) {
    sched_yield();
  } else {
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
  }
  if ((w->spins & 255) == 0 && 1e-9 * (double)kd_trace_now() - w->start > c->timeout_s) {
    *st = broke(c, kd_fail(KD_ERR_COMM_FAILED, "%s: rank %d of %d: rank %d did not arrive within %g s "
                           "(KDAG_COMM_TIMEOUT_S) for %s", what, c->rank, c->nranks, peer, c->timeout_s, for_what));
    return 0;
  }
  return 1;
}

/* Every rank's counter at phase or past it. */
static kd_status barrier(kd_shm_comm *c, line *ctr, const char *what, const char *for_what) {
  kd_status st = KD_OK;
  atomic_store_explicit(&ctr[c->rank].v, c->phase, memory_order_release);
  for (int r = 0; r < c->nranks; ++r) {
    waiter w = {0, 0};
    while (atomic_load_explicit(&ctr[r].v, memory_order_acquire) < c->phase)
      if (!wait_step(c, &w, what, for_what, r, &st)) return st;
  }
  return KD_OK;
}

static void describe(const meta *m, char *buf, size_t cap) {
  snprintf(buf, cap, "%s of %llu %s elements", m->kind < 5 ? kind_names[m->kind] : "?",
           (unsigned long long)m->count, kd_dtype_name((kd_dtype)m->dtype));
  if (m->kind == K_BROADCAST) snprintf(buf + strlen(buf), cap - strlen(buf), " from rank %d", m->root);
}

/* Publishes this rank's chunk (already in its slot) and its meta, waits
 * for every rank's, and checks that they all do the same thing. */
static kd_status gather_chunk(kd_shm_comm *c, const meta *m, int first, const char *what) {
  c->phase++;
  if (first) c->h->meta[c->rank] = *m;
  kd_status st = barrier(c, c->h->arrive, what, kind_names[m->kind]);
  if (st || !first) return st;
  for (int r = 0; r < c->nranks; ++r) {
    const meta *o = &c->h->meta[r];
    if (o->kind == m->kind && o->dtype == m->dtype && o->op == m->op && o->root == m->root && o->count == m->count)
      continue;
    char mine[128], theirs[128];
    describe(m, mine, sizeof mine);
    describe(o, theirs, sizeof theirs);
    return broke(c, kd_fail(KD_ERR_COMM_FAILED, "%s: the ranks disagree: rank %d has %s, rank %d %s", what, c->rank,
                            mine, r, theirs));
  }
  return KD_OK;
}

/* Every rank has read every slot: they may be written again. */
static kd_status release_chunk(kd_shm_comm *c, const meta *m, const char *what) {
  return barrier(c, c->h->leave, what, kind_names[m->kind]);
}

/* ---- reductions: acc[i] = acc[i] op x[i], in the type's arithmetic ---- */

#define KD_REDUCE_LOOP(T, ADD, MUL)                                           \
  do {                                                                        \
    T *a = acc;                                                               \
    const T *b = x;                                                           \
    for (size_t i = 0; i < n; ++i) {                                          \
      T u = a[i], v = b[i];                                                   \
      switch (op) {                                                           \
        case KD_REDUCE_SUM: case KD_REDUCE_AVG: a[i] = ADD; break;            \
        case KD_REDUCE_PROD: a[i] = MUL; break;                               \
        case KD_REDUCE_MAX: a[i] = v > u ? v : u; break;                      \
        case KD_REDUCE_MIN: a[i] = v < u ? v : u; break;                      \
      }                                                                       \
    }                                                                         \
  } while (0)

/* Integers wrap: added and multiplied as unsigned of their width. */
#define KD_WRAP(T, U, E) (T)(U)((U)u E (U)v)

static float half_op(kd_reduce op, float u, float v) {
  switch (op) {
    case KD_REDUCE_PROD: return u * v;
    case KD_REDUCE_MAX: return v > u ? v : u;
    case KD_REDUCE_MIN: return v < u ? v : u;
    default: return u + v;
  }
}

static void reduce_into(kd_dtype dtype, kd_reduce op, void *acc, const void *x, size_t n) {
  switch (dtype) {
    case KD_C32: n *= 2; /* SUM and AVG only: per component */ /* fall through */
    case KD_F32: KD_REDUCE_LOOP(float, u + v, u * v); break;
    case KD_C64: n *= 2; /* fall through */
    case KD_F64: KD_REDUCE_LOOP(double, u + v, u * v); break;
    case KD_I32: KD_REDUCE_LOOP(int32_t, KD_WRAP(int32_t, uint32_t, +), KD_WRAP(int32_t, uint32_t, *)); break;
    case KD_I64: KD_REDUCE_LOOP(int64_t, KD_WRAP(int64_t, uint64_t, +), KD_WRAP(int64_t, uint64_t, *)); break;
    case KD_I8: KD_REDUCE_LOOP(int8_t, KD_WRAP(int8_t, uint8_t, +), KD_WRAP(int8_t, uint8_t, *)); break;
    case KD_U8: KD_REDUCE_LOOP(uint8_t, (uint8_t)(u + v), (uint8_t)(u * v)); break;
    case KD_U32: KD_REDUCE_LOOP(uint32_t, u + v, u * v); break;
    case KD_U64: KD_REDUCE_LOOP(uint64_t, u + v, u * v); break;
    case KD_F16:
    case KD_BF16: {
      uint16_t *a = acc;
      const uint16_t *b = x;
      for (size_t i = 0; i < n; ++i) {
        float u = dtype == KD_F16 ? kd_kf16_to_f32(a[i]) : kd_kbf16_to_f32(a[i]);
        float v = dtype == KD_F16 ? kd_kf16_to_f32(b[i]) : kd_kbf16_to_f32(b[i]);
        float r = half_op(op, u, v);
        a[i] = dtype == KD_F16 ? kd_kf32_to_f16(r) : kd_kf32_to_bf16(r);
      }
      break;
    }
    default: break; /* refused when the node is declared */
  }
}

/* AVG: the sum divided by the ranks (floating-point types only). */
static void average(kd_dtype dtype, void *acc, size_t n, int nranks) {
  if (dtype == KD_C32 || dtype == KD_C64) n *= 2;
  for (size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case KD_C32:
      case KD_F32: ((float *)acc)[i] /= (float)nranks; break;
      case KD_C64:
      case KD_F64: ((double *)acc)[i] /= (double)nranks; break;
      case KD_F16: ((uint16_t *)acc)[i] = kd_kf32_to_f16(kd_kf16_to_f32(((uint16_t *)acc)[i]) / (float)nranks); break;
      case KD_BF16:
        ((uint16_t *)acc)[i] = kd_kf32_to_bf16(kd_kbf16_to_f32(((uint16_t *)acc)[i]) / (float)nranks);
        break;
      default: break;
    }
  }
}

/* out = slot[0][off..] op slot[1][off..] op ... in rank order. */
static void reduce_slots(kd_shm_comm *c, kd_dtype dtype, kd_reduce op, size_t off, void *out, size_t n) {
  size_t es = kd_dtype_size(dtype);
  memcpy(out, slot(c, 0) + off, n * es);
  for (int r = 1; r < c->nranks; ++r) reduce_into(dtype, op, out, slot(c, r) + off, n);
  if (op == KD_REDUCE_AVG) average(dtype, out, n, c->nranks);
}

kd_status kd_shm_all_reduce(kd_shm_comm *c, const char *what, const void *src, void *dst, size_t count,
                            kd_dtype dtype, kd_reduce op) {
  size_t es = kd_dtype_size(dtype), per = SLOT_BYTES / es;
  meta m = {K_ALL_REDUCE, (uint32_t)dtype, (uint32_t)op, -1, count};
  size_t at = 0;
  do {
    size_t n = count - at < per ? count - at : per;
    memcpy(slot(c, c->rank), (const unsigned char *)src + at * es, n * es);
    kd_status st = gather_chunk(c, &m, at == 0, what);
    if (!st) reduce_slots(c, dtype, op, 0, (unsigned char *)dst + at * es, n);
    if (!st) st = release_chunk(c, &m, what);
    if (st) return st;
    at += n;
  } while (at < count);
  return KD_OK;
}

kd_status kd_shm_reduce_scatter(kd_shm_comm *c, const char *what, const void *src, void *dst, size_t count,
                                kd_dtype dtype, kd_reduce op) {
  size_t es = kd_dtype_size(dtype), per = SLOT_BYTES / es / (size_t)c->nranks;
  meta m = {K_REDUCE_SCATTER, (uint32_t)dtype, (uint32_t)op, -1, count};
  size_t at = 0;
  do {
    size_t n = count - at < per ? count - at : per;
    for (int p = 0; p < c->nranks; ++p) /* piece p of this chunk: what rank p reduces */
      memcpy(slot(c, c->rank) + (size_t)p * n * es, (const unsigned char *)src + ((size_t)p * count + at) * es,
             n * es);
    kd_status st = gather_chunk(c, &m, at == 0, what);
    if (!st) reduce_slots(c, dtype, op, (size_t)c->rank * n * es, (unsigned char *)dst + at * es, n);
    if (!st) st = release_chunk(c, &m, what);
    if (st) return st;
    at += n;
  } while (at < count);
  return KD_OK;
}

kd_status kd_shm_all_gather(kd_shm_comm *c, const char *what, const void *src, void *dst, size_t bytes) {
  meta m = {K_ALL_GATHER, (uint32_t)KD_U8, 0, -1, bytes};
  size_t at = 0;
  do {
    size_t n = bytes - at < SLOT_BYTES ? bytes - at : SLOT_BYTES;
    memcpy(slot(c, c->rank), (const unsigned char *)src + at, n);
    kd_status st = gather_chunk(c, &m, at == 0, what);
    for (int r = 0; !st && r < c->nranks; ++r) memcpy((unsigned char *)dst + (size_t)r * bytes + at, slot(c, r), n);
    if (!st) st = release_chunk(c, &m, what);
    if (st) return st;
    at += n;
  } while (at < bytes);
  return KD_OK;
}

kd_status kd_shm_broadcast(kd_shm_comm *c, const char *what, void *buf, size_t bytes, int root) {
  meta m = {K_BROADCAST, (uint32_t)KD_U8, 0, root, bytes};
  size_t at = 0;
  do {
    size_t n = bytes - at < SLOT_BYTES ? bytes - at : SLOT_BYTES;
    if (c->rank == root) memcpy(slot(c, root), (unsigned char *)buf + at, n);
    kd_status st = gather_chunk(c, &m, at == 0, what);
    if (!st && c->rank != root) memcpy((unsigned char *)buf + at, slot(c, root), n);
    if (!st) st = release_chunk(c, &m, what);
    if (st) return st;
    at += n;
  } while (at < bytes);
  return KD_OK;
}

static size_t chunks(size_t bytes) { return bytes ? (bytes + BOX_BYTES - 1) / BOX_BYTES : 1; }

kd_status kd_shm_send_recv(kd_shm_comm *c, const char *what, const void *send, size_t send_bytes, int to,
                           void *recv, size_t recv_bytes, int from) {
  size_t sent = 0, got = 0, to_send = to >= 0 ? chunks(send_bytes) : 0, to_get = from >= 0 ? chunks(recv_bytes) : 0;
  box *out = to >= 0 ? mailbox(c, c->rank, to) : NULL, *in = from >= 0 ? mailbox(c, from, c->rank) : NULL;
  waiter w = {0, 0};
  kd_status st = KD_OK;
  while (sent < to_send || got < to_get) {
    int moved = 0;
    if (sent < to_send && atomic_load_explicit(&out->taken, memory_order_acquire) ==
                              atomic_load_explicit(&out->put, memory_order_relaxed)) {
      size_t at = sent * BOX_BYTES, n = send_bytes - at < BOX_BYTES ? send_bytes - at : BOX_BYTES;
      memcpy(box_data(out), (const unsigned char *)send + at, n);
      out->bytes = n;
      out->total = send_bytes;
      atomic_fetch_add_explicit(&out->put, 1, memory_order_release);
      sent++;
      moved = 1;
    }
    if (got < to_get && atomic_load_explicit(&in->put, memory_order_acquire) >
                            atomic_load_explicit(&in->taken, memory_order_relaxed)) {
      if (in->total != recv_bytes)
        return broke(c, kd_fail(KD_ERR_COMM_FAILED, "%s: rank %d of %d receives %zu bytes from rank %d, which sends "
                                "%llu", what, c->rank, c->nranks, recv_bytes, from, (unsigned long long)in->total));
      memcpy((unsigned char *)recv + got * BOX_BYTES, box_data(in), in->bytes);
      atomic_fetch_add_explicit(&in->taken, 1, memory_order_release);
      got++;
      moved = 1;
    }
    if (moved) {
      w.spins = 0;
    } else if (!wait_step(c, &w, what, sent < to_send ? "a send" : "a receive", sent < to_send ? to : from, &st)) {
      return st;
    }
  }
  return KD_OK;
}
