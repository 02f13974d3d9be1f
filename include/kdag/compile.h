/* SPDX-License-Identifier: Apache-2.0 */
/// @file
/// kdag/compile.h — run-time compilation with NVRTC and linking with
/// nvJitLink, usable without a GPU.
///
/// NVRTC and nvJitLink run on the CPU, so these functions need no driver and
/// no session: they are how the host lane produces PTX, CUBIN and LTO-IR, and
/// links LTO-IR (e.g. a cuBLASDx kernel, or libmathdx output) into one CUBIN.
/// Each library is loaded on first use (KDAG_NVRTC_PATH / KDAG_NVJITLINK_PATH,
/// then the dynamic loader's search path, then the CUDA toolkit kdag was built
/// against, then pip wheels under KDAG_PYTHON_SITE). Thread-safe: NVRTC
/// programs and nvJitLink handles are per call.
#ifndef KDAG_COMPILE_H
#define KDAG_COMPILE_H

#include <stddef.h>
#include <stdint.h>

#include "kdag/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/// What a binary holds.
typedef enum kd_binary_kind {
  KD_BINARY_PTX = 0,    ///< NUL-terminated text; size counts the NUL
  KD_BINARY_CUBIN = 1,  ///< ELF for one real architecture
  KD_BINARY_FATBIN = 2, ///< several images and/or PTX
  KD_BINARY_LTOIR = 3,  ///< link-time IR, for nvJitLink
  KD_BINARY_LIBRARY = 4 ///< host archive (.a) of relocatable device code; link input only
} kd_binary_kind;

/// How kd_nvrtc_compile (and a raw scope's kd_raw_compile_nvrtc) compiles.
typedef struct kd_nvrtc_options {
  uint32_t struct_size; ///< sizeof(kd_nvrtc_options), set by kd_nvrtc_options_init: checked
  /// "sm_90" compiles to CUBIN for that GPU, "compute_90" to PTX. NULL: the
  /// session device's sm_XX inside a raw scope; required outside one.
  const char *arch;
  const char *std;                   ///< e.g. "c++17"; NULL: NVRTC's default
  const char *const *include_paths;  ///< each becomes -I`path`
  size_t include_path_count;         ///< entries in include_paths
  const char *const *defines;        ///< "NAME" or "NAME=VALUE", each -D
  size_t define_count;               ///< entries in defines
  const char *const *extra_flags;    ///< passed verbatim, after the above
  size_t extra_flag_count;           ///< entries in extra_flags
  const char *program_name;          ///< shown in the log; default "kdag.cu"
  /// In-memory headers: header_names[i] (as written in `#include "..."`)
  /// has the text header_sources[i]. Both arrays are read during the call
  /// only. Unlike files found through include_paths, their text is part of
  /// a module cache key (kdag/cache.h).
  const char *const *header_names;
  const char *const *header_sources; ///< the texts of header_names, in order
  size_t header_count;               ///< entries in each of the two
  int emit_ptx;                      ///< 1: PTX even for an sm_XX arch
  int lto;                           ///< 1: -dlto, output is LTO-IR
  int relocatable;                   ///< 1: -rdc=true
} kd_nvrtc_options;

/// Zeroes *options (every field's default) and sets struct_size. NULL is
/// ignored; thread-safe.
KD_API void kd_nvrtc_options_init(kd_nvrtc_options *options);

/// Output of one compilation. Owned by the caller: free with kd_binary_destroy.
/// Immutable once returned, so any number of threads may read one binary at
/// once; kd_binary_destroy must not overlap any other use. No kdag call given a
/// binary keeps it or frees it.
typedef struct kd_binary kd_binary;

/// Compiles CUDA C++ source (NUL-terminated). options is required (its arch
/// above all); kd_raw_compile_nvrtc takes NULL options and supplies the
/// device's arch.
/// Errors: KD_ERR_INVALID_ARGUMENT (NULL source, no arch, bad option strings,
/// an option NVRTC refuses: NVRTC_ERROR_INVALID_OPTION),
/// KD_ERR_LIBRARY_MISSING (no NVRTC), KD_ERR_COMPILE_FAILED (kd_last_error()
/// holds NVRTC's full log), KD_ERR_OUT_OF_MEMORY. On failure *out_binary is NULL.
/// source, options and every string and array options points to (arch, std,
/// include paths, defines, extra flags, program name, headers) are read
/// during the call only: the binary copies what it needs (arch).
KD_API kd_status kd_nvrtc_compile(const char *source, const kd_nvrtc_options *options,
                                  kd_binary **out_binary);

/// Accessors; the pointers are borrowed from the binary and live until
/// kd_binary_destroy. A NULL binary gives NULL, 0, KD_BINARY_PTX, "" and ""
/// (and 0 for kd_binary_producer_version): check the binary first, since
/// KD_BINARY_PTX is also a real answer. Thread-safe: a binary is not
/// changed after it is made.
/// @{
KD_API const void *kd_binary_data(const kd_binary *binary);
KD_API size_t kd_binary_size(const kd_binary *binary);
KD_API kd_binary_kind kd_binary_kind_of(const kd_binary *binary);
/// @}
/// The compiler's or linker's log (warnings); "" if none.
KD_API const char *kd_binary_log(const kd_binary *binary);
/// The arch the binary was built for, e.g. "sm_90" or "compute_90".
KD_API const char *kd_binary_arch(const kd_binary *binary);
/// Frees the binary; NULL is ignored.
KD_API void kd_binary_destroy(kd_binary *binary);

