"""The whole bounded hard fit with its bounded final pass (`_BoundedHardPass.final`) against
the same fit with the plain final pass it replaced (one `block_stats` pass at the final
centroids, the peer, swapped in for the timed call), interleaved in one process, one
thread, CPU time (`time.process_time`: the machine is shared), median of the repeats; the
final pass alone, once; and the check that both fits agree (labels_ and min_margin_ bit
for bit, inertia_ within rounding). The figures of bench/README.md's "final pass" item.

    python bench/final_pass.py N D K ITERS [float32|float64] [REPEATS]
    python bench/final_pass.py 1e5 256 1024 8
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import peers as P  # noqa: E402

import softkmeans  # noqa: E402
from softkmeans import _native  # noqa: E402
from softkmeans._driver import _BoundedHardPass  # noqa: E402

BOUNDED_FINAL = _BoundedHardPass.final


def plain_final(self, C):
    """The final pass before: block_stats at C, labels, no sums."""
    stats, labels, _ = _native.block_stats(
        self.X, C, "hard", 0.0, self.w, self.n_threads, sums=False, labels=True
    )
    return stats, labels


def main(n, d, k, iters, dtype, repeats):
    X = P.make_blobs(n, d, k, dtype)
    C0 = P.initial_centroids(X, k)
    finals = {"bounded": BOUNDED_FINAL, "plain": plain_final}
    times = {name: [] for name in finals}
    fits, final_times = {}, {}

    def fit():
        return softkmeans.SoftKMeans(
            k, assignment="hard", init=C0, n_init=1, max_iter=iters, tol=0, n_threads=1
        ).fit(X)

    def timed_final(final):
        def wrapped(self, C):
            t0 = time.process_time()
            out = final(self, C)
            final_times.setdefault(final, time.process_time() - t0)
            return out

        return wrapped

    try:
        for r in range(repeats + 1):  # the first round warms up
            order = list(finals) if r % 2 == 0 else list(finals)[::-1]
            for name in order:
                _BoundedHardPass.final = timed_final(finals[name]) if r == 0 else finals[name]
                t0 = time.process_time()
                fits[name] = fit()
                if r:
                    times[name].append(time.process_time() - t0)
    finally:
        _BoundedHardPass.final = BOUNDED_FINAL
    b, p = fits["bounded"], fits["plain"]
    tb, tp = np.median(times["bounded"]), np.median(times["plain"])
    print(f"({n}, {d}, {k}) {np.dtype(dtype).name}, {iters} iterations, one thread, CPU time, "
          f"median of {repeats}: fit with bounded final pass {tb:.3f} s, with plain final pass "
          f"{tp:.3f} s, ratio {tb / tp:.3f}")  # fmt: skip
    print(f"final pass alone: bounded {final_times[BOUNDED_FINAL] * 1e3:.1f} ms, plain "
          f"{final_times[plain_final] * 1e3:.1f} ms")  # fmt: skip
    same = np.array_equal(b.labels_, p.labels_) and b.min_margin_ == p.min_margin_
    print(f"labels_ and min_margin_ identical: {same}; inertia_ relative difference "
          f"{(b.inertia_ - p.inertia_) / p.inertia_:.2e}")  # fmt: skip


if __name__ == "__main__":
    args = sys.argv[1:]
    n, d, k, iters = (int(float(a)) for a in args[:4])
    dtype = np.dtype(args[4]) if len(args) > 4 else np.dtype(np.float32)
    repeats = int(args[5]) if len(args) > 5 else 5
    main(n, d, k, iters, dtype, repeats)
