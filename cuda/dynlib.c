/* Search for a dynamically loaded toolkit library. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/dynlib.h"

#ifndef KDAG_CUDA_TOOLKIT_LIBDIR
#define KDAG_CUDA_TOOLKIT_LIBDIR "/usr/local/cuda/lib64"
#endif

static void *try_open(const char *path, char *tried, size_t tried_len,
                      char *found, size_t found_len) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  size_t used = strlen(tried);
  if (used + 1 < tried_len)
    snprintf(tried + used, tried_len - used, "%s%s", used ? ", " : "", path);
  if (h) snprintf(found, found_len, "%s", path);
  return h;
}

void *kd_dynlib_open(const char *env_override, const char *soname,
                     const char *wheel_dir, char *tried, size_t tried_len,
                     char *found, size_t found_len) {
  char path[1024];
  void *h;
  tried[0] = '\0';
  found[0] = '\0';
  const char *ov = env_override ? getenv(env_override) : NULL;
  if (ov && *ov) return try_open(ov, tried, tried_len, found, found_len);
  if ((h = try_open(soname, tried, tried_len, found, found_len))) return h;
  snprintf(path, sizeof path, "%s/%s", KDAG_CUDA_TOOLKIT_LIBDIR, soname);
  if ((h = try_open(path, tried, tried_len, found, found_len))) return h;
  const char *site = getenv("KDAG_PYTHON_SITE");
  if (site && *site) {
    char *copy = strdup(site);
    char *save = NULL;
    for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir && !h;
         dir = strtok_r(NULL, ":", &save)) {
      snprintf(path, sizeof path, "%s/nvidia/cu13/lib/%s", dir, soname);
      if ((h = try_open(path, tried, tried_len, found, found_len))) break;
      snprintf(path, sizeof path, "%s/nvidia/%s/lib/%s", dir, wheel_dir, soname);
      h = try_open(path, tried, tried_len, found, found_len);
    }
    free(copy);
  }
  return h;
}
