# SPDX-License-Identifier: Apache-2.0
"""The package on a GPU (the GPU lane): PyTorch and CuPy tensors into kdag
and back without a copy, ordered on their streams, and a kernel compiled
with NVRTC from Python. Skipped without a GPU or the framework."""
import os

import numpy as np
import pytest

import kdag


def _gpu_session():
    if os.environ.get("KDAG_CUDA_DRIVER_PATH"):
        pytest.skip("the null driver is loaded, not a GPU")
    try:
        s = kdag.Session(backend="cuda")
    except kdag.KdagError as e:
        if os.environ.get("KDAG_REQUIRE_GPU") == "1":
            raise
        pytest.skip(f"no usable CUDA device: {e}")
    return s


SOURCE = r'''
extern "C" __global__ void axpb(float *y, const float *x, float a, float b, unsigned n) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}
'''


def test_pytorch_tensors_round_trip_without_a_copy():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no GPU")
    with _gpu_session() as s:
        x = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
        t = s.from_dlpack(x)            # torch's stream -> kdag's stream, on the device
        g = s.graph("torch")
        g.scale(t, 2.0)
        g.submit()
        y = torch.from_dlpack(t)        # kdag's work -> torch's current stream
        assert y.data_ptr() == x.data_ptr(), "zero-copy both ways"
        torch.testing.assert_close(y, torch.arange(1 << 20, dtype=torch.float32, device="cuda") * 2)


def test_cupy_and_an_nvrtc_kernel_from_python():
    cp = pytest.importorskip("cupy")
    with _gpu_session() as s:
        fn = s.module(source=SOURCE).function("axpb")
        n = 4096
        x = cp.arange(n, dtype=cp.float32)
        y = cp.zeros(n, dtype=cp.float32)
        tx, ty = s.from_dlpack(x), s.from_dlpack(y)
        g = s.graph("cupy", exec_mode="graph")
        g.kernel(fn, (n + 255) // 256, 256, [kdag.Out(ty), kdag.In(tx), np.float32(3), np.float32(1), kdag.u32(n)],
                 pdl=True)
        g.scale(ty, 0.5)
        for _ in range(3):
            g.submit()
        out = cp.from_dlpack(ty)
        cp.testing.assert_array_equal(out, (3 * cp.arange(n, dtype=cp.float32) + 1) * 0.5)
        assert s.stats()["programmatic_edges"] >= 1


@pytest.mark.parametrize("example", ["jacobi", "add"])
def test_examples_on_the_gpu_match_numpy(capsys, example):
    _gpu_session().close()  # skips without a GPU
    import runpy
    path = os.path.join(os.path.dirname(__file__), "..", "examples", f"{example}.py")
    runpy.run_path(path)["main"](backend="cuda")
    assert f"{example}: ok (cuda" in capsys.readouterr().out


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.filterwarnings("ignore:ExternalStream is deprecated:DeprecationWarning")  # CuPy 14's rename
def test_a_foreign_node_runs_cupy_on_kdags_stream(mode):
    cp = pytest.importorskip("cupy")
    double = cp.ElementwiseKernel("float32 x", "float32 y", "y = 2 * x", "kdag_double")
    double(cp.zeros(1, cp.float32), cp.zeros(1, cp.float32))  # compiled and loaded before any capture
    with _gpu_session() as s:
        n = 1024
        x = s.asarray(np.arange(n, dtype=np.float32))
        y = s.empty((n,))

        def call(c):
            (xp, xb), (yp, yb) = c.spans
            xs = cp.ndarray((n,), cp.float32, cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(xp, xb, None), 0))
            ys = cp.ndarray((n,), cp.float32, cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(yp, yb, None), 0))
            with cp.cuda.ExternalStream(c.stream):   # no allocation: a GRAPH-mode capture must not allocate
                double(xs, ys)

        g = s.graph(exec_mode=mode)
        g.foreign(call, reads=[x], writes=[y], name="cupy double")
        g.scale(y, 0.5)
        out = g.sink(y)
        for _ in range(3):
            g.submit()
            np.testing.assert_array_equal(out.wait(), np.arange(n, dtype=np.float32))


def test_an_all_reduce_of_one_nccl_rank_and_a_copy_between_sessions():
    a = _gpu_session()
    b = kdag.Session(backend="cuda", exec_mode="graph")
    try:
        comm = kdag.Comm(b, kdag.Comm.new_id(b), 1, 0)
    except kdag.KdagError as e:
        if e.name != "KD_ERR_LIBRARY_MISSING" or os.environ.get("KDAG_REQUIRE_GPU") == "1":
            raise
        pytest.skip(f"no NCCL: {e}")
    x = np.arange(1024, dtype=np.float32)
    tx = a.asarray(x)
    ty, tsum = b.empty((1024,)), b.empty((1024,))
    g = b.graph("peer and all-reduce")
    g.copy_peer(ty, tx)             # a's tensor into b, ordered with a on the device
    g.all_reduce(comm, tsum, ty)    # one rank: the sum is the tensor itself
    out = g.sink(tsum)
    for _ in range(2):
        g.submit()
        np.testing.assert_array_equal(out.wait(), x)
    g.close()
    comm.close()
    b.close()
    a.close()
