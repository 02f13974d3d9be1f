/* Out-of-line view numbers: a bump allocator over blocks that never move. */
#include <stdlib.h>

#include "graph/view_store.h"

#define KD_VIEW_BLOCK_NUMBERS 4096 /* 32 KiB: well above one node's 64 views of rank 8 */

struct kd_view_block {
  kd_view_block *next;
  uint32_t used, cap;
  int64_t v[];
};

int kd_view_store_reserve(kd_view_store *s, uint32_t n) {
  if (s->head && s->head->cap - s->head->used >= n) return 1;
  uint32_t cap = n > KD_VIEW_BLOCK_NUMBERS ? n : KD_VIEW_BLOCK_NUMBERS;
  kd_view_block *b = malloc(sizeof *b + (size_t)cap * sizeof b->v[0]);
  if (!b) return 0;
  b->next = s->head;
  b->used = 0;
  b->cap = cap;
  s->head = b;
  return 1;
}

const int64_t *kd_view_store_put(kd_view_store *s, const kd_view *v) {
  int64_t *out = s->head->v + s->head->used;
  s->head->used += kd_view_numbers(v->rank);
  out[0] = v->offset;
  for (int i = 0; i < v->rank; ++i) {
    out[1 + i] = v->shape[i];
    out[1 + v->rank + i] = v->strides[i];
  }
  return out;
}

void kd_view_store_free(kd_view_store *s) {
  while (s->head) {
    kd_view_block *next = s->head->next;
    free(s->head);
    s->head = next;
  }
}
