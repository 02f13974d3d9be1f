/* SPDX-License-Identifier: Apache-2.0 */
/// @file
/// kdag/mathdx.h — NVIDIA MathDx device libraries (cuBLASDx, cuSOLVERDx).
///
/// MathDx is not part of kdag: tools/install-mathdx.sh installs the pinned
/// PyPI wheels nvidia-mathdx (headers: cuBLASDx, cuSOLVERDx, commonDx,
/// CUTLASS) and nvidia-libmathdx-cu13 (libmathdx, a C library that generates
/// LTO-IR for a described cuBLASDx / cuSOLVERDx function) into
/// a folder of your choice with `pip install --no-deps --target`. Its
/// licence is the user's responsibility. kdag finds it at $KDAG_MATHDX_DIR,
/// else at the folder kdag was configured with (KDAG_MATHDX_DIR in CMake, by
/// default `prefix/share/kdag/mathdx`).
///
/// Two routes, both ending in kd_build_cubin (kdag/cache.h):
/// - headers: a kernel that includes `<cublasdx.hpp>`, compiled by NVRTC with
///   kd_mathdx_info's include paths and flags (-default-device, C++17);
/// - libmathdx: kd_dx_solver_create generates a cuSOLVERDx device function
///   as LTO-IR (plus the library's fatbin it calls into), which a kernel
///   declares extern "C" and calls; both are link inputs.
///
/// Threads: every function here may be called from any thread.
#ifndef KDAG_MATHDX_H
#define KDAG_MATHDX_H

#include <stddef.h>
#include <stdint.h>

#include "kdag/cache.h"
#include "kdag/compile.h"
#include "kdag/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The longest MathDx folder path kdag handles, NUL included.
#define KD_MATHDX_PATH_MAX 1024

/// Where MathDx is and how to compile against it (kd_mathdx_find).
typedef struct kd_mathdx_info {
  char root[KD_MATHDX_PATH_MAX];            ///< the install folder
  char include_dir[KD_MATHDX_PATH_MAX];     ///< cublasdx.hpp, cusolverdx.hpp, commondx/
  char cutlass_include_dir[KD_MATHDX_PATH_MAX]; ///< CUTLASS's headers, which cuBLASDx includes
  char cuda_include_dir[KD_MATHDX_PATH_MAX];  ///< the toolkit's headers (cuda_fp16.h, ...)
  char cccl_include_dir[KD_MATHDX_PATH_MAX];  ///< the toolkit's CCCL (cuda/std/...)
  /// Point into this struct: valid while it lives at this address (do not
  /// copy the struct and use the copy's pointers).
  const char *include_paths[4];
  size_t include_path_count;    ///< entries in include_paths
  const char *nvrtc_flags[1];   ///< "-default-device": cuBLASDx/CUTLASS have unannotated helpers
  size_t nvrtc_flag_count;      ///< entries in nvrtc_flags
  const char *std;              ///< "c++17"
  char headers_version[32];     ///< nvidia-mathdx version, e.g. "25.6.0"; "unknown" without dist-info
  char libmathdx_version[32];   ///< nvidia-libmathdx-cu13 version; "" when not installed
  char libmathdx_path[KD_MATHDX_PATH_MAX]; ///< "" when not installed
  /// For kd_build_recipe.key_tags: both versions and a 64-bit hash of the
  /// wheels' RECORD manifests (which list every file with its SHA-256),
  /// computed once per process and root; without dist-info, of every file's
  /// path, size and modification time under the include folders. The hash
  /// also covers the toolkit's cuda.h and CCCL version header (their path,
  /// size, time and ends), which stand for the toolkit headers
  /// kd_mathdx_nvrtc_options adds.
  char key_tag[160];
} kd_mathdx_info;

/// Finds MathDx and fills *out_info: in the folder the environment variable
/// KDAG_MATHDX_DIR names, else in the one kdag was configured with
/// (-DKDAG_MATHDX_DIR, by default `prefix/share/kdag/mathdx`), in the PyPI
/// wheels' layout or a MathDx tarball's. Errors: KD_ERR_INVALID_ARGUMENT
/// (out_info NULL), KD_ERR_LIBRARY_MISSING (no cublasdx.hpp where it should
/// be; the message names the folder and says how to point kdag at one).
KD_API kd_status kd_mathdx_find(kd_mathdx_info *out_info);

