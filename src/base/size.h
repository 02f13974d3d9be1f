/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: byte sizes as people write them ("512M", "2G", "1048576"). */
#ifndef KDAG_BASE_SIZE_H
#define KDAG_BASE_SIZE_H

#include <stdint.h>

/* Parses digits with an optional K, M, G or T suffix (powers of 1024, an
 * optional "iB" or "B" after it, any case): 1 with *out set, or 0 for
 * anything else, an empty string, or a value past UINT64_MAX. */
int kd_size_parse(const char *text, uint64_t *out);

#endif
