# SPDX-License-Identifier: Apache-2.0
"""The C API of libkdag through ctypes: its structs, and the prototypes of
the functions the package calls. Mirrors include/kdag/*.h; the layouts are
checked against the headers' sizes by tests/test_capi.py.

ctypes, and not a compiled extension: kdag's API is plain C with value
handles, ctypes releases the GIL around every call (kdag's waits and
submits run without it), and one wheel serves every CPython version,
with nothing to compile on a machine that has no compiler or registry.
"""
import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, Union, c_char_p, c_double, c_float, c_int, c_int32, c_int64,
                    c_size_t, c_uint32, c_uint64, c_void_p)

MAX_RANK = 8


def _library_path():
    """$KDAG_LIBRARY (a build tree's libkdag.so), else the one in the package."""
    path = os.environ.get("KDAG_LIBRARY")
    if path:
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "libkdag.so")


lib = ctypes.CDLL(_library_path())


class Tensor(Structure):
    _fields_ = [("bits", c_uint64)]


class Module(Structure):
    _fields_ = [("bits", c_uint64)]


class Function(Structure):
    _fields_ = [("module", Module), ("index", c_uint32)]


class Ticket(Structure):
    _fields_ = [("seq", c_uint64), ("session", c_uint32)]


LOG_FN = CFUNCTYPE(None, c_void_p, c_int, c_char_p)


class SessionOptions(Structure):
    _fields_ = [("struct_size", c_uint32), ("backend", c_int), ("device_ordinal", c_int),
                ("pool_release_threshold", c_uint64), ("completion_ring_capacity", c_uint32),
                ("flags", c_uint32), ("exec_mode", c_int), ("graph_after", c_uint32), ("unload_cap", c_uint32),
                ("idle_staging_cap", c_uint64), ("flags_set", c_uint32), ("log_level", c_int), ("log", c_void_p),
                ("log_user", c_void_p), ("trace_path", c_char_p)]


class DeviceInfo(Structure):
    _fields_ = [("name", ctypes.c_char * 256), ("ordinal", c_int), ("cc_major", c_int), ("cc_minor", c_int),
                ("sm_count", c_int), ("driver_version", c_int), ("max_ptx_isa", c_int), ("numa_node", c_int),
                ("pci_bus_id", ctypes.c_char * 32), ("placement", ctypes.c_char * 256),
                ("memory_bytes", c_size_t)]


STATS_FIELDS = ("launches submissions uploads downloads event_records event_queries event_waits stream_syncs "
                "device_syncs stream_event_waits ring_full_waits completions_retired inflight bytes_device "
                "bytes_retained bytes_staging staging_grows graph_instantiations graph_updates graph_launches "
                "plans_built context_waits modules_deferred module_bytes_deferred staging_blocks "
                "staging_idle_bytes programmatic_edges host_splits").split()


class SessionStats(Structure):
    _fields_ = [(name, c_uint64) for name in STATS_FIELDS]


class TensorDesc(Structure):
    _fields_ = [("dtype", c_int), ("rank", c_int), ("shape", c_int64 * MAX_RANK),
                ("strides", c_int64 * MAX_RANK), ("residency", c_int), ("bytes", c_size_t)]


class View(Structure):
    _fields_ = [("tensor", Tensor), ("rank", c_int), ("offset", c_int64), ("shape", c_int64 * MAX_RANK),
                ("strides", c_int64 * MAX_RANK)]


class Span(Structure):
    _fields_ = [("device_ptr", c_uint64), ("bytes", c_size_t), ("elements", c_int64), ("dtype", c_int),
                ("tensor", Tensor), ("scope_", c_uint64)]


class _Bytes(Structure):
    _fields_ = [("data", c_void_p), ("size", c_size_t)]


class _ArgValue(Union):
    _fields_ = [("span", Span), ("i32", c_int32), ("i64", c_int64), ("u32", c_uint32), ("u64", c_uint64),
                ("f32", c_float), ("f64", c_double), ("bytes", _Bytes)]


