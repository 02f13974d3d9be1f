/* SPDX-License-Identifier: Apache-2.0 */
/// @file
/// kdag/session.h — a session: one device, one context, one stream.
///
/// Ownership: kd_session_create returns an owned session; kd_session_destroy
/// drains its in-flight work (waiting on its completion events, never the
/// device) and frees everything it still holds, including tensors and modules
/// the caller did not release.
///
/// Threads: every function taking a kd_session may be called from any thread;
/// calls on one session are serialised by an internal lock. Each call that
/// reaches the driver makes the session's context current on the calling
/// thread first, and leaves it current. Calls that only declare or ask
/// (nodes, edges, kd_graph_set_arg, kd_graph_rebind, kd_tensor_info, ...)
/// do not query the thread's context, as they need no driver call; the
/// exceptions, a session's first built-in node (it loads kdag's kernels)
/// and a kernel node raising its kernel's shared-memory limit, make the
/// context current like the rest. A raw scope
/// (kd_with_raw) holds the lock for the whole callback: other threads calling
/// into the same session wait until the callback returns, while the
/// callback's own thread may call session functions (release, download).
/// Different sessions are independent.
#ifndef KDAG_SESSION_H
#define KDAG_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "kdag/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/// A session: one device (or the HOST backend), its stream, its memory
/// pool, its module cache and counters. Opaque; kd_session_create.
typedef struct kd_session kd_session;

/// Where a session runs its work.
typedef enum kd_backend {
  KD_BACKEND_AUTO = 0, ///< CUDA when a usable device exists, else HOST (with a reason)
  KD_BACKEND_CUDA = 1, ///< fail with the driver's reason when no device is usable
  KD_BACKEND_HOST = 2  ///< host memory and host implementations only; needs no driver
} kd_backend;

enum {
  /// Fill every fresh device allocation with a poison pattern (0x7FA5A5A5
  /// per 32-bit word, a float NaN; 0xA5 per byte when the size is not a
  /// multiple of 4) so a kernel that forgets to write shows up in tests.
  KD_SESSION_POISON_ALLOCATIONS = 1u << 0,
  /// Log the reasons for backend and placement fallbacks, and where a
  /// HOST session's workers were placed: raises log_level to KD_LOG_INFO.
  /// Also set by KDAG_VERBOSE=1 unless code decided it (flags_set).
  KD_SESSION_VERBOSE = 1u << 1,
  /// Test option, HOST backend: sleep a random 0-200 us before each node so
  /// a missing dependency shows as a wrong result even on two cores.
  KD_SESSION_HOST_JITTER = 1u << 2,
  /// Debug option, CUDA backend: wait for an event after every graph node,
  /// so a device fault is reported naming the node that caused it. Also set
  /// by KDAG_DEBUG_NODES=1 unless code decided it (flags_set).
  KD_SESSION_DEBUG_NODES = 1u << 3,
  /// Never use programmatic dependent launch (KD_LAUNCH_PDL), for
  /// comparisons and for ruling it out when a result looks wrong: every
  /// edge is a full dependency. Also set by KDAG_NO_PDL=1 unless code
  /// decided it (flags_set).
  KD_SESSION_NO_PDL = 1u << 4
};

/// How a CUDA session runs a submitted graph (HOST sessions ignore it).
typedef enum kd_exec_mode {
  /// EAGER for the first graph_after submissions of a plan, then GRAPH: a
  /// one-shot graph never pays for instantiation, a pipeline submitted over
  /// and over reaches the CUDA-graph launch cost. A plan the driver refuses
  /// as a CUDA graph (the error names the node; the session's log has it as
  /// a warning) runs eagerly from then on; one that ran out of memory on the way
  /// runs that submission eagerly and tries the CUDA graph again at the
  /// next, until it has run out three times in a row.
  KD_EXEC_AUTO = 0,
  /// Each node enqueued on the session stream, in topological order.
  KD_EXEC_EAGER = 1,
  /// The whole plan as one instantiated CUDA graph, cached per plan and
  /// updated in place when only bindings or scalars change.
  KD_EXEC_GRAPH = 2
} kd_exec_mode;

