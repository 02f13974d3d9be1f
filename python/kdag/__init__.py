# SPDX-License-Identifier: Apache-2.0
"""kdag: pipelines of custom CUDA kernels as an asynchronous task graph.

Python over the C library (libkdag, through ctypes): sessions, tensors
shared with NumPy, CuPy and PyTorch through DLPack, modules, and graphs of
kernel, built-in, transfer and host-function nodes. docs/python.md has the
guide; the C headers have each call's contract.

Shapes are given and reported in NumPy's (row-major) order; kdag itself is
column-major, so a C-contiguous array of shape (a, b) is a compact kdag
tensor of dimensions (b, a), as DLPack import does.
"""
import contextlib
import ctypes

import numpy as _np

from . import _capi as _c
from ._capi import lib as _lib

__all__ = ["KdagError", "build_cubin", "Session", "Tensor", "Graph", "Module", "Function", "Sink", "Ticket", "In", "Out",
           "InOut", "i32", "i64", "u32", "u64", "f32", "f64", "version", "Comm", "NO_PEER"]


def version():
    """The loaded libkdag's version, "0.2.0"."""
    return _c.kd_version_string().decode()


class KdagError(RuntimeError):
    """A kdag call failed. status is the kd_status code (an int), name its
    name ("KD_ERR_INVALID_ARGUMENT"), and the message kdag's, naming the
    call, the argument and the node."""

    def __init__(self, status, message):
        self.status = int(status)
        self.name = _c.kd_status_name(self.status).decode()
        super().__init__(f"{self.name}: {message}")


_RELEASED = 12  # KD_ERR_RELEASED


def _check(status):
    if status:
        raise KdagError(status, (_c.kd_last_error() or b"").decode(errors="replace"))


# kd_dtype by NumPy dtype. bfloat16 has no NumPy dtype: it comes through
# DLPack only.
_DTYPES = {_np.dtype(_np.float32): 0, _np.dtype(_np.float64): 1, _np.dtype(_np.int32): 2, _np.dtype(_np.int64): 3,
           _np.dtype(_np.uint8): 4, _np.dtype(_np.uint32): 5, _np.dtype(_np.uint64): 6,
           _np.dtype(_np.complex64): 7, _np.dtype(_np.complex128): 8, _np.dtype(_np.float16): 9,
           _np.dtype(_np.int8): 11}
_NP_OF = {v: k for k, v in _DTYPES.items()}
_BACKENDS = {"auto": 0, "cuda": 1, "host": 2}
_MODES = {"auto": 0, "eager": 1, "graph": 2}
_FLAGS = {"poison": 1, "verbose": 2, "host_jitter": 4, "debug_nodes": 8, "no_pdl": 16}


def _kd_dtype(dtype):
    try:
        return _DTYPES[_np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"kdag has no dtype for {dtype!r}") from None


