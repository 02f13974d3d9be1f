# SPDX-License-Identifier: Apache-2.0
"""DLPack and events with PyTorch and CuPy on a CUDA session (the GPU lane).

    python3 tests/interop/dlpack_cuda.py LIBKDAG.so

For each of PyTorch and CuPy present with a GPU: a 2 x 3 float32 array made
on the framework's current stream goes into kdag without a copy, kdag's
stream waits for an event recorded after it (kd_tensor_from_dlpack's
wait_event), a kdag graph scales it in place, kdag's export comes back with
an event the framework's stream waits on (cuStreamWaitEvent), and the
framework reads the result: the same device memory both ways. Then the bad
inputs: a host (NumPy) array, and a read-only wrap used as an output.
Prints "dlpack cuda: ok" and exits 0; exits 77 (skipped) without a GPU
framework, unless KDAG_REQUIRE_GPU=1, which makes that a failure.
"""
import ctypes
import os
import sys

frameworks = []
try:
    import torch
    if torch.cuda.is_available():
        frameworks.append("torch")
except ImportError:
    pass
try:
    import cupy
    if cupy.cuda.runtime.getDeviceCount() > 0:
        frameworks.append("cupy")
except Exception:  # no CuPy, or no device for it
    pass
if not frameworks:
    print("dlpack cuda: SKIP: neither PyTorch nor CuPy with a GPU here")
    sys.exit(1 if os.environ.get("KDAG_REQUIRE_GPU") == "1" else 77)

lib = ctypes.CDLL(sys.argv[1])
cuda = ctypes.CDLL("libcuda.so.1")
api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class View(ctypes.Structure):  # kd_view
    _fields_ = [("tensor", ctypes.c_uint64), ("rank", ctypes.c_int), ("offset", ctypes.c_int64),
                ("shape", ctypes.c_int64 * 8), ("strides", ctypes.c_int64 * 8)]


KD_BACKEND_CUDA, KD_DLPACK_VERSIONED, KD_DLPACK_LEGACY = 1, 0, 1
KD_ERR_INVALID_ARGUMENT, KD_ERR_NOT_RESIDENT, KD_EXTERNAL_READ_ONLY = 1, 8, 1
lib.kd_last_error.restype = ctypes.c_char_p
lib.kd_graph_op_scale.argtypes = [ctypes.c_void_p, ctypes.c_char_p, View, ctypes.c_double, ctypes.c_void_p]
lib.kd_tensor_from_dlpack.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                      ctypes.c_void_p, ctypes.c_void_p]
lib.kd_tensor_to_dlpack.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
lib.kd_tensor_wrap.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
lib.kd_tensor_release.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
for name in ("kd_session_create", "kd_graph_create", "kd_graph_submit"):
    getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p]
lib.kd_session_destroy.argtypes = [ctypes.c_void_p]
lib.kd_graph_destroy.argtypes = [ctypes.c_void_p]
cuda.cuStreamWaitEvent.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]
cuda.cuEventDestroy_v2.argtypes = [ctypes.c_void_p]
names = {KD_DLPACK_VERSIONED: b"dltensor_versioned", KD_DLPACK_LEGACY: b"dltensor"}
used = {k: b"used_" + v for k, v in names.items()}  # capsules keep the pointer: kept alive here


def check(status, call):
    if status != 0:
        sys.exit(f"dlpack cuda: {call}: {lib.kd_last_error().decode()}")


def fail(what):
    print(f"dlpack cuda: MISMATCH: {what}")
    sys.exit(1)


options = ctypes.create_string_buffer(1024)
lib.kd_session_options_init(options)
ctypes.c_int.from_buffer(options, 4).value = KD_BACKEND_CUDA
session = ctypes.c_void_p()
check(lib.kd_session_create(options, ctypes.byref(session)), "kd_session_create")


class Exported:  # what torch.from_dlpack and cupy.from_dlpack ask of a producer
    def __init__(self, pointer, kind):
        self.capsule = api.PyCapsule_New(pointer, names[kind], None)

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0


