# SPDX-License-Identifier: Apache-2.0
"""The package on a CUDA session through the null driver (no GPU: kernels
do nothing): modules from PTX, kernel nodes with In/Out/InOut and scalars,
the argument checks kdag makes, exec modes, counters. Skipped when
$KDAG_NULL_DRIVER is not set (ctest sets it)."""
import os

import numpy as np
import pytest

NULL = os.environ.get("KDAG_NULL_DRIVER")
pytestmark = pytest.mark.skipif(not NULL, reason="KDAG_NULL_DRIVER names no null driver")
if NULL:
    os.environ["KDAG_CUDA_DRIVER_PATH"] = NULL

import kdag  # noqa: E402

PTX = """
.version 7.8
.target sm_90
.address_size 64
.visible .entry scale(.param .u64 y, .param .u64 x, .param .f32 a, .param .u32 n)
{
  griddepcontrol.wait;
  ret;
}
"""


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_kernel_nodes_submit_on_a_cuda_session(mode):
    with kdag.Session(backend="cuda", exec_mode=mode) as s:
        assert s.backend == "cuda"
        assert "null driver" in s.device_info()["name"]
        fn = s.module(ptx=PTX).function("scale")
        x = s.asarray(np.ones(256, dtype=np.float32))
        y = s.empty((256,))
        g = s.graph("py kernels")
        g.kernel(fn, 1, 256, [kdag.Out(y), kdag.In(x), np.float32(2), kdag.u32(256)])
        g.kernel(fn, 1, 256, [kdag.InOut(y), kdag.In(x), kdag.f32(3), kdag.u32(256)], pdl=True, name="second")
        sink = g.sink(y)
        for _ in range(3):
            g.submit()
            sink.wait()
        st = s.stats()
        assert st["launches"] == 6 or st["graph_launches"] >= 2
        assert st["programmatic_edges"] >= 1
        assert g.stats()["edges"] >= 2


def test_kdag_checks_the_kernels_arguments():
    with kdag.Session(backend="cuda") as s:
        fn = s.module(ptx=PTX).function("scale")
        x, y = s.asarray(np.ones(4, dtype=np.float32)), s.empty((4,))
        g = s.graph()
        with pytest.raises(kdag.KdagError) as e:
            g.kernel(fn, 1, 4, [kdag.In(x), kdag.In(x)], name="two of four")
        assert e.value.name == "KD_ERR_ARGUMENT_MISMATCH" and "two of four" in str(e.value)
        with pytest.raises(kdag.KdagError) as e:
            g.kernel(fn, 1, 4, [kdag.Out(y), kdag.In(x), np.float64(1), kdag.u32(4)])
        assert e.value.name == "KD_ERR_ARGUMENT_MISMATCH"  # f64 where the kernel takes f32
        with pytest.raises(kdag.KdagError) as e:
            g.kernel(fn, 1, 2048, [kdag.Out(y), kdag.In(x), kdag.f32(1), kdag.u32(4)])
        assert e.value.name == "KD_ERR_LAUNCH_CONFIG"
        with pytest.raises(kdag.KdagError) as e:
            g.kernel(fn, 1, 4, [kdag.Out(x), kdag.In(x), kdag.f32(1), kdag.u32(4)])
        assert e.value.name == "KD_ERR_ALIASING"
        with pytest.raises(kdag.KdagError) as e:
            s.module(ptx=PTX).function("nope")
        assert e.value.name == "KD_ERR_NOT_FOUND"


def test_nvrtc_source_reaches_the_compiler():
    with kdag.Session(backend="cuda") as s:
        with pytest.raises(kdag.KdagError) as e:
            s.module(source='extern "C" __global__ void k() { this is not C++ }')
        assert e.value.name in ("KD_ERR_COMPILE_FAILED", "KD_ERR_LIBRARY_MISSING")


def test_foreign_nodes_get_the_stream_and_spans_and_raise_through_submit():
    with kdag.Session(backend="cuda", exec_mode="eager") as s:
        x, y = s.asarray(np.ones(16, dtype=np.float32)), s.empty((8,), dtype=np.float64)
        seen = []

        def call(c):
            seen.append((c.stream, c.spans, c.workspace))

        g = s.graph()
        g.fill(y, 0.0)
        g.foreign(call, reads=[x], writes=[y], workspace=256, name="library call")
        g.submit()
        assert len(seen) == 1
        stream, spans, (ws, ws_bytes) = seen[0]
        assert stream != 0 and ws != 0 and ws_bytes == 256
        assert [b for _, b in spans] == [64, 64] and all(p for p, _ in spans)

        def fails(c):
            raise RuntimeError("the library refused")

        g2 = s.graph()
        g2.foreign(fails, writes=[y], name="refusing call")
        with pytest.raises(kdag.KdagError) as e:
            g2.submit()
        assert "refusing call" in str(e.value)
        assert isinstance(e.value.__cause__, RuntimeError)


def test_a_module_from_source_through_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KDAG_CACHE_DIR", str(tmp_path))
    src = 'extern "C" __global__ void k(float *x, unsigned n) { if (threadIdx.x < n) x[threadIdx.x] = 1.0f; }'
    with kdag.Session(backend="cuda") as s:
        try:
            fn = s.module(source=src, cache=True).function("k")
        except kdag.KdagError as e:
            if e.name == "KD_ERR_LIBRARY_MISSING":
                pytest.skip(f"no NVRTC or nvJitLink: {e}")
            raise
        x = s.empty((32,))
        g = s.graph()
        g.kernel(fn, 1, 32, [kdag.Out(x), kdag.u32(32)])
        g.submit()
    assert any(tmp_path.iterdir()), "the CUBIN was stored in the cache's folder"