class Session:
    """A kdag session: one device (or the host), its stream and memory.

    backend: "auto" (CUDA when a device is usable, else HOST), "cuda" or
    "host". exec_mode: "auto", "eager" or "graph". flags: names of
    KD_SESSION_* bits ("poison", "verbose", "debug_nodes", "no_pdl").
    Use it as a context manager; close() waits for its work and frees it,
    and every object of it raises KdagError (KD_ERR_RELEASED) after.
    """

    def __init__(self, backend="auto", exec_mode="auto", device=0, flags=(), trace_path=None):
        self._h = None
        o = _c.SessionOptions()
        _c.kd_session_options_init(ctypes.byref(o))
        try:
            o.backend = _BACKENDS[backend]
            o.exec_mode = _MODES[exec_mode]
            for f in flags:
                o.flags |= _FLAGS[f]
        except KeyError as e:
            raise ValueError(f"kdag.Session: unknown option {e.args[0]!r}") from None
        o.device_ordinal = device
        if trace_path is not None:
            self._trace = trace_path.encode()
            o.trace_path = self._trace
        h = ctypes.c_void_p()
        _check(_c.kd_session_create(ctypes.byref(o), ctypes.byref(h)))
        self._h = h

    def _handle(self):
        if self._h is None:
            raise KdagError(_RELEASED, "the session is closed")
        return self._h

    @property
    def closed(self):
        return self._h is None

    def close(self):
        """Waits for the session's work, then frees it. Idempotent."""
        if self._h is not None:
            h, self._h = self._h, None
            _c.kd_session_destroy(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    @property
    def backend(self):
        """"cuda" or "host"."""
        return "host" if _c.kd_session_backend(self._handle()) == 2 else "cuda"

    @property
    def backend_reason(self):
        """Why AUTO chose HOST ("" otherwise)."""
        r = _c.kd_session_backend_reason(self._handle())
        return r.decode() if r else ""

    def device_info(self):
        """The device's description, a dict (CUDA sessions)."""
        d = _c.DeviceInfo()
        _check(_c.kd_session_device_info(self._handle(), ctypes.byref(d)))
        return {f: (getattr(d, f).decode() if isinstance(getattr(d, f), bytes) else getattr(d, f))
                for f, _ in d._fields_}

    def stats(self):
        """kd_session_stats as a dict."""
        s = _c.SessionStats()
        _check(_c.kd_session_stats_get(self._handle(), ctypes.byref(s)))
        return {f: getattr(s, f) for f in _c.STATS_FIELDS}

    # ---- tensors --------------------------------------------------------

    def empty(self, shape, dtype=_np.float32):
        """An uninitialised tensor of shape (NumPy order) and dtype."""
        return Tensor._create(self, tuple(shape), _np.dtype(dtype), None)

    def asarray(self, array):
        """A tensor holding a copy of array (any NumPy array-like)."""
        a = _np.ascontiguousarray(array)
        return Tensor._create(self, a.shape, a.dtype, a)

    def from_dlpack(self, x):
        """A tensor sharing x's memory (zero-copy), from any object with
        __dlpack__ (NumPy on HOST sessions; CuPy, PyTorch, JAX on CUDA
        sessions). A strided x becomes a view. On a CUDA session kdag
        gives the producer its stream, and the producer orders its pending
        work on x before kdag's (the array API's protocol)."""
        return Tensor._from_dlpack(self, x, self.stream if self.backend == "cuda" else None)

    @property
    def stream(self):
        """The session's CUstream, as an int (CUDA sessions): for
        torch.cuda.ExternalStream or cupy.cuda.ExternalStream, to order
        other work with kdag's. Never destroy it."""
        if getattr(self, "_stream", None) is None:
            got = ctypes.c_void_p()

            def body(raw, user):
                return _c.kd_raw_stream(raw, ctypes.byref(got))

            _check(_c.kd_with_raw(self._handle(), b"kdag.Session.stream", _c.RAW_FN(body), None))
            self._stream = got.value or 0
        return self._stream

    # ---- modules and graphs ---------------------------------------------

    def module(self, ptx=None, image=None, source=None, options=None, arch=None, cache=False):
        """A module from PTX text, a CUBIN or fatbin image (bytes), or CUDA C
        source compiled with NVRTC (options: a list of NVRTC flags; arch,
        e.g. "sm_90", default the device's). cache=True builds the source
        through kdag's module cache (build_cubin), so a later process
        loads the CUBIN from disk instead of compiling again."""
        if cache and source is not None:
            if arch is None:
                d = self.device_info()
                arch = f"sm_{d['cc_major']}{d['cc_minor']}"
            image, _ = build_cubin(source, arch, options)
            source = options = None
        return Module(self, ptx=ptx, image=image, source=source, options=options, arch=arch)

    def graph(self, name=None, exec_mode=None):
        """A new graph of this session."""
        return Graph(self, name, exec_mode)

    def reap(self):
        """Retires completed submissions; returns how many are still in flight."""
        n = ctypes.c_uint32()
        _check(_c.kd_session_reap(self._handle(), ctypes.byref(n)))
        return n.value

    def trim(self):
        """Releases deferred modules and idle staging (waits for the device)."""
        _check(_c.kd_session_trim(self._handle()))


_caches = {}


def build_cubin(source, arch, options=None, cache_dir=None):
    """Compiles CUDA C source for arch ("sm_90") into a CUBIN through kdag's
    module cache (NVRTC -dlto, then nvJitLink), returning (bytes, origin):
    origin is "compiled", "memory" or "disk". cache_dir: the cache's
    folder (None: $KDAG_CACHE_DIR, else the user's cache folder; "": memory
    only). Needs no GPU."""
    key = cache_dir
    if key not in _caches:
        h = ctypes.c_void_p()
        _check(_c.kd_cubin_cache_create(None if cache_dir is None else cache_dir.encode(), ctypes.byref(h)))
        _caches[key] = h
    r = _c.BuildRecipe()
    _c.kd_build_recipe_init(ctypes.byref(r))
    src = source.encode() if isinstance(source, str) else bytes(source)
    r.source = src
    r.nvrtc.arch = arch.encode()
    flags = [f.encode() for f in (options or [])]
    arr = (ctypes.c_char_p * max(1, len(flags)))(*flags)
    r.nvrtc.extra_flags = arr
    r.nvrtc.extra_flag_count = len(flags)
    binary, report = ctypes.c_void_p(), _c.BuildReport()
    _check(_c.kd_build_cubin(_caches[key], ctypes.byref(r), ctypes.byref(binary), ctypes.byref(report)))
    try:
        data = ctypes.string_at(_c.kd_binary_data(binary), _c.kd_binary_size(binary))
    finally:
        _c.kd_binary_destroy(binary)
    return data, ("compiled", "memory", "disk")[report.origin]


# ---- DLPack capsules ---------------------------------------------------------

_capsule = ctypes.pythonapi
_capsule.PyCapsule_GetPointer.restype = ctypes.c_void_p
_capsule.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule.PyCapsule_IsValid.restype = ctypes.c_int
_capsule.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule.PyCapsule_SetName.restype = ctypes.c_int
_capsule.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule.PyCapsule_New.restype = ctypes.py_object
_capsule.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
# The destructor gets the capsule as a raw pointer: these take it so.
_capsule_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)(("PyCapsule_GetName", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_DLPACK_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# A capsule keeps the pointer to its name, never a copy: the names must
# outlive every capsule, so they are these module constants.
_NAMES = {b"dltensor": ctypes.c_char_p(b"dltensor"), b"dltensor_versioned": ctypes.c_char_p(b"dltensor_versioned")}
_USED = {b"dltensor": ctypes.c_char_p(b"used_dltensor"),
         b"dltensor_versioned": ctypes.c_char_p(b"used_dltensor_versioned")}


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    """A capsule nobody consumed still owns its tensor (DLPack's rule): its
    deleter runs here. A consumed one was renamed "used_..."."""
    name = _capsule_name(capsule)
    if name not in (b"dltensor", b"dltensor_versioned"):
        return
    managed = _capsule_pointer(capsule, name)
    if not managed:
        return
    # DLManagedTensorVersioned: {DLPackVersion version (8 bytes); void *manager_ctx; deleter; ...};
    # DLManagedTensor: {DLTensor dl_tensor (48 bytes); void *manager_ctx; deleter}.
    offset = 16 if name == b"dltensor_versioned" else 56
    fn = ctypes.c_void_p.from_address(managed + offset).value
    if fn:
        _DLPACK_DELETER(fn)(managed)


def _dims(shape):
    """NumPy-order shape -> kdag's column-major dimensions."""
    return tuple(reversed(shape))


class Tensor:
    """A kdag tensor (or a view of one), owned by this object: released when
    it is garbage collected or release() is called, once kdag's work on it
    has completed. shape and dtype are NumPy's."""

    def __init__(self):
        raise TypeError("tensors come from Session.empty, Session.asarray or Session.from_dlpack")

    @classmethod
    def _wrap(cls, session, handle, shape, dtype, view=None, parent=None):
        t = object.__new__(cls)
        t._session, t._t, t.shape, t.dtype, t._view = session, handle, tuple(shape), dtype, view
        t._parent = parent  # a view (t[...]) holds its tensor's object, and owns no handle
        return t

    @classmethod
    def _create(cls, session, shape, dtype, array):
        kd = _kd_dtype(dtype)
        d = _c.TensorDesc()
        d.dtype = kd
        d.rank = len(shape)
        if d.rank > _c.MAX_RANK:
            raise ValueError(f"kdag tensors have at most {_c.MAX_RANK} dimensions, not {d.rank}")
        for i, n in enumerate(_dims(shape)):
            d.shape[i] = n
        t = _c.Tensor()
        h = session._handle()
        if array is None:
            _check(_c.kd_tensor_create(h, ctypes.byref(d), ctypes.byref(t)))
        else:
            _check(_c.kd_tensor_from_host(h, ctypes.byref(d), array.ctypes.data, array.nbytes, ctypes.byref(t)))
        return cls._wrap(session, t, shape, _np.dtype(dtype) if kd in _NP_OF else None)

    @classmethod
    def _from_dlpack(cls, session, x, stream):
        h = session._handle()
        kwargs = {"stream": stream} if stream is not None else {}
        try:
            capsule = x.__dlpack__(max_version=(1, 0), **kwargs)
        except TypeError:  # a producer before the array API's max_version
            capsule = x.__dlpack__(**kwargs)
        versioned = bool(_capsule.PyCapsule_IsValid(capsule, b"dltensor_versioned"))
        name = b"dltensor_versioned" if versioned else b"dltensor"
        managed = _capsule.PyCapsule_GetPointer(capsule, name)
        t, v = _c.Tensor(), _c.View()
        st = _c.kd_tensor_from_dlpack(h, managed, 0 if versioned else 1, None, ctypes.byref(t), ctypes.byref(v))
        if st == 30:  # KD_ERR_VERSION_MISMATCH: kdag has called the deleter, as DLPack asks of a consumer
            _capsule.PyCapsule_SetName(capsule, _USED[name])
        _check(st)
        _capsule.PyCapsule_SetName(capsule, _USED[name])  # consumed: kdag calls the deleter
        desc = _c.TensorDesc()
        _check(_c.kd_tensor_info(h, t, ctypes.byref(desc)))
        shape = tuple(getattr(x, "shape", ()))
        dtype = _NP_OF.get(desc.dtype)
        whole = _c.View()
        _check(_c.kd_view_whole(h, t, ctypes.byref(whole)))
        strided = v.rank != whole.rank or v.offset != 0 or any(
            v.shape[i] != whole.shape[i] or v.strides[i] != whole.strides[i] for i in range(v.rank))
        return cls._wrap(session, t, shape, dtype, v if strided else None)  # owns t

    def _handle(self):
        self._session._handle()
        if self._t is None:
            raise KdagError(_RELEASED, "the tensor was released")
        return self._t

    def _whole(self, op):
        """The handle of a tensor that is not a view, for calls that take a whole tensor."""
        if self._parent is not None or self._view is not None:
            raise KdagError(9, f"{op}: a view (strided, or part of a tensor); this call takes a whole compact "
                               "tensor: copy the view into one first (Graph.copy)")
        return self._handle()

    def _kview(self):
        """This tensor as a kd_view: the whole tensor, or the DLPack view."""
        if self._view is not None:
            self._handle()
            return self._view
        v = _c.View()
        v.tensor = self._handle()
        v.rank = -1
        return v

    def release(self):
        """Drops this handle now (kdag keeps the memory until its work on it
        completes). On a view (t[...]) it drops the view alone."""
        if self._t is not None and self._parent is None and not self._session.closed:
            _c.kd_tensor_release(self._session._handle(), self._t)
        self._t = None

    def _layout(self):
        """(offset, shape, strides) in elements, NumPy order."""
        if self._view is None:
            strides, acc = [], 1
            for n in reversed(self.shape):
                strides.append(acc)
                acc *= n
            return 0, list(self.shape), strides[::-1]
        v, r = self._view, self._view.rank
        return v.offset, [v.shape[r - 1 - i] for i in range(r)], [v.strides[r - 1 - i] for i in range(r)]

    def __getitem__(self, key):
        """A view: basic indexing in NumPy order (integers, and slices with
        positive steps), no copy. It shares this tensor's memory and keeps
        this object alive; nodes take it wherever they take a tensor."""
        self._handle()
        key = key if isinstance(key, tuple) else (key,)
        off, shape, strides = self._layout()
        if len(key) > len(shape):
            raise IndexError(f"{len(key)} indices for a tensor of {len(shape)} dimensions")
        new_shape, new_strides = [], []
        for axis, (n, st) in enumerate(zip(shape, strides)):
            k = key[axis] if axis < len(key) else slice(None)
            if isinstance(k, (int, _np.integer)):
                k = int(k) + (n if k < 0 else 0)
                if not 0 <= k < n:
                    raise IndexError(f"index {key[axis]} is out of bounds for axis {axis} with size {n}")
                off += k * st
            elif isinstance(k, slice):
                start, stop, step = k.indices(n)
                if step <= 0:
                    raise ValueError("kdag views take positive steps only")
                off += start * st
                new_shape.append(len(range(start, stop, step)))
                new_strides.append(st * step)
            else:
                raise TypeError(f"kdag views take integers and slices, not {type(k).__name__}")
        if len(new_shape) > _c.MAX_RANK:
            raise ValueError(f"kdag views have at most {_c.MAX_RANK} dimensions")
        v = _c.View()
        v.tensor = self._t
        v.rank = len(new_shape)
        v.offset = off
        for i in range(v.rank):
            v.shape[i] = new_shape[v.rank - 1 - i]
            v.strides[i] = new_strides[v.rank - 1 - i]
        return Tensor._wrap(self._session, self._t, tuple(new_shape), self.dtype, v, self._parent or self)

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass

    def numpy(self):
        """A copy of the tensor's contents (a host wait)."""
        t = self._whole("Tensor.numpy")
        if self.dtype is None:
            raise TypeError("Tensor.numpy: NumPy has no type for this tensor's dtype")
        out = _np.empty(self.shape, self.dtype)
        _check(_c.kd_tensor_download(self._session._handle(), t, out.ctypes.data, out.nbytes))
        return out

    def upload(self, array):
        """Copies array (same shape and dtype) into the tensor, in order with submitted work."""
        a = _np.ascontiguousarray(array, dtype=self.dtype)
        if a.shape != self.shape:
            raise ValueError(f"Tensor.upload: shape {a.shape}, the tensor's is {self.shape}")
        _check(_c.kd_tensor_upload(self._session._handle(), self._whole("Tensor.upload"), a.ctypes.data, a.nbytes))

    def __dlpack_device__(self):
        if self._session.backend == "host":
            return (1, 0)  # kDLCPU
        return (2, self._session.device_info()["ordinal"])  # kDLCUDA

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        """Exports the tensor without a copy (array API standard). On a CUDA
        session the consumer's stream (None: the legacy default stream)
        waits on the device for the work kdag has enqueued so far; a HOST
        session's export waits for its submissions."""
        if copy:
            raise BufferError("kdag exports without a copy; copy=True is not supported")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"kdag cannot export to device {tuple(dl_device)}")
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        h = self._session._handle()
        t = self._whole("Tensor.__dlpack__")
        managed = ctypes.c_void_p()
        if self._session.backend == "host":
            _check(_c.kd_tensor_to_dlpack(h, t, 0 if versioned else 1, None, ctypes.byref(managed)))
        else:
            event = ctypes.c_void_p()
            _check(_c.kd_tensor_to_dlpack(h, t, 0 if versioned else 1, ctypes.byref(event), ctypes.byref(managed)))
            _order_consumer(event.value, stream)
        name = b"dltensor_versioned" if versioned else b"dltensor"
        return _capsule.PyCapsule_New(managed.value, _NAMES[name], ctypes.cast(_capsule_destructor, ctypes.c_void_p))

    def __repr__(self):
        return f"kdag.Tensor(shape={self.shape}, dtype={self.dtype})"


def _order_consumer(event, stream):
    """Orders a DLPack consumer's stream after kdag's work (event, recorded
    after it), then destroys the event. stream as the array API has it for
    CUDA: None or 1 the legacy default stream, 2 the per-thread one, another
    int a CUstream; -1: no ordering (the consumer's own affair)."""
    from . import _cuda
    cu = _cuda.driver()
    try:
        if stream != -1:
            handle = 1 if stream is None else stream  # CU_STREAM_LEGACY is 0x1, CU_STREAM_PER_THREAD 0x2
            _cuda.check(cu.cuStreamWaitEvent(handle, event, 0), "cuStreamWaitEvent")
    finally:
        cu.cuEventDestroy(event)


# ---- kernel arguments ------------------------------------------------------------

class _Access:
    access = 0

    def __init__(self, tensor):
        if not isinstance(tensor, Tensor):
            raise TypeError(f"{type(self).__name__} takes a kdag.Tensor, not {type(tensor).__name__}")
        self.tensor = tensor


class In(_Access):
    """A kernel argument the kernel reads (its device pointer)."""
    access = 1


class Out(_Access):
    """A kernel argument the kernel writes whole (reads none of)."""
    access = 2


class InOut(_Access):
    """A kernel argument the kernel reads and writes."""
    access = 3


class _Scalar:
    def __init__(self, value):
        self.value = value


class i32(_Scalar):
    kind, field = 2, "i32"


class i64(_Scalar):
    kind, field = 3, "i64"


class u32(_Scalar):
    kind, field = 4, "u32"


class u64(_Scalar):
    kind, field = 5, "u64"


class f32(_Scalar):
    kind, field = 6, "f32"


class f64(_Scalar):
    kind, field = 7, "f64"


_NP_SCALARS = {_np.dtype(_np.int32): i32, _np.dtype(_np.int64): i64, _np.dtype(_np.uint32): u32,
               _np.dtype(_np.uint64): u64, _np.dtype(_np.float32): f32, _np.dtype(_np.float64): f64}


def _garg(a, position):
    g = _c.GArg()
    if isinstance(a, Tensor):
        raise TypeError(f"argument {position}: a tensor must say how the kernel uses it: kdag.In, kdag.Out or "
                        "kdag.InOut")
    if isinstance(a, _Access):
        g.is_tensor = 1
        g.access = a.access
        g.view = a.tensor._kview()
        return g
    if isinstance(a, _np.generic) and a.dtype in _NP_SCALARS:
        a = _NP_SCALARS[a.dtype](a.item())
    if not isinstance(a, _Scalar):
        raise TypeError(f"argument {position}: {a!r} has no C type; pass kdag.i32(...), kdag.f32(...), ... "
                        "or a NumPy scalar (numpy.float32(...))")
    g.access = 1
    g.view.rank = -1
    g.value.kind = a.kind
    setattr(g.value.v, a.field, a.value)
    return g


# ---- modules ------------------------------------------------------------------------

class Function:
    """A kernel of a Module (Module.function)."""

    def __init__(self, module, name, fn):
        self.module, self.name, self._fn = module, name, fn

    def __repr__(self):
        return f"kdag.Function({self.name!r})"


class Module:
    """A loaded module (PTX, CUBIN, fatbin, or CUDA C compiled with NVRTC)."""

    def __init__(self, session, ptx=None, image=None, source=None, options=None, arch=None):
        if sum(x is not None for x in (ptx, image, source)) != 1:
            raise ValueError("kdag.Module: give exactly one of ptx, image, source")
        self._session = session
        out = _c.Module()
        err = []

        def body(raw, user):
            try:
                if ptx is not None:
                    text = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
                    text = text if text.endswith(b"\0") else text + b"\0"
                    return _c.kd_raw_load_ptx(raw, text, len(text), ctypes.byref(out))
                if image is not None:
                    data = bytes(image)
                    return _c.kd_raw_load_image(raw, data, len(data), ctypes.byref(out))
                o = _c.NvrtcOptions()
                _c.kd_nvrtc_options_init(ctypes.byref(o))
                keep = [f.encode() for f in (options or [])]
                flags = (ctypes.c_char_p * max(1, len(keep)))(*keep)
                o.extra_flags = flags
                o.extra_flag_count = len(keep)
                if arch:
                    o.arch = arch.encode()
                src = source.encode() if isinstance(source, str) else bytes(source)
                return _c.kd_raw_compile_nvrtc(raw, src, ctypes.byref(o), ctypes.byref(out))
            except Exception as e:  # never across the C frame
                err.append(e)
                return 1

        cb = _c.RAW_FN(body)
        st = _c.kd_with_raw(session._handle(), b"kdag.Module", cb, None)
        if err:
            raise err[0]
        _check(st)
        self._m = out

    def function(self, name):
        """The kernel called name (extern "C")."""
        f = _c.Function()
        _check(_c.kd_module_function(self._session._handle(), self._m, name.encode(), ctypes.byref(f)))
        return Function(self, name, f)

    def release(self):
        if self._m is not None and not self._session.closed:
            _c.kd_module_release(self._session._handle(), self._m)
        self._m = None

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass


# ---- graphs -------------------------------------------------------------------------

class Ticket:
    """A submission (Graph.submit)."""

    def __init__(self, session, t):
        self._session, self._t = session, t

    def done(self):
        """Whether the submission has completed (never waits)."""
        d = ctypes.c_int()
        _check(_c.kd_ticket_done(self._session._handle(), self._t, ctypes.byref(d)))
        return bool(d.value)


class Sink:
    """A host sink: each submission copies a tensor into array; wait() waits
    for the latest submission's copy and returns array."""

    def __init__(self, graph, handle, array):
        self._graph, self._h, self.array = graph, handle, array

    def wait(self):
        self._graph._handle()
        _check(_c.kd_sink_wait(self._h))
        return self.array


def _accesses(reads, writes, updates):
    """A host or foreign node's accesses: reads, then writes, then updates."""
    kinds = [(In, t) for t in reads] + [(Out, t) for t in writes] + [(InOut, t) for t in updates]
    return [_garg(kind(t), i) for i, (kind, t) in enumerate(kinds)]


class _ForeignCall:
    """What a foreign node's callback gets (Graph.foreign)."""

    def __init__(self, stream, spans, workspace):
        self.stream, self.spans, self.workspace = stream, spans, workspace


NO_PEER = -1  # Graph.send_recv: that side of the exchange is left out
_REDUCE = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}


