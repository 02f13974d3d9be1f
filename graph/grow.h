/* Internal: the growable arrays of a graph (nodes, accesses, edges, ...).
 *
 * Capacity doubles. An array of KD_GROW_MAPPED bytes or more lives in a
 * mapping of its own, so growing it is a mremap: no copy, and no second
 * round of page faults on fresh memory (glibc would serve arrays this size
 * from the heap once its mmap threshold has risen, and copy them). Whether
 * an array is mapped follows from its capacity alone, so kd_grow_free needs
 * no flag. Not thread-safe: the graph's session lock covers its arrays. */
#ifndef KDAG_GRAPH_GROW_H
#define KDAG_GRAPH_GROW_H

#include <stddef.h>
#include <stdint.h>

#define KD_GROW_MAPPED ((size_t)1 << 20)

/* Makes *arr (capacity *cap elements of elem bytes) hold need: 0 out of
 * memory, the array unchanged. */
int kd_grow(void **arr, uint32_t *cap, uint32_t need, size_t elem);
/* Frees an array grown by kd_grow (NULL with cap 0 is fine). */
void kd_grow_free(void *arr, uint32_t cap, size_t elem);

/* The check that nearly always passes stays inline: a node added to a
 * graph checks six arrays. */
#define KD_GROW(arr, cap, need) ((need) <= (cap) || kd_grow((void **)&(arr), &(cap), (need), sizeof *(arr)))
#define KD_GROW_FREE(arr, cap) kd_grow_free((arr), (cap), sizeof *(arr))

#endif
