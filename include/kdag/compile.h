/* kdag/compile.h — run-time compilation with NVRTC, usable without a GPU.
 *
 * NVRTC runs on the CPU, so these functions need no driver and no session:
 * they are how the host lane produces PTX, CUBIN and LTO-IR. NVRTC is loaded
 * on first use (KDAG_NVRTC_PATH, then the dynamic loader's search path, then
 * the CUDA toolkit kdag was built against, then pip wheels under
 * KDAG_PYTHON_SITE). Thread-safe: NVRTC programs are per call.
 */
#ifndef KDAG_COMPILE_H
#define KDAG_COMPILE_H

#include <stddef.h>

#include "kdag/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kd_binary_kind {
  KD_BINARY_PTX = 0,    /* NUL-terminated text; size counts the NUL */
  KD_BINARY_CUBIN = 1,  /* ELF for one real architecture */
  KD_BINARY_FATBIN = 2, /* several images and/or PTX */
  KD_BINARY_LTOIR = 3   /* link-time IR, for nvJitLink */
} kd_binary_kind;

typedef struct kd_nvrtc_options {
  /* "sm_90" compiles to CUBIN for that GPU, "compute_90" to PTX. NULL: the
   * session device's sm_XX inside a raw scope; required outside one. */
  const char *arch;
  const char *std;                   /* e.g. "c++17"; NULL: NVRTC's default */
  const char *const *include_paths;  /* each becomes -I<path> */
  size_t include_path_count;
  const char *const *defines;        /* "NAME" or "NAME=VALUE", each -D */
  size_t define_count;
  const char *const *extra_flags;    /* passed verbatim, after the above */
  size_t extra_flag_count;
  const char *program_name;          /* shown in the log; default "kdag.cu" */
  int emit_ptx;                      /* 1: PTX even for an sm_XX arch */
  int lto;                           /* 1: -dlto, output is LTO-IR */
  int relocatable;                   /* 1: -rdc=true */
} kd_nvrtc_options;

/* Output of one compilation. Owned by the caller: free with kd_binary_free. */
typedef struct kd_binary kd_binary;

/* Compiles CUDA C++ source (NUL-terminated). options may be NULL only when
 * called inside a raw scope's compile (which supplies the arch).
 * Errors: KD_ERR_INVALID_ARGUMENT (NULL source, no arch, bad option strings),
 * KD_ERR_LIBRARY_MISSING (no NVRTC), KD_ERR_COMPILE_FAILED (kd_last_error()
 * holds NVRTC's full log), KD_ERR_OUT_OF_MEMORY. On failure *out is NULL. */
kd_status kd_nvrtc_compile(const char *source, const kd_nvrtc_options *options,
                           kd_binary **out);

/* Accessors; the pointers are borrowed from the binary and live until
 * kd_binary_free. */
const void *kd_binary_data(const kd_binary *binary);
size_t kd_binary_size(const kd_binary *binary);
kd_binary_kind kd_binary_kind_of(const kd_binary *binary);
const char *kd_binary_log(const kd_binary *binary); /* compiler warnings; "" if none */
/* The arch the binary was built for, e.g. "sm_90" or "compute_90". */
const char *kd_binary_arch(const kd_binary *binary);
void kd_binary_free(kd_binary *binary); /* NULL is ignored */

/* NVRTC's version. Errors: KD_ERR_LIBRARY_MISSING. */
kd_status kd_nvrtc_version(int *major, int *minor);
/* nvJitLink's version. Errors: KD_ERR_LIBRARY_MISSING. */
kd_status kd_nvjitlink_version(int *major, int *minor);

#ifdef __cplusplus
}
#endif
#endif /* KDAG_COMPILE_H */
