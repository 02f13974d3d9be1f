/* SPDX-License-Identifier: Apache-2.0 */
/* The struct_size check of the public options structs. */
#include "base/options.h"

#include "base/status_internal.h"
#include "kdag/version.h"

kd_status kd_options_check(const char *op, const char *arg, const char *type, uint32_t got, size_t want) {
  if (got == 0)
    return kd_fail(KD_ERR_INVALID_ARGUMENT,
                   "%s: %sstruct_size is 0: fill a %s with %s_init() before setting its fields", op, arg,
                   type, type);
  /* Only this layout exists so far: a struct from older headers is
   * smaller, one from newer headers larger, and either would be read
   * wrong. */
  if (got != want)
    return kd_fail(KD_ERR_VERSION_MISMATCH,
                   "%s: %sstruct_size is %u, but a %s of this kdag (%s) has %zu bytes: the program "
                   "was compiled against the headers of another kdag version; rebuild it against "
                   "these", op, arg, got, type, kd_version_string(), want);
  return KD_OK;
}
