# SPDX-License-Identifier: Apache-2.0
"""What the DLPack checks (dlpack_numpy.py, dlpack_cuda.py) share: kdag's
library through ctypes, the capsule calls of the C API, and a producer
object for the frameworks' from_dlpack."""
import ctypes
import sys

KD_BACKEND_CUDA, KD_BACKEND_HOST = 1, 2
KD_DLPACK_VERSIONED, KD_DLPACK_LEGACY = 0, 1
KD_ERR_INVALID_ARGUMENT, KD_ERR_NOT_RESIDENT = 1, 8
KD_EXTERNAL_READ_ONLY = 1
NAMES = {KD_DLPACK_VERSIONED: b"dltensor_versioned", KD_DLPACK_LEGACY: b"dltensor"}
USED = {k: b"used_" + v for k, v in NAMES.items()}  # capsules keep the pointer, not a copy: kept alive here

capi = ctypes.pythonapi
capi.PyCapsule_GetPointer.restype = ctypes.c_void_p
capi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
capi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
capi.PyCapsule_New.restype = ctypes.py_object
capi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class View(ctypes.Structure):  # kd_view
    _fields_ = [("tensor", ctypes.c_uint64), ("rank", ctypes.c_int), ("offset", ctypes.c_int64),
                ("shape", ctypes.c_int64 * 8), ("strides", ctypes.c_int64 * 8)]


def load(path):
    """libkdag with the signatures the checks call."""
    lib = ctypes.CDLL(path)
    lib.kd_last_error.restype = ctypes.c_char_p
    lib.kd_graph_op_scale.argtypes = [ctypes.c_void_p, ctypes.c_char_p, View, ctypes.c_double, ctypes.c_void_p]
    lib.kd_tensor_from_dlpack.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                          ctypes.c_void_p, ctypes.c_void_p]
    lib.kd_tensor_to_dlpack.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p,
                                        ctypes.c_void_p]
    lib.kd_tensor_wrap.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.kd_tensor_release.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    for name in ("kd_session_create", "kd_graph_create", "kd_graph_submit"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.kd_session_destroy.argtypes = [ctypes.c_void_p]
    lib.kd_graph_destroy.argtypes = [ctypes.c_void_p]
    return lib


def checker(lib, who):
    """check(status, call): exits naming who, the call and kdag's message."""
    def check(status, call):
        if status != 0:
            sys.exit(f"{who}: {call}: {lib.kd_last_error().decode()}")
    return check


def fail(who, what):
    print(f"{who}: MISMATCH: {what}")
    sys.exit(1)


def session(lib, backend, check):
    """A session of backend: kd_session_options_init, then backend (the
    int after struct_size)."""
    options = ctypes.create_string_buffer(1024)
    lib.kd_session_options_init(options)
    ctypes.c_int.from_buffer(options, 4).value = backend
    s = ctypes.c_void_p()
    check(lib.kd_session_create(options, ctypes.byref(s)), "kd_session_create")
    return s


def import_capsule(lib, s, capsule, kind, wait_event, check, who):
    """kd_tensor_from_dlpack of a framework's capsule; kdag owns it after
    (renamed used_, as the protocol asks). Returns (tensor, view)."""
    tensor, view = ctypes.c_uint64(), View()
    check(lib.kd_tensor_from_dlpack(s, capi.PyCapsule_GetPointer(capsule, NAMES[kind]), kind, wait_event,
                                    ctypes.byref(tensor), ctypes.byref(view)), f"{who}: kd_tensor_from_dlpack")
    capi.PyCapsule_SetName(capsule, USED[kind])
    return tensor, view


def scale_in_place(lib, s, view, alpha, check):
    """A graph of one scale node over view, submitted; returns the graph."""
    graph = ctypes.c_void_p()
    check(lib.kd_graph_create(s, ctypes.byref(graph)), "kd_graph_create")
    check(lib.kd_graph_op_scale(graph, b"x *= alpha", view, alpha, None), "kd_graph_op_scale")
    check(lib.kd_graph_submit(graph, None), "kd_graph_submit")
    return graph


class Exported:
    """kdag's export as a producer object for np/torch/cupy.from_dlpack."""

    def __init__(self, pointer, kind, device):
        self.capsule = capi.PyCapsule_New(pointer, NAMES[kind], None)
        self.device = device

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return self.device
