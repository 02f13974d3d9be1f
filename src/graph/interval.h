/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: a tensor's active accesses (those that can still conflict with
 * later ones), by their footprints' bounding element intervals, so that a
 * new access visits only the entries whose interval meets its own.
 *
 * One array per set, whose entries share a few cache lines (sets are small
 * as a rule: a covering write retires what it covers). Up to
 * KD_IVSET_SCAN entries it is kept in no order: a query tests every entry,
 * without a branch on the data, an insertion appends, and a retirement
 * moves the last entry into the hole (keeping it sorted moved half the
 * entries and mispredicted where to stop, which cost more than a query
 * saved by stopping early: 15-20% of the declaration benchmark's time at
 * 10k nodes, by interleaved A/B). Beyond, it is
 * sorted by interval start: a query is a binary search and a scan of the
 * matches, and the longest interval in the set bounds how far before the
 * query a match can start. */
#ifndef KDAG_GRAPH_INTERVAL_H
#define KDAG_GRAPH_INTERVAL_H

#include <stdint.h>

#include "graph/footprint.h"

/* An entry's flags (kd_ival.flags), written as one byte: a bit-field's
 * read-modify-write of a line just stored to stalls (it did, measurably). */
enum {
  KD_IVAL_KIND = 3,          /* kd_fp_kind */
  KD_IVAL_SHADOWED = 1 << 2, /* a write that a later read of another node covers: later
                                writes are ordered after it through that read */
  KD_IVAL_OVERWRITTEN = 1 << 3, /* a read that a later write of another node overlaps
                                (without covering it: that retires it): a later read that
                                covers it is ordered after that write, so after it, and
                                orders every later write that meets it, so it retires it */
  KD_IVAL_WITNESS_SHIFT = 4, /* bits 4-6: how many witness runs it has (kd_ival_witnesses) */
  KD_IVAL_WITNESS_MASK = 7 << 4,
  KD_IVAL_RETIRED = 1 << 7   /* retired from a set of more than KD_IVSET_SCAN entries:
                                removed at the next kd_ivset_sweep */
};

/* Witness runs an entry keeps, from different writes (the two colours of
 * a red-black sweep each leave one on what they both overwrite in part). */
#define KD_IVAL_WITNESSES 4
_Static_assert(KD_IVAL_WITNESSES <= KD_FP_SPARE_RUNS, "a footprint block has room for every witness");

/* 32 bytes: two entries a cache line; that is what a query scans and an
 * insert moves. */
typedef struct kd_ival {
  int64_t lo, hi;          /* the footprint's bounding interval [lo, hi), not empty */
  void *data;              /* the footprint's runs or box, then room for the witness runs:
                              owned; NULL for the one run [lo, hi) without a witness */
  uint32_t node;
  uint16_t count;          /* as kd_footprint.count: at most KD_IVAL_MAX_RUNS */
  uint8_t mode;            /* kd_access */
  uint8_t flags;           /* KD_IVAL_* */
} kd_ival;
_Static_assert(sizeof(kd_ival) <= 32, "an interval entry grew past 32 bytes");

static inline int kd_ival_kind(const kd_ival *e) { return e->flags & KD_IVAL_KIND; }

/* Parts of what later writes of other nodes wrote over the entry without
 * covering it: every later access that meets one meets that write, so
 * follows it, and with it the entry, whose edge to it is then implied.
 * Kept after the footprint's numbers, in room every runs list and box
 * block has (kd_footprint_build). Sets *n to how many (0: none). */
static inline kd_run *kd_ival_witnesses(const kd_ival *e, uint32_t *n) {
  *n = (e->flags & KD_IVAL_WITNESS_MASK) >> KD_IVAL_WITNESS_SHIFT;
  if (!e->data) return NULL;
  if (kd_ival_kind(e) == KD_FP_BOX) return (kd_run *)((int64_t *)e->data + 4 * e->count);
  return (kd_run *)e->data + e->count;
}

