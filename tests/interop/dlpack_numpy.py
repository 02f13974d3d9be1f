# SPDX-License-Identifier: Apache-2.0
"""DLPack with a real producer and consumer: NumPy, on a HOST session.

    python3 tests/interop/dlpack_numpy.py LIBKDAG.so

A 2 x 3 float32 NumPy array goes into kdag without a copy (its __dlpack__
capsule, versioned when NumPy offers it, legacy otherwise), a kdag graph
scales it in place, and kdag's export comes back into NumPy with
np.from_dlpack: the same memory both ways, the axes reversed into kdag's
column-major order and back. Prints "dlpack numpy: ok" and exits 0, or
says what differed and exits 1. dlpack_cuda.py takes the same steps with
PyTorch and CuPy on a CUDA session.
"""
import ctypes
import sys

import numpy as np

from kdag_ctypes import (KD_BACKEND_HOST, KD_DLPACK_LEGACY, KD_DLPACK_VERSIONED, Exported, checker, fail,
                         import_capsule, load, scale_in_place, session)

WHO = "dlpack numpy"
lib = load(sys.argv[1])
check = checker(lib, WHO)
s = session(lib, KD_BACKEND_HOST, check)

a = np.arange(6, dtype=np.float32).reshape(2, 3)
try:  # versioned when this NumPy offers it
    capsule, kind = a.__dlpack__(max_version=(1, 0)), KD_DLPACK_VERSIONED
except TypeError:
    capsule, kind = a.__dlpack__(), KD_DLPACK_LEGACY
tensor, view = import_capsule(lib, s, capsule, kind, None, check, "numpy")
if view.rank != 2 or list(view.shape[:2]) != [3, 2] or list(view.strides[:2]) != [1, 3]:
    fail(WHO, f"view rank {view.rank}, shape {list(view.shape[:2])}, strides {list(view.strides[:2])}")
graph = scale_in_place(lib, s, view, 10.0, check)

out = ctypes.c_void_p()  # the export waits for the submission on HOST
check(lib.kd_tensor_to_dlpack(s, tensor.value, kind, None, ctypes.byref(out)), "kd_tensor_to_dlpack")
b = np.from_dlpack(Exported(out.value, kind, (1, 0)))  # kDLCPU
if b.shape != (2, 3) or not np.array_equal(b, np.arange(6, dtype=np.float32).reshape(2, 3) * 10):
    fail(WHO, f"kdag's export reads {b!r}")
if b.ctypes.data != a.ctypes.data:
    fail(WHO, "the export is a copy")
if a[1, 2] != 50.0:
    fail(WHO, f"NumPy's own array holds {a[1, 2]} at (1, 2), not 50")
del b  # NumPy calls kdag's deleter, before the session goes
lib.kd_graph_destroy(graph)
check(lib.kd_tensor_release(s, tensor.value), "kd_tensor_release")  # kdag calls NumPy's deleter
lib.kd_session_destroy(s)
print(f"{WHO}: ok ({'versioned' if kind == KD_DLPACK_VERSIONED else 'legacy'} DLPack, NumPy {np.__version__})")
