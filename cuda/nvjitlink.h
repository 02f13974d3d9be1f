/* Internal: nvJitLink facts used by the module cache. */
#ifndef KDAG_CUDA_NVJITLINK_H
#define KDAG_CUDA_NVJITLINK_H

#include "kdag/compile.h"

/* The path of the loaded nvJitLink, "" when it could not be loaded. */
const char *kd_nvjitlink_path(void);

#endif
