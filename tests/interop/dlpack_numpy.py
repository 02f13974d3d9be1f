# SPDX-License-Identifier: Apache-2.0
"""DLPack with a real producer and consumer: NumPy, on a HOST session.

    python3 tests/interop/dlpack_numpy.py LIBKDAG.so

A 2 x 3 float32 NumPy array goes into kdag without a copy (its __dlpack__
capsule, versioned when NumPy offers it, legacy otherwise), a kdag graph
scales it in place, and kdag's export comes back into NumPy with
np.from_dlpack: the same memory both ways, the axes reversed into kdag's
column-major order and back. Prints "dlpack numpy: ok" and exits 0, or
says what differed and exits 1. The GPU lane's PyTorch and CuPy checks
follow the same steps on a CUDA session.
"""
import ctypes
import sys

import numpy as np

lib = ctypes.CDLL(sys.argv[1])
api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class View(ctypes.Structure):  # kd_view
    _fields_ = [("tensor", ctypes.c_uint64), ("rank", ctypes.c_int), ("offset", ctypes.c_int64),
                ("shape", ctypes.c_int64 * 8), ("strides", ctypes.c_int64 * 8)]


KD_BACKEND_HOST, KD_DLPACK_VERSIONED, KD_DLPACK_LEGACY = 2, 0, 1
lib.kd_last_error.restype = ctypes.c_char_p
lib.kd_graph_op_scale.argtypes = [ctypes.c_void_p, ctypes.c_char_p, View, ctypes.c_double, ctypes.c_void_p]
lib.kd_tensor_from_dlpack.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                      ctypes.c_void_p, ctypes.c_void_p]
lib.kd_tensor_to_dlpack.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
for name in ("kd_session_create", "kd_graph_create", "kd_graph_submit", "kd_tensor_release"):
    getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p] if name != "kd_tensor_release" \
        else [ctypes.c_void_p, ctypes.c_uint64]
lib.kd_session_destroy.argtypes = [ctypes.c_void_p]
lib.kd_graph_destroy.argtypes = [ctypes.c_void_p]


def check(status, call):
    if status != 0:
        sys.exit(f"{call}: {lib.kd_last_error().decode()}")


def fail(what):
    print(f"dlpack numpy: MISMATCH: {what}")
    sys.exit(1)


# A HOST session: kd_session_options_init, then backend (the int after
# struct_size).
options = ctypes.create_string_buffer(1024)
lib.kd_session_options_init(options)
ctypes.c_int.from_buffer(options, 4).value = KD_BACKEND_HOST
session = ctypes.c_void_p()
check(lib.kd_session_create(options, ctypes.byref(session)), "kd_session_create")

a = np.arange(6, dtype=np.float32).reshape(2, 3)
try:  # versioned when this NumPy offers it
    capsule, kind, name = a.__dlpack__(max_version=(1, 0)), KD_DLPACK_VERSIONED, b"dltensor_versioned"
except TypeError:
    capsule, kind, name = a.__dlpack__(), KD_DLPACK_LEGACY, b"dltensor"
tensor, view = ctypes.c_uint64(), View()
check(lib.kd_tensor_from_dlpack(session, api.PyCapsule_GetPointer(capsule, name), kind, None,
                                ctypes.byref(tensor), ctypes.byref(view)), "kd_tensor_from_dlpack")
used_name = b"used_" + name  # a capsule keeps the pointer, not a copy: it must outlive the capsule
api.PyCapsule_SetName(capsule, used_name)  # the DLPack protocol: kdag owns it now, and will delete it
if view.rank != 2 or list(view.shape[:2]) != [3, 2] or list(view.strides[:2]) != [1, 3]:
    fail(f"view rank {view.rank}, shape {list(view.shape[:2])}, strides {list(view.strides[:2])}")

graph = ctypes.c_void_p()
check(lib.kd_graph_create(session, ctypes.byref(graph)), "kd_graph_create")
check(lib.kd_graph_op_scale(graph, b"a *= 10", view, 10.0, None), "kd_graph_op_scale")
check(lib.kd_graph_submit(graph, None), "kd_graph_submit")

out = ctypes.c_void_p()  # the export waits for the submission on HOST
check(lib.kd_tensor_to_dlpack(session, tensor.value, kind, None, ctypes.byref(out)), "kd_tensor_to_dlpack")


class Exported:  # what np.from_dlpack asks of a producer
    def __init__(self, pointer):
        self.capsule = api.PyCapsule_New(pointer, name, None)

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


b = np.from_dlpack(Exported(out.value))
if b.shape != (2, 3) or not np.array_equal(b, np.arange(6, dtype=np.float32).reshape(2, 3) * 10):
    fail(f"kdag's export reads {b!r}")
if b.ctypes.data != a.ctypes.data:
    fail("the export is a copy")
if a[1, 2] != 50.0:
    fail(f"NumPy's own array holds {a[1, 2]} at (1, 2), not 50")
del b  # NumPy calls kdag's deleter, before the session goes
lib.kd_graph_destroy(graph)
check(lib.kd_tensor_release(session, tensor.value), "kd_tensor_release")  # kdag calls NumPy's deleter
lib.kd_session_destroy(session)
print(f"dlpack numpy: ok ({'versioned' if kind == KD_DLPACK_VERSIONED else 'legacy'} DLPack, NumPy {np.__version__})")
