# SPDX-License-Identifier: Apache-2.0
"""kdag's add example from Python: out = a + b by a kernel compiled with
NVRTC on a CUDA session, or by the add built-in on a HOST session; the
result checked against NumPy. Prints "add: ok"."""
import sys

import numpy as np

import kdag

SOURCE = r'''
extern "C" __global__ void add_kernel(float *out, const float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
'''


def main(backend="auto"):
    n = 1 << 20
    a = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    b = np.random.default_rng(2).standard_normal(n, dtype=np.float32)
    with kdag.Session(backend=backend) as s:
        ta, tb, out = s.asarray(a), s.asarray(b), s.empty((n,))
        g = s.graph("add")
        if s.backend == "cuda":
            add = s.module(source=SOURCE).function("add_kernel")
            g.kernel(add, (n + 255) // 256, 256, [kdag.Out(out), kdag.In(ta), kdag.In(tb), kdag.i32(n)])
        else:
            g.add(out, ta, tb)
        sink = g.sink(out)
        g.submit()
        got = sink.wait()
        if not np.array_equal(got, a + b):
            raise SystemExit(f"add: MISMATCH on {s.backend}")
        print(f"add: ok ({s.backend})")


if __name__ == "__main__":
    main(backend=sys.argv[1] if len(sys.argv) > 1 else "auto")
