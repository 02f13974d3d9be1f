/* SPDX-License-Identifier: Apache-2.0 */
/* A session's log (base/log.h). */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const names[] = {"off", "error", "warn", "info", "debug"};

const char *kd_log_level_name(kd_log_level level) {
  return level >= KD_LOG_OFF && level <= KD_LOG_DEBUG ? names[level] : "?";
}

int kd_log_level_parse(const char *text, kd_log_level *out) {
  for (int i = KD_LOG_OFF; i <= KD_LOG_DEBUG; ++i)
    if (strcasecmp(text, names[i]) == 0 || (text[0] == '0' + i && !text[1])) {
      *out = (kd_log_level)i;
      return 1;
    }
  if (strcasecmp(text, "warning") == 0) {
    *out = KD_LOG_WARN;
    return 1;
  }
  return 0;
}

void kd_log(const kd_logger *l, kd_log_level level, const char *fmt, ...) {
  if (!kd_log_on(l, level) || level == KD_LOG_OFF) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (l->fn) l->fn(l->user, level, line);
  else fprintf(stderr, "kdag: [%s] %s\n", names[level], line);
}