/// How kd_session_create makes a session; kd_session_options_init fills
/// the defaults.
typedef struct kd_session_options {
  uint32_t struct_size;            ///< sizeof(kd_session_options), set by
                                   ///< kd_session_options_init: checked
  kd_backend backend;              ///< default AUTO
  int device_ordinal;              ///< CUDA device index; default 0. Where a driver with
                                   ///< devices is found, an ordinal it does not have (or past
                                   ///< kdag's 64) is KD_ERR_INVALID_ARGUMENT, even with AUTO;
                                   ///< with no driver or no device, AUTO gives HOST
  uint64_t pool_release_threshold; ///< bytes the memory pool keeps cached at
                                   ///< stream syncs; default UINT64_MAX (keep all)
  uint32_t completion_ring_capacity; ///< in-flight completions before a submit
                                     ///< waits on the oldest; a power of two
                                     ///< in [1, 2^20], default 1024
  uint32_t flags;                  ///< KD_SESSION_*
  kd_exec_mode exec_mode;          ///< default for the session's graphs; default AUTO
  uint32_t graph_after;            ///< AUTO: eager submissions of a plan before it
                                   ///< switches to GRAPH (0: from the first); default 2
  /// What kdag releases only in a wait (see "Waits" below): modules whose
  /// last reference went (kd_session_stats.modules_deferred), and pinned staging
  /// no transfer holds (staging_idle_bytes). Past either cap, the next wait
  /// the caller asks for (kd_sink_wait, kd_tensor_download,
  /// kd_raw_synchronize) releases them, and so waits for all work in the
  /// device's context; kd_session_trim and kd_session_destroy always do.
  uint32_t unload_cap;             ///< modules; default 64 (0: every such wait releases)
  uint64_t idle_staging_cap;       ///< bytes; default 1 GiB (0: as above)
  /// The KD_SESSION_* bits of flags decided in code, on or off: the
  /// environment (KDAG_VERBOSE, KDAG_DEBUG_NODES) sets only the others. A
  /// bit set in flags is decided whether or not it is here; default 0.
  uint32_t flags_set;
  /// default KD_LOG_DEFAULT: KDAG_LOG_LEVEL, else KD_LOG_WARN.
  /// KD_SESSION_VERBOSE raises it to KD_LOG_INFO.
  kd_log_level log_level;
  kd_log_fn log;                   ///< NULL (default): "kdag: [level] text" lines on stderr
  void *log_user;                  ///< passed to log as is
  /// Where to write a trace of the session's run (Chrome trace-event
  /// JSON, for the Perfetto UI), at kd_session_destroy; "{session}" and
  /// "{pid}" are replaced by the session's number and the process id.
  /// Default NULL: $KDAG_TRACE, else no trace; "" means no trace whatever
  /// the environment says. Copied. docs/observability.md says what a
  /// trace holds and costs.
  const char *trace_path;
} kd_session_options;

/// Fills the defaults above and struct_size. Thread-safe: it writes every
/// field of the caller's *options and touches nothing else. NULL is
/// ignored.
KD_API void kd_session_options_init(kd_session_options *options);

