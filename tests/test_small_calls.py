"""Tiny calls run on the calling thread whatever n_threads says (kSerialWork): no kernel
a fit calls (seeding, covariance, block statistics, labels; dense and CSR) wakes an
OpenMP team for a few microseconds of work. Checked in a fresh process by counting its
threads (an OpenMP team, once started, stays alive), Linux only."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import os
    import numpy as np
    import scipy.sparse as sp
    import softkmeans

    def n_threads_alive():
        return len(os.listdir("/proc/self/task"))

    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 2))
    Xs = sp.random(100, 20, density=0.2, format="csr", random_state=0)
    C = X[:3].copy()

    def calls(threads):
        for data in (X, Xs):
            for kind in ("hard", "softmax", "entmax15"):
                softkmeans.SoftKMeans(3, assignment=kind, n_threads=threads).fit(data)
        softkmeans.SoftKMeans(3, assignment="hard", init=C, n_init=1, n_threads=threads).fit(X)
        softkmeans.SoftKMeans(3, anneal=True, n_threads=threads).fit(X)
        softkmeans.assign(X, C, n_threads=threads)
        softkmeans.centroid_step(X, C, 0.5, kind="softmax", n_threads=threads)

    calls(1)  # every lazy import and library thread pool first
    before = n_threads_alive()
    calls(2)
    print("extra threads:", n_threads_alive() - before)
    """
)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_tiny_fits_at_two_threads_start_no_thread_team():
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("extra threads: 0"), proc.stdout[-2000:]
