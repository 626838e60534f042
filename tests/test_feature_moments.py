"""The validation pass's native read (`_native.feature_moments`, cpp/src/impl/moments.hpp)
against NumPy: per chunk of rows, the weights' sum, the features' weighted mean and sum of
squared deviations, the largest |x| (of a finite chunk) and whether every value is finite;
the same bits at every thread count."""

import numpy as np
import pytest

from softkmeans import _native


def _numpy_chunks(X, w, chunk_rows):
    """The reference: each chunk's (W, mean, M2, max |x|, finite) in float64."""
    out = []
    for s in range(0, X.shape[0], chunk_rows):
        x, wc = X[s : s + chunk_rows].astype(np.float64), w[s : s + chunk_rows]
        W = wc.sum()
        finite = bool(np.isfinite(x).all())
        if W > 0 and finite:
            mean = (wc[:, None] * x).sum(axis=0) / W
            M2 = (wc[:, None] * (x - mean) ** 2).sum(axis=0)
        else:
            mean = M2 = np.zeros(X.shape[1])
        big = np.abs(x).max() if finite else None
        out.append((W, mean, M2, big, finite))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "n, d, chunk_rows", [(1, 1, 1), (1000, 3, 64), (777, 17, 100), (50, 40, 7)]
)
def test_feature_moments_are_numpys_per_chunk(dtype, n, d, chunk_rows):
    rng = np.random.default_rng(n + d)
    X = rng.standard_normal((n, d)) * rng.uniform(0.1, 100, d) + rng.uniform(-1e3, 1e3, d)
    X = X.astype(dtype)
    w = rng.uniform(0, 3, n)
    w[: min(n, chunk_rows)] = 0.0  # the first chunk weighs nothing: W = 0, moments 0
    W, mean, M2, big, finite = _native.feature_moments(X, w, chunk_rows, 2)
    expected = _numpy_chunks(X, w, chunk_rows)
    assert W.shape == (len(expected),) and mean.shape == M2.shape == (len(expected), d)
    for c, (We, me, M2e, bige, fe) in enumerate(expected):
        assert W[c] == pytest.approx(We, rel=1e-13, abs=0)
        np.testing.assert_allclose(mean[c], me, rtol=1e-12, atol=1e-12 * np.abs(X).max())
        np.testing.assert_allclose(M2[c], M2e, rtol=1e-10, atol=1e-10 * (M2e.max() + 1e-300))
        assert finite[c] == fe and (bige is None or big[c] == bige)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_nonfinite_value_marks_its_chunk_only(bad):
    X = np.ones((100, 5))
    X[42, 3] = bad
    X[7, 1] = -9.0  # the largest |x| of its chunk
    W, mean, M2, big, finite = _native.feature_moments(X, np.ones(100), 20, 1)
    assert finite.tolist() == [True, True, False, True, True]
    assert big[[0, 1, 3, 4]].tolist() == [9.0, 1.0, 1.0, 1.0]


def test_the_same_bits_at_every_thread_count():
    rng = np.random.default_rng(9)
    X = rng.standard_normal((5003, 13)).astype(np.float32) * 1e3
    w = rng.uniform(0, 1, 5003)
    runs = [_native.feature_moments(X, w, 128, t) for t in (1, 2, 3)]
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert a.tobytes() == b.tobytes()


def test_bad_arguments_are_refused():
    X = np.ones((4, 2))
    with pytest.raises(ValueError, match="chunk_rows"):
        _native.feature_moments(X, np.ones(4), 0, 1)
    with pytest.raises(ValueError, match="sample_weight"):
        _native.feature_moments(X, np.ones(3), 2, 1)
    with pytest.raises(TypeError, match="C-contiguous"):
        _native.feature_moments(np.asfortranarray(np.ones((4, 2))), np.ones(4), 2, 1)


def test_an_empty_block_has_no_chunks():
    """A block of no rows (a Dask array's empty chunk) adds nothing to the moments and
    passes the checks."""
    from softkmeans.sources import dense

    assert dense.chunk_moments(np.zeros((0, 3), np.float32), np.zeros(0)) == []
    moments = dense.FeatureMoments(3).add(np.zeros((0, 3)), np.zeros(0))
    assert moments.W == 0.0
    assert dense.check_values([(0, 0, np.zeros((0, 3)))], np.zeros(0), "X", fit=False) is None
