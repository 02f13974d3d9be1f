/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: session serial numbers, the 16 bits in every handle that tell
 * the handles of different sessions apart. A serial is never held by two
 * live sessions at once, however many sessions the process has made:
 * serials are taken from the set of free ones and given back when a
 * session ends. Thread-safe (one process-wide lock). */
#ifndef KDAG_ENGINE_SERIAL_H
#define KDAG_ENGINE_SERIAL_H

#include <stdint.h>

#include "kdag/status.h"

#define KD_SERIAL_MAX 0xffffu /* serials are 1 .. KD_SERIAL_MAX; 0 is never issued */

/* A serial no live session holds. Errors: KD_ERR_RESOURCE_EXHAUSTED (every
 * serial is held: KD_SERIAL_MAX sessions are open). */
kd_status kd_serial_take(uint32_t *out, const char *op);
/* Gives back a serial from kd_serial_take; 0 is ignored. */
void kd_serial_give(uint32_t serial);

#endif
