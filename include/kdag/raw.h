/* SPDX-License-Identifier: Apache-2.0 */
/// @file
/// kdag/raw.h — the scoped raw session: load kernels, borrow tensors, launch.
///
/// kd_with_raw(session, "op.name", fn, user) is the one execution authority
/// for hand-written kernels: inside fn the caller loads
/// PTX/CUBIN/fatbin or compiles NVRTC source, borrows tensors as bounded
/// device spans, and launches on the session's single stream. Launches only
/// enqueue; the host waits only in kd_raw_synchronize or a download.
///
/// Lifetimes (read these once):
/// - kd_raw *, kd_span and kd_span_mut are valid only inside the callback, on
///   the thread running it. Afterwards every kdag call given them returns
///   KD_ERR_SCOPE_ENDED, until the session opens its next scope: a session
///   has one kd_raw, so a pointer kept from an earlier scope then acts on
///   the open one (spans stay refused). Never keep it. Raw CUdeviceptr values (kd_span_device_ptr) and the
///   CUstream (kd_raw_stream) cannot be policed once copied out: never keep
///   them past the callback, never destroy the stream.
/// - Everything a launch uses (module, tensors) is retained until an event
///   recorded at the end of the scope has fired, so the caller may release
///   handles as soon as the launch call returns.
/// - Modules (kd_module) are session handles that outlive the scope; release
///   them with kd_module_release, or keep them in the module cache.
///
/// Borrow rules per scope: any number of kd_raw_tensor borrows of a tensor, or
/// exactly one kd_raw_tensor_mut; anything else is KD_ERR_BORROW_CONFLICT.
/// Only compact, device-resident tensors of this session can be borrowed.
///
/// Errors every kd_raw_* call may return besides its own (each with a
/// message naming the call and, where one is at fault, the argument):
/// KD_ERR_INVALID_ARGUMENT for a NULL raw or a NULL out-pointer,
/// KD_ERR_SCOPE_ENDED outside the callback, KD_ERR_BUSY on another thread
/// than the callback's or from a callback that must not call kdag, and
/// KD_ERR_DEVICE_FAULT once the device has faulted.
#ifndef KDAG_RAW_H
#define KDAG_RAW_H

#include <stddef.h>
#include <stdint.h>

#include "kdag/compile.h"
#include "kdag/kernel.h"
#include "kdag/session.h"
#include "kdag/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/// A raw scope: the execution authority kd_with_raw hands its callback.
/// Opaque; valid only during that callback.
typedef struct kd_raw kd_raw;

/// The callback's return value becomes kd_with_raw's (after the scope is
/// closed). Returning an error does not lose enqueued work: it is retained
/// and completes as usual.
typedef kd_status (*kd_raw_fn)(kd_raw *raw, void *user);

/// Runs fn inside a raw scope named op (used in every error message; copied).
/// Errors: KD_ERR_INVALID_ARGUMENT (NULL session or fn, NULL or empty op),
/// KD_ERR_WRONG_BACKEND ("backend session is not CUDA") on a HOST
/// session, KD_ERR_BUSY when called from inside another raw scope of the same
/// session, KD_ERR_DEVICE_FAULT when the session is poisoned, else fn's.
/// user is passed to fn as is; kdag does not keep it after the call.
KD_API kd_status kd_with_raw(kd_session *session, const char *op, kd_raw_fn fn,
                             void *user);

/// The session the scope belongs to (borrowed: valid until
/// kd_session_destroy). NULL, with kd_last_error saying why, for a NULL raw,
/// after the scope ended, or on another thread than the callback's.
KD_API kd_session *kd_raw_session(kd_raw *raw);

/* ---- modules ----------------------------------------------------------
 * Loading a module is a wait: the driver waits for all work in flight in
 * the device's context, of every session and library, before it returns
 * (kdag/session.h, "Waits"). Load modules before a pipeline runs, or where
 * it may wait. Releasing never waits: the unload is deferred. */

/// PTX text of len bytes that must end with its terminating NUL (len counts
/// it) and contain no other NUL: otherwise KD_ERR_INVALID_ARGUMENT. A PTX
/// ISA newer than the driver accepts is KD_ERR_UNSUPPORTED_PTX. The text is
/// copied; *out_module is owned. A wait on the context (above).
KD_API kd_status kd_raw_load_ptx(kd_raw *raw, const char *ptx, size_t len,
                                 kd_module *out_module);

/// CUBIN (ELF) or fatbin image of size bytes, copied. A CUBIN or fatbin
/// without code for this GPU is KD_ERR_NO_BINARY_FOR_GPU, naming both
/// architectures; a NULL or empty image, or one that is neither, is
/// KD_ERR_INVALID_ARGUMENT. *out_module is owned. A wait on the context.
KD_API kd_status kd_raw_load_image(kd_raw *raw, const void *image, size_t size,
                                   kd_module *out_module);

