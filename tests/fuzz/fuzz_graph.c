/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: graph programs (tests/fuzz/program.c) on a HOST session,
 * where the built-in nodes compute: every submission must match running
 * the accepted nodes one by one with the host kernels. */
#include "tests/fuzz/program.h"

static kd_session *host_session(void) {
  static kd_session *s;
  if (!s) {
    kd_session_options o;
    kd_session_options_init(&o);
    o.backend = KD_BACKEND_HOST;
    if (kd_session_create(&o, &s)) kdf_violation("kdf_graph", "kd_session_create: %s", kd_last_error());
  }
  return s;
}

int kdf_graph(const uint8_t *data, size_t size) {
  static const kdf_backend host = {.target = "kdf_graph", .session = host_session, .kernels_run = 1};
  kdf_program_run(&host, data, size);
  return 0;
}
