"""Why a short case is timed as a burst of back-to-back calls (`peers.BURST_SECONDS`): the
hard step (`_native.block_stats`) after `peers.SETTLE_SECONDS` of rest, the first call
against the calls right after it, at one and two threads. Medians over rounds.

    python bench/studies/burst.py [ROUNDS]
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
import peers as P  # noqa: E402

from softkmeans import _native  # noqa: E402

CALLS = 6  # the first after the rest, then CALLS - 1 back to back


def first_and_next(n, d, k, threads, rounds):
    X = P.make_blobs(n, d, k, np.float32)
    C = P.initial_centroids(X, k)
    w = np.ones(n)
    _native.block_stats(X, C, "hard", 1.0, w, threads)
    first, after = [], []
    for _ in range(rounds):
        time.sleep(P.SETTLE_SECONDS)
        for call in range(CALLS):
            t0 = time.perf_counter()
            _native.block_stats(X, C, "hard", 1.0, w, threads)
            (first if call == 0 else after).append(time.perf_counter() - t0)
    return statistics.median(first), statistics.median(after)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    print(f"hard step, float32, {P.SETTLE_SECONDS} s rest, then {CALLS} calls; medians of {rounds}")
    for n, d, k in ((1_000_000, 16, 64), (100_000, 16, 64)):
        for threads in (1, 2):
            first, after = first_and_next(n, d, k, threads, rounds)
            print(f"({n:,}, {d}, {k}) {threads} thread(s): first call {first * 1e3:.2f} ms, "
                  f"the next {after * 1e3:.2f} ms, ratio {first / after:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
