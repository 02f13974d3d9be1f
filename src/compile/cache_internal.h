/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: raw blobs in the module cache's folder (same header and atomic
 * write as CUBIN entries), for outputs of other generators (libmathdx). */
#ifndef KDAG_CUDA_CACHE_INTERNAL_H
#define KDAG_CUDA_CACHE_INTERNAL_H

#include <stddef.h>

#include "kdag/cache.h"

/* 1: found (*data malloc'd, *size set); 0: absent or memory-only cache;
 * -1: present but refused (counted as corrupt_rebuilt); -2: no memory. */
int kd_cache_blob_get(kd_cubin_cache *c, const unsigned char key[16], void **data, size_t *size);
/* 0 stored, -1 not stored (memory-only cache or write failure). */
int kd_cache_blob_put(kd_cubin_cache *c, const unsigned char key[16], const void *data, size_t size);

#endif
