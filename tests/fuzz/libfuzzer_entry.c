/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer's entry point for one target (KDF_TARGET, set by CMake): a
 * broken property aborts, which libFuzzer reports as a crash and saves. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/fuzz/fuzz.h"

void kdf_violation(const char *target, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: property broken: ", target);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return KDF_TARGET(data, size); }
