/* SPDX-License-Identifier: Apache-2.0 */
/* The environment's say in a session's options (session/env.h). */
#include "session/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* 1 on, 0 off, -1 unreadable. */
static int switch_value(const char *v) {
  static const char *const on[] = {"1", "on", "yes", "true"}, *const off[] = {"0", "off", "no", "false", ""};
  for (size_t i = 0; i < sizeof on / sizeof on[0]; ++i)
    if (strcasecmp(v, on[i]) == 0) return 1;
  for (size_t i = 0; i < sizeof off / sizeof off[0]; ++i)
    if (strcasecmp(v, off[i]) == 0) return 0;
  return -1;
}

static void note(char *bad, size_t cap, const char *name, const char *value, const char *want) {
  size_t len = strlen(bad);
  if (len < cap)
    snprintf(bad + len, cap - len, "%s%s=\"%s\" ignored (%s)", len ? "; " : "", name, value, want);
}

void kd_session_env_apply(kd_session_options *o, char *bad, size_t cap) {
  static const struct {
    const char *name;
    uint32_t flag;
  } switches[] = {{"KDAG_VERBOSE", KD_SESSION_VERBOSE}, {"KDAG_DEBUG_NODES", KD_SESSION_DEBUG_NODES},
                  {"KDAG_NO_PDL", KD_SESSION_NO_PDL}};
  bad[0] = 0;
  for (size_t i = 0; i < sizeof switches / sizeof switches[0]; ++i) {
    const char *v = getenv(switches[i].name);
    if (!v || ((o->flags | o->flags_set) & switches[i].flag)) continue; /* decided in code */
    int on = switch_value(v);
    if (on < 0) note(bad, cap, switches[i].name, v, "1, on, yes or true; 0, off, no or false");
    else if (on) o->flags |= switches[i].flag;
  }
  if (!o->trace_path) o->trace_path = getenv("KDAG_TRACE"); /* read once, copied by the trace */
  if (o->log_level == KD_LOG_DEFAULT) {
    o->log_level = KD_LOG_WARN;
    const char *v = getenv("KDAG_LOG_LEVEL");
    kd_log_level level;
    if (v && kd_log_level_parse(v, &level)) o->log_level = level;
    else if (v) note(bad, cap, "KDAG_LOG_LEVEL", v, "off, error, warn, info or debug, or 0 to 4");
  }
}
