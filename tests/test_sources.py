"""Every kind of input through every path of a fit (`softkmeans.sources`): the result of
the C-ordered array, and predictions that accept each kind.

Layouts: C, Fortran, a strided column slice, an np.memmap, a DataFrame, a CSR matrix and
a row-sliceable array-like (h5py / zarr style); Dask in tests/test_dask.py. Paths: hard
with an empty cluster to relocate (regression: a Fortran-ordered X crashed there with
"RowBlockFitter._labels_and_distances() takes 3 positional arguments but 4 were given"),
softmax, entmax15, annealing, sample weights, k-means++ with n_init > 1. Row blocks are
made small, so that the blocked layouts really are read in several blocks.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from conftest import make_blobs
from softkmeans import SoftKMeans
from softkmeans.sources import dense

pd = pytest.importorskip("pandas")

N, D, K = 400, 5, 4
RTOL = 1e-9


class RowSlices:
    """An array-like read only by row slices, as an h5py or zarr dataset."""

    def __init__(self, array):
        self._array = array
        self.shape = array.shape
        self.dtype = array.dtype

    def __getitem__(self, key):
        if isinstance(key, slice) or isinstance(key, (int, np.integer)):
            return np.array(self._array[key])
        raise TypeError(f"rows are read by slices or single indices; got {key!r}")

    def __len__(self):
        return self.shape[0]


def _strided(X):
    wide = np.zeros((X.shape[0], 2 * X.shape[1]))
    wide[:, ::2] = X
    return wide[:, ::2]


def _memmap(X, tmp_path):
    mm = np.memmap(tmp_path / "x.f64", dtype=X.dtype, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    return np.memmap(tmp_path / "x.f64", dtype=X.dtype, mode="r", shape=X.shape)


LAYOUTS = {
    "fortran": lambda X, tmp: np.asfortranarray(X),
    "strided": lambda X, tmp: _strided(X),
    "memmap": _memmap,
    "dataframe": lambda X, tmp: pd.DataFrame(X),
    "csr": lambda X, tmp: sp.csr_matrix(X),
    "row_slices": lambda X, tmp: RowSlices(X),
}


def _problem():
    X, C = make_blobs(N, D, K, seed=11)
    # One initial centroid far from every point: its cluster is empty after the first step.
    far = C.copy()
    far[-1] = 1e3
    w = np.random.default_rng(5).uniform(0.5, 2.0, size=N)
    return X, C, far, w


PATHS = {
    "hard_empty_cluster": lambda C, far: dict(assignment="hard", init=far),
    "softmax": lambda C, far: dict(assignment="softmax", init=C),
    "entmax15": lambda C, far: dict(assignment="entmax15", init=C),
    "annealing": lambda C, far: dict(anneal={"cooling": 0.7, "steps": 20}, random_state=0),
    "weighted": lambda C, far: dict(assignment="hard", init=C, weighted=True),
    "kmeans++_n_init": lambda C, far: dict(assignment="hard", n_init=3, random_state=0),
}


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Row blocks of 64 rows (and array-likes read 50 rows at a time): several blocks."""
    monkeypatch.setattr(dense, "ROW_BLOCK_BYTES", 64 * D * 8)
    monkeypatch.setattr(dense, "ARRAY_LIKE_ROWS", 50)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_fits_as_its_c_ordered_copy(layout, path, tmp_path):
    X, C, far, w = _problem()
    params = PATHS[path](C, far)
    weights = w if params.pop("weighted", False) else None
    expected = SoftKMeans(K, **params).fit(X, sample_weight=weights)
    if path == "hard_empty_cluster":  # the far centroid's cluster was empty: relocated
        assert np.abs(expected.cluster_centers_).max() < 100
    data = LAYOUTS[layout](X, tmp_path)  # referenced: critical_sigma_ may be read from it
    got = SoftKMeans(K, **params).fit(data, sample_weight=weights)
    np.testing.assert_allclose(got.cluster_centers_, expected.cluster_centers_, rtol=RTOL)
    np.testing.assert_array_equal(got.labels_, expected.labels_)
    assert got.inertia_ == pytest.approx(expected.inertia_, rel=RTOL)
    assert got.critical_sigma_ == pytest.approx(expected.critical_sigma_, rel=RTOL)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_predictions_accept_every_layout(layout, tmp_path):
    X, C, _, w = _problem()
    model = SoftKMeans(K, assignment="softmax", init=C).fit(X)
    data = LAYOUTS[layout](X, tmp_path)
    np.testing.assert_array_equal(model.predict(data), model.predict(X))
    np.testing.assert_allclose(model.transform(data), model.transform(X), rtol=RTOL)
    np.testing.assert_allclose(model.predict_proba(data), model.predict_proba(X), rtol=RTOL)
    assert model.score(data, sample_weight=w) == pytest.approx(
        model.score(X, sample_weight=w), rel=RTOL
    )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_partial_fit_accepts_every_layout(layout, tmp_path):
    X, C, _, _ = _problem()
    got, expected = (SoftKMeans(K, assignment="hard", init=C) for _ in range(2))
    for batch in (slice(0, 200), slice(200, N)):
        expected.partial_fit(X[batch])
        got.partial_fit(LAYOUTS[layout](np.ascontiguousarray(X[batch]), tmp_path))
        np.testing.assert_allclose(got.cluster_centers_, expected.cluster_centers_, rtol=RTOL)
        np.testing.assert_array_equal(got.labels_, expected.labels_)