class Arg(Structure):
    _fields_ = [("kind", c_int), ("v", _ArgValue)]


class GArg(Structure):
    _fields_ = [("is_tensor", c_int), ("access", c_int), ("view", View), ("value", Arg)]


class LaunchConfig(Structure):
    _fields_ = [("grid", c_uint32 * 3), ("block", c_uint32 * 3), ("shared_bytes", c_uint32), ("flags", c_uint32)]


class GraphStats(Structure):
    _fields_ = [("nodes", c_uint32), ("edges", c_uint32), ("accesses", c_uint32), ("edges_dropped", c_uint32),
                ("edges_in_max", c_uint32)]


class NvrtcOptions(Structure):
    _fields_ = [("struct_size", c_uint32), ("arch", c_char_p), ("std", c_char_p),
                ("include_paths", POINTER(c_char_p)), ("include_path_count", c_size_t),
                ("defines", POINTER(c_char_p)), ("define_count", c_size_t), ("extra_flags", POINTER(c_char_p)),
                ("extra_flag_count", c_size_t), ("program_name", c_char_p), ("header_names", POINTER(c_char_p)),
                ("header_sources", POINTER(c_char_p)), ("header_count", c_size_t), ("emit_ptx", c_int),
                ("lto", c_int), ("relocatable", c_int)]


class ForeignCall(Structure):
    _fields_ = [("stream", c_void_p), ("spans", POINTER(Span)), ("span_count", c_size_t), ("workspace", c_uint64),
                ("workspace_bytes", c_size_t), ("resource", c_void_p)]


class BuildRecipe(Structure):
    _fields_ = [("source", c_char_p), ("nvrtc", NvrtcOptions), ("inputs", c_void_p), ("input_count", c_size_t),
                ("link_flags", POINTER(c_char_p)), ("link_flag_count", c_size_t), ("key_tags", POINTER(c_char_p)),
                ("key_tag_count", c_size_t), ("host_variables", POINTER(c_char_p)),
                ("host_variable_count", c_size_t), ("keep_unused_variables", c_int)]


class BuildReport(Structure):
    _fields_ = [("origin", c_int), ("key", ctypes.c_char * 33), ("key_ms", c_double), ("compile_ms", c_double),
                ("link_ms", c_double), ("total_ms", c_double), ("disk_entry_rejected", c_int),
                ("disk_write_failed", c_int)]


RAW_FN = CFUNCTYPE(c_int, c_void_p, c_void_p)
FOREIGN_FN = CFUNCTYPE(c_int, POINTER(ForeignCall), c_void_p)
HOST_FN = CFUNCTYPE(None, c_void_p)

_P = c_void_p  # kd_session *, kd_graph *, kd_sink *, kd_raw *: opaque