/// options may be NULL (defaults). *out_session is owned by the caller.
/// Errors: KD_ERR_INVALID_ARGUMENT, KD_ERR_DRIVER_MISSING (no libcuda.so.1,
/// the toolkit's stub, or a driver whose cuInit fails: a kernel module of
/// another version, a too old driver), KD_ERR_NO_DEVICE (the driver reports
/// no device, or the device lacks stream-ordered memory pools; an ordinal
/// it does not have is KD_ERR_INVALID_ARGUMENT), KD_ERR_OUT_OF_MEMORY,
/// KD_ERR_DRIVER, KD_ERR_RESOURCE_EXHAUSTED (65535 sessions are open in the
/// process: each holds a serial no other live session has, which tells
/// their handles apart; or a HOST session's pool could not start its
/// threads).
/// With KD_BACKEND_AUTO, KD_ERR_DRIVER_MISSING and KD_ERR_NO_DEVICE become
/// a HOST session whose kd_session_backend_reason() says why. KD_ERR_DEVICE_FAULT: a session of
/// this device faulted earlier in this process; the driver cannot give the
/// device back to the faulting process (tools/fault-probe), so every later
/// CUDA session of it there is refused and a new process is needed.
/// options (NULL: the defaults) is read during the call only; *out_session
/// is owned by the caller (kd_session_destroy). Any thread may create
/// sessions, at once too; from a callback that must not call kdag it is
/// KD_ERR_BUSY.
KD_API kd_status kd_session_create(const kd_session_options *options,
                                   kd_session **out_session);

/// Waits for the session's in-flight work (its own events), then frees it:
/// unloading its modules and unpinning its staging memory waits for all
/// work in the device's context, other sessions' and other libraries'
/// (PyTorch, CuPy) included (see "Waits" below). NULL is ignored. Destroy the session's graphs (kd_graph_destroy)
/// first: they hold no reference on it. No other thread may be inside a call
/// on the session, or enter one, during or after this call. Called inside the session's own raw callback, it takes
/// effect when kd_with_raw returns; called from a callback that must not
/// call kdag (a foreign node's fn or release, a HOST host function), it
/// destroys nothing and says so in kd_last_error. Using the session or any
/// of its handles afterwards is undefined: handles cannot be policed once
/// their session is gone.
KD_API void kd_session_destroy(kd_session *session);

/// The backend the session runs on (never AUTO for a session; AUTO for NULL).
KD_API kd_backend kd_session_backend(kd_session *session);

/// Why the session runs where it does, e.g. "AUTO chose HOST: cuInit failed:
/// CUDA_ERROR_NO_DEVICE ...". Borrowed; valid for the session's lifetime.
/// NULL session: "" (static).
KD_API const char *kd_session_backend_reason(kd_session *session);

/// A CUDA session's device, as kd_session_device_info reports it.
typedef struct kd_device_info {
  char name[256];              ///< the driver's name, e.g. "NVIDIA H100 80GB HBM3"
  int ordinal;                 ///< the CUDA device index
  int cc_major;                ///< compute capability, major (9 for sm_90)
  int cc_minor;                ///< compute capability, minor
  int sm_count;                ///< streaming multiprocessors
  int driver_version;          ///< cuDriverGetVersion, e.g. 13000
  int max_ptx_isa;             ///< highest PTX ISA the driver accepts, x10 (90 = 9.0); 0 unknown
  int numa_node;               ///< NUMA node of the GPU per hwloc, -1 unknown
  char pci_bus_id[32];         ///< e.g. "0000:3B:00.0"
  char placement[256];         ///< how pinned staging memory is placed, and why
  size_t memory_bytes;         ///< the device's memory (cuDeviceTotalMem)
} kd_device_info;

/// Copies the device's description into the caller's *out_info (every string is
/// an array inside it, nothing borrowed); written during the call only, and
/// only on success. Errors: KD_ERR_INVALID_ARGUMENT, KD_ERR_WRONG_BACKEND on
/// a HOST session.
KD_API kd_status kd_session_device_info(kd_session *session, kd_device_info *out_info);

/// The CUDA devices the driver reports, without a session or a context
/// (loading the driver and cuInit once per process, as kd_session_create
/// does). Thread-safe. Errors: KD_ERR_INVALID_ARGUMENT (NULL out_count),
/// KD_ERR_DRIVER_MISSING (no usable driver: the message says why; *out_count
/// is 0), KD_ERR_NO_DEVICE, KD_ERR_DRIVER.
KD_API kd_status kd_device_count(int *out_count);

