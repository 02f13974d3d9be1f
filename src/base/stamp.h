/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: scope stamps. A stamp names one holding pass of kdag's: a
 * submission, a raw scope, a plan's count of its modules, an executable
 * graph's build. Objects remember the last stamp that held them
 * (held_by_scope) so that each is held once per pass, and a raw span
 * carries its scope's stamp, checked when it is used.
 *
 * Stamps are unique in the process for its whole life, so an old mark
 * never looks current and another session's span never passes for this
 * one's. Each session draws them from a block of KD_STAMP_BLOCK it takes
 * from a process-wide counter (one atomic add per block, so sessions on
 * different threads do not share a cache line per submission). They are
 * never 0 (an object's "never held") and stay below 2^63 (bit 63 of a
 * span's scope_ is its mutable flag): 2^63 stamps outlast any process. */
#ifndef KDAG_ENGINE_STAMP_H
#define KDAG_ENGINE_STAMP_H

#include <stdint.h>

#define KD_STAMP_BLOCK (1ull << 20)

/* A session's current block: [next, end). Zeroed: none taken yet. Guarded
 * by the session's lock, as every caller holds it. */
typedef struct kd_stamps {
  uint64_t next, end;
} kd_stamps;

/* Takes a fresh block into *s. */
void kd_stamps_refill(kd_stamps *s);

/* The next stamp, never issued before in this process. */
static inline uint64_t kd_stamp_next(kd_stamps *s) {
  if (s->next == s->end) kd_stamps_refill(s);
  return s->next++;
}

#endif
