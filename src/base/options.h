/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: the struct_size check of the public options structs
 * (kd_session_options, kd_nvrtc_options, kd_link_options). */
#ifndef KDAG_BASE_OPTIONS_H
#define KDAG_BASE_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "kdag/status.h"

/* op's argument, a `type` whose struct_size (named arg "struct_size", arg
 * being "options->" or "recipe->nvrtc.") is got, against this
 * library's sizeof, want. 0 is a struct nobody initialized
 * (KD_ERR_INVALID_ARGUMENT, naming type's _init function); another size is
 * a program built against other kdag headers (KD_ERR_VERSION_MISMATCH,
 * naming both sizes and this library's version). */
kd_status kd_options_check(const char *op, const char *arg, const char *type, uint32_t got, size_t want);

#endif
