/* SPDX-License-Identifier: Apache-2.0 */
/* Loading PTX, CUBIN and fatbin images; function ABI; kernel launch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/module.h"
#include "base/status_internal.h"
#include "cuda/cu_status.h"

#define KD_JIT_LOG_BYTES 8192

static kd_status load_data(kd_device *d, const char *op, const void *data,
                           const char *what, kd_cu_module *out) {
  /* The JIT's own log explains PTX that the driver rejects. */
  char *log = calloc(1, KD_JIT_LOG_BYTES);
  CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[2] = {log, (void *)(uintptr_t)(log ? KD_JIT_LOG_BYTES : 0)};
  d->context_waits++;
  CUresult r = d->cu->cuModuleLoadDataEx(&out->mod, data, log ? 2 : 0, opts, vals);
  if (r != CUDA_SUCCESS) {
    kd_status st = kd_fail_cu(r, op, "cuModuleLoadDataEx");
    if (log && log[0]) st = kd_fail_context(st, "%s: loading %s (JIT log: %s)", op, what, log);
    free(log);
    out->mod = NULL;
    return st;
  }
  free(log);
  return KD_OK;
}

kd_status kd_cu_module_load_ptx(kd_device *d, const char *op, const char *ptx,
                                size_t len, kd_cu_module *out) {
  memset(out, 0, sizeof *out);
  kd_status st = kd_ptx_check_text(op, ptx, len);
  if (st) return st;
  st = kd_ptx_parse(op, ptx, &out->ptx);
  if (st) return st;
  out->has_ptx = 1;
  out->image_bytes = len;
  st = kd_ptx_check_isa(op, out->ptx.isa, d->info.max_ptx_isa, d->info.driver_version);
  if (!st) st = load_data(d, op, ptx, "PTX", out);
  if (st == KD_ERR_UNSUPPORTED_PTX && out->ptx.isa)
    st = kd_fail_context(st, "PTX .version %d.%d", out->ptx.isa / 10, out->ptx.isa % 10);
  if (st) kd_cu_module_unload(d, out);
  return st;
}

kd_status kd_cu_module_load_image(kd_device *d, const char *op, const void *image,
                                  size_t size, kd_cu_module *out) {
  memset(out, 0, sizeof *out);
  if (!image || size == 0)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument image is NULL or empty", op);
  kd_image_info info = kd_image_inspect(image, size);
  if (info.kind == KD_IMAGE_TRUNCATED)
    return kd_fail(KD_ERR_INVALID_ARGUMENT,
                   "%s: argument image is a truncated CUBIN or fatbin: its headers describe more "
                   "than the %zu bytes given", op, size);
  if (info.kind == KD_IMAGE_UNKNOWN)
    return kd_fail(KD_ERR_INVALID_ARGUMENT,
                   "%s: argument image (%zu bytes) is neither a CUBIN (ELF) nor a "
                   "fatbin; load PTX text with kd_raw_load_ptx", op, size);
  char have[160];
  kd_image_describe(&info, have, sizeof have);
  const char *kind = info.kind == KD_IMAGE_CUBIN ? "CUBIN" : "fatbin";
  if (kd_image_runs_on(&info, d->sm) == 0)
    return kd_fail(KD_ERR_NO_BINARY_FOR_GPU,
                   "%s: the %s holds code for %s, but this GPU (%s) is sm_%d: "
                   "rebuild for sm_%d or ship PTX", op, kind, have, d->info.name, d->sm, d->sm);
  out->image_bytes = size;
  kd_status st = load_data(d, op, image, kind, out);
  if (st == KD_ERR_NO_BINARY_FOR_GPU)
    st = kd_fail_context(st, "%s: the %s holds %s, this GPU is sm_%d", op, kind, have, d->sm);
  return st;
}

void kd_cu_module_unload(kd_device *d, kd_cu_module *m) {
  for (size_t i = 0; i < m->fn_count; ++i) {
    free(m->fns[i].name);
    free(m->fns[i].param_sizes);
  }
  free(m->fns);
  if (m->has_ptx) kd_ptx_info_free(&m->ptx);
  if (m->mod) {
    d->context_waits++;
    d->cu->cuModuleUnload(m->mod);
  }
  memset(m, 0, sizeof *m);
}

/* Probes cuFuncGetParamInfo by index until the driver says the index is out
 * of range: that gives the count, and each call the size. Returns 1 when
 * the kernel takes more parameters than kdag can pass (KD_PTX_MAX_PARAMS),
 * else 0. */
