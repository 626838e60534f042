"""The native weighted covariance pass (behind critical_sigma_ and the fit's tolerance)
against numpy.cov, over the shapes that exercise the register blocks' edges: d below,
at and above a block's 6 rows and a vector block's columns, n across row tiles. The
kernel sums in float64 whatever the input dtype, so float32 X is held to the float64
tolerance against numpy on the same (exactly widened) values."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import DTYPES, TOLERANCE
from softkmeans import _native

SHAPES = [(1, 1), (2, 3), (7, 5), (300, 6), (257, 7), (513, 9), (600, 16), (1000, 17), (700, 33)]


def _data(n, d, dtype, seed):
    rng = np.random.default_rng(seed)
    # Offset and unequal scales: the centring matters and the entries differ in size.
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 10.0, size=d) + 50.0
    w = rng.uniform(0.0, 2.0, size=n)
    w[0] = 1.0  # W > 0 for n = 1
    return X.astype(dtype), w


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"n{s[0]}-d{s[1]}")
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
def test_weighted_covariance_matches_numpy(shape, dtype, simd_level):
    n, d = shape
    X, w = _data(n, d, dtype, seed=n * 100 + d)
    mean, cov = _native.weighted_covariance(X, w, 1)
    X64 = X.astype(np.float64)
    expected = np.atleast_2d(np.cov(X64.T, aweights=w, bias=True))
    tol = TOLERANCE[np.dtype(np.float64)]
    scale = np.abs(expected).max() or 1.0
    assert np.abs(cov - expected).max() <= tol * scale
    assert np.allclose(mean, np.average(X64, axis=0, weights=w), rtol=tol, atol=0.0)
    assert np.array_equal(cov, cov.T)


@pytest.mark.parametrize("d", [5, 33])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
def test_weighted_covariance_bitwise_equal_across_threads(d, dtype, simd_level):
    # n d^2 well above the serial-work threshold, so 2 and 3 threads really run.
    X, w = _data(30_011, d, dtype, seed=d)
    first = _native.weighted_covariance(X, w, 1)
    for threads in (2, 3):
        again = _native.weighted_covariance(X, w, threads)
        assert first[0].tobytes() == again[0].tobytes(), threads
        assert first[1].tobytes() == again[1].tobytes(), threads
