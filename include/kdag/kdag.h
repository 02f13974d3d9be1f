/* SPDX-License-Identifier: Apache-2.0 */
/// @file
/// kdag/kdag.h — kdag runs pipelines of custom CUDA kernels as asynchronous
/// task graphs. This umbrella header includes every other; each of them
/// opens with a banner on its objects, and its declarations state only
/// where they differ from the conventions below.
///
///   kdag/version.h   the version of the headers and of the loaded library
///   kdag/status.h    status codes and the thread's last message
///   kdag/session.h   a session: a device (or the HOST backend), its stream, counters
///   kdag/tensor.h    tensors (value handles) and views
///   kdag/kernel.h    modules and functions, spans, launch configurations, arguments
///   kdag/raw.h       the raw scope: load kernels, borrow tensors, launch
///   kdag/graph.h     task graphs: nodes, inferred order, submissions, sinks
///   kdag/comm.h      communicators and collective nodes (NCCL; shared memory on HOST)
///   kdag/compile.h   NVRTC and nvJitLink, binaries (no session, no GPU)
///   kdag/cache.h     the CUBIN cache (no session, no GPU)
///   kdag/mathdx.h    cuSOLVERDx and cuBLASDx kernels (no session, no GPU)
///
/// Conventions, which hold for every declaration unless it says otherwise:
/// - Arguments. A `const T *` argument (and a string) is read during the
///   call only: the caller may free or change it once the call returns. A
///   NULL pointer where an object is needed is KD_ERR_INVALID_ARGUMENT,
///   naming the argument.
/// - Results. Out-parameters come last and are named out_*; *out_x is
///   written only on success (a call that zeroes it on failure as well says
///   so).
/// - Ownership. A pointer object *_create returns (a session, a graph, a
///   binary, a CUBIN cache, a solver) is the caller's, freed with the
///   matching *_destroy, which ignores NULL. A value handle a call gives
///   out (kd_tensor, kd_module) is the caller's one reference: each
///   *_retain adds one, each *_release drops one, and the object lives
///   while a reference or a submission in flight holds it.
/// - Threads. Every call given a session, or an object of one (a graph,
///   a sink, a tensor, a module, a raw scope), is serialized by that
///   session's lock and may come from any thread; different sessions are
///   independent. The calls that take no session (compile.h, cache.h,
///   mathdx.h, kd_status_name, kd_dtype_size, ...) are thread-safe.
/// - Errors. Every failing call returns its code and leaves a message that
///   names the call, the argument and, where there is one, the node or raw
///   scope (kdag/status.h). KD_ERR_BUSY (a call from a callback that must
///   not call kdag), KD_ERR_DEVICE_FAULT (a session whose device faulted)
///   and KD_ERR_COMM_FAILED (one whose communicator failed, kdag/comm.h)
///   may come from every call into a session.
/// - Waits. No call waits for the device unless its declaration says so
///   (kdag/session.h, "Waits").
/// - Options structs (kd_session_options, kd_nvrtc_options,
///   kd_link_options, and a kd_build_recipe's nvrtc) open with struct_size,
///   so fields can be added without breaking programs built earlier: fill
///   one with its *_init function (kd_build_recipe_init for a recipe)
///   before setting fields, or set struct_size to its sizeof. A struct_size
///   of 0 is KD_ERR_INVALID_ARGUMENT; another size than this library's is
///   KD_ERR_VERSION_MISMATCH (a program compiled against the headers of
///   another kdag version).
///
/// Names of the previous release (kd_graph_add for kd_graph_op_add, ...)
/// are kept as macros for one release; define KDAG_NO_DEPRECATED before
/// including kdag to leave them out.
#ifndef KDAG_KDAG_H
#define KDAG_KDAG_H

#include "kdag/version.h"
#include "kdag/status.h"
#include "kdag/session.h"
#include "kdag/tensor.h"
#include "kdag/compile.h"
#include "kdag/cache.h"
#include "kdag/mathdx.h"
#include "kdag/kernel.h"
#include "kdag/raw.h"
#include "kdag/graph.h"
#include "kdag/comm.h"

#endif /* KDAG_KDAG_H */
