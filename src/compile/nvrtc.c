/* SPDX-License-Identifier: Apache-2.0 */
/* NVRTC, loaded at run time: compile CUDA C++ to PTX, CUBIN or LTO-IR. */
#include <dlfcn.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/binary.h"
#include "base/options.h"
#include "base/dynlib.h"
#include "base/status_internal.h"

#define KD_NVRTC_SYMBOLS(X)                                                   \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram)                \
  X(nvrtcDestroyProgram) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize)     \
  X(nvrtcGetProgramLog) X(nvrtcGetPTXSize) X(nvrtcGetPTX) X(nvrtcGetCUBINSize) \
  X(nvrtcGetCUBIN) X(nvrtcGetLTOIRSize) X(nvrtcGetLTOIR)

static struct {
#define KD_FIELD(name) __typeof__(name) *name;
  KD_NVRTC_SYMBOLS(KD_FIELD)
#undef KD_FIELD
} g_nvrtc;
static const char *const g_nvrtc_names[] = {
#define KD_NAME(name) #name,
    KD_NVRTC_SYMBOLS(KD_NAME)
#undef KD_NAME
};
_Static_assert(sizeof g_nvrtc == sizeof g_nvrtc_names / sizeof g_nvrtc_names[0] * sizeof(void (*)(void)),
               "one function pointer per NVRTC symbol");

kd_dynlib_lib kd_nvrtc_lib = {
    .what = "NVRTC",
    .env = "KDAG_NVRTC_PATH",
    .soname = "libnvrtc.so.13",
    .wheel = "cuda_nvrtc",
    .hint = "Install the CUDA toolkit or point KDAG_NVRTC_PATH at the library",
    .names = g_nvrtc_names,
    .fns = &g_nvrtc,
    .count = sizeof g_nvrtc_names / sizeof g_nvrtc_names[0],
    KD_DYNLIB_INIT,
};

static kd_status nvrtc_load(const char *op) { return kd_dynlib_load(&kd_nvrtc_lib, op); }

int kd_nvrtc_loaded(void) { return kd_dynlib_tried(&kd_nvrtc_lib); }

kd_status kd_nvrtc_identity(const char **out) { return kd_dynlib_identify(&kd_nvrtc_lib, "kd_nvrtc_identity", out); }

kd_status kd_nvrtc_version(int *major, int *minor) {
  if (!major || !minor)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "kd_nvrtc_version: argument %s is NULL", major ? "minor" : "major");
  kd_status st = nvrtc_load("kd_nvrtc_version");
  if (st) return st;
  g_nvrtc.nvrtcVersion(major, minor);
  return KD_OK;
}

/* Checks an option string for being non-NULL and non-empty. NVRTC takes
 * each string as one option, spaces and all ("-DNAME=a b" defines NAME as
 * "a b"), so nothing else needs refusing here. */
static int option_ok(const char *s) { return s && *s; }

#define KD_MAX_OPTIONS 256

void kd_nvrtc_options_init(kd_nvrtc_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
}

