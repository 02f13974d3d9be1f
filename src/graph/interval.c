/* SPDX-License-Identifier: Apache-2.0 */
/* Sets of active accesses: arrays of element intervals, sorted once large. */
#include <stdlib.h>
#include <string.h>

#include "graph/interval.h"

void kd_ivset_init(kd_ivset *s) { memset(s, 0, sizeof *s); }

void kd_ivset_free(kd_ivset *s) {
  for (uint32_t i = 0; i < s->count; ++i) free(s->at[i].data); /* retired ones hold none */
  free(s->at);
  kd_ivset_init(s);
}

int kd_ivset_grow(kd_ivset *s, uint32_t more) {
  uint32_t need = s->count + more;
  if (need <= s->cap) return 1;
  uint32_t c = s->cap ? s->cap : 8;
  while (c < need) c *= 2;
  kd_ival *grown = realloc(s->at, (size_t)c * sizeof *grown);
  if (!grown) return 0;
  s->at = grown;
  s->cap = c;
  return 1;
}

uint32_t kd_ivset_after(const kd_ivset *s, int64_t x) {
  /* Halving without a branch on the data (a conditional move): the answer
   * stays in [b - at, b - at + n]. */
  const kd_ival *at = s->at, *b = at;
  uint32_t n = s->count;
  if (!n) return 0;
  while (n > 1) {
    uint32_t half = n / 2;
    b = b[half].lo <= x ? b + half : b;
    n -= half;
  }
  return (uint32_t)(b - at) + (b->lo <= x);
}

void kd_ivset_retire(kd_ivset *s, kd_ival *e) {
  if (e->data) free(e->data); /* most are one run, inline */
  s->overwritten -= (e->flags & KD_IVAL_OVERWRITTEN) != 0;
  if (s->count <= KD_IVSET_SCAN) {
    /* In any order: the last entry fills the hole. A mark and a sweep
     * instead copied every later entry with wide loads, right after the
     * mark's narrow stores, which store forwarding cannot serve: perf put
     * half the sweep's time on that stall. */
    *e = s->at[--s->count];
    s->first_retired = s->count;
    return;
  }
  uint32_t i = (uint32_t)(e - s->at);
  e->data = NULL;
  e->flags |= KD_IVAL_RETIRED;
  s->first_retired = i < s->first_retired ? i : s->first_retired;
}

int kd_witness_pool_reserve(kd_witness_pool *p, uint32_t n) {
  if (p->count >= n) return 1;
  if (n > p->cap) {
    kd_run **grown = realloc(p->blocks, n * sizeof *grown);
    if (!grown) return 0;
    p->blocks = grown;
    p->cap = n;
  }
  while (p->count < n)
    if (!(p->blocks[p->count++] = malloc((1 + KD_IVAL_WITNESSES) * sizeof(kd_run)))) return p->count--, 0;
  return 1;
}

void kd_witness_pool_free(kd_witness_pool *p) {
  while (p->count) free(p->blocks[--p->count]);
  free(p->blocks);
  memset(p, 0, sizeof *p);
}

void kd_ivset_overwrite(kd_ivset *s, kd_ival *e, const kd_run *witness, kd_witness_pool *pool) {
  uint32_t n;
  kd_run *w = kd_ival_witnesses(e, &n);
  if (witness && n < KD_IVAL_WITNESSES) {
    int met = 0;
    for (uint32_t i = 0; i < n && !met; ++i) met = w[i].lo < witness->hi && witness->lo < w[i].hi;
    if (!met && !e->data) { /* one run: a block for it and the witnesses */
      kd_run *b = pool->blocks[--pool->count];
      b[0] = (kd_run){e->lo, e->hi};
      e->data = b;
      w = kd_ival_witnesses(e, &n);
    }
    if (!met) {
      w[n] = *witness;
      e->flags = (uint8_t)((e->flags & ~KD_IVAL_WITNESS_MASK) | (n + 1) << KD_IVAL_WITNESS_SHIFT);
    }
  }
  if ((e->mode & 2) || (e->flags & KD_IVAL_OVERWRITTEN)) return; /* a write (KD_OUT), or counted */
  e->flags |= KD_IVAL_OVERWRITTEN;
  s->overwritten++;
}

/* max_len from the live entries (a set with no retired entry). */
static void tighten(kd_ivset *s) {
  s->max_len = 0;
  for (uint32_t i = 0; i < s->count; ++i)
    if (s->at[i].hi - s->at[i].lo > s->max_len) s->max_len = s->at[i].hi - s->at[i].lo;
}

void kd_ivset_sweep_retired(kd_ivset *s) {
  int longest_gone = 0;
  uint32_t keep = s->first_retired;
  /* Every entry is copied and kept ones counted: which are retired is data
   * a branch would mispredict on (a copy onto itself is exact overlap). */
  for (uint32_t i = s->first_retired; i < s->count; ++i) {
    const kd_ival *e = &s->at[i];
    int gone = (e->flags & KD_IVAL_RETIRED) != 0;
    longest_gone |= gone & (e->hi - e->lo == s->max_len);
    s->at[keep] = *e;
    keep += !gone;
  }
  s->count = keep;
  s->first_retired = keep;
  /* Tighten the bound, or every later query looks too far back. A set a
   * query scans whole does not use it: there a loose bound stays (a bound
   * all the same), and kd_ivset_insert tightens it when the set grows past
   * a scan again. */
  if (longest_gone && s->count > KD_IVSET_SCAN) tighten(s);
}

void kd_ivset_insert_at_scan(kd_ivset *s, uint32_t node, uint8_t mode, kd_footprint *fp) {
  int64_t lo = fp->one.lo;
  uint32_t at = s->count;
  if (at > KD_IVSET_SCAN) { /* sorted: make room after every entry of equal lo */
    at = kd_ivset_after(s, lo);
    if (at < s->count) /* no 0-byte move at the end: see grow_zeroed in graph.c */
      memmove(&s->at[at + 1], &s->at[at], (size_t)(s->count - at) * sizeof *s->at);
  } /* else the set holds KD_IVSET_SCAN entries in any order: append */
  kd_ivset_put(s, at, node, mode, fp);
  if (s->count == KD_IVSET_SCAN + 1) { /* growing past a scan: sort it, once */
    for (uint32_t i = 1; i < s->count; ++i) {
      kd_ival v = s->at[i];
      uint32_t j = i;
      for (; j && s->at[j - 1].lo > v.lo; --j) s->at[j] = s->at[j - 1];
      s->at[j] = v;
    }
    /* Queries stop scanning it whole and start using the bound, which
     * retirements left loose while the set was small. */
    tighten(s);
  }
}