static int driver_params(kd_device *d, kd_cu_function *f) {
  uint32_t cap = 0;
  if (!d->cu->cuFuncGetParamInfo) return 0; /* driver before 12.4: unknown */
  for (uint32_t i = 0; i <= KD_PTX_MAX_PARAMS; ++i) {
    size_t offset = 0, size = 0;
    CUresult r = d->cu->cuFuncGetParamInfo(f->fn, i, &offset, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) break; /* index past the last one */
    if (r != CUDA_SUCCESS) {
      f->param_count = 0; /* the driver cannot tell: leave params_known 0 */
      return 0;
    }
    if (i == KD_PTX_MAX_PARAMS) return 1;
    if (f->param_count == cap) {
      cap = cap ? cap * 2 : 8;
      uint32_t *grown = realloc(f->param_sizes, cap * sizeof *grown);
      if (!grown) return 0; /* leave params_known 0: checks fall back to none */
      f->param_sizes = grown;
    }
    f->param_sizes[f->param_count++] = (uint32_t)size;
  }
  f->params_known = 1;
  return 0;
}

/* The SM number of PTX's .target ("sm_90a" is 90), 0 when not sm_NN. */
static int ptx_target_sm(const kd_ptx_info *ptx) {
  if (strncmp(ptx->target, "sm_", 3) != 0) return 0;
  return atoi(ptx->target + 3);
}

kd_status kd_cu_module_function(kd_device *d, const char *op, kd_cu_module *m,
                                const char *name, uint32_t *index) {
  if (!name || !*name) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument name is NULL or empty", op);
  for (size_t i = 0; i < m->fn_count; ++i)
    if (strcmp(m->fns[i].name, name) == 0) {
      *index = (uint32_t)i;
      return KD_OK;
    }
  if (m->has_ptx && !kd_ptx_find(&m->ptx, name))
    return kd_fail(KD_ERR_NOT_FOUND, "%s: the module has no kernel named \"%s\" (%zu .entry "
                   "in its PTX%s%s)", op, name, m->ptx.entry_count,
                   m->ptx.entry_count ? ", first " : "",
                   m->ptx.entry_count ? m->ptx.entries[0].name : "");
  kd_cu_function f;
  memset(&f, 0, sizeof f);
  CUresult r = d->cu->cuModuleGetFunction(&f.fn, m->mod, name);
  if (r == CUDA_ERROR_NOT_FOUND)
    return kd_fail(KD_ERR_NOT_FOUND, "%s: the module has no kernel named \"%s\" "
                   "(declare it extern \"C\" to avoid C++ name mangling)", op, name);
  if (r != CUDA_SUCCESS) return kd_fail_cu(r, op, "cuModuleGetFunction");
  /* Lazy loading: these attribute queries make the driver load the code. */
  r = d->cu->cuFuncGetAttribute(&f.max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f.fn);
  if (r == CUDA_SUCCESS) r = d->cu->cuFuncGetAttribute(&f.static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f.fn);
  if (r == CUDA_SUCCESS) r = d->cu->cuFuncGetAttribute(&f.dyn_smem_limit, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f.fn);
  if (r != CUDA_SUCCESS) return kd_fail_cu(r, op, "cuFuncGetAttribute");
  /* The driver's account of the parameters when it gives one (CUDA 12.4+),
   * else the PTX signature's: the driver reads what it loaded. */
  if (driver_params(d, &f)) {
    free(f.param_sizes);
    return kd_fail(KD_ERR_ARGUMENT_MISMATCH, "%s: kernel \"%s\" takes more than %d parameters; kdag passes at "
                   "most %d (pass a struct, or a pointer to one)", op, name, KD_PTX_MAX_PARAMS, KD_PTX_MAX_PARAMS);
  }
  const kd_ptx_entry *e = m->has_ptx ? kd_ptx_find(&m->ptx, name) : NULL;
  if (!f.params_known && e && e->params_known) {
    free(f.param_sizes);
    f.param_sizes = malloc((e->param_count ? e->param_count : 1) * sizeof *f.param_sizes);
    if (!f.param_sizes) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory", op);
    memcpy(f.param_sizes, e->param_sizes, e->param_count * sizeof *f.param_sizes);
    f.param_count = e->param_count;
    f.params_known = 1;
  }
  f.grid_wait = !e                                      ? (m->grid_wait ? KD_GRID_WAIT_YES : KD_GRID_WAIT_UNKNOWN)
                : e->grid_wait || m->ptx.func_grid_wait ? KD_GRID_WAIT_YES
                : ptx_target_sm(&m->ptx) < 90           ? KD_GRID_WAIT_PRE_SM90
                                                        : KD_GRID_WAIT_NONE;
  f.name = strdup(name);
  if (!f.name) {
    free(f.param_sizes);
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory", op);
  }
  if (m->fn_count == m->fn_cap) {
    size_t cap = m->fn_cap ? m->fn_cap * 2 : 4;
    kd_cu_function *grown = realloc(m->fns, cap * sizeof *grown);
    if (!grown) {
      free(f.name);
      free(f.param_sizes);
      return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory", op);
    }
    m->fns = grown;
    m->fn_cap = cap;
  }
  m->fns[m->fn_count] = f;
  *index = (uint32_t)m->fn_count++;
  return KD_OK;
}

