/* Internal: finding a toolkit library (NVRTC, nvJitLink) at run time. */
#ifndef KDAG_CUDA_DYNLIB_H
#define KDAG_CUDA_DYNLIB_H

#include <stddef.h>

/* Tries, in order: the file named by env_override; soname through the
 * dynamic loader's search path; soname in the toolkit library directory kdag
 * was built against (KDAG_CUDA_TOOLKIT_LIBDIR); soname in each pip wheel
 * layout under every ':'-separated directory of $KDAG_PYTHON_SITE
 * (nvidia/cu13/lib, nvidia/<wheel_dir>/lib). Returns the dlopen handle or
 * NULL, with every place tried written to tried (for the error message) and
 * the path that worked to found. */
void *kd_dynlib_open(const char *env_override, const char *soname,
                     const char *wheel_dir, char *tried, size_t tried_len,
                     char *found, size_t found_len);

/* Loads NVRTC / nvJitLink if not yet loaded; the path in use, "" if neither
 * could be loaded. */
const char *kd_nvrtc_path(void);
const char *kd_nvjitlink_path(void);

#endif