/* An entry's run count is 16 bits. */
#define KD_IVAL_MAX_RUNS UINT16_MAX

typedef struct kd_ivset {
  kd_ival *at;             /* count <= KD_IVSET_SCAN: any order; beyond: sorted by lo */
  uint32_t count, cap;
  uint32_t first_retired;  /* lowest retired index; count when none */
  uint32_t overwritten;    /* entries with the overwritten flag (kd_ivset_overwrite) */
  int64_t max_len;         /* no entry is longer; tight while the set has more than
                              KD_IVSET_SCAN entries (smaller sets are scanned whole) */
} kd_ivset;

/* Sets this small are searched by a scan: 1 KB, 16 cache lines. 32 rather
 * than 16: in the declaration benchmark's steady state a tensor's readers
 * number 12 on average with a long tail, and the sorted path's binary
 * searches and insertion moves for sets of 17-32 cost 7-13% of the time
 * (interleaved A/B, 3 rounds); 64 gained 0-3% more, within noise. */
#define KD_IVSET_SCAN 32

/* The entry's footprint, for the kd_footprint tests (borrows its numbers). */
static inline kd_footprint kd_ival_footprint(const kd_ival *e) {
  kd_footprint f = {kd_ival_kind(e) == KD_FP_RUNS && e->count == 1 ? NULL : e->data, {e->lo, e->hi}, e->count,
                    (uint8_t)kd_ival_kind(e), 0};
  return f;
}

/* kd_footprint_overlap and kd_footprint_covers against an entry, without
 * building its footprint when both are one run (the common case). */
static inline int kd_ival_overlaps(const kd_ival *e, const kd_footprint *fp) {
  if (e->count == 1 && fp->count == 1 && kd_ival_kind(e) == KD_FP_RUNS && fp->kind == KD_FP_RUNS)
    return e->lo < fp->one.hi && fp->one.lo < e->hi; /* one run each: the intervals are the runs */
  kd_footprint f = kd_ival_footprint(e);
  return kd_footprint_overlap(&f, fp);
}
static inline int kd_ival_covered(const kd_ival *e, const kd_footprint *outer) {
  if (e->count == 1 && outer->count == 1 && kd_ival_kind(e) != KD_FP_BOX && outer->kind == KD_FP_RUNS)
    return outer->one.lo <= e->lo && e->hi <= outer->one.hi; /* a run holds a run or an interval */
  kd_footprint f = kd_ival_footprint(e);
  return kd_footprint_covers(outer, &f);
}

void kd_ivset_init(kd_ivset *s);
void kd_ivset_free(kd_ivset *s);
/* Room for more entries without allocating: 0 out of memory. */
int kd_ivset_grow(kd_ivset *s, uint32_t more);
static inline int kd_ivset_reserve(kd_ivset *s, uint32_t more) {
  return s->count + more <= s->cap || kd_ivset_grow(s, more);
}
/* The first index whose entry starts after x, in a set of more than
 * KD_IVSET_SCAN entries (sorted). */
uint32_t kd_ivset_after(const kd_ivset *s, int64_t x);
/* Appends to out the entries whose interval meets [lo, hi) (in the set's
 * order); returns how many. out needs room for every entry of the set (it is
 * written past the matches). The pointers stay valid until the next insert
 * or sweep, and a retirement from a small set moves its last entry (see
 * kd_ivset_retire). Inline: every access queries one or two sets. */
