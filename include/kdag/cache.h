/* SPDX-License-Identifier: Apache-2.0 */
/// @file
/// kdag/cache.h — building CUBINs from source and link inputs (NVRTC -dlto,
/// then nvJitLink) through a content-addressed cache in memory and on disk.
///
/// Objects: kd_build_recipe (everything that goes into a module: source,
/// options, headers, link inputs and flags, key tags for header trees kdag
/// cannot read), kd_module_key (its XXH3-128 key, which also covers the
/// NVRTC and nvJitLink files and the cache format, so a changed input,
/// compiler or linker never finds a stale module) and kd_cubin_cache (the
/// caller's: kd_cubin_cache_create, kd_cubin_cache_destroy). The on-disk
/// format, its checks and the key's parts are in docs/design/module-cache.md.
///
/// The folder: the dir argument of kd_cubin_cache_create, else
/// $KDAG_CACHE_DIR, else $XDG_CACHE_HOME/kdag, else $HOME/.cache/kdag. The
/// empty string "" (as dir or KDAG_CACHE_DIR) keeps the cache in memory
/// only. kdag loads code from the folder, so it refuses one that belongs to
/// another user or that its group or others can write; an entry is read
/// only as a plain file of this user, and one that is truncated, corrupt or
/// of another format or key is rebuilt, never loaded.
///
/// Size: the folder is kept under a cap (KD_CUBIN_CACHE_DEFAULT_MAX_SIZE
/// unless $KDAG_CACHE_MAX_SIZE or kd_cubin_cache_set_max_size says
/// otherwise): after each entry it writes, a cache past the cap removes the
/// entries used least recently. A use is recorded explicitly, by setting the
/// entry's modification time when it is written or read from disk (access
/// times are unreliable: many file systems are mounted noatime).
///
/// Threads: a kd_cubin_cache may be used from any number of threads at once
/// (one internal lock; compiling and linking happen outside it, so two
/// threads asking for one missing module may both build it, and the second
/// result is dropped). Several processes of one user may share one folder,
/// pruning it too: an entry is written to a temporary file and renamed into
/// place, and a reader holds the file it opened, so nobody reads an entry
/// half-written or half-removed.
#ifndef KDAG_CACHE_H
#define KDAG_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "kdag/compile.h"

