/* SPDX-License-Identifier: Apache-2.0 */
/// @file
/// kdag/kernel.h — what a kernel launch is made of: modules and their
/// functions (value handles of a session), launch configurations, device
/// spans of borrowed tensors, and typed arguments. The raw scope
/// (kdag/raw.h) and kernel nodes (kdag/graph.h) both take them.
///
/// Module handles follow the session's handle rules (kdag/session.h); the
/// other types are plain values.
#ifndef KDAG_KERNEL_H
#define KDAG_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "kdag/session.h"
#include "kdag/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- modules and functions ------------------------------------------- */

/// A loaded module (CUBIN, PTX or fatbin): a value handle like kd_tensor,
/// from a raw scope's load and compile calls.
typedef struct kd_module {
  uint64_t bits; ///< value handle, like kd_tensor
} kd_module;

/// A kernel of a module (kd_module_function): a plain value, valid while
/// its module lives.
typedef struct kd_function {
  kd_module module; ///< the module holding the kernel
  uint32_t index; ///< slot inside the module
} kd_function;

/// Looks up an extern "C" kernel. Unknown names are KD_ERR_NOT_FOUND.
/// name is borrowed for the call. *out_function, a value, is written only on
/// success; the function lives as long as its module.
KD_API kd_status kd_module_function(kd_session *session, kd_module module,
                                    const char *name, kd_function *out_function);

/// Number of parameters and their sizes, from the driver (cuFuncGetParamInfo)
/// or, for PTX kdag loaded itself, from the .entry signature. out_sizes may
/// be NULL; at most cap sizes are written (cap, the room in out_sizes, comes
/// after it: the one input after out-parameters). *out_count counts every
/// parameter, even past cap; out_count must not be NULL. Errors:
/// KD_ERR_INVALID_ARGUMENT (NULL session or out_count), KD_ERR_RELEASED,
/// KD_ERR_WRONG_SESSION, KD_ERR_DRIVER (the driver cannot tell the
/// parameters: a driver before CUDA 12.4).
KD_API kd_status kd_function_params(kd_session *session, kd_function fn,
                                    size_t *out_count, size_t *out_sizes, size_t cap);

/// Drops the caller's reference; in-flight launches keep the module loaded
/// until they complete, and the unload waits for a call that may wait
/// (kd_session_trim, kd_session_destroy, or a requested wait past
/// kd_session_options.unload_cap): it never waits itself. After a device
/// fault it still succeeds, as kd_tensor_release does. Errors: KD_ERR_INVALID_ARGUMENT (NULL session, a
/// module the session's module cache owns), KD_ERR_RELEASED,
/// KD_ERR_WRONG_SESSION.
KD_API kd_status kd_module_release(kd_session *session, kd_module module);

/// Takes one more reference to the module: each kd_module_retain needs its
/// kd_module_release. Errors: KD_ERR_INVALID_ARGUMENT (NULL session, a
/// module the session's module cache owns), KD_ERR_RELEASED,
/// KD_ERR_WRONG_SESSION.
KD_API kd_status kd_module_retain(kd_session *session, kd_module module);

/* ---- device spans ----------------------------------------------------- */

/// Bounded device span of a borrowed tensor; plain value, valid in its scope.
/// Fields are for reading; kdag checks them against the scope when used.
typedef struct kd_span {
  uint64_t device_ptr; ///< CUdeviceptr; do not keep past the callback
  size_t bytes;        ///< the span's size; a kernel must stay inside it
  int64_t elements;    ///< elements of dtype in the span
  kd_dtype dtype;      ///< the tensor's element type
  kd_tensor tensor;    ///< the borrowed tensor's handle: a name, holds no reference
  uint64_t scope_;     ///< internal: the scope that issued it
} kd_span;

/// An exclusive (writable) span: a distinct type, so a read-only span
/// cannot be passed where a kernel writes.
typedef struct kd_span_mut {
  kd_span span; ///< the span itself
} kd_span_mut;

/// The span's CUdeviceptr. Valid only inside the callback (see top).
static inline uint64_t kd_span_device_ptr(const kd_span *s) { return s->device_ptr; }

/* ---- launch configurations and arguments ------------------------------ */

/// KD_LAUNCH_* bits of kd_launch_config.flags.
enum {
  /// The kernel keeps the contract of programmatic dependent launch (PDL,
  /// Hopper and later): every thread executes the grid-dependency wait
  /// (griddepcontrol.wait in PTX, cudaGridDependencySynchronize() in CUDA
  /// C++) before its first read or write of any tensor it declares, and
  /// before touching any other global memory an earlier kernel may use.
  /// kdag may then start it while the kernel it depends on is finishing: in
  /// GRAPH mode its edges from other kernel nodes that come from declared
  /// accesses become programmatic, in EAGER mode it is launched with
  /// programmatic stream serialization when the kernel before it on the
  /// stream belongs to the same submission and no explicit edge (kd_graph_edge)
  /// leads to it. Writes are covered because write-after-read and
  /// write-after-write edges become programmatic too. Triggering dependents
  /// early (griddepcontrol.launch_dependents) is optional and only a
  /// scheduling hint. kdag refuses the flag for a kernel loaded from PTX
  /// for sm_90 or later that has no griddepcontrol.wait
  /// (KD_ERR_LAUNCH_CONFIG); PTX for an older target (where CUDA C++'s wait
  /// compiles to nothing) launches plainly; a CUBIN's kernel is taken at
  /// its word. Without PDL (a device before sm_90, a
  /// driver without cuLaunchKernelEx, KD_SESSION_NO_PDL, the raw scope),
  /// the launch is an ordinary one. See docs/pdl.md.
  KD_LAUNCH_PDL = 1u << 0
};

