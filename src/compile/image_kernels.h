/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: what a CUBIN says of its kernels, and what a fatbin holds,
 * read on the CPU (kdag inspect). The CUBIN's ELF is read as the driver
 * lays it out: a kernel is a ".text.<name>" section; its parameters are
 * the KPARAM_INFO records of ".nv.info.<name>" (ordinal, offset, size)
 * and their total CBANK_PARAM_SIZE (a section with neither: none); its registers the REGCOUNT record of
 * ".nv.info" (images of ELF ABI 8 on) or the top byte of the text
 * section's sh_info (older ones); its shared memory section the size of
 * ".nv.shared.<name>" (for sm_90 and sm_100, ptxas starts it with 1 KiB
 * it reserves: its -v output and the static size it reports are 1024
 * bytes less). What an image does not say is reported unknown, never
 * guessed. */
#ifndef KDAG_COMPILE_IMAGE_KERNELS_H
#define KDAG_COMPILE_IMAGE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kdag/status.h"

#define KD_IMAGE_MAX_PARAMS 256

typedef struct kd_image_param {
  uint32_t ordinal, offset, size;
} kd_image_param;

typedef struct kd_image_kernel {
  char *name;             /* malloc'd */
  int registers;          /* -1: the image does not say */
  int64_t shared_section_bytes; /* the .nv.shared section's size; 0 without one */
  int param_count;        /* -1: no parameter records */
  int64_t param_bytes;    /* CBANK_PARAM_SIZE; -1: not recorded */
  kd_image_param params[KD_IMAGE_MAX_PARAMS]; /* by ordinal */
} kd_image_kernel;

/* The kernels of a CUBIN (an ELF of machine EM_CUDA, every header and
 * section inside size), in section order. Errors: KD_ERR_INVALID_ARGUMENT
 * (not a CUBIN, or one whose tables reach past its end: the message says
 * which), KD_ERR_OUT_OF_MEMORY. *out is malloc'd: kd_image_kernels_free. */
kd_status kd_image_kernels(const char *op, const void *image, size_t size, kd_image_kernel **out, size_t *count);
void kd_image_kernels_free(kd_image_kernel *k, size_t count);

typedef struct kd_fatbin_entry {
  int kind;               /* 1 PTX, 2 ELF (CUBIN), other values as found */
  int arch;               /* e.g. 90 */
  uint64_t offset;        /* the payload, from the start of the image */
  uint64_t size;          /* the payload's bytes in the image */
  int compressed;         /* the entry's compressed flag: its payload is not readable as is */
  int zstd;               /* compressed as a zstd frame (CUDA 13's nvcc), else another way */
  uint64_t uncompressed_size; /* when compressed and recorded; else 0 */
} kd_fatbin_entry;

/* The entries of a fatbin. Errors: KD_ERR_INVALID_ARGUMENT (not a fatbin,
 * or an entry reaching past the image), KD_ERR_OUT_OF_MEMORY. *out is
 * malloc'd (free). */
kd_status kd_fatbin_entries(const char *op, const void *image, size_t size, kd_fatbin_entry **out, size_t *count);

#endif