kd_status kd_launch_config_check_dims(const char *op, const kd_launch_config *c) {
  static const char *axis = "xyz";
  static const uint32_t max_block[3] = {1024, 1024, 64};
  static const uint32_t max_grid[3] = {0x7fffffffu, 65535, 65535};
  uint64_t threads = 1;
  if (c->flags & ~(uint32_t)KD_LAUNCH_PDL)
    return kd_fail(KD_ERR_LAUNCH_CONFIG, "%s: config flags 0x%x has unknown bits (KD_LAUNCH_* are 0x%x)", op,
                   c->flags, (unsigned)KD_LAUNCH_PDL);
  for (int i = 0; i < 3; ++i) {
    if (c->grid[i] == 0 || c->block[i] == 0)
      return kd_fail(KD_ERR_LAUNCH_CONFIG, "%s: config %s.%c is 0", op,
                     c->grid[i] == 0 ? "grid" : "block", axis[i]);
    if (c->block[i] > max_block[i])
      return kd_fail(KD_ERR_LAUNCH_CONFIG, "%s: config block.%c = %u exceeds %u", op, axis[i],
                     c->block[i], max_block[i]);
    if (c->grid[i] > max_grid[i])
      return kd_fail(KD_ERR_LAUNCH_CONFIG, "%s: config grid.%c = %u exceeds %u", op, axis[i],
                     c->grid[i], max_grid[i]);
    threads *= c->block[i];
  }
  if (threads > 1024)
    return kd_fail(KD_ERR_LAUNCH_CONFIG, "%s: config has %llu threads per block, at most 1024",
                   op, (unsigned long long)threads);
  return KD_OK;
}

kd_status kd_cu_check_config(kd_device *d, const char *op, kd_cu_function *f,
                             const kd_launch_config *c) {
  kd_status st = kd_launch_config_check_dims(op, c);
  if (st) return st;
  if ((c->flags & KD_LAUNCH_PDL) && f->grid_wait == KD_GRID_WAIT_NONE)
    return kd_fail(KD_ERR_LAUNCH_CONFIG,
                   "%s: config flags has KD_LAUNCH_PDL, but kernel %s's PTX has no griddepcontrol.wait: it "
                   "must wait for the grid dependency (cudaGridDependencySynchronize()) before it touches "
                   "memory an earlier kernel uses (docs/pdl.md)", op, f->name);
  uint64_t threads = (uint64_t)c->block[0] * c->block[1] * c->block[2];
  if (threads > (uint64_t)f->max_threads)
    return kd_fail(KD_ERR_LAUNCH_CONFIG,
                   "%s: %llu threads per block, but kernel %s allows at most %d "
                   "(registers or __launch_bounds__)", op, (unsigned long long)threads,
                   f->name, f->max_threads);
  if ((int64_t)c->shared_bytes > f->dyn_smem_limit) {
    int64_t room = (int64_t)d->max_shared_optin - f->static_smem;
    if ((int64_t)c->shared_bytes > room)
      return kd_fail(KD_ERR_LAUNCH_CONFIG,
                     "%s: %u bytes of dynamic shared memory for kernel %s, but this GPU "
                     "allows at most %lld beside its %d static bytes", op, c->shared_bytes,
                     f->name, (long long)room, f->static_smem);
    CUresult r = d->cu->cuFuncSetAttribute(f->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                           (int)c->shared_bytes);
    if (r != CUDA_SUCCESS) return kd_fail_cu(r, op, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    f->dyn_smem_limit = (int)c->shared_bytes;
  }
  return KD_OK;
}

kd_status kd_cu_launch(kd_device *d, const char *op, kd_cu_function *f,
                       const kd_launch_config *c, void **params, int programmatic) {
  CUresult r;
  if (programmatic) {
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig lc = {c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2],
                         c->shared_bytes, d->stream, &attr, 1};
    r = d->cu->cuLaunchKernelEx(&lc, f->fn, params, NULL);
  } else {
    r = d->cu->cuLaunchKernel(f->fn, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2],
                              c->shared_bytes, d->stream, params, NULL);
  }
  if (r != CUDA_SUCCESS) {
    kd_status st = kd_fail_cu(r, op, programmatic ? "cuLaunchKernelEx (programmatic)" : "cuLaunchKernel");
    return kd_fail_context(st, "kernel %s", f->name);
  }
  return KD_OK;
}
