"""Results are bitwise identical for every thread count (issue 3, "Threads").

Rows are split into tiles and chunks independently of the thread count and the
chunk partials are merged in a fixed order, so 1, 2 and 3 threads must give the
same bits, not merely close numbers. The problems are large enough to span many
chunks, on both distance paths (direct differences for d <= 4, the norm
expansion micro-kernel above).
"""

from __future__ import annotations

import numpy as np
import pytest
import threadpoolctl

import softkmeans
from conftest import DTYPES, KINDS, make_blobs

THREADS = (1, 2, 3)
SHAPES = [(40_000, 2, 9), (20_011, 20, 37)]


def _problem(shape, dtype):
    n, d, k = shape
    X, C = make_blobs(n, d, k, dtype=dtype, seed=n + d + k)
    w = np.random.default_rng(1).uniform(0.0, 2.0, size=n)
    sigma = 0.5 * float(np.sqrt(np.median(softkmeans.assign(X, C)[1]) + 1e-3))
    return X, C, w, sigma


def _bits(a):
    a = np.asarray(a)
    return a.tobytes(), a.dtype, a.shape


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"n{s[0]}-d{s[1]}-k{s[2]}")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
def test_centroid_step_bitwise_equal_across_threads(shape, kind, dtype, simd_level):
    X, C, w, sigma = _problem(shape, dtype)
    results = [
        softkmeans.centroid_step(X, C, sigma, kind=kind, sample_weight=w, n_threads=t)
        for t in THREADS
    ]
    first = results[0]
    for t, res in zip(THREADS[1:], results[1:]):
        for field in first._fields:
            a, b = getattr(first, field), getattr(res, field)
            assert _bits(a) == _bits(b), f"{field} differs between 1 and {t} threads"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"n{s[0]}-d{s[1]}-k{s[2]}")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
def test_objective_and_gradients_bitwise_equal_across_threads(shape, kind, dtype):
    X, C, w, sigma = _problem(shape, dtype)
    objs = [
        softkmeans.objective(X, C, sigma, kind=kind, sample_weight=w, n_threads=t) for t in THREADS
    ]
    assert len({np.float64(o).tobytes() for o in objs}) == 1, objs
    grads = [
        softkmeans.gradients(X, C, sigma, kind=kind, sample_weight=w, n_threads=t) for t in THREADS
    ]
    for t, (gX, gC) in zip(THREADS[1:], grads[1:]):
        assert _bits(gX) == _bits(grads[0][0]), f"grad_X differs at {t} threads"
        assert _bits(gC) == _bits(grads[0][1]), f"grad_C differs at {t} threads"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
def test_default_threads_follow_threadpoolctl(dtype):
    """n_threads=None resolves at the call: threadpool_limits(1) takes effect, same bits."""
    X, C, w, sigma = _problem(SHAPES[0], dtype)
    ref = softkmeans.centroid_step(X, C, sigma, kind="softmax", sample_weight=w, n_threads=1)
    with threadpoolctl.threadpool_limits(1):
        assert softkmeans.build_info()["default_threads"] == 1
        res = softkmeans.centroid_step(X, C, sigma, kind="softmax", sample_weight=w)
    for field in ref._fields:
        assert _bits(getattr(ref, field)) == _bits(getattr(res, field)), field


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
def test_kmeanspp_update_closest_bits_do_not_depend_on_row_position(dtype, simd_level):
    """Each row's distance is the same bits wherever the row sits (several rows per step
    or a leftover row) and for every thread count: the row-block reader of a Fortran X
    shifts rows between blocks and must pick what the in-memory pass picks."""
    from softkmeans import _native

    X, _ = make_blobs(40_003, 9, 5, dtype=dtype, seed=3)
    results = []
    for t in THREADS:
        closest = np.full(X.shape[0], np.inf)
        _native.kmeanspp_update_closest(X, closest, 11, t)
        results.append(closest)
    for t, closest in zip(THREADS[1:], results[1:]):
        assert _bits(closest) == _bits(results[0]), f"update_closest differs at {t} threads"
    for offset in range(1, 9):  # every position of a row within a step of rows
        shifted = np.full(X.shape[0] - offset, np.inf)
        _native.kmeanspp_update_closest(X[offset:], shifted, 11 - offset, 1)
        assert _bits(shifted) == _bits(results[0][offset:]), f"rows shifted by {offset}"