#ifdef __cplusplus
extern "C" {
#endif

/// What kd_build_cubin builds: a source and link inputs, with their
/// options; kd_build_recipe_init fills the defaults.
typedef struct kd_build_recipe {
  /// CUDA C++ source (NUL-terminated), compiled by NVRTC with -dlto into
  /// LTO-IR and linked with the inputs. NULL: link the inputs only.
  const char *source;
  /// NVRTC options; nvrtc.arch ("sm_XX") is required and is also the link
  /// architecture. lto is forced to 1 and emit_ptx to 0.
  kd_nvrtc_options nvrtc;
  const kd_link_input *inputs; ///< extra link inputs; borrowed during the call
  size_t input_count;            ///< entries in inputs
  const char *const *link_flags; ///< nvJitLink flags passed verbatim, e.g. "-O3"
  size_t link_flag_count;        ///< entries in link_flags
  /// Strings that stand for inputs kdag does not hash itself (header trees
  /// behind include_paths: "mathdx-25.6.0+<manifest hash>", your own
  /// "myheaders-v3"). Change one and the key changes.
  const char *const *key_tags;
  size_t key_tag_count;          ///< entries in key_tags
  /// The CUBIN is a whole program, so kd_build_cubin drops every device
  /// variable no kernel references (nvJitLink -optimize-unused-variables)
  /// except the ones named here: those the host reads by name
  /// (kd_binary_read_global, cuModuleGetGlobal). Why: header-only libraries
  /// (cuBLASDx, CUTLASS, libcu++) leave thousands of constexpr objects in an
  /// -rdc CUBIN, and the driver pays for each when it loads the module; on
  /// the H200 a cuBLASDx GEMM CUBIN of 1.35 MB and 5,950 symbols took 25 ms
  /// to load and 18 ms more to its first launch, against 13 KB once they
  /// were dropped. Names are borrowed during the call; each must be
  /// non-empty and hold no comma.
  const char *const *host_variables;
  size_t host_variable_count;    ///< entries in host_variables
  int keep_unused_variables; ///< 1: keep every device variable (drops nothing)
} kd_build_recipe;

/// Zeroes *recipe (every field's default) and fills recipe->nvrtc with
/// kd_nvrtc_options_init, whose struct_size the build calls check. NULL is
/// ignored; thread-safe.
KD_API void kd_build_recipe_init(kd_build_recipe *recipe);

/// A module key: XXH3-128 as 32 lowercase hex digits and a NUL.
typedef struct kd_module_key {
  char hex[33]; ///< the key as text
} kd_module_key;

/// Computes the recipe's key (identifies NVRTC, when there is a source, and
/// nvJitLink by their files without loading them unless they cannot be found
/// by name; hashes every byte of source, headers and link inputs). Errors:
/// KD_ERR_INVALID_ARGUMENT (NULL recipe or out_key, no arch, no source and no
/// inputs, an array NULL with a count), KD_ERR_LIBRARY_MISSING. The recipe,
/// with every string, array and input it points to, is read during the call
/// only; *out_key is written only on success. Thread-safe.
KD_API kd_status kd_build_key(const kd_build_recipe *recipe, kd_module_key *out_key);

/// A CUBIN cache: in memory, and on disk unless opened memory-only.
/// Opaque; kd_cubin_cache_create.
typedef struct kd_cubin_cache kd_cubin_cache;

/// Opens (creating the folder, mode 0700, if needed) a cache. dir may be NULL
/// (see the top for the search order) or "" (memory only); it is copied.
/// Errors: KD_ERR_INVALID_ARGUMENT (out_cache NULL; the folder cannot be created,
/// is not a writable directory, belongs to another user or is writable by
/// its group or others: the message names it), KD_ERR_OUT_OF_MEMORY.
/// *out_cache is owned: kd_cubin_cache_destroy.
KD_API kd_status kd_cubin_cache_create(const char *dir, kd_cubin_cache **out_cache);

/// Frees the cache and its in-memory entries; disk entries stay. The caller
/// must make sure no other thread is using it. NULL is ignored.
KD_API void kd_cubin_cache_destroy(kd_cubin_cache *cache);

/// The folder in use ("" when memory only, and for a NULL cache). Borrowed;
/// lives as the cache.
KD_API const char *kd_cubin_cache_dir(const kd_cubin_cache *cache);

/// Where kd_build_cubin's CUBIN came from.
typedef enum kd_build_origin {
  KD_BUILD_COMPILED = 0, ///< compiled and linked now (and stored)
  KD_BUILD_MEMORY = 1,   ///< found in the in-memory cache
  KD_BUILD_DISK = 2      ///< read from a valid disk entry
} kd_build_origin;

/// What one kd_build_cubin call did, and how long each step took.
typedef struct kd_build_report {
  kd_build_origin origin; ///< compiled, or found in memory or on disk
  kd_module_key key;      ///< the recipe's key
  double key_ms;     ///< hashing the recipe
  double compile_ms; ///< NVRTC (0 unless compiled)
  double link_ms;    ///< nvJitLink (0 unless compiled)
  double total_ms;   ///< the whole call
  int disk_entry_rejected; ///< 1: a disk entry existed but was corrupt, truncated or stale
  int disk_write_failed;   ///< 1: the module was built but could not be stored on disk
} kd_build_report;

/// Returns the linked CUBIN for the recipe: from memory, from disk, or built
/// (NVRTC -dlto, then nvJitLink with the inputs) and stored in both. cache
/// may be NULL (always build). report may be NULL. A failure to write the
/// disk entry is not an error (report->disk_write_failed says so). Errors:
/// those of kd_build_key, KD_ERR_COMPILE_FAILED (NVRTC's log),
/// KD_ERR_LINK_FAILED (nvJitLink's log), KD_ERR_LTO_VERSION,
/// KD_ERR_OUT_OF_MEMORY. *out_binary is owned (kd_binary_destroy), a copy the caller
/// may keep after the cache is closed; NULL on failure. The recipe is read
/// during the call only, as by kd_build_key. *report is written on success,
/// and on a memory or disk hit whose copy fails (KD_ERR_OUT_OF_MEMORY); every
/// other failure leaves it untouched.
KD_API kd_status kd_build_cubin(kd_cubin_cache *cache, const kd_build_recipe *recipe,
                                kd_binary **out_binary, kd_build_report *out_report);

/// A cache's counts since it was created (kd_cubin_cache_stats_get).
typedef struct kd_cubin_cache_stats {
  uint64_t memory_hits;     ///< builds answered from memory
  uint64_t disk_hits;       ///< builds answered from a valid disk entry
  uint64_t builds;          ///< builds that compiled and linked
  uint64_t corrupt_rebuilt; ///< disk entries refused (bad magic, version, size, checksum, key)
  uint64_t disk_write_failures; ///< modules built but not stored on disk
  uint64_t entries;         ///< in memory
  uint64_t pruned;          ///< disk entries this cache removed (the size cap, prune, clear)
  uint64_t max_size;        ///< the disk cap in effect, bytes (0: none)
} kd_cubin_cache_stats;

/// Copies the cache's counts into the caller's *out_stats; callable from any
/// thread, like every cache call. Errors: KD_ERR_INVALID_ARGUMENT.
KD_API kd_status kd_cubin_cache_stats_get(kd_cubin_cache *cache, kd_cubin_cache_stats *out_stats);

/// The disk cap a cache starts with: 1 GiB.
#define KD_CUBIN_CACHE_DEFAULT_MAX_SIZE ((uint64_t)1 << 30)

/// Sets the cache's disk cap in bytes (0: no cap); the next entry written
/// past it prunes the folder. A new cache takes $KDAG_CACHE_MAX_SIZE (bytes,
/// or with a K, M or G suffix: powers of 1024) when it is set and readable,
/// else KD_CUBIN_CACHE_DEFAULT_MAX_SIZE. Errors: KD_ERR_INVALID_ARGUMENT
/// (NULL cache).
KD_API kd_status kd_cubin_cache_set_max_size(kd_cubin_cache *cache, uint64_t max_bytes);

/// One disk entry of a cache's folder (kd_cubin_cache_list).
typedef struct kd_cache_entry_info {
  char key[33];     ///< the entry's key, 32 hex digits
  const char *kind; ///< "cubin" (kd_build_cubin's) or "blob" (libmathdx's output)
  uint64_t bytes;   ///< the file's size
  int64_t last_use; ///< when it was last written or read from disk, seconds since the epoch
} kd_cache_entry_info;

/// Called once per entry; a nonzero return stops the listing. entry is
/// borrowed for the call.
typedef int (*kd_cache_entry_fn)(void *user, const kd_cache_entry_info *entry);

/// Lists the folder's entries, the most recently used first (other
/// processes may add and remove entries meanwhile: the listing is of the
/// moment it read the folder). Errors: KD_ERR_INVALID_ARGUMENT (NULL cache
/// or fn, a memory-only cache, a folder that cannot be read),
/// KD_ERR_OUT_OF_MEMORY.
KD_API kd_status kd_cubin_cache_list(kd_cubin_cache *cache, kd_cache_entry_fn fn, void *user);

/// Removes the least recently used entries until the folder's entries
/// take at most max_bytes (0 removes all of them); also counts them.
/// Temporary files of writes in progress are left alone. out_removed and
/// out_removed_bytes may be NULL. Errors: as kd_cubin_cache_list.
KD_API kd_status kd_cubin_cache_prune(kd_cubin_cache *cache, uint64_t max_bytes, uint64_t *out_removed,
                                      uint64_t *out_removed_bytes);

#ifndef KDAG_NO_DEPRECATED
/// Names of the previous release, kept for one release (kdag/kdag.h).
/// @{
#define kd_module_cache kd_cubin_cache
#define kd_module_cache_open kd_cubin_cache_create
#define kd_module_cache_close kd_cubin_cache_destroy
#define kd_module_cache_dir kd_cubin_cache_dir
#define kd_module_cache_stats kd_cubin_cache_stats
#define kd_module_cache_stats_get kd_cubin_cache_stats_get
/// @}
#endif

#ifdef __cplusplus
}
#endif
#endif /* KDAG_CACHE_H */
