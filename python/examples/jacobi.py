# SPDX-License-Identifier: Apache-2.0
"""The Jacobi workload from Python: a 2D 5-point Jacobi of built-in nodes
over shifted views (no kernel of your own), on whichever backend the
session has, checked bit for bit against NumPy computing the same
additions in the same order. Prints "jacobi: ok"."""
import sys

import numpy as np

import kdag


def reference(grid, sweeps):
    a, b = grid.copy(), grid.copy()
    for _ in range(sweeps):
        b[1:-1, 1:-1] = (((a[:-2, 1:-1] + a[2:, 1:-1]) + a[1:-1, :-2]) + a[1:-1, 2:]) * np.float32(0.25)
        a, b = b, a
    return a


def main(n=256, sweeps=100, backend="auto"):
    grid = np.zeros((n, n), np.float32)
    grid[0, :] = 1.0                                   # a hot edge
    with kdag.Session(backend=backend) as s:
        t = [s.asarray(grid), s.asarray(grid)]
        g = s.graph("jacobi")
        for k in range(sweeps):
            a, b = t[k % 2], t[1 - k % 2]
            inner = b[1:-1, 1:-1]
            g.add(inner, a[:-2, 1:-1], a[2:, 1:-1], name="up+down")
            g.axpy(inner, a[1:-1, :-2], 1.0, name="+left")
            g.axpy(inner, a[1:-1, 2:], 1.0, name="+right")
            g.scale(inner, 0.25, name="/4")
        out = g.sink(t[sweeps % 2])
        g.submit()
        got = out.wait()
        want = reference(grid, sweeps)
        if not np.array_equal(got, want):
            sys.exit(f"jacobi: MISMATCH on {s.backend}: max difference {np.abs(got - want).max()}")
        print(f"jacobi: ok ({s.backend}, {n} x {n}, {sweeps} sweeps, {g.stats()['nodes']} nodes)")


if __name__ == "__main__":
    main(backend=sys.argv[1] if len(sys.argv) > 1 else "auto")
