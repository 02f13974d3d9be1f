/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: a session's log (kd_session_options.log, .log_level). Lines go
 * to the user's callback, or to stderr as "kdag: [level] text" without
 * one; a line above the level is never formatted. */
#ifndef KDAG_BASE_LOG_H
#define KDAG_BASE_LOG_H

#include "kdag/status.h"

typedef struct kd_logger {
  kd_log_fn fn;       /* NULL: stderr */
  void *user;
  kd_log_level level; /* resolved: never KD_LOG_DEFAULT */
} kd_logger;

static inline int kd_log_on(const kd_logger *l, kd_log_level level) { return l && level <= l->level; }

void kd_log(const kd_logger *l, kd_log_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Parses a level's name or number ("warn", "2"): 1 with *out set, or 0. */
int kd_log_level_parse(const char *text, kd_log_level *out);

#endif
