# SPDX-License-Identifier: Apache-2.0
"""The package on a HOST session: tensors from and to NumPy (copies and
DLPack without a copy), graphs of built-ins, sinks, host-function nodes,
errors, DOT, and objects used after their session has closed."""
import re
import os

import numpy as np
import pytest

import kdag


@pytest.fixture
def s():
    with kdag.Session(backend="host") as session:
        yield session


def test_version_matches_the_package():
    here = os.path.join(os.path.dirname(__file__), "..", "pyproject.toml")
    with open(here) as f:
        want = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
    assert kdag.version() == want


def test_session_is_host_and_a_context_manager():
    with kdag.Session(backend="host", exec_mode="eager") as s:
        assert s.backend == "host"
        assert not s.closed
    assert s.closed
    with pytest.raises(ValueError, match="unknown option 'gpu'"):
        kdag.Session(backend="gpu")


def test_arrays_round_trip_in_numpy_order(s):
    for dtype in (np.float32, np.float64, np.int32, np.int64, np.uint8, np.uint32, np.uint64, np.float16, np.int8,
                  np.complex64):
        a = (np.arange(24).reshape(2, 3, 4) % 7).astype(dtype)
        t = s.asarray(a)
        assert t.shape == (2, 3, 4) and t.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(t.numpy(), a)
    with pytest.raises(TypeError, match="no dtype"):
        s.asarray(np.zeros(3, dtype=np.float128 if hasattr(np, "float128") else object))


def test_a_graph_of_built_ins_matches_numpy(s):
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    tx, ty, tz, tsum = s.asarray(x), s.empty((1000,)), s.empty((1000,)), s.empty((1,))
    g = s.graph("built-ins")
    g.fill(ty, 0.5)
    g.axpy(ty, tx, 2.0)          # y = 2x + 0.5
    g.add(tz, ty, tx)            # z = y + x
    g.scale(tz, 0.25)
    g.sum(tsum, tz)
    z, total = g.sink(tz), g.sink(tsum)
    for _ in range(3):
        g.submit()
        got = z.wait()
    want = ((np.float32(2) * x + np.float32(0.5)) + x) * np.float32(0.25)
    np.testing.assert_array_equal(got, want)
    assert abs(total.wait()[0] - want.sum(dtype=np.float64)) < 1e-2
    st = g.stats()
    assert st["nodes"] == 7 and st["edges"] >= 5
    assert s.stats()["submissions"] == 3


def test_dlpack_import_shares_numpy_memory(s):
    a = np.zeros((4, 5), dtype=np.float64)
    t = s.from_dlpack(a)
    assert t.shape == (4, 5)
    g = s.graph()
    g.fill(t, 3.0)
    sink = g.sink(t)
    g.submit()
    sink.wait()
    assert (a == 3.0).all(), "kdag wrote the NumPy array's own memory"


def test_dlpack_import_of_a_strided_array_is_a_view(s):
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    col = a[:, 1]                 # stride 5 elements
    t = s.from_dlpack(col)
    out = s.empty((4,))
    g = s.graph()
    g.copy(out, t)                # canonicalize
    sink = g.sink(out)
    g.submit()
    np.testing.assert_array_equal(sink.wait(), col)
    with pytest.raises(kdag.KdagError, match="strided"):
        t.numpy()


def test_numpy_reads_a_kdag_tensor_without_a_copy(s):
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = s.asarray(a)
    b = np.from_dlpack(t)
    np.testing.assert_array_equal(b, a)
    g = s.graph()
    g.fill(t, 7)
    g.sink(t)
    g.submit()
    s.reap()
    t.numpy()  # a host wait: the fill is done
    assert (b == 7).all(), "the export is the tensor's memory"
    del b


def test_host_function_nodes_run_in_order(s):
    seen = []
    t = s.asarray(np.zeros(8, dtype=np.float32))
    g = s.graph()
    g.fill(t, 1.0)
    g.host(lambda: seen.append("after fill"), reads=[t])
    g.scale(t, 2.0)   # WAR after the host node's read
    sink = g.sink(t)
    g.submit()
    np.testing.assert_array_equal(sink.wait(), np.full(8, 2.0, np.float32))
    assert seen == ["after fill"]


