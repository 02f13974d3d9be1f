/* SPDX-License-Identifier: Apache-2.0 */
/// @file
/// kdag/status.h — status codes and the message that explains them.
///
/// Every kdag function that can fail returns a kd_status. On failure it also
/// writes a message into a per-thread buffer, read with kd_last_error(). The
/// message starts with the kdag call that failed ("kd_graph_op_add: node 'n'
/// (#4), argument 1, ..."; a call may name another it made for it, such as
/// "kd_view_whole: kd_tensor_info: ...", and kd_with_raw returns its
/// callback's failure as the call in the callback made it), then names the
/// offending argument and, where the CUDA driver, NVRTC or nvJitLink said
/// no, the call and its result name and text. Like errno, the buffer belongs to the calling
/// thread and is overwritten by the next failing kdag call on that thread;
/// successful calls leave it alone, but for the two that succeed by falling
/// back from a failure, which leave that failure's message as the reason:
/// kd_session_create with KD_BACKEND_AUTO choosing HOST, and kd_graph_submit
/// in KD_EXEC_AUTO running a graph eagerly that it could not launch as a
/// CUDA graph.
///
/// Besides the errors listed at each declaration, two hold for every call
/// into a session (any call given a session, graph, sink, tensor or raw
/// scope, and kd_session_create): one made from inside a callback that must
/// not call kdag (a foreign node's, a host function node's, a resource
/// release) returns KD_ERR_BUSY (a destroy made there destroys nothing;
/// compiling and the module cache take no session and stay allowed; the
/// calls that cannot fail, such as kd_session_backend, just answer), and
/// one on a session whose device has faulted returns KD_ERR_DEVICE_FAULT
/// (but for the release and destroy calls, which keep working so a faulted
/// session can be taken apart).
#ifndef KDAG_STATUS_H
#define KDAG_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/// Marks the functions libkdag exports. The library is built with hidden
/// visibility, so nothing else in it (the driver layer, the engine's
/// internals) is part of its ABI or can collide with a caller's symbols.
#if defined(__GNUC__) || defined(__clang__)
#define KD_API __attribute__((visibility("default")))
#else
#define KD_API
#endif

/// Codes are distinct per cause so callers can branch on them; the message
/// carries the detail. Values are stable within a major version.
typedef enum kd_status {
  KD_OK = 0,
  KD_ERR_INVALID_ARGUMENT = 1,  ///< an argument is out of its domain
  KD_ERR_NO_DEVICE = 2,         ///< driver present, but no (such) CUDA device
  KD_ERR_DRIVER_MISSING = 3,    ///< libcuda.so.1 absent, unusable, or the toolkit stub
  KD_ERR_LIBRARY_MISSING = 4,   ///< NVRTC or nvJitLink could not be loaded
  KD_ERR_COMPILE_FAILED = 5,    ///< NVRTC rejected the source; message holds the log
  KD_ERR_LINK_FAILED = 6,       ///< nvJitLink rejected the inputs; message holds the log
  KD_ERR_BORROW_CONFLICT = 7,   ///< tensor already borrowed incompatibly in this scope
  KD_ERR_NOT_RESIDENT = 8,      ///< tensor is not in the session's device memory
  KD_ERR_NOT_COMPACT = 9,       ///< view is not compact column-major
  KD_ERR_WRONG_SESSION = 10,    ///< handle belongs to another session
  KD_ERR_WRONG_BACKEND = 11,    ///< operation needs another backend (e.g. raw on HOST)
  KD_ERR_RELEASED = 12,         ///< handle was released (stale generation)
  KD_ERR_SCOPE_ENDED = 13,      ///< raw scope or span used outside its callback
  KD_ERR_LAUNCH_CONFIG = 14,    ///< grid/block/shared memory invalid for the function
  KD_ERR_ARGUMENT_MISMATCH = 15,///< argument count or sizes differ from the kernel's
  KD_ERR_NO_BINARY_FOR_GPU = 16,///< image has no code for this GPU's architecture
  KD_ERR_UNSUPPORTED_PTX = 17,  ///< PTX ISA newer than the driver accepts
  KD_ERR_NOT_FOUND = 18,        ///< no kernel of that name in the module
  KD_ERR_DEVICE_FAULT = 19,     ///< sticky device error (trap, illegal address)
  KD_ERR_OUT_OF_MEMORY = 20,    ///< device, pinned or host allocation failed
  KD_ERR_UNINITIALIZED = 21,    ///< reading a tensor nothing has written
  KD_ERR_DRIVER = 22,           ///< any other CUDA driver failure
  KD_ERR_BUSY = 23,             ///< called re-entrantly or from a thread not owning the scope
  KD_ERR_RESOURCE_EXHAUSTED = 24,///< a fixed-capacity table is full
  KD_ERR_OUT_OF_BOUNDS = 25,    ///< a view reaches outside its tensor
  KD_ERR_ALIASING = 26,         ///< two arguments of one node overlap and one writes
  KD_ERR_CYCLE = 27,            ///< an explicit edge would close a cycle
  KD_ERR_NO_HOST_IMPL = 28,     ///< node has no host implementation (HOST session)
  KD_ERR_LTO_VERSION = 29,      ///< LTO-IR newer than the nvJitLink asked to link it
  KD_ERR_VERSION_MISMATCH = 30, ///< an options struct from other kdag headers (struct_size)
  KD_ERR_WRONG_DEVICE = 31,     ///< memory of another device than the session's
  KD_ERR_MISALIGNED = 32,       ///< an address not aligned to its element size
  KD_ERR_COMM_FAILED = 33       ///< a communicator failed: a peer timed out or disagreed, or NCCL refused
} kd_status;

/// Stable identifier of a code, e.g. "KD_ERR_BORROW_CONFLICT". Never NULL;
/// the string is static. Thread-safe.
KD_API const char *kd_status_name(kd_status status);

/// Message of the last failing kdag call on this thread ("" if none).
/// Borrowed: valid until the next kdag call on this thread writes the
/// buffer (a failing call, or one of the fallbacks above). Thread-safe.
KD_API const char *kd_last_error(void);

/// How much a session tells its log (kd_session_options.log_level).
typedef enum kd_log_level {
  /// Not set in code: KDAG_LOG_LEVEL decides, else KD_LOG_WARN
  /// (kd_session_options_init's default).
  KD_LOG_DEFAULT = -1,
  KD_LOG_OFF = 0,   ///< nothing
  KD_LOG_ERROR = 1, ///< a device fault, when the session first sees it
  KD_LOG_WARN = 2,  ///< a choice that costs time: AUTO keeping a plan EAGER for good
  KD_LOG_INFO = 3,  ///< why AUTO chose HOST, where staging and HOST workers were placed
  KD_LOG_DEBUG = 4  ///< plans built, CUDA graphs instantiated
} kd_log_level;

/// A session's log callback (kd_session_options.log): one line of text,
/// without a newline, borrowed for the call. Called on the thread of the
/// kdag call that has something to say, with the session's lock held: it
/// must not call kdag (such calls return KD_ERR_BUSY, but for the calls
/// that take no session: compiling, the module cache, kd_log_level_name).
typedef void (*kd_log_fn)(void *user, kd_log_level level, const char *message);

/// Lower-case name of a level ("warn"), "?" for another value. Static,
/// thread-safe.
KD_API const char *kd_log_level_name(kd_log_level level);

#ifdef __cplusplus
}
#endif
#endif /* KDAG_STATUS_H */