class _SessionObject:
    """An object of a session that a C call destroys (_destroy): closed
    explicitly, by a with block, or when collected, and never after its
    session (the session's close frees it)."""
    _what = "object"

    def _handle(self):
        self._session._handle()
        if self._h is None:
            raise KdagError(_RELEASED, f"the {self._what} was closed")
        return self._h

    def close(self):
        if self._h is not None and not self._session.closed:
            type(self)._destroy(self._h)
        self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Comm(_SessionObject):
    """One rank of a communicator (kdag/comm.h, docs/multi-gpu.md): NCCL's
    on a CUDA session, shared memory between the sessions or processes of
    one machine on HOST. Rank 0 makes an id (Comm.new_id), every rank
    joins with it; or Comm.create_all joins the sessions of this process
    at once. Close it before its session: close() drops this reference,
    and graphs holding its collectives keep it."""
    _what = "communicator"
    _destroy = staticmethod(lambda h: _c.kd_comm_destroy(h))

    def __init__(self, session, comm_id, nranks, rank):
        cid = _c.CommId.from_buffer_copy(bytes(comm_id))
        h = ctypes.c_void_p()
        _check(_c.kd_comm_create(session._handle(), ctypes.byref(cid), int(nranks), int(rank), ctypes.byref(h)))
        self._init(session, h)

    def _init(self, session, h):
        self._session, self._h = session, h
        r, n = ctypes.c_int(), ctypes.c_int()
        _check(_c.kd_comm_info(h, ctypes.byref(r), ctypes.byref(n)))
        self.rank, self.nranks = r.value, n.value

    @staticmethod
    def new_id(session):
        """A new communicator id (bytes) for rank 0 to hand to the others."""
        cid = _c.CommId()
        _check(_c.kd_comm_id_create(session._handle(), ctypes.byref(cid)))
        return bytes(cid.bytes)

    @classmethod
    def create_all(cls, sessions):
        """The sessions of this process as ranks 0, 1, ... of one
        communicator, joined at once. On CUDA each rank's graphs must then
        be submitted from a thread of its own."""
        n = len(sessions)
        hs = (ctypes.c_void_p * n)(*[s._handle() for s in sessions])
        out = (ctypes.c_void_p * n)()
        _check(_c.kd_comm_create_all(hs, n, out))
        comms = []
        for s, h in zip(sessions, out):
            c = cls.__new__(cls)
            c._init(s, ctypes.c_void_p(h))
            comms.append(c)
        return comms