def test_critical_sigma_of_a_hard_fit_is_computed_on_first_read_and_pickles():
    import pickle

    import softkmeans

    X, C, _, w = _problem()
    model = SoftKMeans(K, assignment="hard", init=C).fit(X, sample_weight=w)
    assert model.__dict__["_critical"]._value is None  # not computed by the fit
    clone = pickle.loads(pickle.dumps(model))
    expected = softkmeans.critical_sigma(X, sample_weight=w)
    assert model.critical_sigma_ == clone.critical_sigma_ == pytest.approx(expected, rel=1e-12)


def test_critical_sigma_of_data_no_longer_referenced_says_what_to_do():
    X, C, _, _ = _problem()
    model = SoftKMeans(K, assignment="hard", init=C).fit(X.copy())  # the copy is gone
    with pytest.raises(AttributeError, match=r"softkmeans.critical_sigma\(X"):
        _ = model.critical_sigma_
    listed = SoftKMeans(K, assignment="hard", init=C).fit(X.tolist())  # no weak reference
    assert listed.critical_sigma_ == pytest.approx(SoftKMeans(K, init=C).fit(X).critical_sigma_)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_feature_moments_fold_in_steps_as_numpy_computes_them(monkeypatch, dtype):
    # Steps of 7 rows over 40 (a short last step) in one reused buffer; a step of zero
    # weight is skipped. Against NumPy's weighted variance of the whole array at once.
    monkeypatch.setattr(dense, "SCAN_BYTES", 7 * 3 * 8)
    rng = np.random.default_rng(5)
    X = (rng.normal(size=(40, 3)) * [1.0, 10.0, 0.1] + 3.0).astype(dtype)
    w = rng.uniform(0.5, 2.0, size=40)
    w[7:14] = 0.0
    X64 = X.astype(np.float64)
    mean = np.average(X64, axis=0, weights=w)
    expected = np.average((X64 - mean) ** 2, axis=0, weights=w)
    got = dense.FeatureMoments(3).add(X, w).variances()
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_distinct_rows_over_blocks_count_each_row_once(monkeypatch):
    """The distinct rows of positive weight, read in many row blocks (each block's own,
    merged): a row repeated across blocks counts once, a row of weight 0 not at all."""
    from softkmeans import sources
    from softkmeans.sources import queries

    rng = np.random.default_rng(3)
    X = rng.integers(0, 3, size=(2000, 3)).astype(np.float64)  # 27 possible rows
    X[:5] = 7.0  # a row only at weight 0
    w = np.ones(2000)
    w[:5] = 0.0
    monkeypatch.setattr(dense, "ROW_BLOCK_BYTES", 1 << 10)  # 42 rows a block
    source = sources.source_of(np.asfortranarray(X), w)
    assert len(list(source.blocks())) > 40
    assert queries.n_distinct_rows(source) == np.unique(X[5:], axis=0).shape[0] == 27


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("collide", [False, True])
def test_distinct_dense_rows_are_numpys_even_when_hashes_collide(monkeypatch, dtype, collide):
    """The distinct rows found by hashing are np.unique's (values, -0.0 equal to 0.0),
    each at its first place; where every row hashes alike (collisions everywhere), the
    different rows are still told apart."""
    from softkmeans.sources import queries

    rng = np.random.default_rng(5)
    X = rng.integers(-2, 3, size=(3000, 4)).astype(dtype)  # at most 625 distinct rows
    X[::7, 0] = -0.0 * X[::7, 0]  # zeros of both signs in the same column
    X[::11] = rng.standard_normal((X[::11].shape[0], 4))  # rows seen once
    if collide:
        monkeypatch.setattr(queries, "_row_hashes", lambda rows: np.zeros(len(rows), np.uint64))
    got = queries.distinct_dense_rows(X)
    expected = np.unique(X, axis=0)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(np.unique(got, axis=0), expected)
    if not collide:  # each distinct row at its first place, in X's order
        first = sorted(np.unique(X, axis=0, return_index=True)[1])
        np.testing.assert_array_equal(got, X[first])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_distances_to_labels_are_scikit_learns_per_row_sums_at_any_thread_count(dtype):
    # The relocation's farthest rows are chosen on these bits: in place, in ~4 MiB row
    # blocks on threads, each row must still be NumPy's sum of its own squares.
    from softkmeans.sources.block_ops import sq_distances_to_labels

    rng = np.random.default_rng(3)
    n, d = 20_011, 129  # several blocks, the last one short
    X = (rng.standard_normal((n, d)) * rng.uniform(0.1, 1e3, size=(n, 1))).astype(dtype)
    C = rng.standard_normal((7, d)).astype(dtype)
    labels = rng.integers(0, 7, size=n)
    expected = ((X - C[labels]) ** 2).sum(axis=1)
    for threads in (1, 2, 3, 0):
        got = sq_distances_to_labels(X, C, labels, threads)
        assert got.dtype == dtype
        assert got.tobytes() == expected.tobytes(), threads
