"""The fused pass's candidates on every path of their extraction (cpp/src/impl/biased.hpp,
SPEC.md "Balanced assignments as one pass"): the columns below a row's bar are packed and
placed by rank: up to one vector of them in registers, up to 64 in memory, past that by
insertion. Rows with nothing but the best below the band, exactly m and m + 1 columns
below it, ties at the m-th value, and more than 64 columns below the bar (k = 90, not a
multiple of the SIMD width: padded columns).

Oracle: a stable sort of the kernel's biased distances (NumPy), on integer-valued data
(exact ties within a row) and integer offsets.
"""

import numpy as np
import pytest

from conftest import DTYPES, THREAD_COUNTS
from softkmeans import _native

BANDS = (0.5, 3.5, 20.5, 60.5, 200.5, 1000.5, np.inf)


def expected_candidates(D, g, m, band):
    """(cand, cand_dist, floor, below): the contract by a stable sort; below: each row's
    count of columns under its best + band."""
    v = D - g.astype(D.dtype)
    order = np.argsort(v, axis=1, kind="stable")
    sorted_v = np.take_along_axis(v, order, axis=1)
    bar = sorted_v[:, :1] + D.dtype.type(band)
    below = (sorted_v < bar).sum(1)
    held = sorted_v[:, :m] < bar
    cand = np.where(held, order[:, :m], -1)
    cand_dist = np.where(held, np.take_along_axis(D, order[:, :m], axis=1), 0)
    floor = np.where(held[:, -1], sorted_v[:, m - 1], bar[:, 0])
    tie_at_m = (sorted_v[:, m - 1] == sorted_v[:, m]) & held[:, -1]
    return cand, cand_dist, floor, below, tie_at_m


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [8, 17])
def test_candidates_on_every_path_are_the_m_best_biased_columns(dtype, m, simd_level):
    rng = np.random.default_rng(m)
    k = 90
    X = rng.integers(-45, 46, size=(2000, 1)).astype(dtype)
    C = rng.integers(-40, 41, size=(k, 1)).astype(dtype)  # integer distances: ties
    g = rng.integers(0, 3, size=k).astype(np.float64)
    D = _native.sq_distances(X, C, 1)
    seen = {"best only": False, "m": False, "m + 1": False, "tie at m": False, "> 64": False}
    for band in BANDS:
        cand, cand_dist, floor, below, tie_at_m = expected_candidates(D, g, m, band)
        seen["best only"] |= bool((below == 1).any())
        seen["m"] |= bool((below == m).any())
        seen["m + 1"] |= bool((below == m + 1).any())
        seen["tie at m"] |= bool(tie_at_m.any())
        seen["> 64"] |= bool((below > 64).any())
        for n_threads in THREAD_COUNTS:
            out = _native.biased_hard_stats_candidates(X, C, g, np.ones(len(X)), n_threads, m, band)
            assert np.array_equal(out[4], cand), (band, n_threads)
            assert np.array_equal(out[5], cand_dist), (band, n_threads)
            assert out[6].dtype == dtype and np.array_equal(out[6], floor), (band, n_threads)
    assert all(seen.values()), seen
