/* Internal: the numbers of the views a graph's accesses use (offset, shape,
 * strides), out of line in blocks that never move, so an access record can
 * stay small and point at its own. */
#ifndef KDAG_GRAPH_VIEW_STORE_H
#define KDAG_GRAPH_VIEW_STORE_H

#include <stdint.h>

#include "kdag/tensor.h"

typedef struct kd_view_block kd_view_block;

typedef struct kd_view_store {
  kd_view_block *head; /* the block being filled; older ones follow */
} kd_view_store;

/* Numbers a view of rank r takes. */
static inline uint32_t kd_view_numbers(int rank) { return 1 + 2 * (uint32_t)rank; }

/* Makes room for n more numbers without allocating: 0 out of memory. */
int kd_view_store_reserve(kd_view_store *s, uint32_t n);
/* Stores a resolved view's numbers in reserved room (cannot fail). */
const int64_t *kd_view_store_put(kd_view_store *s, const kd_view *v);
void kd_view_store_free(kd_view_store *s);

#endif