kd_status kd_nvrtc_compile(const char *source, const kd_nvrtc_options *o,
                           kd_binary **out) {
  static const char *op = "kd_nvrtc_compile";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_binary is NULL", op);
  *out = NULL;
  if (!source) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument source is NULL", op);
  if (o) {
    kd_status st = kd_options_check(op, "options->", "kd_nvrtc_options", o->struct_size, sizeof *o);
    if (st) return st;
  }
  if (!o || !o->arch || !*o->arch)
    return kd_fail(KD_ERR_INVALID_ARGUMENT,
                   "%s: options->arch is required outside a raw scope (e.g. "
                   "\"sm_90\" for CUBIN or \"compute_90\" for PTX)", op);
  int real = strncmp(o->arch, "sm_", 3) == 0;
  if (!real && strncmp(o->arch, "compute_", 8) != 0)
    return kd_fail(KD_ERR_INVALID_ARGUMENT,
                   "%s: options->arch \"%s\" is neither sm_XX nor compute_XX", op, o->arch);
  kd_status st = kd_binary_arch_check(op, "options->arch", o->arch);
  if (st) return st;
  /* Each count alone first, so their sum cannot wrap. */
  if (o->include_path_count > KD_MAX_OPTIONS || o->define_count > KD_MAX_OPTIONS ||
      o->extra_flag_count > KD_MAX_OPTIONS)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->%s is above %d", op,
                   o->include_path_count > KD_MAX_OPTIONS ? "include_path_count"
                   : o->define_count > KD_MAX_OPTIONS      ? "define_count"
                                                           : "extra_flag_count",
                   KD_MAX_OPTIONS);
  size_t n_opts = 1 + (o->std ? 1 : 0) + o->include_path_count + o->define_count +
                  o->extra_flag_count + 2;
  if (n_opts > KD_MAX_OPTIONS)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: %zu options, at most %d", op,
                   n_opts, KD_MAX_OPTIONS);
  const char *null_array = o->include_path_count && !o->include_paths ? "include_paths"
                           : o->define_count && !o->defines           ? "defines"
                           : o->extra_flag_count && !o->extra_flags   ? "extra_flags"
                           : o->header_count && !o->header_names      ? "header_names"
                           : o->header_count && !o->header_sources    ? "header_sources"
                                                                      : NULL;
  if (null_array)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->%s is NULL but its count is not 0", op, null_array);
  if (o->header_count > KD_MAX_OPTIONS)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: %zu in-memory headers, at most %d", op,
                   o->header_count, KD_MAX_OPTIONS);
  for (size_t i = 0; i < o->header_count; ++i)
    if (!option_ok(o->header_names[i]) || !o->header_sources[i])
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->header_%s[%zu] is NULL%s", op,
                     option_ok(o->header_names[i]) ? "sources" : "names", i,
                     option_ok(o->header_names[i]) ? "" : " or empty");
  st = nvrtc_load(op);
  if (st) return st;

  /* Owned option strings, freed at the end. */
  char *opts[KD_MAX_OPTIONS];
  int n = 0;
  st = KD_OK;
  /* Each option at its full length: a long -D or -I is passed whole, as
   * the cache key hashed it. */
