/* SPDX-License-Identifier: Apache-2.0 */
/* The library's version, as compiled from kdag/version.h. */
#include "kdag/version.h"

#define KD_STR_(x) #x
#define KD_STR(x) KD_STR_(x)

unsigned kd_version(void) { return KD_VERSION; }

const char *kd_version_string(void) {
  return KD_STR(KD_VERSION_MAJOR) "." KD_STR(KD_VERSION_MINOR) "." KD_STR(KD_VERSION_PATCH);
}
