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

from kdag_ctypes import (KD_BACKEND_CUDA, KD_DLPACK_LEGACY, KD_DLPACK_VERSIONED, KD_ERR_INVALID_ARGUMENT,
                         KD_ERR_NOT_RESIDENT, KD_EXTERNAL_READ_ONLY, NAMES, Exported, View, capi, checker, fail,
                         import_capsule, load, scale_in_place, session)

WHO = "dlpack cuda"
lib = load(sys.argv[1])
check = checker(lib, WHO)
cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuStreamWaitEvent.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]
cuda.cuEventDestroy_v2.argtypes = [ctypes.c_void_p]
s = session(lib, KD_BACKEND_CUDA, check)


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
    tensor, view = import_capsule(lib, s, capsule, kind, event, check, fw)  # kdag's stream waits for ev
    graph = scale_in_place(lib, s, view, 10.0, check)
    out, done = ctypes.c_void_p(), ctypes.c_void_p()
    check(lib.kd_tensor_to_dlpack(s, tensor.value, kind, ctypes.byref(done), ctypes.byref(out)),
          f"{fw}: kd_tensor_to_dlpack")
    if cuda.cuStreamWaitEvent(stream, done, 0) != 0 or cuda.cuEventDestroy_v2(done) != 0:
        fail(WHO, f"{fw}: the framework's stream could not wait for kdag's event")
    exported = Exported(out.value, kind, (2, 0))  # kDLCUDA, device 0
    y = torch.from_dlpack(exported) if fw == "torch" else cupy.from_dlpack(exported)
    want = (torch.arange(6, dtype=torch.float32, device="cuda") if fw == "torch"
            else cupy.arange(6, dtype=cupy.float32)).reshape(2, 3) * 10
    same = bool((y == want).all())
    y_ptr = y.data_ptr() if fw == "torch" else y.data.ptr
    del y  # the framework calls kdag's deleter
    lib.kd_graph_destroy(graph)
    check(lib.kd_tensor_release(s, tensor.value), "kd_tensor_release")  # kdag calls the framework's
    if not same:
        fail(WHO, f"{fw}: the result differs from 10 x arange(6)")
    if y_ptr != ptr:
        fail(WHO, f"{fw}: the memory changed on the way ({y_ptr:#x} against {ptr:#x}): a copy")
    return x


for fw in frameworks:
    x = round_trip(fw)
    # A read-only wrap of the same memory, used as an output: refused,
    # naming the node. kd_external_desc's offsets: data at 8, dtype 16,
    # rank 20, shape 24, flags after shape and strides.
    desc = ctypes.create_string_buffer(1024)
    lib.kd_external_desc_init(desc)
    ctypes.c_void_p.from_buffer(desc, 8).value = x.data_ptr() if fw == "torch" else x.data.ptr
    ctypes.c_int.from_buffer(desc, 16).value = 0  # KD_F32
    ctypes.c_int.from_buffer(desc, 20).value = 1  # rank
    ctypes.c_int64.from_buffer(desc, 24).value = 6  # shape[0]
    ctypes.c_uint32.from_buffer(desc, 24 + 16 * 8).value = KD_EXTERNAL_READ_ONLY
    tensor, graph = ctypes.c_uint64(), ctypes.c_void_p()
    check(lib.kd_tensor_wrap(s, desc, ctypes.byref(tensor)), f"{fw}: kd_tensor_wrap")
    check(lib.kd_graph_create(s, ctypes.byref(graph)), "kd_graph_create")
    st = lib.kd_graph_op_scale(graph, b"writes it", View(tensor=tensor.value, rank=-1), 2.0, None)
    if st != KD_ERR_INVALID_ARGUMENT or b"read-only" not in lib.kd_last_error():
        fail(WHO, f"{fw}: a read-only wrap used as an output gave {st}: {lib.kd_last_error()}")
    lib.kd_graph_destroy(graph)
    check(lib.kd_tensor_release(s, tensor.value), "kd_tensor_release")

# A host array on a CUDA session: refused, the tensor still the caller's.
try:
    import numpy as np
    capsule = np.zeros(4, dtype=np.float32).__dlpack__()
    tensor, view = ctypes.c_uint64(), View()
    st = lib.kd_tensor_from_dlpack(s, capi.PyCapsule_GetPointer(capsule, NAMES[KD_DLPACK_LEGACY]), KD_DLPACK_LEGACY,
                                   None, ctypes.byref(tensor), ctypes.byref(view))
    if st != KD_ERR_NOT_RESIDENT:
        fail(WHO, f"a NumPy array on a CUDA session gave {st}: {lib.kd_last_error()}")
except ImportError:
    pass
lib.kd_session_destroy(s)
print(f"{WHO}: ok ({', '.join(frameworks)})")
