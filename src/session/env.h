/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: what the environment sets in a session's options, where code
 * left it unset (docs/getting-started.md, "Configuration"):
 *   KDAG_VERBOSE, KDAG_DEBUG_NODES   the flag, unless flags or flags_set has it
 *   KDAG_LOG_LEVEL                   log_level, when it is KD_LOG_DEFAULT
 *   KDAG_TRACE                       trace_path, when it is NULL
 * Read once, by kd_session_create. */
#ifndef KDAG_SESSION_ENV_H
#define KDAG_SESSION_ENV_H

#include <stddef.h>

#include "base/log.h"
#include "kdag/session.h"

/* Fills o from the environment; log_level is never KD_LOG_DEFAULT after.
 * A value it cannot read changes nothing and is described in bad (cap
 * bytes; "" when every value was read), for the session's log. */
void kd_session_env_apply(kd_session_options *o, char *bad, size_t cap);

#endif