/// Fills the NVRTC options a MathDx kernel needs (include paths, flags, std)
/// into *o, borrowing info's arrays (see above); other fields, struct_size
/// included, are left alone (initialize *o first).
/// Errors: KD_ERR_INVALID_ARGUMENT.
KD_API kd_status kd_mathdx_nvrtc_options(const kd_mathdx_info *info, kd_nvrtc_options *o);

/* ---- cuSOLVERDx through libmathdx -------------------------------------- */

/// The cuSOLVERDx functions kd_dx_solver_create generates.
typedef enum kd_dx_solver_function {
  KD_DX_POTRF = 0, ///< Cholesky: A = L L^T (lower) or U^T U (upper), in place
  KD_DX_POTRS = 1, ///< solve with a potrf factor
  KD_DX_TRSM = 2   ///< triangular solve op(A) X = B (left) or X op(A) = B (right)
} kd_dx_solver_function;

/// Which cuSOLVERDx function to generate, for what shape.
typedef struct kd_dx_solver_desc {
  kd_dx_solver_function function; ///< POTRF, POTRS or TRSM
  kd_dtype dtype;    ///< KD_F32 or KD_F64 (real)
  uint32_t m;        ///< rows of A (A is m x m)
  uint32_t n;        ///< right-hand sides (POTRS, TRSM); ignored by POTRF
  int upper;         ///< 1: upper triangle, 0: lower
  int transpose;     ///< TRSM: 1 solves with A^T
  int unit_diag;     ///< TRSM: 1 assumes a unit diagonal
  int side_right;    ///< TRSM: 1 solves X op(A) = B
  uint32_t block_threads; ///< threads per block; 0: the library chooses (block_dim says)
  int sm;            ///< target architecture, e.g. 90 (required)
} kd_dx_solver_desc;

/// A generated device function: extern "C" __device__ void `symbol`(...) with
/// cuSOLVERDx's shared-memory signature (potrf: (T *A, int *info); potrs and
/// trsm: (const T *A, T *B)), column-major, leading dimensions m. Link both
/// binaries with the kernel that calls it. Owned: kd_dx_solver_destroy.
typedef struct kd_dx_solver {
  /// Both owned by the solver: never kd_binary_destroy them (kd_dx_solver_destroy).
  kd_binary *ltoir;   ///< the function (LTO-IR, producer version set)
  kd_binary *fatbin;  ///< cuSOLVERDx's universal fatbin the function calls into
  char symbol[128];      ///< the function's name, to declare and call
  uint32_t block_dim[3]; ///< the block the function must be called from
  int from_cache;        ///< 1: read from the cache, libmathdx was not called
} kd_dx_solver;

/// Generates the function with libmathdx (loaded from the MathDx folder, or
/// $KDAG_LIBMATHDX_PATH; kdag's NVRTC is loaded first so libmathdx uses the
/// toolkit's). cache (may be NULL) keeps the output on disk, keyed by the
/// description, the MathDx install, the libmathdx file (path, size, time
/// and a hash of its ends) and kdag's NVRTC, so a warm start does not call
/// libmathdx. One libmathdx serves a process: the first that loads stays,
/// and a later call that finds another (KDAG_LIBMATHDX_PATH changed) is
/// refused; a load that failed is tried again by the next call.
/// Errors: KD_ERR_INVALID_ARGUMENT (bad description; another libmathdx is
/// loaded), KD_ERR_LIBRARY_MISSING (no libmathdx), KD_ERR_COMPILE_FAILED (libmathdx
/// refused: its message is included), KD_ERR_OUT_OF_MEMORY. desc is read and
/// cache used during the call only. *out_solver is zeroed before desc is checked
/// (only a NULL desc leaves it untouched), so it must not hold a live solver:
/// that one would leak. On success *out_solver owns both binaries
/// (kd_dx_solver_destroy); on any other failure it holds none.
KD_API kd_status kd_dx_solver_create(kd_cubin_cache *cache, const kd_dx_solver_desc *desc,
                                     kd_dx_solver *out_solver);
/// Frees both binaries (pointers taken from them, e.g. by kd_link_input_of,
/// die with them) and zeroes *solver. NULL ignored.
KD_API void kd_dx_solver_destroy(kd_dx_solver *solver);

#ifndef KDAG_NO_DEPRECATED
/// Names of the previous release, kept for one release (kdag/kdag.h).
/// @{
#define kd_dx_solver_release kd_dx_solver_destroy
/// @}
#endif

#ifdef __cplusplus
}
#endif
#endif /* KDAG_MATHDX_H */
