/* SPDX-License-Identifier: Apache-2.0 */
/* The dlopen'd CUDA driver table, resolved once per process. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/driver.h"
#include "base/status_internal.h"

/* The only process-wide state in kdag: the resolved table and the outcome of
 * loading it, written once under pthread_once. */
static kd_cu_table g_cu;
static kd_status g_status = KD_ERR_DRIVER_MISSING;
static char g_message[1024];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t,
                                CUdriverProcAddressQueryResult *);

static kd_status load_failure(kd_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static kd_status load_failure(kd_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_message, sizeof g_message, fmt, ap);
  va_end(ap);
  return code;
}

static kd_status load_once_impl(void) {
  const char *override = getenv("KDAG_CUDA_DRIVER_PATH");
  const char *path = (override && *override) ? override : "libcuda.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    return load_failure(KD_ERR_DRIVER_MISSING,
                        "the CUDA driver library %s could not be loaded (%s); "
                        "install the NVIDIA driver, or use KD_BACKEND_HOST",
                        path, why ? why : "unknown reason");
  }
  snprintf(g_cu.path, sizeof g_cu.path, "%s", path);
  get_proc_fn get_proc = (get_proc_fn)dlsym(lib, "cuGetProcAddress_v2");
  if (!get_proc) {
    return load_failure(KD_ERR_DRIVER_MISSING,
                        "%s has no cuGetProcAddress_v2: the driver is older "
                        "than CUDA 12.0, which kdag needs", path);
  }
  /* Resolves one entry point; required ones fail the load when missing. */
#define KD_CU_RESOLVE(name, str, required)                                         \
  do {                                                                        \
    void *fn = NULL;                                                          \
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;  \
    CUresult r = get_proc(str, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &q); \
    if (r == CUDA_ERROR_STUB_LIBRARY)                                         \
      return load_failure(KD_ERR_DRIVER_MISSING,                              \
                          "%s is the CUDA toolkit's stub libcuda "            \
                          "(CUDA_ERROR_STUB_LIBRARY), not a driver: install " \
                          "the NVIDIA driver or drop the stubs directory "    \
                          "from the library path", path);                     \
    if (r != CUDA_SUCCESS || q != CU_GET_PROC_ADDRESS_SUCCESS || !fn) {       \
      if (required)                                                           \
        return load_failure(KD_ERR_DRIVER_MISSING,                            \
                            "%s: cuGetProcAddress(%s, %d) found no such "     \
                            "entry point (result %d, query %d): the driver "  \
                            "is too old for kdag", path, str, CUDA_VERSION, \
                            (int)r, (int)q);                                  \
      fn = NULL;                                                              \
    }                                                                         \
    memcpy(&g_cu.name, &fn, sizeof fn);                                       \
  } while (0);
/* Stringify here, before expansion: cuda.h maps many names to _v2 macros,
 * but cuGetProcAddress wants the base name. */
#define KD_CU_SYMBOL(name) KD_CU_RESOLVE(name, #name, 1)
#define KD_CU_SYMBOL_OPTIONAL(name) KD_CU_RESOLVE(name, #name, 0)
#include "cuda/driver_symbols.h"
#undef KD_CU_SYMBOL
#undef KD_CU_SYMBOL_OPTIONAL
#undef KD_CU_RESOLVE
  CUresult r = g_cu.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char *name = "?", *text = "?";
    g_cu.cuGetErrorName(r, &name);
    g_cu.cuGetErrorString(r, &text);
    if (r == CUDA_ERROR_STUB_LIBRARY)
      return load_failure(KD_ERR_DRIVER_MISSING,
                          "%s is the CUDA toolkit's stub libcuda: cuInit "
                          "failed: CUDA_ERROR_STUB_LIBRARY (%s)", path, text);
    /* Whatever else cuInit refuses (a kernel module of another version
     * than the library, a too old driver, forward compatibility on a GPU
     * without it, no permission), CUDA cannot be used on this machine:
     * like a missing driver, which AUTO answers with a HOST session. */
    return load_failure(r == CUDA_ERROR_NO_DEVICE ? KD_ERR_NO_DEVICE : KD_ERR_DRIVER_MISSING,
                        "cuInit failed: %s (%s)", name, text);
  }
  g_cu.cuDriverGetVersion(&g_cu.driver_version);
  return KD_OK;
}

static void load_once(void) {
  g_status = load_once_impl();
  /* The library stays loaded for the process: its handle is never closed,
   * since function pointers from it may be in use on other threads. */
}

kd_status kd_driver_load(const char *op, const kd_cu_table **out) {
  pthread_once(&g_once, load_once);
  if (g_status != KD_OK) {
    *out = NULL;
    return kd_fail(g_status, "%s: %s", op, g_message);
  }
  *out = &g_cu;
  return KD_OK;
}

void kd_cu_error_strings(CUresult r, const char **name, const char **text) {
  *name = NULL;
  *text = NULL;
  if (g_status == KD_OK) {
    g_cu.cuGetErrorName(r, name);
    g_cu.cuGetErrorString(r, text);
  }
  if (!*name) *name = "CUDA_ERROR_UNKNOWN_CODE";
  if (!*text) *text = "no description";
}

int kd_driver_max_ptx_isa(int v) {
  /* PTX ISA released with each CUDA version (from the PTX ISA release
   * notes): 12.x is 8.x except where a release skipped a number. */
  static const struct { int cuda, isa; } table[] = {
      {11000, 70}, {11010, 71}, {11020, 72}, {11030, 73}, {11040, 74},
      {11050, 75}, {11060, 76}, {11070, 77}, {11080, 78}, {12000, 80},
      {12010, 81}, {12020, 82}, {12030, 83}, {12040, 84}, {12050, 85},
      {12060, 85}, {12080, 87}, {12090, 88}, {13000, 90},
  };
  const size_t n = sizeof table / sizeof table[0];
  /* A driver newer than the table may accept ISAs we do not know: report
   * "unknown" so no pre-check refuses what the driver would take. */
  if (v > table[n - 1].cuda) return 0;
  int best = 0;
  for (size_t i = 0; i < n; ++i)
    if (v >= table[i].cuda) best = table[i].isa;
  return best;
}
