/* SPDX-License-Identifier: Apache-2.0 */
/// @file
/// kdag/tensor.h — tensors: typed, compact column-major, session-owned.
///
/// A kd_tensor is a small value handle (session, slot, generation). Copying it
/// copies the name, not the tensor. Releasing the last reference invalidates
/// every copy at once: any later use returns KD_ERR_RELEASED, and a handle of
/// another session returns KD_ERR_WRONG_SESSION, never a crash. The memory
/// behind a released tensor stays allocated while a graph uses it and until
/// every piece of enqueued work that uses it has completed
/// (kd_session_stats.bytes_retained shows it).
///
/// Layout: element (i0, i1, ...) lives at i0 + i1*shape[0] + ... (column-major,
/// compact). A kd_view selects part of a tensor with its own offset, shape and
/// strides (in elements); raw kernels accept only compact views.
///
/// Threads: as for the owning session (kdag/session.h).
#ifndef KDAG_TENSOR_H
#define KDAG_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "kdag/session.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The most dimensions a tensor or view has.
#define KD_MAX_RANK 8

/// Element types. Values are stable within a major version.
typedef enum kd_dtype {
  KD_F32 = 0, ///< IEEE binary32
  KD_F64 = 1, ///< IEEE binary64
  KD_I32 = 2, ///< signed 32-bit integer (two's complement, wraps)
  KD_I64 = 3, ///< signed 64-bit integer
  KD_U8 = 4,  ///< unsigned byte
  KD_U32 = 5, ///< unsigned 32-bit integer
  KD_U64 = 6, ///< unsigned 64-bit integer
  KD_C32 = 7, ///< complex of two f32 (re, im)
  KD_C64 = 8, ///< complex of two f64
  /// IEEE binary16. The add, axpy, scale and sum built-ins compute it in
  /// f32 (exact widening, f32 rounding, one rounding back to nearest even).
  KD_F16 = 9,
  KD_BF16 = 10, ///< bfloat16, the upper half of an f32: built-ins as for f16
  KD_I8 = 11,   ///< signed byte: fill, copy and transpose (no arithmetic built-ins)
  KD_DTYPE_COUNT_ = 12 ///< how many dtypes there are (not a dtype)
} kd_dtype;

/// Bytes per element; 0 for an invalid dtype.
KD_API size_t kd_dtype_size(kd_dtype dtype);
/// "f32", "c64", ...; "invalid" for an invalid dtype. Static string. Both
/// need no session and are thread-safe.
KD_API const char *kd_dtype_name(kd_dtype dtype);

/// A tensor: a value handle naming session-owned memory (see the banner).
typedef struct kd_tensor {
  uint64_t bits; ///< opaque; 0 is never a valid handle
} kd_tensor;

/// The zero handle, where an optional tensor argument is left out.
static inline kd_tensor kd_no_tensor(void) {
  kd_tensor t;
  t.bits = 0;
  return t;
}

/// Where a tensor's memory lives.
typedef enum kd_residency {
  KD_RESIDENCY_DEVICE = 0, ///< the backend's compute memory: GPU memory on a
                           ///< CUDA session, host memory on a HOST session
  KD_RESIDENCY_HOST = 1    ///< ordinary host memory; never handed to kernels
} kd_residency;

/// What kd_tensor_create allocates, and what kd_tensor_info reports.
typedef struct kd_tensor_desc {
  kd_dtype dtype;                 ///< element type
  int rank;                       ///< 0..KD_MAX_RANK; rank 0 is a scalar
  int64_t shape[KD_MAX_RANK];     ///< extent of each dimension, shape[0..rank)
  int64_t strides[KD_MAX_RANK];   ///< elements; filled in by kd_tensor_info
  kd_residency residency;         ///< device (default) or host memory
  size_t bytes;                   ///< filled in by kd_tensor_info
} kd_tensor_desc;

/// Allocates an uninitialised tensor (dtype, rank, shape[0..rank), residency
/// of *desc; strides and bytes are ignored). Zero-sized dimensions are
/// allowed; a tensor with no element counts as initialised (there is nothing
/// to read before a write, and no write would change that). Device memory
/// comes from the session's stream-ordered pool.
/// *out_tensor is owned: release it with kd_tensor_release; it is zeroed before
/// anything is checked (but for a NULL out_tensor), so a failure leaves the zero
/// handle. desc is read during the call only.
/// Errors: KD_ERR_INVALID_ARGUMENT (dtype, rank, negative or overflowing
/// shape), KD_ERR_OUT_OF_MEMORY, KD_ERR_RESOURCE_EXHAUSTED (the session
/// holds the most live handles it can), KD_ERR_DRIVER (the driver refused
/// the memory pool, the allocation or the poison fill for another reason),
/// KD_ERR_DEVICE_FAULT.
KD_API kd_status kd_tensor_create(kd_session *session, const kd_tensor_desc *desc,
                                  kd_tensor *out_tensor);