#define KD_PUSH_FMT(...)                                              \
  do {                                                                \
    int len_ = snprintf(NULL, 0, __VA_ARGS__);                        \
    if (len_ < 0 || !(opts[n] = malloc((size_t)len_ + 1))) {          \
      st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for options", op); \
      goto done;                                                      \
    }                                                                 \
    snprintf(opts[n], (size_t)len_ + 1, __VA_ARGS__);                 \
    ++n;                                                              \
  } while (0)
  KD_PUSH_FMT("-arch=%s", o->arch);
  if (o->std) {
    if (!option_ok(o->std)) { st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->std is empty", op); goto done; }
    KD_PUSH_FMT("-std=%s", o->std);
  }
  for (size_t i = 0; i < o->include_path_count; ++i) {
    if (!option_ok(o->include_paths[i])) { st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->include_paths[%zu] is NULL or empty", op, i); goto done; }
    KD_PUSH_FMT("-I%s", o->include_paths[i]);
  }
  for (size_t i = 0; i < o->define_count; ++i) {
    if (!option_ok(o->defines[i])) { st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->defines[%zu] is NULL or empty", op, i); goto done; }
    KD_PUSH_FMT("-D%s", o->defines[i]);
  }
  if (o->lto) KD_PUSH_FMT("-dlto");
  if (o->relocatable) KD_PUSH_FMT("-rdc=true");
  for (size_t i = 0; i < o->extra_flag_count; ++i) {
    if (!option_ok(o->extra_flags[i])) { st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->extra_flags[%zu] is NULL or empty", op, i); goto done; }
    KD_PUSH_FMT("%s", o->extra_flags[i]);
  }
#undef KD_PUSH_FMT

  nvrtcProgram prog = NULL;
  const char *pname = o->program_name ? o->program_name : "kdag.cu";
  nvrtcResult r = g_nvrtc.nvrtcCreateProgram(&prog, source, pname, (int)o->header_count,
                                             (const char *const *)o->header_sources,
                                             (const char *const *)o->header_names);
  if (r != NVRTC_SUCCESS) {
    st = kd_fail(r == NVRTC_ERROR_OUT_OF_MEMORY ? KD_ERR_OUT_OF_MEMORY : KD_ERR_COMPILE_FAILED,
                 "%s: nvrtcCreateProgram failed: %s", op, g_nvrtc.nvrtcGetErrorString(r));
    goto done;
  }
  r = g_nvrtc.nvrtcCompileProgram(prog, n, (const char *const *)opts);
  size_t log_size = 0;
  g_nvrtc.nvrtcGetProgramLogSize(prog, &log_size);
  char *log = calloc(1, log_size + 1);
  if (log && log_size) g_nvrtc.nvrtcGetProgramLog(prog, log);
  if (r != NVRTC_SUCCESS) {
    /* An option NVRTC does not take (a bad -arch, an unknown flag) is the
     * caller's argument, as nvJitLink's wrapper reports it. */
    st = kd_fail(r == NVRTC_ERROR_INVALID_OPTION ? KD_ERR_INVALID_ARGUMENT : KD_ERR_COMPILE_FAILED,
                 "%s: nvrtcCompileProgram(%s, -arch=%s) failed: %s\n%s",
                 op, pname, o->arch, g_nvrtc.nvrtcGetErrorString(r), log ? log : "(no log)");
    free(log);
    g_nvrtc.nvrtcDestroyProgram(&prog);
    goto done;
  }
  kd_binary_kind kind = o->lto ? KD_BINARY_LTOIR
                        : (real && !o->emit_ptx) ? KD_BINARY_CUBIN : KD_BINARY_PTX;
  size_t size = 0;
  nvrtcResult rs = kind == KD_BINARY_LTOIR   ? g_nvrtc.nvrtcGetLTOIRSize(prog, &size)
                   : kind == KD_BINARY_CUBIN ? g_nvrtc.nvrtcGetCUBINSize(prog, &size)
                                             : g_nvrtc.nvrtcGetPTXSize(prog, &size);
  void *data = rs == NVRTC_SUCCESS ? malloc(size ? size : 1) : NULL;
  if (data) {
    rs = kind == KD_BINARY_LTOIR   ? g_nvrtc.nvrtcGetLTOIR(prog, data)
         : kind == KD_BINARY_CUBIN ? g_nvrtc.nvrtcGetCUBIN(prog, data)
                                   : g_nvrtc.nvrtcGetPTX(prog, data);
  }
  g_nvrtc.nvrtcDestroyProgram(&prog);
  static const char *kind_name[] = {[KD_BINARY_LTOIR] = "LTO-IR", [KD_BINARY_CUBIN] = "CUBIN", [KD_BINARY_PTX] = "PTX"};
  if (rs != NVRTC_SUCCESS || !data || !size) {
    free(data);
    free(log);
    if (rs != NVRTC_SUCCESS)
      st = kd_fail(KD_ERR_COMPILE_FAILED, "%s: fetching the %s output of %s failed: %s", op, kind_name[kind], pname,
                   g_nvrtc.nvrtcGetErrorString(rs));
    else if (!data)
      st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for %zu output bytes", op, size);
    else /* e.g. -dlto among the extra flags of a compile that asked for no LTO-IR */
      st = kd_fail(KD_ERR_COMPILE_FAILED, "%s: %s compiled to no %s (check the extra flags against the options' "
                   "lto and arch)", op, pname, kind_name[kind]);
    goto done;
  }
  *out = kd_binary_wrap(kind, data, size, log, o->arch);
  if (!*out) {
    st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the binary", op);
  } else {
    int maj = 0, min = 0;
    g_nvrtc.nvrtcVersion(&maj, &min);
    (*out)->producer_version = maj * 1000 + min * 10;
  }
done:
  for (int i = 0; i < n; ++i) free(opts[i]);
  return st;
}