def test_errors_carry_the_status_and_kdags_message(s):
    a, b = s.empty((3,)), s.empty((4,))
    g = s.graph()
    g.fill(a, 1.0)
    g.fill(b, 1.0)
    with pytest.raises(kdag.KdagError) as e:
        g.add(a, a, b, name="mismatched add")
    assert e.value.name.startswith("KD_ERR_")
    assert "mismatched add" in str(e.value)
    with pytest.raises(kdag.KdagError) as e:
        s.module(ptx=".version 8.0\n.target sm_90\n")
    assert e.value.name == "KD_ERR_WRONG_BACKEND"
    with pytest.raises(TypeError, match="must say how the kernel uses it"):
        kdag._garg(a, 0)
    with pytest.raises(TypeError, match="no C type"):
        kdag._garg(3, 1)


def test_objects_used_after_their_session_closed_raise():
    s = kdag.Session(backend="host")
    t = s.asarray(np.ones(4, dtype=np.float32))
    g = s.graph()
    g.scale(t, 2.0)
    s.close()
    for call in (t.numpy, g.submit, lambda: g.fill(t, 0.0), s.stats, lambda: s.empty((2,))):
        with pytest.raises(kdag.KdagError) as e:
            call()
        assert e.value.name == "KD_ERR_RELEASED"
    del t, g  # no crash collecting them


def test_dot_names_the_nodes(s):
    t = s.empty((4,))
    g = s.graph()
    g.fill(t, 1.0, name="first")
    g.scale(t, 3.0, name="second")
    dot = g.dot()
    assert "digraph" in dot and "first" in dot and "second" in dot


def test_views_are_numpy_basic_indexing(s):
    a = np.arange(30, dtype=np.float32).reshape(5, 6)
    t = s.asarray(a)
    inner = t[1:-1, 1:5:2]
    assert inner.shape == (3, 2)
    out = s.empty((3, 2))
    g = s.graph()
    g.copy(out, inner)
    g.scale(t[0], 10.0)             # a row: integer index
    full = g.sink(t)
    part = g.sink(out)
    g.submit()
    np.testing.assert_array_equal(part.wait(), a[1:-1, 1:5:2])
    want = a.copy()
    want[0] *= 10
    np.testing.assert_array_equal(full.wait(), want)
    with pytest.raises(ValueError, match="positive steps"):
        t[::-1]
    with pytest.raises(IndexError):
        t[5]
    with pytest.raises(kdag.KdagError, match="a view"):
        g.sink(inner)
    v = t[1:3]
    v.release()                     # a view's release drops the view alone
    assert t.numpy().shape == (5, 6)


@pytest.mark.parametrize("example", ["jacobi", "add"])
def test_examples_match_numpy(capsys, example):
    import runpy
    path = os.path.join(os.path.dirname(__file__), "..", "examples", f"{example}.py")
    runpy.run_path(path)["main"](backend="host")
    assert f"{example}: ok" in capsys.readouterr().out


def test_a_sink_wait_releases_the_gil(s):
    import threading
    import time
    t = s.asarray(np.zeros(4, dtype=np.float32))
    g = s.graph()
    g.host(lambda: time.sleep(0.3), writes=[t])   # a slow node the sink waits behind
    sink = g.sink(t)
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    ticket = g.submit()
    th = threading.Thread(target=count)
    th.start()
    before = len(ticks)
    sink.wait()                      # blocks in C for about 0.3 s
    during = len(ticks) - before
    stop.set()
    th.join()
    assert ticket.done()
    assert during > 20, f"the other thread ran {during} times while the sink wait blocked"


