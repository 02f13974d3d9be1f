/* SPDX-License-Identifier: Apache-2.0 */
/* GPU-lane tests: a cuBLAS saxpy (y += 2x) as a kdag foreign node, with
 * cuBLAS loaded from the toolkit at run time. Shared by the EAGER and
 * GRAPH-mode suites. */
#ifndef KDAG_TESTS_CUBLAS_NODE_H
#define KDAG_TESTS_CUBLAS_NODE_H

#include <ck_pr.h>
#include <dlfcn.h>

#include "kdag_test.h"

typedef int (*cublas_create_fn)(void **);
typedef int (*cublas_destroy_fn)(void *);
typedef int (*cublas_set_stream_fn)(void *, void *);
typedef int (*cublas_set_workspace_fn)(void *, void *, size_t);
typedef int (*cublas_saxpy_fn)(void *, int, const float *, const float *, int, float *, int);

typedef struct blas {
  void *lib, *handle;
  cublas_destroy_fn destroy;
  cublas_set_stream_fn set_stream;
  cublas_set_workspace_fn set_workspace;
  cublas_saxpy_fn saxpy;
  int released, calls;
} blas;

/* Loads cuBLAS and creates a handle; skips the test when cuBLAS is absent. */
static inline void blas_open(blas *b) {
  memset(b, 0, sizeof *b);
  b->lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!b->lib) b->lib = dlopen("/usr/local/cuda/lib64/libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!b->lib) {
    /* On the GPU lane a missing cuBLAS is a failure: the foreign-node
     * tests would otherwise pass by skipping. */
    if (kdt_require_gpu()) cr_assert_fail("KDAG_REQUIRE_GPU=1 but cuBLAS (libcublas.so.13) is missing: %s", dlerror());
    cr_skip_test("GPU lane: cuBLAS (libcublas.so.13) not found: %s", dlerror());
  }
  cublas_create_fn create = (cublas_create_fn)dlsym(b->lib, "cublasCreate_v2");
  b->destroy = (cublas_destroy_fn)dlsym(b->lib, "cublasDestroy_v2");
  b->set_stream = (cublas_set_stream_fn)dlsym(b->lib, "cublasSetStream_v2");
  b->set_workspace = (cublas_set_workspace_fn)dlsym(b->lib, "cublasSetWorkspace_v2");
  b->saxpy = (cublas_saxpy_fn)dlsym(b->lib, "cublasSaxpy_v2");
  cr_assert(create && b->destroy && b->set_stream && b->set_workspace && b->saxpy);
  cr_assert_eq(create(&b->handle), 0);
}

/* The release callback of the node's resource (the blas itself). */
static inline void release_blas(void *p) {
  blas *b = p;
  b->destroy(b->handle);
  ck_pr_store_int(&b->released, 1);
}

/* The foreign callback: spans[0] is y (inout), spans[1] is x (in). */
static inline kd_status saxpy_node(const kd_foreign_call *call, void *user) {
  blas *b = user;
  float alpha = 2.0f;
  b->calls++;
  if (call->span_count != 2 || !call->workspace || call->resource != b) return KD_ERR_INVALID_ARGUMENT;
  if (b->set_stream(b->handle, call->stream) || b->set_workspace(b->handle, (void *)call->workspace, call->workspace_bytes))
    return KD_ERR_DRIVER;
  int st = b->saxpy(b->handle, (int)call->spans[0].elements, &alpha, (const float *)call->spans[1].device_ptr, 1,
                    (float *)call->spans[0].device_ptr, 1);
  return st ? KD_ERR_DRIVER : KD_OK;
}

#endif