/// Copies bytes == tensor bytes from host into the tensor and marks it
/// initialised. The caller's memory is read completely before this returns
/// (into pinned staging; on a HOST session, into a snapshot when earlier
/// submissions are still running), so it may be reused at once; the
/// transfer itself is asynchronous and ordered after the work submitted
/// before it (on the session stream; on HOST, behind those submissions).
/// It does not wait for that work (only, as a submission does, for the
/// oldest one when the completion ring is full, once the copy is enqueued).
/// Errors: KD_ERR_INVALID_ARGUMENT (NULL, size mismatch), KD_ERR_RELEASED,
/// KD_ERR_WRONG_SESSION, KD_ERR_OUT_OF_MEMORY, KD_ERR_DRIVER (the driver
/// refused the copy or its completion's event record; after a refused
/// record the copy has been made, kdag having waited for the stream, but
/// a tensor never written before is not marked initialised),
/// KD_ERR_DEVICE_FAULT.
KD_API kd_status kd_tensor_upload(kd_session *session, kd_tensor tensor,
                                  const void *host, size_t bytes);

/// Convenience: kd_tensor_create + kd_tensor_upload; nothing is left
/// allocated on failure. desc and host are read during the call only (as by
/// those two); *out_tensor is owned (kd_tensor_release), zeroed on failure.
KD_API kd_status kd_tensor_from_host(kd_session *session, const kd_tensor_desc *desc,
                                     const void *host, size_t bytes, kd_tensor *out_tensor);

/// Flags of kd_external_desc.
enum {
  /// kdag never writes the memory: a node that would (KD_OUT, KD_INOUT), a
  /// mutable raw borrow and an upload are refused with
  /// KD_ERR_INVALID_ARGUMENT naming the node or call.
  KD_EXTERNAL_READ_ONLY = 1u << 0,
  /// Accept managed (unified) memory, which is refused otherwise: its
  /// pages migrate on first touch, which costs time kdag cannot see.
  KD_EXTERNAL_ALLOW_MANAGED = 1u << 1
};

/// The owner's release callback of wrapped memory (kd_tensor_wrap).
typedef void (*kd_release_fn)(void *user);

/// Memory another library owns, to wrap as a tensor (kd_tensor_wrap);
/// kd_external_desc_init fills the defaults.
typedef struct kd_external_desc {
  uint32_t struct_size;          ///< sizeof(kd_external_desc), set by kd_external_desc_init: checked
  /// The first element: on a CUDA session a device address (a CUdeviceptr
  /// cast to a pointer) of the session's device; on a HOST session host
  /// memory.
  void *data;
  kd_dtype dtype;                ///< element type; data must be aligned to its size
  int rank;                      ///< 0..KD_MAX_RANK
  int64_t shape[KD_MAX_RANK];    ///< extent of each dimension
  /// Elements between neighbours in each dimension; all 0 means compact
  /// column-major, the only layout accepted so far (KD_ERR_NOT_COMPACT
  /// otherwise: wrap the whole extent and take a kd_view of it).
  int64_t strides[KD_MAX_RANK];
  uint32_t flags;                ///< KD_EXTERNAL_*
  /// Called exactly once when kdag is done with the memory (the caller's
  /// last reference released and every submission using it completed);
  /// never when kd_tensor_wrap fails. May be NULL.
  kd_release_fn release;
  void *release_user;            ///< passed to release as is
} kd_external_desc;

/// Zeroes *desc and sets struct_size. NULL is ignored; thread-safe.
KD_API void kd_external_desc_init(kd_external_desc *desc);

