/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: what kdag reads out of PTX text and CUBIN/fatbin images on the
 * CPU, so checks work on the host lane and errors can name architectures. */
#ifndef KDAG_CUDA_PTX_H
#define KDAG_CUDA_PTX_H

#include <stddef.h>
#include <stdint.h>

#include "kdag/status.h"

#define KD_PTX_MAX_PARAMS 128

typedef struct kd_ptx_entry {
  char *name;         /* malloc'd */
  int params_known;   /* 0: a parameter list kdag cannot read (the count and sizes are not given) */
  uint32_t param_count;
  uint32_t param_sizes[KD_PTX_MAX_PARAMS];
  int grid_wait;      /* its body holds griddepcontrol.wait (KD_LAUNCH_PDL's contract) */
} kd_ptx_entry;

typedef struct kd_ptx_info {
  int isa;            /* .version X.Y as X*10+Y; 0 if absent */
  char target[32];    /* first word of .target, e.g. "sm_75" */
  size_t entry_count;
  kd_ptx_entry *entries; /* malloc'd; free with kd_ptx_info_free */
  int func_grid_wait; /* a .func holds griddepcontrol.wait: an entry may wait through a call */
} kd_ptx_info;

/* Parses .version, .target and every .entry signature of NUL-terminated PTX
 * (a signature it cannot read is listed with params_known 0: the driver
 * judges the PTX when it loads it). Errors: KD_ERR_INVALID_ARGUMENT (not
 * PTX), KD_ERR_OUT_OF_MEMORY. op names the caller for the message. */
kd_status kd_ptx_parse(const char *op, const char *ptx, kd_ptx_info *out);
void kd_ptx_info_free(kd_ptx_info *info);
const kd_ptx_entry *kd_ptx_find(const kd_ptx_info *info, const char *name);

/* Validates the seed's PTX rules: len counts a terminating NUL, no interior
 * NUL. Errors: KD_ERR_INVALID_ARGUMENT naming argument "ptx". */
kd_status kd_ptx_check_text(const char *op, const char *ptx, size_t len);

/* KD_ERR_UNSUPPORTED_PTX when isa > max_isa (both x10; max_isa 0 = unknown,
 * never refuses). */
kd_status kd_ptx_check_isa(const char *op, int isa, int max_isa, int driver_version);

typedef enum { KD_IMAGE_UNKNOWN, KD_IMAGE_CUBIN, KD_IMAGE_FATBIN, KD_IMAGE_TRUNCATED } kd_image_kind;

typedef struct kd_image_info {
  kd_image_kind kind;
  int sm[16];        /* CUBIN: one arch (e.g. 90); fatbin: its distinct SASS archs */
  int sm_count;
  int ptx[16];       /* fatbin: its distinct embedded PTX archs (compute_XX) */
  int ptx_count;
  int more;          /* fatbin: more distinct archs than fit above (runs_on cannot say no) */
} kd_image_info;

/* Reads the architecture(s) of a CUBIN (ELF e_flags) or fatbin (entry
 * headers). Unknown layouts give KD_IMAGE_UNKNOWN; a CUDA ELF whose headers,
 * sections or segments reach past size, or a fatbin whose entry reaches
 * past its body, KD_IMAGE_TRUNCATED; never an error. */
kd_image_info kd_image_inspect(const void *image, size_t size);

/* Whether an image can run on sm (e.g. 90), judged on the CPU: SASS of the
 * same major and no higher minor, or PTX of no higher version. -1 unknown. */
int kd_image_runs_on(const kd_image_info *info, int sm);

/* "sm_80", "sm_80 sm_86 compute_90" (and " ..." when there are more) into buf. */
void kd_image_describe(const kd_image_info *info, char *buf, size_t len);

#endif