/// Compiles with NVRTC (options may be NULL; arch defaults to the device's
/// sm_XX, so the result is CUBIN) and loads the result. Compile errors are
/// KD_ERR_COMPILE_FAILED with the full log in the message. *out_module is owned.
/// source and options (with what they point to) are read during the call
/// only, as by kd_nvrtc_compile. A wait on the context (its load).
KD_API kd_status kd_raw_compile_nvrtc(kd_raw *raw, const char *source,
                                      const kd_nvrtc_options *options, kd_module *out_module);

/// Loads a binary produced by kd_nvrtc_compile (PTX, CUBIN or fatbin); the
/// binary is only read during the call (the caller keeps it). *out_module is owned.
/// A wait on the context.
/// Errors: KD_ERR_SCOPE_ENDED, KD_ERR_INVALID_ARGUMENT (NULL binary or out_module,
/// LTO-IR or a library: link those first), and the loaders' errors.
KD_API kd_status kd_raw_load_binary(kd_raw *raw, const kd_binary *binary,
                                    kd_module *out_module);

/// The session's module cache: returns the module stored under key, calling
/// build(raw, user, &module) only on the first request (whose load is a
/// wait on the context). The cache owns the module: do not release it; it lives
/// until the session is destroyed. key is copied; user is passed to build as
/// is (only on a miss) and not kept after the call.
/// @{
typedef kd_status (*kd_module_build_fn)(kd_raw *raw, void *user, kd_module *out_module);
KD_API kd_status kd_raw_cached_module(kd_raw *raw, const char *key,
                                      kd_module_build_fn build, void *user,
                                      kd_module *out_module);
/// @}

/* ---- borrows ---------------------------------------------------------- */

/// Read-only borrow of a whole, initialised tensor.
/// Errors: KD_ERR_RELEASED, KD_ERR_WRONG_SESSION, KD_ERR_NOT_RESIDENT,
/// KD_ERR_UNINITIALIZED, KD_ERR_BORROW_CONFLICT (mutably borrowed).
KD_API kd_status kd_raw_tensor(kd_raw *raw, kd_tensor tensor, kd_span *out_span);

/// Exclusive borrow. A launch that receives it marks the tensor initialised.
/// Errors as kd_raw_tensor, less KD_ERR_UNINITIALIZED, plus
/// KD_ERR_BORROW_CONFLICT when borrowed at all.
KD_API kd_status kd_raw_tensor_mut(kd_raw *raw, kd_tensor tensor, kd_span_mut *out_span);

/// Borrows of a view; a non-compact view is KD_ERR_NOT_COMPACT (canonicalize
/// it on the device first; never download it). view is read during the call
/// only; the span lives until the scope ends.
/// @{
KD_API kd_status kd_raw_view(kd_raw *raw, const kd_view *view, kd_span *out_span);
KD_API kd_status kd_raw_view_mut(kd_raw *raw, const kd_view *view, kd_span_mut *out_span);
/// @}

/// A fresh uninitialised device tensor (poisoned when the session asks;
/// one with no element counts as initialised, as for kd_tensor_create).
/// shape (rank entries) is read during the call only. *out_tensor is owned by the
/// caller, like kd_tensor_create's. Errors: KD_ERR_SCOPE_ENDED, and those of
/// kd_tensor_create.
KD_API kd_status kd_raw_alloc_output(kd_raw *raw, kd_dtype dtype, int rank,
                                     const int64_t *shape, kd_tensor *out_tensor);

/* ---- launch ----------------------------------------------------------- */

/// Enqueues fn on the session stream. Checks, before anything is enqueued:
/// the config against the function (threads per block, shared memory, grid),
/// the argument count and each size against the kernel's parameters, that
/// every span comes from this scope and its tensor is still live, and that no
/// two arguments overlap where one writes (KD_ERR_BORROW_CONFLICT).
/// Errors: KD_ERR_SCOPE_ENDED, KD_ERR_INVALID_ARGUMENT (NULL config, NULL
/// args with arg_count > 0, an unknown kind, a NULL or empty BYTES),
/// KD_ERR_LAUNCH_CONFIG, KD_ERR_ARGUMENT_MISMATCH (also above 128
/// arguments), KD_ERR_BORROW_CONFLICT, KD_ERR_RELEASED,
/// KD_ERR_WRONG_SESSION, KD_ERR_DEVICE_FAULT, KD_ERR_DRIVER.
/// config and args are read during the call only (the driver copies the
/// argument values when the launch is enqueued).
KD_API kd_status kd_raw_launch(kd_raw *raw, kd_function fn,
                               const kd_launch_config *config, const kd_arg *args,
                               size_t arg_count);

/// Waits for the session stream (only it) to finish what has been enqueued.
KD_API kd_status kd_raw_synchronize(kd_raw *raw);

/// The session's CUstream, for a foreign CUDA library called inside the
/// callback. Borrowed: valid only inside the callback; never destroy it or
/// create another stream behind kdag's back.
KD_API kd_status kd_raw_stream(kd_raw *raw, void **out_cu_stream);

#ifdef __cplusplus
}
#endif
#endif /* KDAG_RAW_H */
