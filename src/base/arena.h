/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: memory that lives as long as its graph and never moves (node
 * names, the numbers of access views), bump-allocated from blocks, so the
 * records that point into it stay small and one malloc serves many nodes. */
#ifndef KDAG_GRAPH_ARENA_H
#define KDAG_GRAPH_ARENA_H

#include <stddef.h>

typedef struct kd_arena_block kd_arena_block;

typedef struct kd_arena {
  kd_arena_block *head; /* the block being filled; older ones follow */
  unsigned blocks;
} kd_arena;

/* What a take of n bytes uses (8-byte aligned). */
static inline size_t kd_arena_size(size_t n) { return (n + 7) & ~(size_t)7; }

/* Makes room for takes of kd_arena_size() bytes in all: 0 out of memory. */
int kd_arena_reserve(kd_arena *a, size_t bytes);
/* n bytes of reserved room (cannot fail), 8-byte aligned. */
void *kd_arena_take(kd_arena *a, size_t n);
void kd_arena_free(kd_arena *a);

#endif
