/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: per-scope borrow state of one tensor (the seed's tensor /
 * tensor_mut rules). State from an older scope is stale and reads as "not
 * borrowed", so ending a scope needs no pass over its tensors. */
#ifndef KDAG_GRAPH_BORROW_H
#define KDAG_GRAPH_BORROW_H

#include <stdint.h>

#include "kdag/status.h"

typedef struct kd_borrow {
  uint64_t scope;   /* scope the counts belong to */
  uint32_t shared;  /* read-only borrows in that scope */
  int exclusive;    /* one mutable borrow in that scope */
} kd_borrow;

/* Errors: KD_ERR_BORROW_CONFLICT naming op and what. */
kd_status kd_borrow_shared(kd_borrow *b, uint64_t scope, const char *op, const char *what);
kd_status kd_borrow_exclusive(kd_borrow *b, uint64_t scope, const char *op, const char *what);

#endif
