/* SPDX-License-Identifier: Apache-2.0 */
/* Borrow checking: many readers or one writer per tensor per scope. */
#include "base/status_internal.h"
#include "session/borrow.h"

static void refresh(kd_borrow *b, uint64_t scope) {
  if (b->scope != scope) {
    b->scope = scope;
    b->shared = 0;
    b->exclusive = 0;
  }
}

kd_status kd_borrow_shared(kd_borrow *b, uint64_t scope, const char *op, const char *what) {
  refresh(b, scope);
  if (b->exclusive)
    return kd_fail(KD_ERR_BORROW_CONFLICT,
                   "%s: %s is mutably borrowed in this scope; it cannot also be read", op, what);
  b->shared++;
  return KD_OK;
}

kd_status kd_borrow_exclusive(kd_borrow *b, uint64_t scope, const char *op, const char *what) {
  refresh(b, scope);
  if (b->exclusive)
    return kd_fail(KD_ERR_BORROW_CONFLICT,
                   "%s: %s is already mutably borrowed in this scope", op, what);
  if (b->shared)
    return kd_fail(KD_ERR_BORROW_CONFLICT,
                   "%s: %s has %u read-only borrow%s in this scope; a mutable borrow must be "
                   "exclusive", op, what, b->shared, b->shared == 1 ? "" : "s");
  b->exclusive = 1;
  return KD_OK;
}
