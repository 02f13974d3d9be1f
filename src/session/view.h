/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: checking a view against its tensor, in one pass over its
 * numbers that also answers what the graph asks next (how many elements,
 * how far, one run or strided). */
#ifndef KDAG_SESSION_VIEW_H
#define KDAG_SESSION_VIEW_H

#include <stdint.h>

#include "kdag/tensor.h"

/* What one pass over a view's numbers finds (the graph checks every
 * access of every node: one pass, not one per question). */
typedef struct kd_extent {
  int64_t elements;  /* how many elements the view names */
  int64_t last;      /* the highest element index it reaches; the offset when empty */
  int compact;       /* as kd_view_is_compact: one column-major run */
} kd_extent;
/* kd_view_extent's checks one by one, each failure with its own message. */
kd_status kd_view_extent_checked(const char *op, const kd_view *v, int64_t tensor_elements, kd_extent *out);

/* Counts a view's elements and checks it stays inside its tensor of
 * tensor_elements. Errors (the message names op): KD_ERR_INVALID_ARGUMENT
 * (rank, negative numbers), KD_ERR_OUT_OF_BOUNDS. Inline for views of rank
 * 1, most of what graphs declare (every access of every node comes here);
 * the checked pass answers the rest and words every refusal. */
static inline kd_status kd_view_extent(const char *op, const kd_view *v, int64_t tensor_elements,
                                       kd_extent *out) {
  /* In bounds: offset and shape not negative, stride not negative and the
   * last element inside (no overflow: each is below 2^62 here). */
  if (v->rank == 1 && v->offset >= 0 && v->shape[0] > 0 && v->strides[0] >= 0 && v->offset < (1ll << 62) &&
      v->shape[0] < (1ll << 31) && v->strides[0] < (1ll << 31) &&
      v->offset + (v->shape[0] - 1) * v->strides[0] < tensor_elements) {
    out->elements = v->shape[0];
    out->last = v->offset + (v->shape[0] - 1) * v->strides[0];
    out->compact = v->shape[0] == 1 || v->strides[0] == 1;
    return KD_OK;
  }
  return kd_view_extent_checked(op, v, tensor_elements, out);
}

#endif
