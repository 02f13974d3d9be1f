/* SPDX-License-Identifier: Apache-2.0 */
/* nvJitLink, loaded at run time: links LTO-IR, PTX, CUBIN, fatbin and
 * device-library inputs into one CUBIN. Entry points are the versioned
 * __nvJitLink*_13_0 symbols that nvJitLink.h's inline wrappers call. */
#include <dlfcn.h>
#include <nvJitLink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/binary.h"
#include "base/options.h"
#include "base/dynlib.h"
#include "base/status_internal.h"

#define KD_JL_SYMBOLS(X)                                                              \
  X(nvJitLinkVersion, nvJitLinkVersion) X(Create, __nvJitLinkCreate_13_0)                \
  X(Destroy, __nvJitLinkDestroy_13_0) X(AddData, __nvJitLinkAddData_13_0)               \
  X(Complete, __nvJitLinkComplete_13_0) X(CubinSize, __nvJitLinkGetLinkedCubinSize_13_0) \
  X(Cubin, __nvJitLinkGetLinkedCubin_13_0) X(ErrorLogSize, __nvJitLinkGetErrorLogSize_13_0) \
  X(ErrorLog, __nvJitLinkGetErrorLog_13_0) X(InfoLogSize, __nvJitLinkGetInfoLogSize_13_0) \
  X(InfoLog, __nvJitLinkGetInfoLog_13_0)

static struct {
#define KD_FIELD(field, sym) __typeof__(sym) *field;
  KD_JL_SYMBOLS(KD_FIELD)
#undef KD_FIELD
} g_jl;
static const char *const g_jl_names[] = {
#define KD_NAME(field, sym) #sym,
    KD_JL_SYMBOLS(KD_NAME)
#undef KD_NAME
};
_Static_assert(sizeof g_jl == sizeof g_jl_names / sizeof g_jl_names[0] * sizeof(void (*)(void)),
               "one function pointer per nvJitLink symbol");

kd_dynlib_lib kd_nvjitlink_lib = {
    .what = "nvJitLink 13",
    .env = "KDAG_NVJITLINK_PATH",
    .soname = "libnvJitLink.so.13",
    .wheel = "nvjitlink",
    .hint = "Install the CUDA toolkit or point KDAG_NVJITLINK_PATH at the library",
    .names = g_jl_names,
    .fns = &g_jl,
    .count = sizeof g_jl_names / sizeof g_jl_names[0],
    KD_DYNLIB_INIT,
};

/* Loads nvJitLink and reads its version. */
static kd_status jl_load(const char *op, unsigned *major, unsigned *minor) {
  kd_status st = kd_dynlib_load(&kd_nvjitlink_lib, op);
  if (st) return st;
  if (g_jl.nvJitLinkVersion(major, minor) != NVJITLINK_SUCCESS)
    return kd_fail(KD_ERR_LIBRARY_MISSING, "%s: %s: nvJitLinkVersion failed", op, kd_nvjitlink_lib.path);
  return KD_OK;
}

int kd_nvjitlink_loaded(void) { return kd_dynlib_tried(&kd_nvjitlink_lib); }

kd_status kd_nvjitlink_identity(const char **out) {
  return kd_dynlib_identify(&kd_nvjitlink_lib, "kd_nvjitlink_identity", out);
}

kd_status kd_nvjitlink_version(int *major, int *minor) {
  if (!major || !minor)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "kd_nvjitlink_version: argument %s is NULL", major ? "minor" : "major");
  unsigned ma, mi;
  kd_status st = jl_load("kd_nvjitlink_version", &ma, &mi);
  if (st) return st;
  *major = (int)ma;
  *minor = (int)mi;
  return KD_OK;
}

kd_link_input kd_link_input_of(const kd_binary *b, const char *name) {
  kd_link_input in;
  memset(&in, 0, sizeof in);
  if (!b) return in; /* refused by kd_nvjitlink_link as a NULL input */
  in.kind = b->kind;
  in.data = b->data;
  in.size = b->size;
  in.name = name;
  in.producer_version = b->producer_version;
  return in;
}

static const char *kind_name(kd_binary_kind k) {
  static const char *names[] = {"PTX", "CUBIN", "fatbin", "LTO-IR", "library"};
  return (unsigned)k <= KD_BINARY_LIBRARY ? names[k] : "invalid";
}

static nvJitLinkInputType input_type(kd_binary_kind k) {
  switch (k) {
    case KD_BINARY_PTX: return NVJITLINK_INPUT_PTX;
    case KD_BINARY_CUBIN: return NVJITLINK_INPUT_CUBIN;
    case KD_BINARY_FATBIN: return NVJITLINK_INPUT_FATBIN;
    case KD_BINARY_LTOIR: return NVJITLINK_INPUT_LTOIR;
    case KD_BINARY_LIBRARY: return NVJITLINK_INPUT_LIBRARY;
  }
  return NVJITLINK_INPUT_NONE;
}

