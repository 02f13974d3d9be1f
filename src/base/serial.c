/* SPDX-License-Identifier: Apache-2.0 */
/* Session serials: a bitmap of the ones live sessions hold. */
#include <pthread.h>

#include "base/status_internal.h"
#include "base/serial.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_held[(KD_SERIAL_MAX + 1) / 64];
/* Where the search starts: the serial after the last one taken, so a
 * serial just given back is the last to be taken again. */
static uint32_t g_next = 1;

static int held(uint32_t v) { return (int)(g_held[v / 64] >> (v % 64) & 1); }

kd_status kd_serial_take(uint32_t *out, const char *op) {
  pthread_mutex_lock(&g_mu);
  for (uint32_t tries = 0; tries < KD_SERIAL_MAX; ++tries) {
    uint32_t v = g_next;
    g_next = v == KD_SERIAL_MAX ? 1 : v + 1;
    if (!held(v)) {
      g_held[v / 64] |= 1ull << (v % 64);
      pthread_mutex_unlock(&g_mu);
      *out = v;
      return KD_OK;
    }
  }
  pthread_mutex_unlock(&g_mu);
  *out = 0;
  return kd_fail(KD_ERR_RESOURCE_EXHAUSTED, "%s: %u sessions are open, the most one process can have", op,
                 KD_SERIAL_MAX);
}

void kd_serial_give(uint32_t serial) {
  if (!serial || serial > KD_SERIAL_MAX) return;
  pthread_mutex_lock(&g_mu);
  g_held[serial / 64] &= ~(1ull << (serial % 64));
  pthread_mutex_unlock(&g_mu);
}