def round_trip(fw):
    if fw == "torch":
        x = torch.arange(6, dtype=torch.float32, device="cuda").reshape(2, 3) * 1.0  # a kernel on torch's stream
        ev = torch.cuda.Event()
        ev.record()
        event, stream = ev.cuda_event, torch.cuda.current_stream().cuda_stream
        ptr = x.data_ptr()
        capsule, kind = torch.utils.dlpack.to_dlpack(x), KD_DLPACK_LEGACY
    else:
        x = cupy.arange(6, dtype=cupy.float32).reshape(2, 3) * 1.0
        ev = cupy.cuda.Event(disable_timing=True)
        ev.record()
        event, stream = ev.ptr, cupy.cuda.get_current_stream().ptr
        ptr = x.data.ptr
        try:
            capsule, kind = x.__dlpack__(max_version=(1, 0)), KD_DLPACK_VERSIONED
        except TypeError:
            capsule, kind = x.__dlpack__(), KD_DLPACK_LEGACY
    tensor, view = ctypes.c_uint64(), View()
    check(lib.kd_tensor_from_dlpack(session, api.PyCapsule_GetPointer(capsule, names[kind]), kind, event,
                                    ctypes.byref(tensor), ctypes.byref(view)), f"{fw}: kd_tensor_from_dlpack")
    api.PyCapsule_SetName(capsule, used[kind])  # kdag owns it now
    graph = ctypes.c_void_p()
    check(lib.kd_graph_create(session, ctypes.byref(graph)), "kd_graph_create")
    check(lib.kd_graph_op_scale(graph, b"x *= 10", view, 10.0, None), "kd_graph_op_scale")
    check(lib.kd_graph_submit(graph, None), "kd_graph_submit")
    out, done = ctypes.c_void_p(), ctypes.c_void_p()
    check(lib.kd_tensor_to_dlpack(session, tensor.value, kind, ctypes.byref(done), ctypes.byref(out)),
          f"{fw}: kd_tensor_to_dlpack")
    if cuda.cuStreamWaitEvent(stream, done, 0) != 0 or cuda.cuEventDestroy_v2(done) != 0:
        fail(f"{fw}: the framework's stream could not wait for kdag's event")
    y = torch.from_dlpack(Exported(out.value, kind)) if fw == "torch" else cupy.from_dlpack(Exported(out.value, kind))
    want = (torch.arange(6, dtype=torch.float32, device="cuda") if fw == "torch"
            else cupy.arange(6, dtype=cupy.float32)).reshape(2, 3) * 10
    same = bool((y == want).all())
    y_ptr = y.data_ptr() if fw == "torch" else y.data.ptr
    del y  # the framework calls kdag's deleter
    lib.kd_graph_destroy(graph)
    check(lib.kd_tensor_release(session, tensor.value), "kd_tensor_release")  # kdag calls the framework's
    if not same:
        fail(f"{fw}: the result differs from 10 x arange(6)")
    if y_ptr != ptr:
        fail(f"{fw}: the memory changed on the way ({y_ptr:#x} against {ptr:#x}): a copy")
    return x


for fw in frameworks:
    x = round_trip(fw)
    # A read-only wrap of the same memory, used as an output: refused,
    # naming the node.
    desc = ctypes.create_string_buffer(1024)
    lib.kd_external_desc_init(desc)
    ptr = x.data_ptr() if fw == "torch" else x.data.ptr
    ctypes.c_void_p.from_buffer(desc, 8).value = ptr  # data, after struct_size and its padding
    ctypes.c_int.from_buffer(desc, 16).value = 0  # KD_F32
    ctypes.c_int.from_buffer(desc, 20).value = 1  # rank
    ctypes.c_int64.from_buffer(desc, 24).value = 6  # shape[0]
    ctypes.c_uint32.from_buffer(desc, 24 + 16 * 8).value = KD_EXTERNAL_READ_ONLY  # flags, after shape and strides
    tensor, graph = ctypes.c_uint64(), ctypes.c_void_p()
    check(lib.kd_tensor_wrap(session, desc, ctypes.byref(tensor)), f"{fw}: kd_tensor_wrap")
    check(lib.kd_graph_create(session, ctypes.byref(graph)), "kd_graph_create")
    whole = View(tensor=tensor.value, rank=-1)
    st = lib.kd_graph_op_scale(graph, b"writes it", whole, 2.0, None)
    if st != KD_ERR_INVALID_ARGUMENT or b"read-only" not in lib.kd_last_error():
        fail(f"{fw}: a read-only wrap used as an output gave {st}: {lib.kd_last_error()}")
    lib.kd_graph_destroy(graph)
    check(lib.kd_tensor_release(session, tensor.value), "kd_tensor_release")

# A host array on a CUDA session: refused, the tensor still the caller's.
try:
    import numpy as np
    capsule = np.zeros(4, dtype=np.float32).__dlpack__()
    tensor, view = ctypes.c_uint64(), View()
    st = lib.kd_tensor_from_dlpack(session, api.PyCapsule_GetPointer(capsule, b"dltensor"), KD_DLPACK_LEGACY, None,
                                   ctypes.byref(tensor), ctypes.byref(view))
    if st != KD_ERR_NOT_RESIDENT:
        fail(f"a NumPy array on a CUDA session gave {st}: {lib.kd_last_error()}")
except ImportError:
    pass
lib.kd_session_destroy(session)
print(f"dlpack cuda: ok ({', '.join(frameworks)})")
