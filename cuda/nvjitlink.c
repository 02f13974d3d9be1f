/* nvJitLink, loaded at run time (links LTO-IR, cubin and fatbin inputs). */
#include <dlfcn.h>
#include <nvJitLink.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda/dynlib.h"
#include "cuda/status_internal.h"
#include "kdag/compile.h"


static struct {
  __typeof__(nvJitLinkVersion) *nvJitLinkVersion;
  char path[1024];
} g_jl;
static kd_status g_jl_status;
static char g_jl_msg[2048];
static pthread_once_t g_jl_once = PTHREAD_ONCE_INIT;

static void jl_load_once(void) {
  char tried[1536];
  void *h = kd_dynlib_open("KDAG_NVJITLINK_PATH", "libnvJitLink.so.13",
                           "nvjitlink", tried, sizeof tried, g_jl.path,
                           sizeof g_jl.path);
  if (!h) {
    g_jl_status = KD_ERR_LIBRARY_MISSING;
    snprintf(g_jl_msg, sizeof g_jl_msg,
             "nvJitLink (libnvJitLink.so.13) not found; tried %s. Install the "
             "CUDA toolkit or point KDAG_NVJITLINK_PATH at the library", tried);
    return;
  }
  void *fn = dlsym(h, "nvJitLinkVersion");
  if (!fn) {
    g_jl_status = KD_ERR_LIBRARY_MISSING;
    snprintf(g_jl_msg, sizeof g_jl_msg, "%s lacks nvJitLinkVersion: not a usable nvJitLink", g_jl.path);
    return;
  }
  memcpy(&g_jl.nvJitLinkVersion, &fn, sizeof fn);
  g_jl_status = KD_OK;
}

kd_status kd_nvjitlink_version(int *major, int *minor) {
  if (!major || !minor)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "kd_nvjitlink_version: major and minor must not be NULL");
  pthread_once(&g_jl_once, jl_load_once);
  if (g_jl_status != KD_OK) return kd_fail(g_jl_status, "kd_nvjitlink_version: %s", g_jl_msg);
  unsigned maj = 0, min = 0;
  nvJitLinkResult r = g_jl.nvJitLinkVersion(&maj, &min);
  if (r != NVJITLINK_SUCCESS)
    return kd_fail(KD_ERR_LIBRARY_MISSING, "kd_nvjitlink_version: nvJitLinkVersion failed (%d)", (int)r);
  *major = (int)maj;
  *minor = (int)min;
  return KD_OK;
}