static const char *jl_result_name(nvJitLinkResult r) {
  switch (r) {
#define KD_R(x) case x: return #x;
    KD_R(NVJITLINK_SUCCESS) KD_R(NVJITLINK_ERROR_UNRECOGNIZED_OPTION) KD_R(NVJITLINK_ERROR_MISSING_ARCH)
    KD_R(NVJITLINK_ERROR_INVALID_INPUT) KD_R(NVJITLINK_ERROR_PTX_COMPILE) KD_R(NVJITLINK_ERROR_NVVM_COMPILE)
    KD_R(NVJITLINK_ERROR_INTERNAL) KD_R(NVJITLINK_ERROR_THREADPOOL) KD_R(NVJITLINK_ERROR_UNRECOGNIZED_INPUT)
    KD_R(NVJITLINK_ERROR_FINALIZE) KD_R(NVJITLINK_ERROR_NULL_INPUT) KD_R(NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS)
    KD_R(NVJITLINK_ERROR_INCORRECT_INPUT_TYPE) KD_R(NVJITLINK_ERROR_ARCH_MISMATCH)
    KD_R(NVJITLINK_ERROR_OUTDATED_LIBRARY) KD_R(NVJITLINK_ERROR_MISSING_FATBIN)
    KD_R(NVJITLINK_ERROR_UNRECOGNIZED_ARCH) KD_R(NVJITLINK_ERROR_UNSUPPORTED_ARCH)
    KD_R(NVJITLINK_ERROR_LTO_NOT_ENABLED)
#undef KD_R
  }
  return "NVJITLINK_ERROR_UNKNOWN";
}

/* The handle's error (or info) log; malloc'd, "" when empty. */
static char *jl_log(nvJitLinkHandle h, int info) {
  size_t n = 0;
  nvJitLinkResult r = info ? g_jl.InfoLogSize(h, &n) : g_jl.ErrorLogSize(h, &n);
  char *log = calloc(1, (r == NVJITLINK_SUCCESS ? n : 0) + 1);
  if (log && r == NVJITLINK_SUCCESS && n) {
    if ((info ? g_jl.InfoLog(h, log) : g_jl.ErrorLog(h, log)) != NVJITLINK_SUCCESS) log[0] = '\0';
  }
  return log;
}

/* nvJitLink reports IR it cannot read (made by a newer compiler) through
 * its log; recognise that so the caller gets KD_ERR_LTO_VERSION. Only
 * where LTO-IR is involved (ltoir): a PTX input's "Unsupported .version"
 * is a link failure like any other. */
static int log_says_version(int ltoir, const char *log) {
  return ltoir && log && (strstr(log, "version") || strstr(log, "Version")) &&
         (strstr(log, "newer") || strstr(log, "mismatch") || strstr(log, "incompatible") ||
          strstr(log, "unsupported") || strstr(log, "Unsupported"));
}

#define KD_MAX_LINK_OPTIONS 64

void kd_link_options_init(kd_link_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
}