/// Wraps a copy of size bytes of data as a binary of the given kind (e.g. a
/// fatbin or LTO-IR file read by the caller, or libmathdx output). arch may be
/// NULL (""). producer_version is the CUDA version of the compiler that made
/// LTO-IR, as major * 1000 + minor * 10 (13000 = 13.0), 0 if unknown; an
/// LTO-IR input newer than nvJitLink is refused before linking. Errors:
/// KD_ERR_INVALID_ARGUMENT (NULL or empty data, unknown kind, LTO-IR without
/// the LTO-IR magic number), KD_ERR_OUT_OF_MEMORY. *out_binary is owned; NULL on
/// failure. data and arch (at most 31 characters) are both copied: neither
/// is read after the call.
KD_API kd_status kd_binary_from_memory(kd_binary_kind kind, const void *data, size_t size,
                                       const char *arch, int producer_version, kd_binary **out_binary);

/// Version of the compiler that produced the binary (major * 1000 + minor *
/// 10; NVRTC's for kd_nvrtc_compile output), 0 if unknown.
KD_API int kd_binary_producer_version(const kd_binary *binary);

/// Reads the initial value of an extern "C" __device__ or __constant__
/// variable from a CUBIN (e.g. launch parameters a device library computes
/// at compile time: block dimensions, shared memory bytes), without a GPU.
/// Exactly size bytes are copied into dst. Errors: KD_ERR_INVALID_ARGUMENT
/// (not a CUBIN, NULL dst, size differs from the variable's), KD_ERR_NOT_FOUND
/// (no such symbol, or it has no initial data in the image). name is read
/// and dst written during the call only; on failure dst is left untouched.
KD_API kd_status kd_binary_read_global(const kd_binary *cubin, const char *name, void *dst,
                                       size_t size);

/* ---- nvJitLink ----------------------------------------------------------- */

/// One link input. data is borrowed for the duration of kd_nvjitlink_link.
/// kind PTX, CUBIN, FATBIN, LTOIR or LIBRARY; name is shown in the log (may
/// be NULL). producer_version as for kd_binary_from_memory (0 unknown).
typedef struct kd_link_input {
  kd_binary_kind kind;  ///< what data holds
  const void *data;     ///< the bytes (PTX: NUL-terminated)
  size_t size;          ///< bytes in data (PTX: counting the NUL)
  const char *name;     ///< shown in the log; may be NULL
  int producer_version; ///< CUDA version that made it, major*1000+minor*10; 0 unknown
} kd_link_input;

/// A link input borrowing a binary and name (neither copied: both must stay
/// valid until the link call that takes the input returns). A NULL binary
/// gives a zeroed input, which kd_nvjitlink_link refuses.
KD_API kd_link_input kd_link_input_of(const kd_binary *binary, const char *name);

/// How kd_nvjitlink_link links.
typedef struct kd_link_options {
  uint32_t struct_size;           ///< sizeof(kd_link_options), set by kd_link_options_init: checked
  const char *arch;               ///< "sm_90": required, a real architecture
  int lto;                        ///< 1: -lto (needed when any input is LTO-IR;
                                  ///< kdag sets it itself when one is)
  const char *const *extra_flags; ///< passed verbatim (e.g. "-O3", "-maxrregcount=64")
  size_t extra_flag_count;        ///< entries in extra_flags
} kd_link_options;

/// Zeroes *options and sets struct_size (arch stays to be set). NULL is
/// ignored; thread-safe.
KD_API void kd_link_options_init(kd_link_options *options);

/// Links the inputs into one CUBIN for options->arch. Before calling
/// nvJitLink, every LTO-IR input with a known producer version newer than
/// nvJitLink's own is refused with KD_ERR_LTO_VERSION naming both versions
/// (nvJitLink cannot read newer IR); a mismatch nvJitLink itself reports is
/// mapped to the same code. Errors: KD_ERR_INVALID_ARGUMENT (no inputs, a
/// NULL or empty input, bad kind, no arch, an arch that is not sm_XX),
/// KD_ERR_LIBRARY_MISSING, KD_ERR_LINK_FAILED (the message holds nvJitLink's
/// whole error log and names the input where nvJitLink did),
/// KD_ERR_LTO_VERSION, KD_ERR_OUT_OF_MEMORY. *out_binary (a CUBIN, its log holding
/// nvJitLink's info log) is owned; NULL on failure. inputs (with the data
/// and names they point to) and options (arch, extra flags) are read during
/// the call only; the CUBIN borrows nothing from them.
KD_API kd_status kd_nvjitlink_link(const kd_link_input *inputs, size_t input_count,
                                   const kd_link_options *options, kd_binary **out_binary);

/// NVRTC's version. Errors: KD_ERR_INVALID_ARGUMENT (NULL major or minor),
/// KD_ERR_LIBRARY_MISSING. *major and *minor are the caller's, written only
/// on success (as for kd_nvjitlink_version).
KD_API kd_status kd_nvrtc_version(int *major, int *minor);
/// nvJitLink's version. Errors: KD_ERR_INVALID_ARGUMENT (NULL major or
/// minor), KD_ERR_LIBRARY_MISSING. *major and *minor are the caller's,
/// written only on success.
KD_API kd_status kd_nvjitlink_version(int *major, int *minor);

#ifndef KDAG_NO_DEPRECATED
/// Names of the previous release, kept for one release (kdag/kdag.h).
/// @{
#define kd_binary_free kd_binary_destroy
/// @}
#endif

#ifdef __cplusplus
}
#endif
#endif /* KDAG_COMPILE_H */
