/* SPDX-License-Identifier: Apache-2.0 */
/* Byte sizes as people write them (base/size.h). */
#include "base/size.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

int kd_size_parse(const char *text, uint64_t *out) {
  if (!text || !isdigit((unsigned char)*text)) return 0;
  uint64_t v = 0;
  const char *p = text;
  for (; isdigit((unsigned char)*p); ++p) {
    uint64_t d = (uint64_t)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return 0;
    v = v * 10 + d;
  }
  unsigned shift = 0;
  switch (*p) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    case 't': case 'T': shift = 40; break;
    default: break;
  }
  if (shift) {
    ++p;
    if (strcasecmp(p, "ib") == 0 || strcasecmp(p, "b") == 0) p += strlen(p);
  } else if (strcasecmp(p, "b") == 0) {
    ++p;
  }
  if (*p) return 0;
  if (shift && v > (UINT64_MAX >> shift)) return 0;
  *out = v << shift;
  return 1;
}
