/* SPDX-License-Identifier: Apache-2.0 */
/* A recording NVTX tool (tests/nvtx_inject.c): loaded by NVTX itself
 * through NVTX_INJECTION64_PATH, as Nsight Systems is, it keeps every
 * domain, category, registered string, range and stream name kdag gives
 * it. A test reads them back with kdt_nvtx_events from the same library.
 * Not part of kdag. */
#ifndef KDAG_TESTS_NVTX_INJECT_H
#define KDAG_TESTS_NVTX_INJECT_H

#include <dlfcn.h>
#include <stdint.h>

typedef enum {
  KDT_NVTX_DOMAIN,   /* text: the domain's name */
  KDT_NVTX_CATEGORY, /* category, text */
  KDT_NVTX_STRING,   /* a registration: text */
  KDT_NVTX_PUSH,     /* category, text; registered: named by a registered string */
  KDT_NVTX_POP,
  KDT_NVTX_STREAM    /* text: the name given to a CUstream */
} kdt_nvtx_kind;

typedef struct kdt_nvtx_event {
  kdt_nvtx_kind kind;
  uint32_t category;
  int registered;
  int in_kdag;       /* the call named the "kdag" domain */
  char text[96];
} kdt_nvtx_event;

/* The events so far (count in *out_count): valid until the next event. */
typedef const kdt_nvtx_event *kdt_nvtx_events_fn(uint32_t *out_count);

/* The recorder NVTX loaded from path, or NULL when NVTX loaded none. */
static inline kdt_nvtx_events_fn *kdt_nvtx_recorder(const char *path) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return NULL;
  kdt_nvtx_events_fn *fn = (kdt_nvtx_events_fn *)dlsym(lib, "kdt_nvtx_events");
  dlclose(lib); /* NVTX keeps its own handle */
  return fn;
}

#endif