def test_build_cubin_goes_through_the_module_cache(tmp_path):
    src = 'extern "C" __global__ void k(float *x) { x[threadIdx.x] += 1.0f; }'
    try:
        cubin, origin = kdag.build_cubin(src, "sm_90", cache_dir=str(tmp_path))
    except kdag.KdagError as e:
        if e.name == "KD_ERR_LIBRARY_MISSING":
            pytest.skip(f"no NVRTC or nvJitLink: {e}")
        raise
    assert origin == "compiled" and cubin[:4] == b"\x7fELF"
    again, origin = kdag.build_cubin(src, "sm_90", cache_dir=str(tmp_path))
    assert origin == "memory" and again == cubin
    kdag._caches.pop(str(tmp_path))          # a new cache object, as a new process: the disk entry
    again, origin = kdag.build_cubin(src, "sm_90", cache_dir=str(tmp_path))
    assert origin == "disk" and again == cubin
    with pytest.raises(kdag.KdagError) as e:
        kdag.build_cubin("this is not C++", "sm_90", cache_dir=str(tmp_path))
    assert e.value.name == "KD_ERR_COMPILE_FAILED"


def test_a_host_callback_that_calls_kdag_is_refused(s, capsys):
    t = s.asarray(np.zeros(4, dtype=np.float32))
    seen = []

    def calls_kdag():
        try:
            s.stats()
        except kdag.KdagError as e:
            seen.append(e.name)

    g = s.graph()
    g.host(calls_kdag, writes=[t])
    sink = g.sink(t)
    g.submit()
    sink.wait()
    assert seen == ["KD_ERR_BUSY"]


def test_a_device_loop_counts_down_and_an_if_runs_once(s):
    c, tmp, m1 = s.asarray(np.array([5], np.int32)), s.empty((1,), np.int32), s.asarray(np.array([-1], np.int32))
    y, trips, flag = s.asarray(np.array([1.5], np.float32)), s.empty((1,), np.int32), s.asarray(np.array([1], np.int32))
    g = s.graph("loop")
    with g.while_loop(c, 100, trips=trips):
        g.add(tmp, c, m1)
        g.copy(c, tmp)
        g.scale(y, 2.0)
    with g.if_(flag):
        g.scale(y, 3.0)
    out = g.sink(y)
    g.submit()
    assert out.wait()[0] == np.float32(1.5 * 32 * 3)
    assert trips.numpy()[0] == 5 and c.numpy()[0] == 0
    g2 = s.graph("open")
    with pytest.raises(kdag.KdagError, match="no node of its body writes its condition"):
        with g2.while_loop(c, 3):
            g2.scale(y, 2.0)


def test_collectives_across_two_host_sessions_of_one_process():
    a, b = kdag.Session(backend="host"), kdag.Session(backend="host")
    comms = kdag.Comm.create_all([a, b])
    assert [(c.rank, c.nranks) for c in comms] == [(0, 2), (1, 2)]
    xs = [np.arange(8, dtype=np.float32) + 100 * r for r in range(2)]
    graphs, sinks = [], []
    for s, c, x in zip((a, b), comms, xs):
        g = s.graph("rank %d" % c.rank)
        tx, tsum, tall, tring = s.asarray(x), s.empty((8,)), s.empty((16,)), s.empty((8,))
        g.all_reduce(c, tsum, tx, op="sum")
        g.all_gather(c, tall, tx)
        g.send_recv(c, send=tx, to=1 - c.rank, recv=tring, source=1 - c.rank)
        graphs.append(g)
        sinks.append((g.sink(tsum), g.sink(tall), g.sink(tring)))
    for g in graphs:  # one thread submits both ranks: HOST collectives wait on workers
        g.submit()
    for r, (ssum, sall, sring) in enumerate(sinks):
        np.testing.assert_array_equal(ssum.wait(), xs[0] + xs[1])
        np.testing.assert_array_equal(sall.wait(), np.concatenate(xs))
        np.testing.assert_array_equal(sring.wait(), xs[1 - r])
    with pytest.raises(kdag.KdagError) as e:
        graphs[0].broadcast(comms[0], a.empty((4,)), 5)
    assert e.value.name == "KD_ERR_INVALID_ARGUMENT" and "argument root is 5" in str(e.value)
    for g in graphs:
        g.close()
    for c in comms:
        c.close()
    a.close()
    b.close()
