/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: finding and loading a library at run time (NVRTC, nvJitLink,
 * libmathdx): one loader for all of them. */
#ifndef KDAG_CUDA_DYNLIB_H
#define KDAG_CUDA_DYNLIB_H

#include <pthread.h>
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

/* One library kdag loads at run time (NVRTC, nvJitLink, libmathdx):
 * found (kd_dynlib_open's search) and loaded once per process, its
 * symbols resolved into the owner's table of function pointers, and its
 * file identified for cache keys. A static object: the owner fills the
 * first fields and KD_DYNLIB_INIT the lock; the rest is the loader's,
 * under that lock. */
typedef struct kd_dynlib_lib {
  const char *what;          /* names it in messages: "NVRTC" */
  const char *env;           /* the variable that names its file: "KDAG_NVRTC_PATH" (may be NULL) */
  const char *soname;        /* "libnvrtc.so.13" */
  const char *wheel;         /* its pip wheel folder: "cuda_nvrtc" */
  const char *hint;          /* how to get it, ending the not-found message */
  const char *const *names;  /* the symbols, in the order of fns */
  void *fns;                 /* the owner's struct of function pointers, one per name */
  size_t count;
  pthread_mutex_t lock;
  int tried;                 /* loading was tried (atomically read: kd_dynlib_tried) */
  kd_status status;          /* of that try; kept: a failure is reported again, not retried */
  char msg[2048];
  char path[1024];           /* the file loaded */
  void *handle;
  int id_done;
  char id[KD_DYNLIB_IDENTITY_MAX]; /* its identity, "" if it could not be read */
} kd_dynlib_lib;

#define KD_DYNLIB_INIT .lock = PTHREAD_MUTEX_INITIALIZER

/* Loads lib once: found by kd_dynlib_open, every name resolved. Later
 * calls return the first one's result; errors name op. */
kd_status kd_dynlib_load(kd_dynlib_lib *lib, const char *op);
/* Loads the file at path into lib (the caller found it): every name
 * resolved, or nothing kept, so a later call may try again. */
kd_status kd_dynlib_load_file(kd_dynlib_lib *lib, const char *path, const char *op);
/* 1 once loading lib was tried in this process. */
int kd_dynlib_tried(kd_dynlib_lib *lib);
/* The identity of the file lib loads (or would), computed once without
 * loading it when kd_dynlib_locate finds it; else lib is loaded and the
 * loaded file identified. *out lives for the process. Errors:
 * KD_ERR_LIBRARY_MISSING. */
kd_status kd_dynlib_identify(kd_dynlib_lib *lib, const char *op, const char **out);

/* NVRTC and nvJitLink (compile/nvrtc.c, compile/nvjitlink.c). */
extern kd_dynlib_lib kd_nvrtc_lib, kd_nvjitlink_lib;
/* Their identities (kd_dynlib_identify), for cache keys. */
kd_status kd_nvrtc_identity(const char **out);
kd_status kd_nvjitlink_identity(const char **out);
/* 1 once kdag has tried to load NVRTC / nvJitLink in this process. */
int kd_nvrtc_loaded(void);
int kd_nvjitlink_loaded(void);

#endif
