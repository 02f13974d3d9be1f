# SPDX-License-Identifier: Apache-2.0
"""The few CUDA driver calls the package makes itself (ordering a DLPack
consumer's stream after kdag's work), through the driver kdag loads
($KDAG_CUDA_DRIVER_PATH when set, else libcuda.so.1), resolved as kdag
resolves its own: cuGetProcAddress_v2."""
import ctypes
import os


class _Driver:
    def __init__(self):
        lib = ctypes.CDLL(os.environ.get("KDAG_CUDA_DRIVER_PATH") or "libcuda.so.1")
        get = lib.cuGetProcAddress_v2
        get.restype = ctypes.c_int
        get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64,
                        ctypes.c_void_p]

        def resolve(name, *args):
            fn = ctypes.c_void_p()
            r = get(name.encode(), ctypes.byref(fn), 12000, 0, None)
            if r or not fn.value:
                raise OSError(f"the CUDA driver has no {name} (CUresult {r})")
            return ctypes.CFUNCTYPE(ctypes.c_int, *args)(fn.value)

        self.cuStreamWaitEvent = resolve("cuStreamWaitEvent", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint)
        self.cuEventDestroy = resolve("cuEventDestroy", ctypes.c_void_p)


_driver = None


def driver():
    global _driver
    if _driver is None:
        _driver = _Driver()
    return _driver


def check(r, call):
    if r:
        from . import KdagError
        raise KdagError(22, f"{call} failed: CUresult {r}")  # KD_ERR_DRIVER
