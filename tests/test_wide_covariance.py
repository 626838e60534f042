"""lambda_max of wide data without a d x d matrix (issue 36, items 1 and 6).

Up to DENSE_D features the covariance is formed and eigvalsh'd; wider, Lanczos on one pass
over X per product stops within LANCZOS_TOL of lambda_max. The oracle is independent of
the code under test: the largest eigenvalue of the n x n Gram matrix of the centred,
weight-scaled rows (numpy's eigvalsh), which equals that of the d x d covariance.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from test_sklearn_dropin import _peak_numpy_bytes

import softkmeans
from softkmeans import SoftKMeans
from softkmeans._covariance import DENSE_D, LANCZOS_TOL


def _gram_lambda_max(X, w):
    """lambda_max of sum_i w_i (x_i - mu)(x_i - mu)^T / W through the n x n Gram matrix."""
    X = np.asarray(X, dtype=np.float64)
    mu = np.average(X, axis=0, weights=w)
    Y = (X - mu) * np.sqrt(w / w.sum())[:, None]
    return float(np.linalg.eigvalsh(Y @ Y.T)[-1])


def _wide(kind, n, d, seed):
    rng = np.random.default_rng(seed)
    if kind == "uniform":  # the hard case: a Marchenko-Pastur edge, eigenvalues crowd
        return rng.random((n, d))
    if kind == "blobs":
        centres = 3.0 * rng.standard_normal((4, d))
        return centres[rng.integers(0, 4, n)] + rng.standard_normal((n, d)) + 40.0
    return rng.standard_normal((n, 5)) @ rng.standard_normal((5, d))  # low rank


@pytest.mark.parametrize("layout", ["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["uniform", "blobs", "lowrank"])
def test_wide_critical_sigma_within_the_lanczos_tolerance(kind, dtype, layout):
    n, d = 120, DENSE_D + 389
    X = _wide(kind, n, d, seed=len(kind)).astype(dtype)
    w = np.random.default_rng(1).uniform(0.2, 2.0, n)
    lam = _gram_lambda_max(X, w)  # of the same (exactly widened) values
    data = sp.csr_matrix(X) if layout == "csr" else X
    got = softkmeans.critical_sigma(data, sample_weight=w) ** 2
    # CSR takes the second moment less mu mu^T (uncentred): its cancellation costs the
    # digits of ||mu||^2 / lambda_max (blobs: mean 40 in 901 features).
    cancel = float(np.average(X, axis=0, weights=w) @ np.average(X, axis=0, weights=w)) / lam
    tol = LANCZOS_TOL + (1e-15 * cancel if layout == "csr" else 0.0) + 1e-13
    assert got == pytest.approx(lam, rel=tol)


def test_dense_and_wide_paths_agree_at_the_boundary():
    """d = DENSE_D (formed, eigvalsh) and d = DENSE_D + 1 (Lanczos): both equal the oracle."""
    rng = np.random.default_rng(3)
    for d in (DENSE_D, DENSE_D + 1):
        X = rng.random((80, d))
        w = np.ones(80)
        assert softkmeans.critical_sigma(X) ** 2 == pytest.approx(
            _gram_lambda_max(X, w), rel=LANCZOS_TOL + 1e-13
        )


# d x d float64 at d = 8000 is 512 MB; X itself 3.2 MB.
WIDE = np.random.default_rng(0).random((50, 8000))
NO_D_BY_D = 64 << 20


@pytest.mark.parametrize(
    "call",
    [
        lambda: softkmeans.critical_sigma(WIDE),
        lambda: SoftKMeans(3, random_state=0).fit(WIDE),  # softmax, sigma=None
        lambda: SoftKMeans(3, assignment="entmax15", random_state=0).fit(WIDE),
        lambda: SoftKMeans(3, assignment="hard", random_state=0).fit(WIDE).critical_sigma_,
        lambda: SoftKMeans(3, anneal=True, max_iter=20, random_state=0).fit(WIDE),
        lambda: SoftKMeans(3, metric="cosine", random_state=0).fit(WIDE),
    ],
    ids=["critical_sigma", "softmax", "entmax15", "hard-then-read", "anneal", "cosine"],
)
def test_wide_dense_data_never_allocates_d_by_d(call):
    assert _peak_numpy_bytes(call) < NO_D_BY_D


def test_critical_sigma_read_after_the_training_array_changed_is_refused():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 4)) + rng.integers(0, 3, 500)[:, None] * 5.0
    unchanged = SoftKMeans(3, assignment="hard", random_state=0).fit(X)
    assert unchanged.critical_sigma_ == pytest.approx(
        np.sqrt(_gram_lambda_max(X, np.ones(500))), rel=1e-12
    )
    changed = SoftKMeans(3, assignment="hard", random_state=0).fit(X)
    X *= 17.5  # in place: the weak reference now sees other data
    with pytest.raises(AttributeError, match="changed since fit"):
        _ = changed.critical_sigma_


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_second_moment_matvec_kernel_against_numpy_and_across_threads(dtype, simd_level):
    from softkmeans import _native

    rng = np.random.default_rng(5)
    X = (rng.normal(size=(3001, 37)) + 20.0).astype(dtype)  # n across chunks, d off the lanes
    w = rng.uniform(0.0, 2.0, 3001)
    mean, v = rng.normal(size=37) + 20.0, rng.normal(size=37)
    Y = X.astype(np.float64) - mean
    want = (w * (Y @ v)) @ Y
    runs = [_native.second_moment_matvec(X, w, mean, v, t) for t in (1, 2, 3)]
    np.testing.assert_allclose(runs[0], want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    assert all(r.tobytes() == runs[0].tobytes() for r in runs[1:])
    uncentred = _native.second_moment_matvec(X, w, None, v, 1)
    X64 = X.astype(np.float64)
    np.testing.assert_allclose(uncentred, (w * (X64 @ v)) @ X64, rtol=1e-12)


def test_wide_dask_data_takes_lanczos_over_passes_without_d_by_d():
    """On Dask past DENSE_D the covariance is the same operator, each product one pass of
    the runner over the chunks (reads.COVARIANCE): entmax15's default width and
    critical_sigma_ within the Lanczos tolerance of the oracle, and no (d, d) array
    (4000^2 float64 is 128 MB; X is 1.9 MB)."""
    dask = pytest.importorskip("dask")
    da = pytest.importorskip("dask.array")
    from softkmeans.dask import SoftKMeans as DaskSoftKMeans

    n, d = 60, 4000
    X = _wide("blobs", n, d, seed=7)
    w = np.random.default_rng(2).uniform(0.2, 2.0, n)
    Xd, wd = da.from_array(X, chunks=(25, d)), da.from_array(w, chunks=(25,))
    model = DaskSoftKMeans(3, assignment="entmax15", max_iter=3, random_state=0)
    with dask.config.set(scheduler="synchronous"):
        peak = _peak_numpy_bytes(lambda: model.fit(Xd, sample_weight=wd))
    assert peak < 32 << 20
    lam = _gram_lambda_max(X, w)
    assert model.critical_sigma_**2 == pytest.approx(lam, rel=LANCZOS_TOL + 1e-13)
    assert model.sigma_ == pytest.approx(0.1 * np.sqrt(lam), rel=LANCZOS_TOL + 1e-13)