/// Wraps memory another library allocated (PyTorch, CuPy, cudaMalloc,
/// a pool) as a tensor, without a copy. The tensor counts as initialised
/// and lives in the backend's compute memory (KD_RESIDENCY_DEVICE). On a
/// CUDA session the driver is asked (cuPointerGetAttributes, which does
/// not wait) whether the memory is device memory of the session's device
/// and whether the tensor lies inside one allocation; kdag then holds the
/// memory until the caller has released the tensor and every submission
/// using it has completed, and then calls desc->release(release_user)
/// exactly once: after the session's lock is let go, on the thread of the
/// kdag call that found the last use complete (a submit, a wait, a reap,
/// a release, kd_graph_destroy or kd_session_destroy). The callback must
/// not call kdag (such calls are refused with KD_ERR_BUSY). The caller
/// orders the memory's earlier writes before the wrap: kdag's work on it
/// starts on the session's stream without waiting for another library's.
/// Errors: KD_ERR_INVALID_ARGUMENT (NULL desc, data or out_tensor; bad
/// struct_size, dtype, rank, shape or flags), KD_ERR_VERSION_MISMATCH,
/// KD_ERR_NOT_COMPACT (strides other than compact column-major),
/// KD_ERR_MISALIGNED (data not aligned to the element size),
/// KD_ERR_NOT_RESIDENT (not device memory: a host pointer, pinned host
/// memory, or managed memory without KD_EXTERNAL_ALLOW_MANAGED),
/// KD_ERR_WRONG_DEVICE (another device's memory), KD_ERR_OUT_OF_BOUNDS (the
/// tensor reaches past the allocation's end), KD_ERR_OUT_OF_MEMORY,
/// KD_ERR_RESOURCE_EXHAUSTED, KD_ERR_DRIVER. On failure release is not
/// called: the memory stays the caller's. *out_tensor is owned
/// (kd_tensor_release), zeroed on failure.
KD_API kd_status kd_tensor_wrap(kd_session *session, const kd_external_desc *desc, kd_tensor *out_tensor);

/// Copies the tensor into host memory. This is an explicit host wait: it
/// waits on the event of this copy alone (not the device, not the whole
/// stream; on HOST, for the submissions before it), so all earlier work on
/// the stream that the tensor depends on has completed when it returns.
/// Errors: KD_ERR_INVALID_ARGUMENT, KD_ERR_RELEASED, KD_ERR_WRONG_SESSION,
/// KD_ERR_UNINITIALIZED (nothing has written it), KD_ERR_OUT_OF_MEMORY
/// (pinned staging or an event), KD_ERR_DRIVER (the copy refused),
/// KD_ERR_DEVICE_FAULT. host (the caller's, bytes long) is written during
/// the call only.
KD_API kd_status kd_tensor_download(kd_session *session, kd_tensor tensor, void *host,
                                    size_t bytes);

/// Adds a reference; each must be matched by kd_tensor_release.
/// Errors: KD_ERR_INVALID_ARGUMENT (NULL session, a zero handle),
/// KD_ERR_RELEASED, KD_ERR_WRONG_SESSION.
KD_API kd_status kd_tensor_retain(kd_session *session, kd_tensor tensor);

/// Drops a reference. The last one invalidates the handle at once; the memory
/// is returned to the pool when in-flight work using it has completed.
/// After a device fault it still succeeds (without writing the fault into
/// kd_last_error), so a faulted session can be taken apart.
/// Errors: KD_ERR_RELEASED (double release), KD_ERR_WRONG_SESSION,
/// KD_ERR_INVALID_ARGUMENT.
KD_API kd_status kd_tensor_release(kd_session *session, kd_tensor tensor);

/// Describes a live tensor: fills every field of the caller's *out_desc (written
/// only on success). Errors: KD_ERR_INVALID_ARGUMENT (NULL session or out_desc, a
/// zero handle), KD_ERR_RELEASED, KD_ERR_WRONG_SESSION.
KD_API kd_status kd_tensor_info(kd_session *session, kd_tensor tensor,
                                kd_tensor_desc *out_desc);

/// A view: a region of a tensor. Plain value; it holds no reference, so the
/// tensor must be live whenever the view is used.
typedef struct kd_view {
  kd_tensor tensor;              ///< the tensor viewed
  int rank;                      ///< 0..KD_MAX_RANK; -1: the whole tensor (kd_whole)
  int64_t offset;                ///< elements from the tensor's start
  int64_t shape[KD_MAX_RANK];    ///< extent of each dimension
  int64_t strides[KD_MAX_RANK];  ///< elements; may be any non-negative value
} kd_view;

/// The whole tensor as a compact view, written to the caller's *out_view (only on
/// success). Errors: as kd_tensor_info.
KD_API kd_status kd_view_whole(kd_session *session, kd_tensor tensor, kd_view *out_view);

/// Checks that every element of the view lies inside its tensor (view is
/// read during the call only).
/// Errors: KD_ERR_OUT_OF_BOUNDS, KD_ERR_INVALID_ARGUMENT (negative strides or
/// shape, or more elements than an int64_t counts), KD_ERR_RELEASED,
/// KD_ERR_WRONG_SESSION.
KD_API kd_status kd_view_check(kd_session *session, const kd_view *view);

/// 1 when the view's elements are one contiguous column-major block (an
/// empty view, with a zero extent, is: it names no element); 0 for NULL, a
/// rank outside [0, KD_MAX_RANK] (kd_whole's -1 too: resolve it with
/// kd_view_whole) or a negative or overflowing shape. view is read during
/// the call only; its tensor is not looked up (nor its offset checked), so
/// it needs no session or lock and any thread may call it.
KD_API int kd_view_is_compact(const kd_view *view);

