/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: the kd_binary object (output of NVRTC, input of module loading). */
#ifndef KDAG_CUDA_BINARY_H
#define KDAG_CUDA_BINARY_H

#include <stddef.h>

#include "kdag/compile.h"

#define KD_BINARY_ARCH_MAX 32 /* "sm_90a" and the like, with room to spare */

struct kd_binary {
  kd_binary_kind kind;
  void *data;
  size_t size;
  char *log;
  char arch[KD_BINARY_ARCH_MAX]; /* the compile and link calls refuse a longer arch */
  int producer_version; /* major * 1000 + minor * 10 of the compiler, 0 unknown */
};

/* KD_ERR_INVALID_ARGUMENT naming op and what (e.g. "options->arch") when
 * arch does not fit a binary's arch field; KD_OK for NULL or one that does.
 * The compile, link and wrap calls check it before anything is built. */
kd_status kd_binary_arch_check(const char *op, const char *what, const char *arch);

/* Takes ownership of data and log (malloc'd); NULL on allocation failure,
 * in which case both are freed. */
kd_binary *kd_binary_wrap(kd_binary_kind kind, void *data, size_t size,
                          char *log, const char *arch);

/* The LTO-IR container's magic number (first four bytes, little-endian). */
#define KD_LTOIR_MAGIC 0x7F4E43EDu
/* 1 when data starts with the LTO-IR magic number. */
int kd_ltoir_has_magic(const void *data, size_t size);

#endif