/// One device's description, as a session on it would report it but for
/// what only a session knows (numa_node -1, placement ""). No context is
/// made. Thread-safe. Errors: those of kd_device_count, and
/// KD_ERR_INVALID_ARGUMENT (NULL out_info, an ordinal the driver lacks).
/// *out_info is written only on success.
KD_API kd_status kd_device_query(int ordinal, kd_device_info *out_info);

/// Waits. Besides the waits a caller asks for (kd_sink_wait,
/// kd_tensor_download, kd_raw_synchronize, and a full completion ring, see
/// kdag/graph.h), some driver calls wait for all work in the device's
/// context, whoever enqueued it: loading and unloading a module, unpinning
/// host memory, cuMemFree (tools/wait-probe measures them on a GPU; an
/// H100 with driver 580 waited 190 ms for an unrelated 200 ms kernel in
/// each). kdag makes them only in these calls, each documented as a wait on
/// the context:
///   - loading: kd_session_create (kdag's built-in kernels), kd_raw_load_ptx,
///     kd_raw_load_image, kd_raw_load_binary, kd_raw_compile_nvrtc,
///     kd_raw_cached_module (when it loads);
///   - releasing: kd_session_trim, kd_session_destroy, and the caller's waits
///     above once a cap of kd_session_options is passed (unload_cap,
///     idle_staging_cap).
/// Everything else defers them: a module whose last reference goes (its
/// release, a graph's destruction, a reap that retires the last work using
/// it) is unloaded in one of those calls. kd_session_stats.context_waits counts
/// the calls made, so a test can show it stays still between a submission
/// and its sink's wait.

/// Unloads the modules whose last reference went and unpins the staging
/// memory no transfer holds, after retiring what has completed. A wait on
/// the device's whole context (see "Waits"): call it where the pipeline may
/// wait, between phases. Errors: KD_ERR_INVALID_ARGUMENT (NULL),
/// KD_ERR_DEVICE_FAULT (found while retiring, or earlier: the release
/// happens all the same). A HOST session has nothing to release.
KD_API kd_status kd_session_trim(kd_session *session);

/// Makes the session's work from now on (submissions, uploads, downloads,
/// raw scopes; callable inside a raw callback, for the rest of its
/// launches) wait, on the device, for event: a CUevent recorded on
/// another library's stream, in any context or on any device. The wait is
/// enqueued during the call (cuStreamWaitEvent), so the caller may
/// re-record the event once it returns; the host does not wait (counted
/// in kd_session_stats.stream_event_waits). An event never recorded is
/// complete. CUDA sessions only. Errors: KD_ERR_INVALID_ARGUMENT (NULL
/// event), KD_ERR_WRONG_BACKEND (a HOST session), KD_ERR_DRIVER (the
/// driver refused the handle), KD_ERR_DEVICE_FAULT.
KD_API kd_status kd_session_wait_event(kd_session *session, void *event);

