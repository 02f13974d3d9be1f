/* NVRTC, loaded at run time: compile CUDA C++ to PTX, CUBIN or LTO-IR. */
#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/binary.h"
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
  char path[1024];
} g_nvrtc;
static kd_status g_nvrtc_status;
static char g_nvrtc_msg[2048];
static pthread_once_t g_nvrtc_once = PTHREAD_ONCE_INIT;
static atomic_int g_nvrtc_loaded;

static void nvrtc_load_once(void) {
  char tried[1536];
  atomic_store(&g_nvrtc_loaded, 1);
  void *h = kd_dynlib_open("KDAG_NVRTC_PATH", "libnvrtc.so.13", "cuda_nvrtc",
                           tried, sizeof tried, g_nvrtc.path,
                           sizeof g_nvrtc.path);
  if (!h) {
    g_nvrtc_status = KD_ERR_LIBRARY_MISSING;
    snprintf(g_nvrtc_msg, sizeof g_nvrtc_msg,
             "NVRTC (libnvrtc.so.13) not found; tried %s. Install the CUDA "
             "toolkit or point KDAG_NVRTC_PATH at the library", tried);
    return;
  }
#define KD_RESOLVE(name)                                                      \
  {                                                                           \
    void *fn = dlsym(h, #name);                                               \
    if (!fn) {                                                                \
      g_nvrtc_status = KD_ERR_LIBRARY_MISSING;                                \
      snprintf(g_nvrtc_msg, sizeof g_nvrtc_msg,                               \
               "%s lacks the symbol %s: not a usable NVRTC", g_nvrtc.path,    \
               #name);                                                        \
      return;                                                                 \
    }                                                                         \
    memcpy(&g_nvrtc.name, &fn, sizeof fn);                                    \
  }
  KD_NVRTC_SYMBOLS(KD_RESOLVE)
#undef KD_RESOLVE
  g_nvrtc_status = KD_OK;
}

static kd_status nvrtc_load(const char *op) {
  pthread_once(&g_nvrtc_once, nvrtc_load_once);
  if (g_nvrtc_status != KD_OK)
    return kd_fail(g_nvrtc_status, "%s: %s", op, g_nvrtc_msg);
  return KD_OK;
}

int kd_nvrtc_loaded(void) { return atomic_load(&g_nvrtc_loaded); }

static pthread_once_t g_nvrtc_id_once = PTHREAD_ONCE_INIT;
static char g_nvrtc_id[KD_DYNLIB_IDENTITY_MAX];
static int g_nvrtc_id_ok;

static void nvrtc_identity_once(void) {
  char path[1024];
  if (!kd_dynlib_locate("KDAG_NVRTC_PATH", "libnvrtc.so.13", "cuda_nvrtc", path, sizeof path)) {
    /* Not found on disk by name: load it and identify the loaded file. */
    Dl_info di;
    void *sym = NULL;
    pthread_once(&g_nvrtc_once, nvrtc_load_once);
    if (g_nvrtc_status != KD_OK) return;
    memcpy(&sym, &g_nvrtc.nvrtcVersion, sizeof sym);
    if (!dladdr(sym, &di) || !di.dli_fname) return;
    snprintf(path, sizeof path, "%s", di.dli_fname);
  }
  g_nvrtc_id_ok = kd_dynlib_identity(path, g_nvrtc_id, sizeof g_nvrtc_id) == 0;
}

kd_status kd_nvrtc_identity(const char **out) {
  pthread_once(&g_nvrtc_id_once, nvrtc_identity_once);
  if (g_nvrtc_id_ok) {
    *out = g_nvrtc_id;
    return KD_OK;
  }
  kd_status st = nvrtc_load("kd_nvrtc_identity");
  if (st) return st;
  return kd_fail(KD_ERR_LIBRARY_MISSING, "kd_nvrtc_identity: cannot read the NVRTC library file %s",
                 g_nvrtc.path);
}

const char *kd_nvrtc_path(void) {
  pthread_once(&g_nvrtc_once, nvrtc_load_once);
  return g_nvrtc_status == KD_OK ? g_nvrtc.path : "";
}

kd_status kd_nvrtc_version(int *major, int *minor) {
  if (!major || !minor)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "kd_nvrtc_version: argument %s is NULL", major ? "minor" : "major");
  kd_status st = nvrtc_load("kd_nvrtc_version");
  if (st) return st;
  g_nvrtc.nvrtcVersion(major, minor);
  return KD_OK;
}

kd_binary *kd_binary_wrap(kd_binary_kind kind, void *data, size_t size,
                          char *log, const char *arch) {
  kd_binary *b = calloc(1, sizeof *b);
  if (!b) {
    free(data);
    free(log);
    return NULL;
  }
  b->kind = kind;
  b->data = data;
  b->size = size;
  b->log = log ? log : strdup("");
  snprintf(b->arch, sizeof b->arch, "%s", arch ? arch : "");
  b->producer_version = 0;
  return b;
}

const void *kd_binary_data(const kd_binary *b) { return b ? b->data : NULL; }
size_t kd_binary_size(const kd_binary *b) { return b ? b->size : 0; }
kd_binary_kind kd_binary_kind_of(const kd_binary *b) { return b ? b->kind : KD_BINARY_PTX; }
const char *kd_binary_log(const kd_binary *b) { return b && b->log ? b->log : ""; }
const char *kd_binary_arch(const kd_binary *b) { return b ? b->arch : ""; }
int kd_binary_producer_version(const kd_binary *b) { return b ? b->producer_version : 0; }

void kd_binary_free(kd_binary *b) {
  if (!b) return;
  free(b->data);
  free(b->log);
  free(b);
}

/* Checks an option string for being non-NULL and non-empty. NVRTC takes
 * each string as one option, spaces and all ("-DNAME=a b" defines NAME as
 * "a b"), so nothing else needs refusing here. */
static int option_ok(const char *s) { return s && *s; }

#define KD_MAX_OPTIONS 256

kd_status kd_nvrtc_compile(const char *source, const kd_nvrtc_options *o,
                           kd_binary **out) {
  static const char *op = "kd_nvrtc_compile";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out is NULL", op);
  *out = NULL;
  if (!source) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument source is NULL", op);
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
