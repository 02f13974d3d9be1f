/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: a whole file into memory (the kdag tool and kdag-bench read
 * kernels with it). */
#ifndef KDAG_BASE_FILE_H
#define KDAG_BASE_FILE_H

#include <stddef.h>

/* Reads path into *out (malloc'd, with a NUL after its *size bytes, so
 * text can be read as a string): 0, or -1 with errno set. */
int kd_file_read(const char *path, unsigned char **out, size_t *size);

#endif
