/* Internal: checking a view against its tensor, in one pass over its
 * numbers that also answers what the graph asks next (how many elements,
 * how far, one run or strided). */
#ifndef KDAG_GRAPH_EXTENT_H
#define KDAG_GRAPH_EXTENT_H

#include <stdint.h>

#include "kdag/tensor.h"

/* What one pass over a view's numbers finds (the graph checks every
 * access of every node: one pass, not one per question). */
typedef struct kd_extent {
  int64_t elements;  /* how many elements the view names */
  int64_t last;      /* the highest element index it reaches; the offset when empty */
  int compact;       /* as kd_view_is_compact: one column-major run */
} kd_extent;
/* Counts a view's elements and checks it stays inside its tensor of
 * tensor_elements. Errors (the message names op): KD_ERR_INVALID_ARGUMENT
 * (rank, negative numbers), KD_ERR_OUT_OF_BOUNDS. */
kd_status kd_view_extent(const char *op, const kd_view *v, int64_t tensor_elements, kd_extent *out);

#endif
