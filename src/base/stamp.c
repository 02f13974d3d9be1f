/* SPDX-License-Identifier: Apache-2.0 */
/* Scope stamps: blocks of a process-wide count (base/stamp.h). */
#include <ck_pr.h>

#include "base/stamp.h"

/* Blocks handed out so far; block b holds stamps [(b + 1) * KD_STAMP_BLOCK,
 * (b + 2) * KD_STAMP_BLOCK), so no stamp is 0. 2^43 - 1 blocks stay below
 * 2^63, far more than a process can take (one per 2^20 holding passes, or
 * per session made). */
static uint64_t g_blocks;

void kd_stamps_refill(kd_stamps *s) {
  uint64_t b = ck_pr_faa_64(&g_blocks, 1);
  s->next = (b + 1) * KD_STAMP_BLOCK;
  s->end = s->next + KD_STAMP_BLOCK;
}
