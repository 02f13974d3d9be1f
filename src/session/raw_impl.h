/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: the raw scope's state (session/raw.c), one per session. */
#ifndef KDAG_SESSION_RAW_IMPL_H
#define KDAG_SESSION_RAW_IMPL_H

#include "kdag/raw.h"
#include "session/held.h"

struct kd_raw {
  kd_session *session;
  uint64_t scope;           /* unique per session and scope; 0 when none is open */
  /* Read by kd_raw_* on any thread without the lock: active and owner are
   * written (under the lock) before active is set, with a fence between,
   * and read after it (ck_pr loads and stores). */
  int active;
  void *owner;              /* the scope's thread: the address of its kd_raw_thread_mark */
  char op[128];
  kd_held_set held;
  uint32_t launches;
};

/* Whether raw's scope is open and runs its callback on this thread (any
 * thread may ask, without the lock). */
int kd_raw_open_here(kd_raw *raw);

#endif
