/* SPDX-License-Identifier: Apache-2.0 */
/* A whole file into memory (base/file.h). */
#include "base/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int kd_file_read(const char *path, unsigned char **out, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap + 1);
  int err = buf ? 0 : ENOMEM;
  for (size_t got; !err && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n < cap) continue;
    unsigned char *grown = realloc(buf, 2 * cap + 1);
    if (!grown) err = ENOMEM;
    else buf = grown, cap *= 2;
  }
  if (!err && ferror(f)) err = EIO;
  fclose(f);
  if (err) {
    free(buf);
    errno = err;
    return -1;
  }
  buf[n] = 0;
  *out = buf;
  *size = n;
  return 0;
}
