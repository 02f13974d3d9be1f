/* SPDX-License-Identifier: Apache-2.0 */
/* Views: a tensor's whole view, compactness, and the checks of a view
 * against its tensor. */
#include <stdint.h>

#include "base/status_internal.h"
#include "session/session_impl.h"
#include "session/view.h"

kd_status kd_view_whole(kd_session *s, kd_tensor t, kd_view *out) {
  static const char *op = "kd_view_whole";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_view is NULL", op);
  kd_tensor_desc d;
  kd_status st = kd_tensor_info(s, t, &d);
  if (st) return kd_fail_context(st, "%s", op); /* the message names kd_tensor_info, which did the check */
  memset(out, 0, sizeof *out);
  out->tensor = t;
  out->rank = d.rank;
  for (int i = 0; i < d.rank; ++i) {
    out->shape[i] = d.shape[i];
    out->strides[i] = d.strides[i];
  }
  return KD_OK;
}

int kd_view_is_compact(const kd_view *v) {
  if (!v || v->rank < 0 || v->rank > KD_MAX_RANK) return 0; /* kd_whole's -1 is not resolved here */
  int empty = 0;
  for (int i = 0; i < v->rank; ++i) {
    if (v->shape[i] < 0) return 0;
    empty |= v->shape[i] == 0;
  }
  if (empty) return 1; /* names no element, so none out of place: as the graph's checks say */
  int64_t expect = 1;
  for (int i = 0; i < v->rank; ++i) {
    /* Extent-1 dimensions place no constraint on their stride. */
    if (v->shape[i] != 1 && v->strides[i] != expect) return 0;
    if (v->shape[i] < 0 || __builtin_mul_overflow(expect, v->shape[i], &expect)) return 0;
  }
  return 1;
}

/* Counts the view's elements, checking that its last element lies inside the tensor. */
kd_status kd_view_extent_checked(const char *op, const kd_view *v, int64_t tensor_elements, kd_extent *out) {
  if (v->rank < 0 || v->rank > KD_MAX_RANK)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: view rank %d is outside [0, %d]%s", op, v->rank, KD_MAX_RANK,
                   v->rank == -1 ? " (kd_whole() is for graph nodes; kd_view_whole gives a tensor's whole view)" : "");
  if (v->offset < 0)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: view offset %lld is negative", op, (long long)v->offset);
  int64_t n = 1, last = v->offset, step;
  int compact = 1, empty = 0;
  for (int i = 0; i < v->rank; ++i) {
    if (v->shape[i] < 0 || v->strides[i] < 0)
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: view shape[%d] or strides[%d] is negative", op, i, i);
    empty |= v->shape[i] == 0;
  }
  /* A view with a zero extent names no element: whatever its other extents
   * and strides, nothing of it lies outside the tensor (only its offset,
   * below). */
  for (int i = 0; i < v->rank && !empty; ++i) {
    /* Compact: each stride is the product of the shapes below it (n so far),
     * except where the extent is 1 and the stride is never used. */
    compact &= v->shape[i] == 1 || v->strides[i] == n;
    if (__builtin_mul_overflow(n, v->shape[i], &n)) /* repeats elements (a stride of 0): may be in bounds */
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: view shape: its element count overflows at dimension %d", op, i);
    if (v->shape[i] && (__builtin_mul_overflow(v->shape[i] - 1, v->strides[i], &step) ||
                        __builtin_add_overflow(last, step, &last)))
      return kd_fail(KD_ERR_OUT_OF_BOUNDS, "%s: view out of bounds: dimension %d overflows", op, i);
  }
  if (empty) n = 0; /* and compact: no element is out of place */
  /* An empty view touches nothing, but its offset is still an address a
   * span is built from: at most one past the tensor's last element. */
  if (!n && v->offset > tensor_elements)
    return kd_fail(KD_ERR_OUT_OF_BOUNDS, "%s: view out of bounds: an empty view at offset %lld of a tensor of %lld",
                   op, (long long)v->offset, (long long)tensor_elements);
  if (n && last >= tensor_elements)
    return kd_fail(KD_ERR_OUT_OF_BOUNDS,
                   "%s: view out of bounds: reaches element %lld of a tensor of %lld", op,
                   (long long)last, (long long)tensor_elements);
  out->elements = n;
  out->last = n ? last : v->offset;
  out->compact = compact;
  return KD_OK;
}

kd_status kd_view_check(kd_session *s, const kd_view *v) {
  static const char *op = "kd_view_check";
  if (!v) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument view is NULL", op);
  kd_status st = kd_session_enter_host(s, op);
  if (st) return st;
  kd_tensor_obj *o;
  kd_extent e;
  st = kd_tensor_lookup(s, v->tensor, &o, op, "view->tensor");
  if (!st) st = kd_view_extent(op, v, o->elements, &e);
  kd_session_leave(s);
  return st;
}
