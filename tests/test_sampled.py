"""Training on a sample (issue 24, item 3): ``max_points_per_centroid`` fits on a seeded
uniform sample and then labels every row exactly; ``labels_``, ``inertia_`` and
``objective_`` are those of all rows, computed here with NumPy and the reference."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest
import scipy.sparse as sp

import softkmeans.reference as ref
from conftest import make_blobs
from softkmeans import SoftKMeans

N, D, K, M = 3000, 6, 8, 25  # a sample of K * M = 200 of the 3000 rows


@pytest.fixture(scope="module")
def data():
    X, C = make_blobs(N, D, K, seed=7, spread=1.5)
    w = np.random.default_rng(8).uniform(0.2, 3.0, size=N)
    return X, C, w


def _fit(X, C, w=None, **kw):
    params = dict(assignment="hard", init=C, tol=0.0, max_iter=50, max_points_per_centroid=M)
    params.update(kw)
    return SoftKMeans(K, random_state=0, **params).fit(X, sample_weight=w)


def _nearest(X, C):
    """(labels, squared distances) by NumPy in float64."""
    D2 = ((X[:, None, :].astype(np.float64) - C[None].astype(np.float64)) ** 2).sum(-1)
    labels = D2.argmin(1)
    return labels, D2[np.arange(len(X)), labels]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_labels_and_inertia_cover_every_row(data, dtype):
    X, C, w = data[0].astype(dtype), data[1].astype(dtype), data[2]
    model = _fit(X, C, w)
    assert model.labels_.shape == (N,)
    np.testing.assert_array_equal(model.labels_, model.predict(X))
    labels, d2 = _nearest(X, model.cluster_centers_)
    np.testing.assert_array_equal(model.labels_, labels)
    rtol = 1e-10 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(model.inertia_, float(w @ d2), rtol=rtol)


def test_the_runs_see_only_the_sample(data):
    """Converged on the sample, the centroids are not the means of all rows' clusters
    (they are on a fit of every row), and the sample's fit sees fewer rows."""
    X, C, w = data
    full = _fit(X, C, w, max_points_per_centroid=None)
    labels, _ = _nearest(X, full.cluster_centers_)
    means = np.array([np.average(X[labels == j], axis=0, weights=w[labels == j]) for j in range(K)])
    np.testing.assert_allclose(full.cluster_centers_, means, rtol=1e-9, atol=1e-9)
    sampled = _fit(X, C, w)
    labels, _ = _nearest(X, sampled.cluster_centers_)
    means = np.array([np.average(X[labels == j], axis=0, weights=w[labels == j]) for j in range(K)])
    assert np.abs(sampled.cluster_centers_ - means).max() > 1e-3
    # Its inertia over all rows is that of its centroids, worse than the full fit's.
    assert sampled.inertia_ > full.inertia_


def test_soft_objective_covers_every_row(data):
    X, C, w = data
    model = _fit(X, C, w, assignment="softmax", sigma=0.8, max_iter=5)
    expected = ref.objective(X, model.cluster_centers_, 0.8, kind="softmax", sample_weight=w)
    np.testing.assert_allclose(model.objective_, expected, rtol=1e-10)
    J = ref.objective(X, model.cluster_centers_, kind="hard", sample_weight=w)
    np.testing.assert_allclose(model.inertia_, J, rtol=1e-10)
    np.testing.assert_array_equal(model.labels_, model.predict(X))


def test_the_sample_is_seeded(data):
    X, C, w = data
    a, b = _fit(X, C, w), _fit(X, C, w)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    # From the same initial centroids only the sample differs between random states.
    other = SoftKMeans(
        K, assignment="hard", init=C, tol=0.0, max_iter=50, max_points_per_centroid=M,
        random_state=1,
    ).fit(X, sample_weight=w)  # fmt: skip
    assert not np.array_equal(other.cluster_centers_, a.cluster_centers_)


def test_a_sample_as_large_as_the_data_is_no_sample(data):
    X, C, w = data
    full = _fit(X, C, w, max_points_per_centroid=None)
    for m in (N // K + 1, 10**9):
        same = _fit(X, C, w, max_points_per_centroid=m)
        np.testing.assert_array_equal(same.cluster_centers_, full.cluster_centers_)
        assert same.inertia_ == full.inertia_ and same.n_iter_ == full.n_iter_


def test_zero_weight_rows_are_not_sampled(data):
    """Only the 200 rows of positive weight are the population: no sampling, and the fit
    equals that of those rows alone."""
    X, C, w = data
    w0 = np.zeros(N)
    keep = np.random.default_rng(3).choice(N, size=K * M, replace=False)
    w0[keep] = w[keep]
    sampled = _fit(X, C, w0)
    alone = _fit(X[np.sort(keep)], C, w0[np.sort(keep)], max_points_per_centroid=None)
    np.testing.assert_allclose(sampled.cluster_centers_, alone.cluster_centers_, rtol=1e-12)


def test_every_input_kind_draws_the_same_sample(data, tmp_path, monkeypatch):
    """An array, a memmap (sampled into a temporary file, removed after the fit), a CSR
    matrix and a Dask array (sampled on its scheduler) fit the same sample."""
    X, C, w = data
    expected = _fit(X, C, w)
    path = tmp_path / "x.f64"
    mm = np.memmap(path, dtype=np.float64, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool_dir))
    import dask.array as da  # the test extra's

    others = [
        np.memmap(path, dtype=np.float64, mode="r", shape=X.shape),
        sp.csr_matrix(X),
        da.from_array(X, chunks=700),
    ]
    for other in others:
        model = _fit(other, C, w)
        np.testing.assert_array_equal(model.labels_, expected.labels_)
        np.testing.assert_allclose(model.cluster_centers_, expected.cluster_centers_, rtol=1e-12)
        np.testing.assert_allclose(model.inertia_, expected.inertia_, rtol=1e-12)
    assert list(spool_dir.iterdir()) == []


@pytest.mark.parametrize("bad", [0, -3, 2.5, "256", True, np.float64(4.0)])
def test_bad_values_name_the_parameter(data, bad):
    X, C, _ = data
    with pytest.raises(ValueError, match="max_points_per_centroid"):
        SoftKMeans(K, max_points_per_centroid=bad).fit(X)


def test_cosine_samples_the_normalized_rows(data):
    """metric="cosine": dense and CSR X fit the same sample of normalized rows."""
    X, C, w = data
    kw = dict(metric="cosine", init=C / np.linalg.norm(C, axis=1, keepdims=True))
    dense = _fit(X, C, w, **kw)
    sparse = _fit(sp.csr_matrix(X), C, w, **kw)
    np.testing.assert_array_equal(sparse.labels_, dense.labels_)
    np.testing.assert_allclose(sparse.cluster_centers_, dense.cluster_centers_, rtol=1e-10)
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    labels, d2 = _nearest(Xn, dense.cluster_centers_)
    np.testing.assert_array_equal(dense.labels_, labels)
    np.testing.assert_allclose(dense.inertia_, float(w @ d2), rtol=1e-10)


def test_sampled_fit_refuses_balance():
    X = np.random.default_rng(2).normal(size=(400, 3))
    with pytest.raises(ValueError, match="max_points_per_centroid does not combine with balance"):
        SoftKMeans(4, assignment="hard", balance="equal", max_points_per_centroid=20).fit(X)