/// A kernel launch's shape, checked against the function's limits.
/// Zero-initialise it (or use kd_launch_config_flat) so flags is 0.
typedef struct kd_launch_config {
  uint32_t grid[3];      ///< blocks in x, y, z
  uint32_t block[3];     ///< threads per block in x, y, z
  uint32_t shared_bytes; ///< dynamic shared memory
  uint32_t flags;        ///< KD_LAUNCH_*; unknown bits are KD_ERR_LAUNCH_CONFIG
} kd_launch_config;

/// ceil(n / block) blocks of block threads, flags 0. Errors: KD_ERR_LAUNCH_CONFIG
/// (block 0 or above 1024, n 0, more than 2^31-1 blocks),
/// KD_ERR_INVALID_ARGUMENT (NULL out_config). Needs no session and is thread-safe;
/// the caller's *out_config is written only on success.
KD_API kd_status kd_launch_config_flat(uint64_t n, uint32_t block,
                                       uint32_t shared_bytes, kd_launch_config *out_config);

/// What a kd_arg holds.
typedef enum kd_arg_kind {
  KD_ARG_TENSOR = 0, ///< a read-only span (kd_arg_tensor): the kernel gets its pointer
  KD_ARG_TENSOR_MUT, ///< an exclusive span (kd_arg_tensor_mut)
  KD_ARG_I32,        ///< int32_t
  KD_ARG_I64,        ///< int64_t
  KD_ARG_U32,        ///< uint32_t
  KD_ARG_U64,        ///< uint64_t
  KD_ARG_F32,        ///< float
  KD_ARG_F64,        ///< double
  KD_ARG_BYTES       ///< a by-value struct: size bytes copied from data
} kd_arg_kind;

/// A typed kernel argument. Build with the kd_arg_* helpers. BYTES points to
/// caller memory read during the call it is given to only: kd_raw_launch
/// reads it, kd_graph_kernel and kd_graph_set_arg copy it.
typedef struct kd_arg {
  kd_arg_kind kind; ///< which member of v is set
  /// The value, by kind.
  union {
    kd_span span;   ///< TENSOR and TENSOR_MUT
    int32_t i32;    ///< I32
    int64_t i64;    ///< I64
    uint32_t u32;   ///< U32
    uint64_t u64;   ///< U64
    float f32;      ///< F32
    double f64;     ///< F64
    /// BYTES: caller memory, see above.
    struct {
      const void *data; ///< the bytes
      size_t size;      ///< how many
    } bytes;
  } v;
} kd_arg;

/// Builds a kd_arg of each kind; nothing is checked until a launch or a
/// node takes it.
/// @{
static inline kd_arg kd_arg_tensor(const kd_span *s) { kd_arg a; a.kind = KD_ARG_TENSOR; a.v.span = *s; return a; }
static inline kd_arg kd_arg_tensor_mut(const kd_span_mut *s) { kd_arg a; a.kind = KD_ARG_TENSOR_MUT; a.v.span = s->span; return a; }
static inline kd_arg kd_arg_i32(int32_t x) { kd_arg a; a.kind = KD_ARG_I32; a.v.i32 = x; return a; }
static inline kd_arg kd_arg_i64(int64_t x) { kd_arg a; a.kind = KD_ARG_I64; a.v.i64 = x; return a; }
static inline kd_arg kd_arg_u32(uint32_t x) { kd_arg a; a.kind = KD_ARG_U32; a.v.u32 = x; return a; }
static inline kd_arg kd_arg_u64(uint64_t x) { kd_arg a; a.kind = KD_ARG_U64; a.v.u64 = x; return a; }
static inline kd_arg kd_arg_f32(float x) { kd_arg a; a.kind = KD_ARG_F32; a.v.f32 = x; return a; }
static inline kd_arg kd_arg_f64(double x) { kd_arg a; a.kind = KD_ARG_F64; a.v.f64 = x; return a; }
static inline kd_arg kd_arg_bytes(const void *p, size_t n) { kd_arg a; a.kind = KD_ARG_BYTES; a.v.bytes.data = p; a.v.bytes.size = n; return a; }
/// @}

#ifdef __cplusplus
}
#endif
#endif /* KDAG_KERNEL_H */