static inline uint32_t kd_ivset_find(kd_ivset *s, int64_t lo, int64_t hi, kd_ival **out) {
  uint32_t n = 0;
  kd_ival *at = s->at; /* out cannot alias the set: no reload per entry */
  /* Written always, counted when it matches: whether an entry meets the
   * query is data the branch predictor cannot learn. */
  if (s->count <= KD_IVSET_SCAN) { /* in any order: every entry */
    for (uint32_t i = 0, count = s->count; i < count; ++i) {
      out[n] = &at[i];
      n += (at[i].lo < hi) & (at[i].hi > lo);
    }
    return n;
  }
  /* Sorted: an entry that ends after lo starts after lo - max_len. */
  for (uint32_t i = kd_ivset_after(s, lo - s->max_len), count = s->count; i < count && at[i].lo < hi; ++i) {
    out[n] = &at[i];
    n += at[i].hi > lo;
  }
  return n;
}
/* Frees the entry's numbers and removes it: from a small set at once, by
 * moving the last entry into its place (so retire a query's matches last
 * first: pointers to entries before e stay valid); from a large one, which
 * must stay sorted, by marking it for the next sweep. */
void kd_ivset_retire(kd_ivset *s, kd_ival *e);
/* Blocks for the witnesses of entries of one run, which have none of their
 * own: taken from here, so that noting a witness cannot fail (the caller
 * reserves as many as it may take, kd_witness_pool_reserve). */
typedef struct kd_witness_pool {
  kd_run **blocks;         /* each malloc'd, 1 + KD_IVAL_WITNESSES runs: freed as an entry's data */
  uint32_t count, cap;
} kd_witness_pool;
/* At least n blocks in the pool: 0 out of memory (the pool keeps what it
 * got). */
int kd_witness_pool_reserve(kd_witness_pool *p, uint32_t n);
void kd_witness_pool_free(kd_witness_pool *p);

/* Notes that a later write of another node overlaps e (in set s) without
 * covering it: part of that write (witness, if any) becomes a witness of e
 * while it has fewer than KD_IVAL_WITNESSES and none that meets it (an
 * entry of one run takes a block from pool, which must have one), and a
 * read is flagged overwritten, counted in s. */
void kd_ivset_overwrite(kd_ivset *s, kd_ival *e, const kd_run *witness, kd_witness_pool *pool);
/* Drops the retired entries. */
void kd_ivset_sweep_retired(kd_ivset *s);
static inline void kd_ivset_sweep(kd_ivset *s) {
  if (s->first_retired < s->count) kd_ivset_sweep_retired(s); /* most accesses retire nothing */
}
/* kd_ivset_insert into a set of KD_IVSET_SCAN entries or more. */
void kd_ivset_insert_at_scan(kd_ivset *s, uint32_t node, uint8_t mode, kd_footprint *fp);
/* Writes the entry at index at (room made) and counts it. Field by field,
 * in place: an entry built on the stack and copied in is read back whole
 * right after its narrow fields were stored, which stalls store-to-load
 * forwarding (it did, measurably). */
static inline void kd_ivset_put(kd_ivset *s, uint32_t at, uint32_t node, uint8_t mode, kd_footprint *fp) {
  int64_t lo = fp->one.lo, hi = fp->one.hi;
  kd_ival *e = &s->at[at];
  e->lo = lo;
  e->hi = hi;
  e->data = fp->data;
  e->node = node;
  e->count = (uint16_t)fp->count;
  e->mode = mode;
  e->flags = fp->kind & KD_IVAL_KIND;
  fp->data = NULL; /* moved in */
  fp->count = 0;
  s->count++;
  s->first_retired = s->count;
  if (hi - lo > s->max_len) s->max_len = hi - lo;
}
/* After a sweep, adds an entry in reserved room (cannot fail): appended to
 * a small set, sorting it when it grows past KD_IVSET_SCAN; in a larger
 * one after every entry of equal lo. The footprint (not empty, at most
 * KD_IVAL_MAX_RUNS runs) moves in. Inline: most insertions append to a
 * small set (-2% to -4% of declaring, by interleaved A/B). */
static inline void kd_ivset_insert(kd_ivset *s, uint32_t node, uint8_t mode, kd_footprint *fp) {
  if (s->count < KD_IVSET_SCAN) kd_ivset_put(s, s->count, node, mode, fp);
  else kd_ivset_insert_at_scan(s, node, mode, fp);
}

#endif
