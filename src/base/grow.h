/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: the growable arrays of a graph (nodes, accesses, edges, ...).
 *
 * Capacity doubles. An array of KD_GROW_MAPPED bytes or more lives in a
 * mapping of its own: a kept one that a freed array let go of, or a new
 * one grown by mremap. 16 KiB, not glibc's 128 KiB mmap threshold: a graph
 * of a thousand nodes has several arrays between the two, and when it is
 * freed glibc trims the top of the heap, so the next such graph faulted
 * its pages in afresh (one-shot EAGER graphs of 1000 nodes took a third
 * less time per node with them kept). Whether an array is mapped follows
 * from its capacity alone, so kd_grow_free needs no flag. A freed mapping
 * may be kept for the next array that needs one (grow.c), so a new mapped
 * array can come with more capacity than asked. An array is not thread-safe (its graph's session
 * lock covers it); the kept mappings are shared and locked. */
#ifndef KDAG_GRAPH_GROW_H
#define KDAG_GRAPH_GROW_H

#include <stddef.h>
#include <stdint.h>

#define KD_GROW_MAPPED ((size_t)16 << 10)
#define KD_GROW_KEEP_BYTES ((size_t)256 << 20) /* freed mappings kept for reuse, at most */

/* Makes *arr (capacity *cap elements of elem bytes) hold need: 0 out of
 * memory, the array unchanged. */
int kd_grow(void **arr, uint32_t *cap, uint32_t need, size_t elem);
/* The same for an array of uint32_t, every new entry 0 (the check that
 * nearly always passes inline, as KD_GROW's). */
int kd_grow_zeroed_slow(uint32_t **arr, uint32_t *cap, uint32_t need);
static inline int kd_grow_zeroed(uint32_t **arr, uint32_t *cap, uint32_t need) {
  return need <= *cap || kd_grow_zeroed_slow(arr, cap, need);
}
/* Frees an array grown by kd_grow (NULL with cap 0 is fine). */
void kd_grow_free(void *arr, uint32_t cap, size_t elem);

/* A mapping of at least *bytes, *bytes set to its size (a multiple of the
 * page size): a kept one that fits, or a new one. elem: the size of what it
 * will hold, which picks among the kept ones (grow.c). NULL out of memory.
 * Contents undefined. */
void *kd_grow_map(size_t *bytes, size_t elem);
/* Gives back a mapping of kd_grow_map (bytes: the size it set): kept for
 * reuse, or unmapped. */
void kd_grow_unmap(void *p, size_t bytes, size_t elem);

/* The check that nearly always passes stays inline: a node added to a
 * graph checks several arrays. */
#define KD_GROW(arr, cap, need) ((need) <= (cap) || kd_grow((void **)&(arr), &(cap), (need), sizeof *(arr)))
#define KD_GROW_FREE(arr, cap) kd_grow_free((arr), (cap), sizeof *(arr))

#endif
