# SPDX-License-Identifier: Apache-2.0
"""Host time per submission of a 100-node chain from Python, in interleaved
rounds on one GPU:
  kdag      kdag.Graph.submit() of a GRAPH-mode graph of 100 kernel nodes
            (one kernel compiled through kdag with NVRTC);
  kdag_ffi  the same submit called straight through ctypes
            (lib.kd_graph_submit), without the package's Python;
  ffi_call  a ctypes call that does nothing (kd_version_string): the cost
            of crossing into C from Python;
  torch     torch.cuda.CUDAGraph.replay() of the same 100 launches
            (the same kernel through CuPy, captured on torch's stream);
  cupy      100 cupy.RawKernel launches of the same kernel.
Each case submits `reps` times, then waits for its stream; a round runs
every case once, each round starting one case further on.
  python3 bench/python/submit.py [--rounds 8] [--reps 2000] [--json OUT]
Prints a markdown table: median host time per submission, and the ratio
of kdag to torch; kdag's own Python overhead is kdag - (kdag_ffi - ffi_call).
"""
import argparse
import ctypes
import json
import statistics
import sys
import time

import numpy as np

N = 100
ELEMS = 128
SOURCE = r'''
extern "C" __global__ void step(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 0.5f * x[i] + 1.0f;
}
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--json")
    a = ap.parse_args()
    import kdag
    from kdag import _capi
    import cupy as cp
    import torch

    s = kdag.Session(backend="cuda", exec_mode="graph")
    fn = s.module(source=SOURCE).function("step")
    x = s.asarray(np.zeros(ELEMS, np.float32))
    g = s.graph("python submit")
    for _ in range(N):
        g.kernel(fn, 1, ELEMS, [kdag.InOut(x), kdag.i32(ELEMS)])
    g.submit()
    x.numpy()
    submit = _capi.lib.kd_graph_submit
    submit.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    submit.restype = ctypes.c_int
    nothing = _capi.lib.kd_version_string
    nothing.restype = ctypes.c_char_p
    nothing.argtypes = []
    gh = g._h

    ck = cp.RawKernel(SOURCE, "step")
    cx = cp.zeros(ELEMS, cp.float32)
    cstream = cp.cuda.Stream(non_blocking=True)
    tstream = torch.cuda.Stream()
    tg = torch.cuda.CUDAGraph()
    with torch.cuda.stream(tstream):
        ext = cp.cuda.ExternalStream(tstream.cuda_stream)
        with ext:  # warm the kernel before capture
            ck((1,), (ELEMS,), (cx, np.int32(ELEMS)))
        tstream.synchronize()
        with torch.cuda.graph(tg, stream=tstream):
            with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
                for _ in range(N):
                    ck((1,), (ELEMS,), (cx, np.int32(ELEMS)))

    def kdag_case(reps):
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            g.submit()
        t = time.perf_counter_ns() - t0
        x.numpy()
        return t

    def ffi_case(reps):
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            submit(gh, None)
        t = time.perf_counter_ns() - t0
        x.numpy()
        return t

    def nothing_case(reps):
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            nothing()
        return time.perf_counter_ns() - t0

    def torch_case(reps):
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            tg.replay()
        t = time.perf_counter_ns() - t0
        tstream.synchronize()
        return t

    def cupy_case(reps):
        with cstream:
            t0 = time.perf_counter_ns()
            for _ in range(reps):
                for _ in range(N):
                    ck((1,), (ELEMS,), (cx, np.int32(ELEMS)))
            t = time.perf_counter_ns() - t0
        cstream.synchronize()
        return t

    cases = [("kdag", kdag_case), ("kdag_ffi", ffi_case), ("ffi_call", nothing_case), ("torch", torch_case),
             ("cupy", cupy_case)]
    for _, f in cases:  # warm-up
        f(50)
    per = {name: [] for name, _ in cases}
    for r in range(a.rounds):
        for k in range(len(cases)):
            name, f = cases[(r + k) % len(cases)]
            reps = a.reps // 10 if name == "cupy" else a.reps  # 100 launches each
            per[name].append(f(reps) / reps)
    med = {k: statistics.median(v) for k, v in per.items()}
    dev = torch.cuda.get_device_name(0)
    print(f"python {sys.version.split()[0]}, kdag {kdag.version()}, torch {torch.__version__}, "
          f"cupy {cp.__version__}, {dev}, {a.rounds} rounds of {a.reps} submissions, {N} nodes each\n")
    print("| case | host time per submission (median) | rounds |")
    print("|---|---|---|")
    for k in per:
        print(f"| {k} | {med[k] / 1000:.2f} us | {', '.join(f'{v / 1000:.2f}' for v in per[k])} |")
    overhead = med["kdag"] - (med["kdag_ffi"] - med["ffi_call"])
    print(f"\nkdag / torch replay: {med['kdag'] / med['torch']:.2f}x; kdag / cupy loop: "
          f"{med['kdag'] / med['cupy']:.3f}x; kdag's Python overhead per submit (kdag - (kdag_ffi - ffi_call)): "
          f"{overhead / 1000:.2f} us; ctypes call: {med['ffi_call'] / 1000:.2f} us")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": dev, "python": sys.version, "rounds": per, "median_ns": med,
                       "python_overhead_ns": overhead}, f, indent=1)
    s.close()


if __name__ == "__main__":
    main()
