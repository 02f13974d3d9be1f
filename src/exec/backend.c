/* SPDX-License-Identifier: Apache-2.0 */
/* kd_session_create: a session (session/session.c) and the backend that
 * runs its work, picked by what kd_session_open found: the CUDA backend
 * on a device, the HOST backend without one (or when asked for). */
#include "base/status_internal.h"
#include "exec/exec.h"

kd_status kd_session_create(const kd_session_options *options, kd_session **out) {
  static const char *op = "kd_session_create";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_session is NULL", op);
  *out = NULL;
  /* First: its failure paths destroy, which a callback may not do. */
  kd_status st = kd_callback_check(op);
  if (st) return st;
  kd_session *s;
  st = kd_session_open(options, &s);
  if (st) return st;
  st = s->has_device ? kd_cuda_backend_start(s, op) : kd_host_backend_start(s, op);
  if (st) {
    kd_session_destroy(s);
    return st;
  }
  *out = s;
  return KD_OK;
}
