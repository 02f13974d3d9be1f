/* Internal: finding a toolkit library (NVRTC, nvJitLink) at run time. */
#ifndef KDAG_CUDA_DYNLIB_H
#define KDAG_CUDA_DYNLIB_H

#include <stddef.h>

#include "kdag/status.h"

/* Loads the file kd_dynlib_locate finds, and only that one when it finds
 * one (its identity is what cache keys name); else tries, in order: the
 * file named by env_override; soname through the dynamic loader's search
 * path; soname in the toolkit library directory kdag was built against
 * (KDAG_CUDA_TOOLKIT_LIBDIR); soname in each pip wheel layout under every
 * ':'-separated directory of $KDAG_PYTHON_SITE (nvidia/cu13/lib,
 * nvidia/<wheel_dir>/lib). Returns the dlopen handle or NULL, with every
 * place tried written to tried (for the error message) and the path that
 * worked to found. */
void *kd_dynlib_open(const char *env_override, const char *soname,
                     const char *wheel_dir, char *tried, size_t tried_len,
                     char *found, size_t found_len);

/* The file kd_dynlib_open would load first, found without loading it:
 * the env_override file (when it names a path), else soname in each
 * $LD_LIBRARY_PATH folder, the loader's default folders, the toolkit
 * library directory, the pip wheel layouts. 1 found (path in found), 0 not
 * (kd_dynlib_open then asks the dynamic loader). */
int kd_dynlib_locate(const char *env_override, const char *soname, const char *wheel_dir,
                     char *found, size_t found_len);

/* A string that changes when the file at path changes: its resolved path,
 * size, modification time (ns) and XXH3-64 of its first and last 64 KiB.
 * Reads at most 128 KiB; loads nothing. 0, or -1 (no such file). */
int kd_dynlib_identity(const char *path, char *out, size_t out_len);

#define KD_DYNLIB_IDENTITY_MAX 4200

/* The identity of the NVRTC / nvJitLink kdag uses (or would load), computed
 * once per process without loading the library when it can be located;
 * else the library is loaded and its loaded file identified. Errors:
 * KD_ERR_LIBRARY_MISSING. The string lives for the process. */
kd_status kd_nvrtc_identity(const char **out);
kd_status kd_nvjitlink_identity(const char **out);

/* 1 once NVRTC / nvJitLink has been dlopen'd by kdag in this process. */
int kd_nvrtc_loaded(void);
int kd_nvjitlink_loaded(void);

/* Loads NVRTC / nvJitLink if not yet loaded; the path in use, "" if neither
 * could be loaded. */
const char *kd_nvrtc_path(void);
const char *kd_nvjitlink_path(void);

#endif