/// Monotonic counters, readable at any time (but from a callback that must
/// not call kdag: KD_ERR_BUSY) so tests can prove what the session did (and
/// did not) do.
typedef struct kd_session_stats {
  uint64_t launches;            ///< kernels enqueued
  uint64_t submissions;         ///< kd_graph_submit calls that enqueued work
  uint64_t uploads;             ///< host-to-device copies: kd_tensor_upload and upload nodes
  uint64_t downloads;           ///< kd_tensor_download calls
  uint64_t event_records;       ///< events recorded: completions', sinks' and downloads'
  uint64_t event_queries;       ///< non-blocking polls of completion events
  uint64_t event_waits;         ///< host waits on one event: sink waits, downloads, a full ring,
                                ///< releases with no memory to defer, the per-node debug option,
                                ///< session destroy's drain
  uint64_t stream_syncs;        ///< waits on the whole session stream: kd_raw_synchronize, and
                                ///< the fallback when a completion's or a download's event cannot
                                ///< be recorded or waited for, after their work was enqueued
  uint64_t device_syncs;        ///< device- or context-wide waits: kdag never makes one
  uint64_t stream_event_waits;  ///< waits for other streams' events enqueued on the session stream
                                ///< (kd_session_wait_event, kd_session_wait_ticket, a DLPack
                                ///< import's wait_event): the device waits, the host does not
  uint64_t ring_full_waits;     ///< submits that had to wait for the oldest completion
  uint64_t completions_retired; ///< completions whose events fired and whose holds were released
  uint64_t inflight;            ///< completions recorded but not yet retired (gauge)
  uint64_t bytes_device;        ///< live device bytes owned by this session's tensors (gauge)
  uint64_t bytes_retained;      ///< bytes of tensors the caller released that are still held: by work
                                ///< in flight, or by a graph that uses them (gauge)
  uint64_t bytes_staging;       ///< pinned staging bytes owned by the session (gauge)
  uint64_t staging_grows;       ///< staging blocks pinned so far. Pinning host memory
                                ///< synchronises the device implicitly, so it happens only
                                ///< while the staging pool grows to the pipeline's
                                ///< high-water mark; steady state reuses blocks
  uint64_t graph_instantiations; ///< GRAPH: CUDA graphs built and instantiated
  uint64_t graph_updates;        ///< GRAPH: launches of an executable graph patched in
                                 ///< place for them (rebound tensors, new scalars)
  uint64_t graph_launches;       ///< GRAPH: executable graph launches
  uint64_t plans_built;          ///< graphs planned (topological order, successors):
                                 ///< once per graph shape, not per submission; a node
                                 ///< or edge added (not one dropped as a repeat)
                                 ///< replans at the next submit, rebinding and new
                                 ///< scalars do not
  uint64_t context_waits;        ///< driver calls made that wait for all work in the device's
                                 ///< context (module loads and unloads, unpinning memory): only
                                 ///< in the calls "Waits" names
  uint64_t modules_deferred;     ///< modules released, unloaded at the next such call (gauge)
  uint64_t module_bytes_deferred; ///< their PTX or image bytes (gauge)
  uint64_t staging_blocks;       ///< pinned staging blocks the session holds (gauge)
  uint64_t staging_idle_bytes;   ///< of bytes_staging, what no transfer holds (gauge)
  uint64_t programmatic_edges;   ///< dependencies given to the driver as programmatic
                                 ///< (KD_LAUNCH_PDL): per EAGER launch, per edge of each
                                 ///< CUDA graph built
  uint64_t host_splits;          ///< HOST: large element-wise built-ins shared out in slices
                                 ///< to workers that were idle when they started
} kd_session_stats;

/// Copies the session's statistics into the caller's *out_stats. Errors: KD_ERR_INVALID_ARGUMENT.
KD_API kd_status kd_session_stats_get(kd_session *session, kd_session_stats *out_stats);

/// Retires every completion whose event has fired, oldest first, never
/// blocking: it stops at the first one still pending. With n in flight it
/// costs at most 2 + log2(n) event queries, one when the oldest is pending
/// (the oldest, the newest, then halves: the stream finishes work in
/// order). *out_pending (may be
/// NULL) receives the number still in flight. A device fault found here is
/// returned as KD_ERR_DEVICE_FAULT.
KD_API kd_status kd_session_reap(kd_session *session, uint32_t *out_pending);

#ifndef KDAG_NO_DEPRECATED
/// Names of the previous release, kept for one release (kdag/kdag.h).
/// @{
#define kd_counters kd_session_stats
#define kd_session_counters kd_session_stats_get
/// @}
#endif

#ifdef __cplusplus
}
#endif
#endif /* KDAG_SESSION_H */
