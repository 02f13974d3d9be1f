/* SPDX-License-Identifier: Apache-2.0 */
/* A graph's arena: a bump allocator over blocks that never move. */
#include <stdlib.h>

#include "base/arena.h"

#include "base/grow.h"

/* A block is well above one node (64 views of rank 8, a name) as a rule.
 * The first few come from the heap, which reuses them without page faults
 * (glibc would map larger ones afresh each time); a large graph's later
 * blocks are mappings that a freed graph hands on to the next
 * (base/grow.c), so the second large graph faults no pages in either.
 * The arena has its own threshold for mappings, not KD_GROW_MAPPED: a
 * small graph's (or executable graph's) first block stays on the heap
 * rather than taking a kept mapping a large graph's array could use. */
#define KD_ARENA_BLOCK (32 << 10)
#define KD_ARENA_HEAP_BLOCKS 8
#define KD_ARENA_BLOCK_LARGE (2 << 20)
#define KD_ARENA_MAPPED ((size_t)128 << 10)

struct kd_arena_block {
  kd_arena_block *next;
  size_t used, cap;
  _Alignas(8) unsigned char bytes[];
};

int kd_arena_reserve(kd_arena *a, size_t bytes) {
  if (a->head && a->head->cap - a->head->used >= bytes) return 1;
  size_t size = a->blocks < KD_ARENA_HEAP_BLOCKS ? KD_ARENA_BLOCK : KD_ARENA_BLOCK_LARGE;
  if (size < sizeof(kd_arena_block) + bytes) size = sizeof(kd_arena_block) + bytes;
  kd_arena_block *b = size >= KD_ARENA_MAPPED ? kd_grow_map(&size, 1) : malloc(size);
  if (!b) return 0;
  size_t cap = size - sizeof *b;
  b->next = a->head;
  b->used = 0;
  b->cap = cap;
  a->head = b;
  a->blocks++;
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
    size_t size = sizeof *a->head + a->head->cap;
    if (size >= KD_ARENA_MAPPED) kd_grow_unmap(a->head, size, 1);
    else free(a->head);
    a->head = next;
  }
  a->blocks = 0;
}
