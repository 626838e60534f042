"""Exact recovery in floating point (SPEC.md, "Margins and temperatures"): below the
threshold sigma <= sqrt(Delta_min) / 2 the native entmax15 step returns exactly the bits of
the native hard step, on every (d, k) path, dtype, SIMD level and thread count; just above
it the step is still the reference's within the tolerance table."""

from __future__ import annotations

import numpy as np
import pytest

import softkmeans
from conftest import DTYPES, THREAD_COUNTS, assert_rel_close, make_blobs
from softkmeans import reference

ROW_TILE = 256  # cpp/include/softkmeans/config.hpp kRowTile
N = 2 * ROW_TILE + 37  # several tiles, and a last W-row group with padding lanes
LANE_D = (1, 2, 3, 4)  # d <= kSmallDim with k <= kLaneAccK (16): rows in the lanes
STEP_FIELDS = ("centroids", "cluster_weights", "objective", "distortion", "min_margin", "empty")


def _problem(d, k, dtype, weighted, seed=0):
    """Blobs and a sample weight with zeros (None when not weighted); the zero-weight points
    include the one of smallest margin, so that entmax15 is not one-hot on them."""
    X, C = make_blobs(N, d, k, dtype=dtype, seed=seed + 7 * d + k)
    if not weighted:
        return X, C, None
    rng = np.random.default_rng(seed + d * k)
    w = rng.uniform(0.5, 2.0, size=N)
    w[rng.random(N) < 0.1] = 0.0
    w[np.argmin(softkmeans.margins(X, C))] = 0.0
    return X, C, w


def _delta_min(X, C, w):
    m = softkmeans.margins(X, C).astype(np.float64)
    return float(m[w > 0].min() if w is not None else m.min())


def _assert_same_bits(got, expected, what):
    for field in STEP_FIELDS:
        a, b = getattr(got, field), getattr(expected, field)
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype, f"{what}: {field} dtype"
            assert np.array_equal(a, b), f"{what}: {field} differs"
            # array_equal treats 0.0 == -0.0: compare the bits too.
            assert a.tobytes() == b.tobytes(), f"{what}: {field} bits differ"
        else:
            assert a == b, f"{what}: {field} {a!r} != {b!r}"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 16])
@pytest.mark.parametrize("k", [2, 8, 16, 17, 64])
def test_entmax15_below_threshold_step_is_hard_step_bit_for_bit(dtype, d, k, simd_level):
    for weighted in (False, True):
        X, C, w = _problem(d, k, dtype, weighted)
        delta_min = _delta_min(X, C, w)
        if delta_min == 0.0:
            continue  # an exact tie: no sigma > 0 is below the threshold
        sigma = 0.999 * np.sqrt(delta_min) / 2
        for n_threads in THREAD_COUNTS:
            what = f"weighted={weighted} threads={n_threads}"
            kw = dict(sample_weight=w, n_threads=n_threads)
            hard = softkmeans.centroid_step(X, C, kind="hard", **kw)
            ent = softkmeans.centroid_step(X, C, sigma, kind="entmax15", **kw)
            _assert_same_bits(ent, hard, what)
            assert ent.objective == ent.distortion, what  # objective = J
            # The objective-only pass (no N and S) agrees too.
            assert softkmeans.objective(X, C, sigma, kind="entmax15", **kw) == softkmeans.objective(
                X, C, kind="hard", **kw
            ), what


def test_entmax15_below_threshold_on_the_lane_path_regression(simd_level):
    """The bug: for d <= 4 and k <= 16 the hard step summed in the vector lanes and the
    entmax15 step row by row, so their bits differed below the threshold."""
    X = np.random.default_rng(0).normal(size=(1000, 2)) + 3.0
    C = X[:2].copy()
    s = 0.999 * np.sqrt(softkmeans.margins(X, C).min()) / 2
    h = softkmeans.centroid_step(X, C, kind="hard")
    e = softkmeans.centroid_step(X, C, s, kind="entmax15")
    assert np.array_equal(h.centroids, e.centroids)
    assert h.objective == e.objective


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("d", LANE_D)
@pytest.mark.parametrize("k", [2, 8, 16])
@pytest.mark.parametrize("factor", [1.001, 3.0])
def test_entmax15_above_threshold_on_the_lane_path_matches_reference(
    dtype, d, k, factor, simd_level
):
    """Just above the threshold some rows are not one-hot: on the lane path they are taken
    row by row; the step is the reference's, and no longer the hard step (sharp threshold;
    the objective is continuous there, so only N is compared with hard's)."""
    for weighted in (False, True):
        X, C, w = _problem(d, k, dtype, weighted)
        delta_min = _delta_min(X, C, w)
        if delta_min == 0.0:
            continue
        sigma = factor * np.sqrt(delta_min) / 2
        expected = reference.centroid_step(X, C, sigma, kind="entmax15", sample_weight=w)
        D = reference.sq_distances(X.astype(np.float64), C.astype(np.float64))
        runs = []
        for n_threads in THREAD_COUNTS:
            what = f"weighted={weighted} threads={n_threads}"
            kw = dict(sample_weight=w, n_threads=n_threads)
            step = softkmeans.centroid_step(X, C, sigma, kind="entmax15", **kw)
            for field in ("centroids", "cluster_weights", "objective", "distortion"):
                assert_rel_close(getattr(step, field), getattr(expected, field), dtype, what)
            assert_rel_close(step.min_margin, expected.min_margin, dtype, what, scale=D.max())
            obj = softkmeans.objective(X, C, sigma, kind="entmax15", **kw)
            assert_rel_close(obj, expected.objective, dtype, what)
            hard = softkmeans.centroid_step(X, C, kind="hard", **kw)
            assert not np.array_equal(step.cluster_weights, hard.cluster_weights), what
            runs.append(step)
        for step in runs[1:]:  # independent of the thread count
            _assert_same_bits(step, runs[0], "threads")
