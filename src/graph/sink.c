/* SPDX-License-Identifier: Apache-2.0 */
/* Host sinks: what a destroyed graph's sinks give back. Their copies are
 * taken, committed and waited for by the executors (exec/xfer.c, the
 * backends' sink_wait). */
#include <stdlib.h>

#include "graph/graph_impl.h"

void kd_sink_free(kd_session *s, kd_sink *sk) {
  kd_copy_put(s, sk->spare, sk->spare_event); /* their copy was waited for */
  /* The latest copy may still be in flight, and destroying a graph never
   * waits: the block is reused once the submission that wrote it has
   * retired. */
  if (sk->block) kd_copy_release(s, sk->seq, sk->block, sk->event);
  if (sk->run) sk->run->ops->release(sk->run);
  free(sk);
}