def _proto(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


kd_status_name = _proto("kd_status_name", c_char_p, c_int)
kd_last_error = _proto("kd_last_error", c_char_p)
kd_version_string = _proto("kd_version_string", c_char_p)
kd_dtype_size = _proto("kd_dtype_size", c_size_t, c_int)
kd_dtype_name = _proto("kd_dtype_name", c_char_p, c_int)

kd_session_options_init = _proto("kd_session_options_init", None, POINTER(SessionOptions))
kd_session_create = _proto("kd_session_create", c_int, POINTER(SessionOptions), POINTER(_P))
kd_session_destroy = _proto("kd_session_destroy", None, _P)
kd_session_backend = _proto("kd_session_backend", c_int, _P)
kd_session_backend_reason = _proto("kd_session_backend_reason", c_char_p, _P)
kd_session_device_info = _proto("kd_session_device_info", c_int, _P, POINTER(DeviceInfo))
kd_session_stats_get = _proto("kd_session_stats_get", c_int, _P, POINTER(SessionStats))
kd_session_reap = _proto("kd_session_reap", c_int, _P, POINTER(c_uint32))
kd_session_trim = _proto("kd_session_trim", c_int, _P)

kd_tensor_create = _proto("kd_tensor_create", c_int, _P, POINTER(TensorDesc), POINTER(Tensor))
kd_tensor_from_host = _proto("kd_tensor_from_host", c_int, _P, POINTER(TensorDesc), c_void_p, c_size_t,
                             POINTER(Tensor))
kd_tensor_upload = _proto("kd_tensor_upload", c_int, _P, Tensor, c_void_p, c_size_t)
kd_tensor_download = _proto("kd_tensor_download", c_int, _P, Tensor, c_void_p, c_size_t)
kd_tensor_release = _proto("kd_tensor_release", c_int, _P, Tensor)
kd_tensor_info = _proto("kd_tensor_info", c_int, _P, Tensor, POINTER(TensorDesc))
kd_tensor_from_dlpack = _proto("kd_tensor_from_dlpack", c_int, _P, c_void_p, c_int, c_void_p, POINTER(Tensor),
                               POINTER(View))
kd_tensor_to_dlpack = _proto("kd_tensor_to_dlpack", c_int, _P, Tensor, c_int, POINTER(c_void_p), POINTER(c_void_p))
kd_view_whole = _proto("kd_view_whole", c_int, _P, Tensor, POINTER(View))

kd_with_raw = _proto("kd_with_raw", c_int, _P, c_char_p, RAW_FN, c_void_p)
kd_raw_load_ptx = _proto("kd_raw_load_ptx", c_int, _P, c_char_p, c_size_t, POINTER(Module))
kd_raw_load_image = _proto("kd_raw_load_image", c_int, _P, c_void_p, c_size_t, POINTER(Module))
kd_raw_compile_nvrtc = _proto("kd_raw_compile_nvrtc", c_int, _P, c_char_p, POINTER(NvrtcOptions), POINTER(Module))
kd_raw_stream = _proto("kd_raw_stream", c_int, _P, POINTER(c_void_p))
kd_nvrtc_options_init = _proto("kd_nvrtc_options_init", None, POINTER(NvrtcOptions))
kd_module_function = _proto("kd_module_function", c_int, _P, Module, c_char_p, POINTER(Function))
kd_module_release = _proto("kd_module_release", c_int, _P, Module)
kd_build_recipe_init = _proto("kd_build_recipe_init", None, POINTER(BuildRecipe))
kd_cubin_cache_create = _proto("kd_cubin_cache_create", c_int, c_char_p, POINTER(_P))
kd_cubin_cache_dir = _proto("kd_cubin_cache_dir", c_char_p, _P)
kd_build_cubin = _proto("kd_build_cubin", c_int, _P, POINTER(BuildRecipe), POINTER(_P), POINTER(BuildReport))
kd_binary_data = _proto("kd_binary_data", c_void_p, _P)
kd_binary_size = _proto("kd_binary_size", c_size_t, _P)
kd_binary_destroy = _proto("kd_binary_destroy", None, _P)
kd_launch_config_flat = _proto("kd_launch_config_flat", c_int, c_uint64, c_uint32, c_uint32, POINTER(LaunchConfig))

kd_graph_create = _proto("kd_graph_create", c_int, _P, POINTER(_P))
kd_graph_destroy = _proto("kd_graph_destroy", None, _P)
kd_graph_set_name = _proto("kd_graph_set_name", c_int, _P, c_char_p)
kd_graph_kernel = _proto("kd_graph_kernel", c_int, _P, c_char_p, Function, POINTER(LaunchConfig), POINTER(GArg),
                         c_size_t, POINTER(c_uint32))
kd_graph_op_fill = _proto("kd_graph_op_fill", c_int, _P, c_char_p, View, c_void_p, POINTER(c_uint32))
kd_graph_op_copy = _proto("kd_graph_op_copy", c_int, _P, c_char_p, View, View, POINTER(c_uint32))
kd_graph_op_transpose = _proto("kd_graph_op_transpose", c_int, _P, c_char_p, View, View, POINTER(c_uint32))
kd_graph_op_add = _proto("kd_graph_op_add", c_int, _P, c_char_p, View, View, View, POINTER(c_uint32))
kd_graph_op_axpy = _proto("kd_graph_op_axpy", c_int, _P, c_char_p, View, View, c_double, POINTER(c_uint32))
kd_graph_op_scale = _proto("kd_graph_op_scale", c_int, _P, c_char_p, View, c_double, POINTER(c_uint32))
kd_graph_op_sum = _proto("kd_graph_op_sum", c_int, _P, c_char_p, View, View, POINTER(c_uint32))
kd_graph_upload = _proto("kd_graph_upload", c_int, _P, c_char_p, Tensor, c_void_p, c_size_t, POINTER(c_uint32))
kd_graph_sink = _proto("kd_graph_sink", c_int, _P, c_char_p, Tensor, c_void_p, c_size_t, POINTER(_P))
kd_graph_host = _proto("kd_graph_host", c_int, _P, c_char_p, HOST_FN, c_void_p, POINTER(GArg), c_size_t,
                       POINTER(c_uint32))
kd_graph_foreign = _proto("kd_graph_foreign", c_int, _P, c_char_p, FOREIGN_FN, c_void_p, POINTER(GArg), c_size_t,
                          c_size_t, c_void_p, c_void_p, POINTER(c_uint32))
kd_graph_edge = _proto("kd_graph_edge", c_int, _P, c_uint32, c_uint32)
class CommId(Structure):
    _fields_ = [("bytes", ctypes.c_ubyte * 128)]


kd_comm_id_create = _proto("kd_comm_id_create", c_int, _P, POINTER(CommId))
kd_comm_create = _proto("kd_comm_create", c_int, _P, POINTER(CommId), c_int, c_int, POINTER(c_void_p))
kd_comm_create_all = _proto("kd_comm_create_all", c_int, POINTER(c_void_p), c_int, POINTER(c_void_p))
kd_comm_destroy = _proto("kd_comm_destroy", None, _P)
kd_comm_info = _proto("kd_comm_info", c_int, _P, POINTER(c_int), POINTER(c_int))
kd_graph_all_reduce = _proto("kd_graph_all_reduce", c_int, _P, c_char_p, _P, View, View, c_int, POINTER(c_uint32))
kd_graph_reduce_scatter = _proto("kd_graph_reduce_scatter", c_int, _P, c_char_p, _P, View, View, c_int,
                                 POINTER(c_uint32))
kd_graph_all_gather = _proto("kd_graph_all_gather", c_int, _P, c_char_p, _P, View, View, POINTER(c_uint32))
kd_graph_broadcast = _proto("kd_graph_broadcast", c_int, _P, c_char_p, _P, View, c_int, POINTER(c_uint32))
kd_graph_send_recv = _proto("kd_graph_send_recv", c_int, _P, c_char_p, _P, View, c_int, View, c_int,
                            POINTER(c_uint32))
kd_graph_copy_peer = _proto("kd_graph_copy_peer", c_int, _P, c_char_p, View, _P, View, POINTER(c_uint32))
kd_graph_while_begin = _proto("kd_graph_while_begin", c_int, _P, c_char_p, Tensor, c_uint32, Tensor, POINTER(c_uint32))
kd_graph_if_begin = _proto("kd_graph_if_begin", c_int, _P, c_char_p, Tensor, POINTER(c_uint32))
kd_graph_end = _proto("kd_graph_end", c_int, _P, c_uint32)
kd_graph_stats_get = _proto("kd_graph_stats_get", c_int, _P, POINTER(GraphStats))
kd_graph_set_exec_mode = _proto("kd_graph_set_exec_mode", c_int, _P, c_int)
kd_graph_submit = _proto("kd_graph_submit", c_int, _P, POINTER(Ticket))
kd_ticket_done = _proto("kd_ticket_done", c_int, _P, Ticket, POINTER(c_int))
kd_sink_wait = _proto("kd_sink_wait", c_int, _P)
