"""The fused pass's candidates at many clusters (cpp/src/impl/biased.hpp, SPEC.md
"Balanced assignments as one pass"): with k a multiple of the SIMD width the pass starts
each row's bar at a bound on its m-th smallest biased value, which must never drop a
column that is among the m best, ties included.

Oracle: a stable sort of the kernel's biased distances (NumPy), on integer-valued data
(many exact ties within a row) and equal offsets.
"""

import numpy as np
import pytest

from conftest import DTYPES, THREAD_COUNTS
from softkmeans import _native


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [8, 3, 16])
@pytest.mark.parametrize("band", [np.inf, 3.0])
def test_candidates_at_64_clusters_are_the_m_best_biased_columns(dtype, m, band, simd_level):
    rng = np.random.default_rng(m)
    k = 64
    X = rng.integers(-2, 3, size=(3000, 3)).astype(dtype)  # integer D: ties
    C = rng.integers(-2, 3, size=(k, 3)).astype(dtype)
    g = rng.integers(0, 3, size=k).astype(np.float64)  # equal offsets
    D = _native.sq_distances(X, C, 1)
    v = D - g.astype(dtype)
    order = np.argsort(v, axis=1, kind="stable")[:, :m]
    sorted_v = np.take_along_axis(v, order, axis=1)
    bar = sorted_v[:, :1] + dtype(band)
    held = sorted_v < bar
    want = np.where(held, order, -1)
    want_floor = np.where(held[:, -1], sorted_v[:, -1], bar[:, 0])
    for n_threads in THREAD_COUNTS:
        out = _native.biased_hard_stats_candidates(X, C, g, np.ones(len(X)), n_threads, m, band)
        cand, cand_dist, floor = out[4:]
        assert np.array_equal(cand, want)
        assert np.array_equal(cand_dist, np.where(held, np.take_along_axis(D, order, axis=1), 0))
        assert np.array_equal(floor, want_floor)
