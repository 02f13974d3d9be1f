/* A graph's arena: a bump allocator over blocks that never move. */
#include <stdlib.h>

#include "graph/arena.h"

#define KD_ARENA_BLOCK (32 << 10) /* well above one node (64 views of rank 8, a name) as a rule */

struct kd_arena_block {
  kd_arena_block *next;
  size_t used, cap;
  _Alignas(8) unsigned char bytes[];
};

int kd_arena_reserve(kd_arena *a, size_t bytes) {
  if (a->head && a->head->cap - a->head->used >= bytes) return 1;
  size_t cap = bytes > KD_ARENA_BLOCK ? bytes : KD_ARENA_BLOCK;
  kd_arena_block *b = malloc(sizeof *b + cap);
  if (!b) return 0;
  b->next = a->head;
  b->used = 0;
  b->cap = cap;
  a->head = b;
  return 1;
}

void *kd_arena_take(kd_arena *a, size_t n) {
  void *p = a->head->bytes + a->head->used;
  a->head->used += kd_arena_size(n);
  return p;
}

void kd_arena_free(kd_arena *a) {
  while (a->head) {
    kd_arena_block *next = a->head->next;
    free(a->head);
    a->head = next;
  }
}
