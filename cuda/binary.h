/* Internal: the kd_binary object (output of NVRTC, input of module loading). */
#ifndef KDAG_CUDA_BINARY_H
#define KDAG_CUDA_BINARY_H

#include <stddef.h>

#include "kdag/compile.h"

struct kd_binary {
  kd_binary_kind kind;
  void *data;
  size_t size;
  char *log;
  char arch[32];
};

/* Takes ownership of data and log (malloc'd); NULL on allocation failure,
 * in which case both are freed. */
kd_binary *kd_binary_wrap(kd_binary_kind kind, void *data, size_t size,
                          char *log, const char *arch);

#endif