class Graph(_SessionObject):
    """A graph of nodes; the order comes from the accesses they declare."""
    _what = "graph"
    _destroy = staticmethod(lambda h: _c.kd_graph_destroy(h))

    def __init__(self, session, name=None, exec_mode=None):
        self._session = session
        h = ctypes.c_void_p()
        _check(_c.kd_graph_create(session._handle(), ctypes.byref(h)))
        self._h = h
        self._keep = []  # what the nodes point at: host buffers, callbacks
        self._foreign_error = None
        if name:
            _check(_c.kd_graph_set_name(h, name.encode()))
        if exec_mode:
            _check(_c.kd_graph_set_exec_mode(h, _MODES[exec_mode]))

    @staticmethod
    def _node(name, default):
        return (name or default).encode()

    def kernel(self, fn, grid, block, args, shared=0, pdl=False, name=None):
        """A kernel node: fn (a Function) over grid and block (ints or
        tuples of up to 3), args in the kernel's order (In/Out/InOut
        tensors, kdag.i32(...) and friends, or NumPy scalars). pdl: the
        kernel waits for its grid dependency (docs/pdl.md). Returns the
        node's index."""
        cfg = _c.LaunchConfig()
        for field, dims in (("grid", grid), ("block", block)):
            dims = (dims,) if isinstance(dims, int) else tuple(dims)
            arr = getattr(cfg, field)
            for i in range(3):
                arr[i] = dims[i] if i < len(dims) else 1
        cfg.shared_bytes = shared
        cfg.flags = 1 if pdl else 0
        gargs = (_c.GArg * max(1, len(args)))(*[_garg(a, i) for i, a in enumerate(args)])
        node = ctypes.c_uint32()
        _check(_c.kd_graph_kernel(self._handle(), self._node(name, fn.name), fn._fn, ctypes.byref(cfg), gargs,
                                  len(args), ctypes.byref(node)))
        return node.value

    def fill(self, dst, value, name=None):
        if dst.dtype is None:
            raise TypeError("Graph.fill: NumPy has no type for this tensor's dtype")
        v = _np.array(value, dtype=dst.dtype)
        node = ctypes.c_uint32()
        _check(_c.kd_graph_op_fill(self._handle(), self._node(name, "fill"), dst._kview(), v.ctypes.data,
                                   ctypes.byref(node)))
        return node.value

    def copy(self, dst, src, name=None):
        node = ctypes.c_uint32()
        _check(_c.kd_graph_op_copy(self._handle(), self._node(name, "copy"), dst._kview(), src._kview(),
                                   ctypes.byref(node)))
        return node.value

    def transpose(self, dst, src, name=None):
        node = ctypes.c_uint32()
        _check(_c.kd_graph_op_transpose(self._handle(), self._node(name, "transpose"), dst._kview(), src._kview(),
                                        ctypes.byref(node)))
        return node.value

    def add(self, dst, a, b, name=None):
        node = ctypes.c_uint32()
        _check(_c.kd_graph_op_add(self._handle(), self._node(name, "add"), dst._kview(), a._kview(), b._kview(),
                                  ctypes.byref(node)))
        return node.value

    def axpy(self, y, x, alpha, name=None):
        node = ctypes.c_uint32()
        _check(_c.kd_graph_op_axpy(self._handle(), self._node(name, "axpy"), y._kview(), x._kview(), float(alpha),
                                   ctypes.byref(node)))
        return node.value

    def scale(self, y, alpha, name=None):
        node = ctypes.c_uint32()
        _check(_c.kd_graph_op_scale(self._handle(), self._node(name, "scale"), y._kview(), float(alpha),
                                    ctypes.byref(node)))
        return node.value

    def sum(self, dst, x, name=None):
        node = ctypes.c_uint32()
        _check(_c.kd_graph_op_sum(self._handle(), self._node(name, "sum"), dst._kview(), x._kview(),
                                  ctypes.byref(node)))
        return node.value

    def upload(self, dst, array, name=None):
        """Copies array into dst at every submission; array is read at each
        submit (it may change between them) and kept alive by the graph."""
        a = _np.ascontiguousarray(array, dtype=dst.dtype)
        if a is not array:
            raise ValueError("Graph.upload: array must be a C-contiguous NumPy array of the tensor's dtype (it "
                             "is read at every submission)")
        self._keep.append(a)
        node = ctypes.c_uint32()
        _check(_c.kd_graph_upload(self._handle(), self._node(name, "upload"), dst._whole("Graph.upload"), a.ctypes.data,
                                  a.nbytes,
                                  ctypes.byref(node)))
        return node.value

    def sink(self, src, name=None):
        """A host sink of src: returns a Sink whose array each submission fills."""
        out = _np.empty(src.shape, src.dtype)
        self._keep.append(out)
        h = ctypes.c_void_p()
        _check(_c.kd_graph_sink(self._handle(), self._node(name, "sink"), src._whole("Graph.sink"), out.ctypes.data,
                                out.nbytes,
                                ctypes.byref(h)))
        return Sink(self, h, out)

    def host(self, fn, reads=(), writes=(), updates=(), name=None):
        """A host-function node: fn() runs in order with the graph's work (on
        a HOST worker thread, or the CUDA driver's callback thread), holding
        the GIL. It must not call kdag or CUDA; an exception it raises is
        printed and dropped. reads, writes and updates are the tensors it
        uses: read, written whole (read none), read and written."""

        def call(user):
            try:
                fn()
            except Exception:  # nothing to return it to
                import traceback
                traceback.print_exc()

        cb = _c.HOST_FN(call)
        self._keep.append(cb)
        accesses = _accesses(reads, writes, updates)
        arr = (_c.GArg * max(1, len(accesses)))(*accesses)
        node = ctypes.c_uint32()
        _check(_c.kd_graph_host(self._handle(), self._node(name, "host"), cb, None, arr, len(accesses),
                                ctypes.byref(node)))
        return node.value

    def foreign(self, fn, reads=(), writes=(), updates=(), workspace=0, name=None):
        """A foreign-library node (CUDA sessions): fn(call) enqueues work on
        call.stream (an int, a CUstream: give it to CuPy's ExternalStream or
        torch.cuda.ExternalStream) over call.spans ((device pointer, bytes)
        per tensor: reads, then writes, then updates, as for host) and call.workspace (pointer,
        bytes). It runs inside submit (in GRAPH mode while kdag captures the
        stream into a CUDA graph) and must not call kdag or wait; an
        exception it raises fails the submit, re-raised from it. In GRAPH
        mode, allocating memory inside fn (a CuPy pool growing) breaks the
        capture: allocate before, or pass a workspace."""
        graph = self

        def call(c, user):
            try:
                k = c.contents
                spans = [(k.spans[i].device_ptr, k.spans[i].bytes) for i in range(k.span_count)]
                fn(_ForeignCall(k.stream or 0, spans, (k.workspace, k.workspace_bytes)))
                return 0
            except BaseException as e:  # never across the C frame; submit re-raises it
                graph._foreign_error = e
                return 1  # KD_ERR_INVALID_ARGUMENT: kdag names the node

        cb = _c.FOREIGN_FN(call)
        self._keep.append(cb)
        accesses = _accesses(reads, writes, updates)
        arr = (_c.GArg * max(1, len(accesses)))(*accesses)
        node = ctypes.c_uint32()
        _check(_c.kd_graph_foreign(self._handle(), self._node(name, "foreign"), cb, None, arr, len(accesses), workspace,
                                   None, None, ctypes.byref(node)))
        return node.value

    def all_reduce(self, comm, dst, src, op="sum", name=None):
        """dst = the reduction (sum, prod, max, min, avg) of every rank's src;
        dst may be src (in place)."""
        node = ctypes.c_uint32()
        _check(_c.kd_graph_all_reduce(self._handle(), self._node(name, "all_reduce"), comm._handle(), dst._kview(),
                                      src._kview(), _REDUCE[op], ctypes.byref(node)))
        return node.value

    def reduce_scatter(self, comm, dst, src, op="sum", name=None):
        """dst (n elements) = this rank's part of the reduction of every rank's src (nranks * n)."""
        node = ctypes.c_uint32()
        _check(_c.kd_graph_reduce_scatter(self._handle(), self._node(name, "reduce_scatter"), comm._handle(),
                                          dst._kview(), src._kview(), _REDUCE[op], ctypes.byref(node)))
        return node.value

    def all_gather(self, comm, dst, src, name=None):
        """dst (nranks * n) = every rank's src (n), in rank order."""
        node = ctypes.c_uint32()
        _check(_c.kd_graph_all_gather(self._handle(), self._node(name, "all_gather"), comm._handle(), dst._kview(),
                                      src._kview(), ctypes.byref(node)))
        return node.value

    def broadcast(self, comm, buf, root, name=None):
        """buf of rank root into every other rank's buf."""
        node = ctypes.c_uint32()
        _check(_c.kd_graph_broadcast(self._handle(), self._node(name, "broadcast"), comm._handle(), buf._kview(),
                                     int(root), ctypes.byref(node)))
        return node.value

    def send_recv(self, comm, send=None, to=NO_PEER, recv=None, source=NO_PEER, name=None):
        """send to rank `to` and recv from rank `source` in one step (a halo
        exchange or a ring cannot deadlock); NO_PEER leaves a side out."""
        node = ctypes.c_uint32()
        sv = send._kview() if send is not None else _c.View()
        rv = recv._kview() if recv is not None else _c.View()
        _check(_c.kd_graph_send_recv(self._handle(), self._node(name, "send_recv"), comm._handle(), sv,
                                     to if send is not None else NO_PEER, rv,
                                     source if recv is not None else NO_PEER, ctypes.byref(node)))
        return node.value

    def copy_peer(self, dst, src, name=None):
        """dst = src, a tensor of another CUDA session of this process (the
        same GPU or another), ordered with that session on the device."""
        node = ctypes.c_uint32()
        _check(_c.kd_graph_copy_peer(self._handle(), self._node(name, "copy_peer"), dst._kview(),
                                     src._session._handle(), src._kview(), ctypes.byref(node)))
        return node.value

    @contextlib.contextmanager
    def while_loop(self, condition, max_trips, trips=None, name=None):
        """A loop that runs on the device (docs/loops.md): the nodes added
        in the with block are its body, run while condition (one int32 or
        uint32 element, written before the loop and by the body) is
        nonzero, at most max_trips times. trips (optional, one int32 or
        uint32 element) receives the trips made. Yields the loop's node
        index. An exception in the block leaves the loop open (the graph
        cannot be submitted)."""
        node = ctypes.c_uint32()
        t = trips._whole("Graph.while_loop") if trips is not None else _c.Tensor()
        _check(_c.kd_graph_while_begin(self._handle(), self._node(name, "while"), condition._whole("Graph.while_loop"),
                                       int(max_trips), t, ctypes.byref(node)))
        yield node.value
        _check(_c.kd_graph_end(self._handle(), node.value))

    @contextlib.contextmanager
    def if_(self, condition, name=None):
        """A conditional that runs on the device: the nodes added in the
        with block run once when condition (one int32 or uint32 element,
        written before it) is nonzero. Yields its node index."""
        node = ctypes.c_uint32()
        _check(_c.kd_graph_if_begin(self._handle(), self._node(name, "if"), condition._whole("Graph.if_"),
                                    ctypes.byref(node)))
        yield node.value
        _check(_c.kd_graph_end(self._handle(), node.value))

    def edge(self, before, after):
        """after runs after before (node indices), beyond what the accesses say."""
        _check(_c.kd_graph_edge(self._handle(), before, after))

    def submit(self):
        """Enqueues the graph; returns a Ticket. Never waits for the device
        (a sink's wait does)."""
        t = _c.Ticket()
        self._foreign_error = None
        st = _c.kd_graph_submit(self._handle(), ctypes.byref(t))
        if st and self._foreign_error is not None:
            e, self._foreign_error = self._foreign_error, None
            raise KdagError(st, (_c.kd_last_error() or b"").decode(errors="replace")) from e
        _check(st)
        return Ticket(self._session, t)

    def stats(self):
        s = _c.GraphStats()
        _check(_c.kd_graph_stats_get(self._handle(), ctypes.byref(s)))
        return {f: getattr(s, f) for f, _ in s._fields_}

    def dot(self):
        """The graph in Graphviz DOT."""
        import os
        import tempfile
        libc = ctypes.CDLL(None)
        libc.fopen.restype = ctypes.c_void_p
        libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        libc.fclose.argtypes = [ctypes.c_void_p]
        write = _lib.kd_graph_write_dot
        write.restype = ctypes.c_int
        write.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        fd, path = tempfile.mkstemp(suffix=".dot")
        os.close(fd)
        try:
            f = libc.fopen(path.encode(), b"w")
            st = write(self._handle(), f)
            libc.fclose(f)
            _check(st)
            with open(path) as r:
                return r.read()
        finally:
            os.unlink(path)
