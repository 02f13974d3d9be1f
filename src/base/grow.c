/* SPDX-License-Identifier: Apache-2.0 */
/* Growable arrays: the heap while small, a mapping of their own once large.
 *
 * Large mappings a freed graph let go of are kept, a few and up to
 * KD_GROW_KEEP_BYTES in all, for the next graph's arrays: the pages are
 * already there, so filling them costs no page faults (a fault costs
 * microseconds in a VM, and a fresh 100k-node graph takes tens of thousands).
 * They are marked MADV_FREE while kept, so the kernel may take them back
 * under memory pressure; nothing here relies on their contents. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/grow.h"

#define KD_GROW_KEEP 32 /* a large graph's arrays and arena blocks */
/* Kept mappings smaller than this are not advised MADV_FREE: the system
 * call cost more than their pages are worth (at most 32 such mappings, so
 * under 32 MiB stays unadvised). */
#define KD_GROW_ADVISE ((size_t)1 << 20)

static struct {
  pthread_mutex_t mu; /* graphs of different sessions grow on different threads */
  void *at[KD_GROW_KEEP];
  size_t bytes[KD_GROW_KEEP];
  size_t elem[KD_GROW_KEEP]; /* the element size of the array it held (1: arena blocks) */
  uint32_t count;
  size_t total;
} g_kept = {.mu = PTHREAD_MUTEX_INITIALIZER};

static size_t mapped_size(size_t bytes) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (bytes + page - 1) / page * page;
}

/* A kept mapping of at least *bytes (a page multiple), taken out of the
 * kept set, *bytes set to its size; NULL if none fits. The largest one that
 * held an array of the same element size: most likely the same array of the
 * graph before, at the size this one will grow to, so it need not grow (a
 * grown array's pages are copied). Else the smallest that fits. */
static void *take_kept(size_t *bytes, size_t elem) {
  pthread_mutex_lock(&g_kept.mu);
  uint32_t best = g_kept.count, same = g_kept.count;
  for (uint32_t i = 0; i < g_kept.count; ++i) {
    if (g_kept.bytes[i] < *bytes) continue;
    if (g_kept.elem[i] == elem && (same == g_kept.count || g_kept.bytes[i] > g_kept.bytes[same])) same = i;
    if (best == g_kept.count || g_kept.bytes[i] < g_kept.bytes[best]) best = i;
  }
  if (same < g_kept.count) best = same;
  void *p = NULL;
  if (best < g_kept.count) {
    p = g_kept.at[best];
    *bytes = g_kept.bytes[best];
    g_kept.total -= *bytes;
    g_kept.count--;
    g_kept.at[best] = g_kept.at[g_kept.count];
    g_kept.bytes[best] = g_kept.bytes[g_kept.count];
    g_kept.elem[best] = g_kept.elem[g_kept.count];
  }
  pthread_mutex_unlock(&g_kept.mu);
  return p;
}

void *kd_grow_map(size_t *bytes, size_t elem) {
  *bytes = mapped_size(*bytes);
  void *p = take_kept(bytes, elem);
  if (p) return p;
  p = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void kd_grow_unmap(void *p, size_t bytes, size_t elem) {
  /* Advised before it is published: once in the kept set another thread
   * may take it and fill it, and MADV_FREE after that would let the kernel
   * drop what that thread wrote. Advice only: on failure the pages stay. */
#ifdef MADV_FREE
  if (bytes >= KD_GROW_ADVISE) (void)madvise(p, bytes, MADV_FREE);
#endif
  pthread_mutex_lock(&g_kept.mu);
  int keep = g_kept.count < KD_GROW_KEEP && g_kept.total + bytes <= KD_GROW_KEEP_BYTES;
  if (keep) {
    g_kept.at[g_kept.count] = p;
    g_kept.bytes[g_kept.count] = bytes;
    g_kept.elem[g_kept.count++] = elem;
    g_kept.total += bytes;
  }
  pthread_mutex_unlock(&g_kept.mu);
  if (!keep) munmap(p, bytes);
}

int kd_grow(void **arr, uint32_t *cap, uint32_t need, size_t elem) {
  if (need <= *cap) return 1;
  uint64_t c = *cap ? *cap : 16;
  while (c < need) c *= 2;
  if (c > UINT32_MAX) c = UINT32_MAX;
  size_t old_bytes = (size_t)*cap * elem, bytes = (size_t)c * elem;
  void *grown;
  if (bytes < KD_GROW_MAPPED) {
    grown = realloc(*arr, bytes);
  } else {
    size_t got = mapped_size(bytes);
    int was_mapped = old_bytes >= KD_GROW_MAPPED;
    grown = was_mapped ? take_kept(&got, elem) : kd_grow_map(&got, elem);
    if (grown) {
      /* Off the heap (once per array), or into a kept mapping: copying
       * costs far less than faulting in the pages of fresh memory. */
      if (*arr) memcpy(grown, *arr, old_bytes);
      if (*arr && was_mapped) kd_grow_unmap(*arr, mapped_size(old_bytes), elem);
      else free(*arr);
    } else if (was_mapped) {
      /* Nothing kept fits: grow in place or move, without a copy. */
      grown = mremap(*arr, mapped_size(old_bytes), got, MREMAP_MAYMOVE);
      if (grown == MAP_FAILED) grown = NULL;
    }
    /* All of the mapping is capacity. Elements are far smaller than a
     * page, so the capacity's bytes round up to the mapping again. */
    uint64_t fits = got / elem;
    if (grown) c = fits > UINT32_MAX ? UINT32_MAX : fits;
  }
  if (!grown) return 0;
  *arr = grown;
  *cap = (uint32_t)c;
  return 1;
}

void kd_grow_free(void *arr, uint32_t cap, size_t elem) {
  size_t bytes = (size_t)cap * elem;
  if (bytes >= KD_GROW_MAPPED) kd_grow_unmap(arr, mapped_size(bytes), elem);
  else free(arr);
}

/* Grows a uint32_t array to hold need entries, every new one 0. */
int kd_grow_zeroed_slow(uint32_t **arr, uint32_t *cap, uint32_t need) {
  if (need <= *cap) return 1;
  uint32_t old = *cap;
  if (!kd_grow((void **)arr, cap, need, sizeof **arr)) return 0; /* KD_GROW's own check is the one above */
  /* Only when it grew: glibc's memset of 0 bytes still issues a masked
   * store at the array's end, which past the last touched page costs a
   * microcode assist (perf put half of kd_graph_edge's time there). */
  memset(*arr + old, 0, (size_t)(*cap - old) * sizeof **arr);
  return 1;
}