/// Which DLPack struct a pointer given to kd_tensor_from_dlpack is.
typedef enum kd_dlpack_kind {
  KD_DLPACK_VERSIONED = 0, ///< DLManagedTensorVersioned (DLPack 1.x)
  KD_DLPACK_LEGACY = 1     ///< DLManagedTensor (DLPack before 1.0)
} kd_dlpack_kind;

/// Imports a DLPack tensor without a copy: managed points to a
/// DLManagedTensorVersioned or a DLManagedTensor (kind says which), of
/// device kDLCUDA (or kDLCUDAManaged) of the session's device on a CUDA
/// session, kDLCPU on a HOST session. kdag is column-major and DLPack
/// producers are row-major: the axes are reversed, so a C-contiguous array
/// of shape (a, b) arrives as a compact kdag tensor of shape (b, a), and
/// element (i, j) of the producer is (j, i) here. *out_view describes the
/// array in that order: a compact array is the whole tensor; a strided one
/// (a slice, a transposed array) is a view of a one-dimensional tensor
/// spanning its elements, which built-in nodes take as it is and kernels
/// after a kd_graph_op_copy. The tensor takes the producer's ownership:
/// the DLPack deleter runs when kdag is done, as kd_tensor_wrap's release
/// callback does (after the lock, must not call kdag). A versioned
/// tensor's READ_ONLY flag makes the tensor read-only (KD_EXTERNAL_READ_ONLY).
/// wait_event (a CUevent, may be NULL) orders kdag after the producer: the
/// session stream waits for it on the device (cuStreamWaitEvent) inside
/// this call, so the caller may re-record it once the call returns;
/// without one the caller must have made the producer's writes complete.
/// Errors: those of kd_tensor_wrap, and KD_ERR_INVALID_ARGUMENT (NULL
/// managed, out_tensor or out_view; an element type kdag has no dtype for,
/// lanes other than 1, a negative stride, a wait_event on a HOST session),
/// KD_ERR_NOT_RESIDENT (a device type the session cannot use),
/// KD_ERR_WRONG_DEVICE (another device_id), KD_ERR_VERSION_MISMATCH (a
/// versioned tensor of another major version: its deleter has been called,
/// as DLPack asks of a consumer). On any other failure the deleter is not
/// called and the tensor stays the caller's. *out_tensor is owned
/// (kd_tensor_release); both outputs are zeroed on failure.
KD_API kd_status kd_tensor_from_dlpack(kd_session *session, void *managed, kd_dlpack_kind kind, void *wait_event,
                                       kd_tensor *out_tensor, kd_view *out_view);

/// Exports the tensor as DLPack without a copy: *out_managed is a new
/// DLManagedTensorVersioned (version 1.1, KD_DLPACK_VERSIONED) or
/// DLManagedTensor (KD_DLPACK_LEGACY) whose deleter the consumer calls
/// once, from any thread, before kd_session_destroy (the memory goes with
/// the session); the export holds a reference to the tensor until then,
/// so the caller may release its handle. Axes are reversed back (a kdag
/// tensor of shape (b, a) is a C-contiguous DLPack array of shape (a, b)),
/// strides are given, the device is kDLCUDA with the session's ordinal, or
/// kDLCPU on a HOST session; a read-only tensor is flagged READ_ONLY.
/// Ordering: on a CUDA session, out_event (may be NULL) gets a new
/// CUevent, recorded after the work enqueued so far, for the consumer to
/// wait on (cuStreamWaitEvent) and the caller to destroy (cuEventDestroy);
/// with none, the caller must wait for that work before the consumer reads
/// (kd_sink_wait or a download). On a HOST session out_event must be NULL,
/// and the export waits for the submissions before it, as a download does.
/// The consumer must not write a read-only export, and writes of its own
/// must be complete before kdag's next use (kd_tensor_from_dlpack's
/// wait_event orders the other way). Errors: KD_ERR_INVALID_ARGUMENT (NULL
/// out_managed, a bad kind, an out_event on a HOST session),
/// KD_ERR_RELEASED, KD_ERR_WRONG_SESSION, KD_ERR_NOT_RESIDENT (a host
/// tensor of a CUDA session), KD_ERR_UNINITIALIZED (nothing has written
/// it), KD_ERR_OUT_OF_MEMORY, KD_ERR_DRIVER. Outputs are written only on
/// success.
KD_API kd_status kd_tensor_to_dlpack(kd_session *session, kd_tensor tensor, kd_dlpack_kind kind, void **out_event,
                                     void **out_managed);

#ifdef __cplusplus
}
#endif
#endif /* KDAG_TENSOR_H */