kd_status kd_nvjitlink_link(const kd_link_input *in, size_t n, const kd_link_options *o,
                            kd_binary **out) {
  static const char *op = "kd_nvjitlink_link";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_binary is NULL", op);
  *out = NULL;
  if (!in || n == 0)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: no inputs to link (argument inputs is %s, input_count %zu)", op,
                   in ? "set" : "NULL", n);
  if (!o) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument options is NULL (it names the architecture)", op);
  kd_status st = kd_options_check(op, "options->", "kd_link_options", o->struct_size, sizeof *o);
  if (st) return st;
  if (!o->arch || strncmp(o->arch, "sm_", 3) != 0 || !o->arch[3])
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->arch must be a real architecture such as "
                   "\"sm_90\" (got %s)", op, o->arch ? o->arch : "NULL");
  st = kd_binary_arch_check(op, "options->arch", o->arch);
  if (st) return st;
  if (o->extra_flag_count && !o->extra_flags)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->extra_flags is NULL but its count is %zu",
                   op, o->extra_flag_count);
  if (o->extra_flag_count > KD_MAX_LINK_OPTIONS - 2) /* not the sum: it could wrap */
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: %zu extra flags, at most %d", op,
                   o->extra_flag_count, KD_MAX_LINK_OPTIONS - 2);
  int any_lto = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!in[i].data || !in[i].size)
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: inputs[%zu] (%s) is NULL or empty", op, i,
                     in[i].name ? in[i].name : "unnamed");
    if ((unsigned)in[i].kind > KD_BINARY_LIBRARY)
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: inputs[%zu] has invalid kind %d", op, i,
                     (int)in[i].kind);
    if (in[i].kind == KD_BINARY_LTOIR) {
      any_lto = 1;
      if (!kd_ltoir_has_magic(in[i].data, in[i].size))
        return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: inputs[%zu] (%s) is declared LTO-IR but lacks "
                       "the LTO-IR magic number", op, i, in[i].name ? in[i].name : "unnamed");
    }
  }
  for (size_t i = 0; i < o->extra_flag_count; ++i)
    if (!o->extra_flags[i] || !*o->extra_flags[i])
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: options->extra_flags[%zu] is NULL or empty", op, i);
  unsigned major, minor;
  st = jl_load(op, &major, &minor);
  if (st) return st;
  int mine = (int)(major * 1000 + minor * 10);
  for (size_t i = 0; i < n; ++i)
    if (in[i].kind == KD_BINARY_LTOIR && in[i].producer_version > mine)
      return kd_fail(KD_ERR_LTO_VERSION,
                     "%s: inputs[%zu] (%s) is LTO-IR from CUDA %d.%d, newer than this nvJitLink "
                     "(%u.%u, %s) can read; build it with the toolkit's NVRTC (for libmathdx: "
                     "install it with --no-deps so it uses the toolkit's NVRTC) or use a newer "
                     "nvJitLink", op, i, in[i].name ? in[i].name : "unnamed",
                     in[i].producer_version / 1000, in[i].producer_version % 1000 / 10,
                     major, minor, kd_nvjitlink_lib.path);

  char arch_opt[KD_BINARY_ARCH_MAX + 8]; /* "-arch=" and an arch checked above */
  snprintf(arch_opt, sizeof arch_opt, "-arch=%s", o->arch);
  const char *opts[KD_MAX_LINK_OPTIONS];
  uint32_t nopt = 0;
  opts[nopt++] = arch_opt;
  if (o->lto || any_lto) opts[nopt++] = "-lto";
  for (size_t i = 0; i < o->extra_flag_count; ++i) opts[nopt++] = o->extra_flags[i];

  nvJitLinkHandle h = NULL;
  nvJitLinkResult r = g_jl.Create(&h, nopt, opts);
  if (r != NVJITLINK_SUCCESS)
    return kd_fail(r == NVJITLINK_ERROR_UNRECOGNIZED_OPTION || r == NVJITLINK_ERROR_UNRECOGNIZED_ARCH ||
                           r == NVJITLINK_ERROR_UNSUPPORTED_ARCH || r == NVJITLINK_ERROR_MISSING_ARCH
                       ? KD_ERR_INVALID_ARGUMENT : KD_ERR_LINK_FAILED,
                   "%s: nvJitLinkCreate(%s%s) failed: %s", op, arch_opt,
                   o->extra_flag_count ? ", extra flags" : "", jl_result_name(r));
  char *log = NULL;
  for (size_t i = 0; i < n; ++i) {
    char name[64];
    if (!in[i].name) snprintf(name, sizeof name, "input%zu", i);
    r = g_jl.AddData(h, input_type(in[i].kind), in[i].data, in[i].size, in[i].name ? in[i].name : name);
    if (r != NVJITLINK_SUCCESS) {
      log = jl_log(h, 0);
      st = kd_fail(log_says_version(in[i].kind == KD_BINARY_LTOIR, log) ? KD_ERR_LTO_VERSION : KD_ERR_LINK_FAILED,
                   "%s: nvJitLinkAddData(inputs[%zu] '%s', %s, %zu bytes) failed: %s\n%s", op, i,
                   in[i].name ? in[i].name : name, kind_name(in[i].kind), in[i].size,
                   jl_result_name(r), log && *log ? log : "(no log)");
      goto done;
    }
  }
  r = g_jl.Complete(h);
  if (r != NVJITLINK_SUCCESS) {
    log = jl_log(h, 0);
    int ltoir = 0;
    for (size_t i = 0; i < n; ++i) ltoir |= in[i].kind == KD_BINARY_LTOIR;
    st = kd_fail(log_says_version(ltoir, log) ? KD_ERR_LTO_VERSION : KD_ERR_LINK_FAILED,
                 "%s: nvJitLinkComplete(%s, %zu inputs) failed: %s\n%s", op, arch_opt, n,
                 jl_result_name(r), log && *log ? log : "(no log)");
    goto done;
  }
  size_t size = 0;
  r = g_jl.CubinSize(h, &size);
  void *data = r == NVJITLINK_SUCCESS && size ? malloc(size) : NULL;
  if (!data) {
    st = r != NVJITLINK_SUCCESS || !size
             ? kd_fail(KD_ERR_LINK_FAILED, "%s: nvJitLinkGetLinkedCubinSize failed: %s", op, jl_result_name(r))
             : kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for a %zu-byte CUBIN", op, size);
    goto done;
  }
  r = g_jl.Cubin(h, data);
  if (r != NVJITLINK_SUCCESS) {
    free(data);
    st = kd_fail(KD_ERR_LINK_FAILED, "%s: nvJitLinkGetLinkedCubin failed: %s", op, jl_result_name(r));
    goto done;
  }
  *out = kd_binary_wrap(KD_BINARY_CUBIN, data, size, jl_log(h, 1), o->arch);
  if (!*out) st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the binary", op);
done:
  free(log);
  g_jl.Destroy(&h);
  return st;
}
