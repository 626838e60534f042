"""Sparse input (SPEC.md, "Sparse input"): the csr_* kernels against the float64 reference
and against the dense kernels on the same values, over kinds x dtypes x SIMD levels x
thread counts; bitwise thread-count determinism; the structures scipy allows (empty rows,
all-zero columns, duplicate and unsorted indices, int32/int64 indices, other formats);
bad input; and the estimator on sparse X against the estimator on the same values dense.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn.cluster

import softkmeans
import softkmeans.reference as ref
from conftest import (
    DTYPES,
    KINDS,
    TOLERANCE,
    assert_identical,
    assert_rel_close,
    hard_label_mismatch_is_rounding,
)
from softkmeans import _native

THREADS = (1, 3)


def sparse_problem(n=300, d=23, k=5, *, dtype=np.float64, seed=0, density=0.25, integer=False):
    """A CSR X (n, d) with clustered stored values, an empty row, an all-zero column and
    rows of unequal length; C (k, d) dense, near k of its rows."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(k, d))
    labels = rng.integers(0, k, size=n)
    dense = centres[labels] + rng.normal(size=(n, d))
    dense *= rng.random((n, d)) < density
    dense[:, 3] = 0.0  # an all-zero column
    dense[7] = 0.0  # an empty row
    if integer:
        dense = np.round(4 * dense)
    C = dense[rng.choice(n, size=k, replace=False)] + rng.normal(scale=0.5, size=(k, d))
    if integer:
        C = np.round(4 * C)
    X = sp.csr_matrix(dense.astype(dtype))
    return X, C.astype(dtype)


def sigma_for(X, C):
    """A width at which soft responsibilities are neither one-hot nor uniform."""
    D = ref.sq_distances(X, C).astype(np.float64)
    return float(np.sqrt(0.25 * np.median(D)))


def weights(n, seed=1):
    w = np.random.default_rng(seed).uniform(0.5, 2.0, size=n)
    w[::17] = 0.0
    return w


# ------------------------------------------------------------------ parity with the reference


@pytest.mark.parametrize("n_threads", THREADS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("kind", KINDS)
def test_sparse_matches_the_reference(kind, dtype, n_threads, simd_level):
    X, C = sparse_problem(dtype=dtype)
    X64, C64 = X.astype(np.float64), C.astype(np.float64)
    w = weights(X.shape[0])
    sigma = sigma_for(X64, C64)
    what = f"{kind} {np.dtype(dtype).name} {simd_level} threads={n_threads}"

    D = softkmeans.sq_distances(X, C, n_threads=n_threads)
    assert D.dtype == dtype
    assert_rel_close(D, ref.sq_distances(X64, C64), dtype, f"D {what}")
    labels, mind = softkmeans.assign(X, C, n_threads=n_threads)
    ref_labels, ref_mind = ref.assign(X64, C64)
    if dtype == np.float64:
        np.testing.assert_array_equal(labels, ref_labels)
    else:
        assert hard_label_mismatch_is_rounding(X.toarray(), C, labels, ref_labels)
    assert_rel_close(mind, ref_mind, dtype, f"min D {what}")
    # Margins are differences of distances: their rounding is relative to D's scale.
    d_scale = float(np.max(ref_mind)) + float(np.max(np.sum(C64**2, axis=1)))
    assert_rel_close(
        softkmeans.margins(X, C, n_threads=n_threads), ref.margins(X64, C64), dtype, what, d_scale
    )
    r = softkmeans.responsibilities(X, C, sigma, kind=kind, n_threads=n_threads)
    assert_rel_close(r, ref.responsibilities(X64, C64, sigma, kind=kind), dtype, f"r {what}")

    step = softkmeans.centroid_step(X, C, sigma, kind=kind, sample_weight=w, n_threads=n_threads)
    expected = ref.centroid_step(X64, C64, sigma, kind=kind, sample_weight=w)
    assert step.centroids.dtype == dtype
    assert_rel_close(step.centroids, expected.centroids, dtype, f"step {what}")
    assert_rel_close(step.cluster_weights, expected.cluster_weights, dtype, f"N {what}")
    for field in ("objective", "distortion"):
        assert_rel_close(getattr(step, field), getattr(expected, field), dtype, f"{field} {what}")
    assert_rel_close(step.min_margin, expected.min_margin, dtype, f"min margin {what}", d_scale)
    np.testing.assert_array_equal(step.empty, expected.empty)
    obj = softkmeans.objective(X, C, sigma, kind=kind, sample_weight=w, n_threads=n_threads)
    assert_rel_close(obj, expected.objective, dtype, f"objective {what}")

    grad_X, grad_C = softkmeans.gradients(
        X, C, sigma, kind=kind, sample_weight=w, n_threads=n_threads
    )
    ref_gX, ref_gC = ref.gradients(X64, C64, sigma, kind=kind, sample_weight=w)
    assert isinstance(grad_X, np.ndarray) and grad_X.shape == X.shape  # dense, as documented
    assert_rel_close(grad_X, ref_gX, dtype, f"grad_X {what}")
    assert_rel_close(grad_C, ref_gC, dtype, f"grad_C {what}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("kind", KINDS)
def test_sparse_equals_dense_on_integer_values(kind, dtype, simd_level):
    """Integer-valued data: distances are exact in both paths, so labels, N and the hard
    and entmax15 steps agree exactly (an indexing bug cannot hide in a tolerance)."""
    X, C = sparse_problem(dtype=dtype, integer=True, seed=3)
    Xd = X.toarray()
    np.testing.assert_array_equal(softkmeans.sq_distances(X, C), softkmeans.sq_distances(Xd, C))
    np.testing.assert_array_equal(softkmeans.assign(X, C)[0], softkmeans.assign(Xd, C)[0])
    sigma = sigma_for(X, C)
    a = softkmeans.centroid_step(X, C, sigma, kind=kind)
    b = softkmeans.centroid_step(Xd, C, sigma, kind=kind)
    assert_rel_close(a.centroids, b.centroids, dtype, kind)
    if kind == "hard":
        np.testing.assert_array_equal(a.cluster_weights, b.cluster_weights)
        assert a.distortion == b.distortion


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("kind", KINDS)
def test_bitwise_identical_across_thread_counts(kind, dtype, simd_level):
    X, C = sparse_problem(n=2600, dtype=dtype, seed=5)  # 11 row tiles: several chunks
    w = weights(X.shape[0])
    sigma = sigma_for(X, C)
    results = [
        _native.block_stats(X, C, kind, sigma, w, t, labels=True, grad_x=True) for t in (1, 2, 3)
    ]
    for t, res in zip((2, 3), results[1:]):
        stats, lab, gX = res
        stats1, lab1, gX1 = results[0]
        assert_identical(tuple(stats) + (lab, gX), tuple(stats1) + (lab1, gX1), f"threads={t}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
def test_entmax15_below_the_threshold_is_the_hard_step_bit_for_bit(dtype):
    X, C = sparse_problem(dtype=dtype, seed=2)
    hard = softkmeans.centroid_step(X, C, kind="hard")
    sigma = 0.9 * np.sqrt(hard.min_margin) / 2
    ent = softkmeans.centroid_step(X, C, sigma, kind="entmax15")
    np.testing.assert_array_equal(ent.centroids, hard.centroids)
    np.testing.assert_array_equal(ent.cluster_weights, hard.cluster_weights)
    assert ent.objective == hard.distortion


# ------------------------------------------------------------------ structures scipy allows


def _messy_copy(X):
    """The same values with every row's entries reversed (unsorted) and the first stored
    entry of each non-empty row split into two duplicates that sum to it."""
    rows, data, cols = [], [], []
    for i in range(X.shape[0]):
        a, b = X.indptr[i], X.indptr[i + 1]
        c, v = X.indices[a:b][::-1], X.data[a:b][::-1]
        if c.size:
            c = np.concatenate([c[:1], c])
            v = np.concatenate([v[:1] * 0.25, v[:1] * 0.75, v[1:]]).astype(X.dtype)
        rows.append(np.full(c.size, i))
        cols.append(c)
        data.append(v)
    indptr = np.concatenate([[0], np.cumsum([c.size for c in cols])])
    messy = sp.csr_matrix(
        (np.concatenate(data), np.concatenate(cols), indptr), shape=X.shape, copy=False
    )
    assert not messy.has_sorted_indices
    return messy


def test_duplicates_are_summed_and_unsorted_indices_read_and_the_input_is_not_mutated():
    X, C = sparse_problem(integer=True)  # quarters of integers: the split sums exactly
    messy = _messy_copy(X)
    before = (messy.data.copy(), messy.indices.copy(), messy.indptr.copy())
    np.testing.assert_array_equal(softkmeans.sq_distances(messy, C), softkmeans.sq_distances(X, C))
    step = softkmeans.centroid_step(messy, C, kind="hard")
    np.testing.assert_array_equal(
        step.centroids, softkmeans.centroid_step(X, C, kind="hard").centroids
    )
    for got, want in zip((messy.data, messy.indices, messy.indptr), before):
        np.testing.assert_array_equal(got, want)
    assert not messy.has_sorted_indices


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "csr_array", "lil"])
def test_formats_and_index_types(fmt, index_dtype):
    X, C = sparse_problem(seed=4)
    expected = softkmeans.centroid_step(X, C, kind="hard")
    Y = X.copy()
    Y.indices = Y.indices.astype(index_dtype)
    Y.indptr = Y.indptr.astype(index_dtype)
    Y = sp.csr_array(Y) if fmt == "csr_array" else Y.asformat(fmt)
    got = softkmeans.centroid_step(Y, C, kind="hard")
    np.testing.assert_array_equal(got.centroids, expected.centroids)
    np.testing.assert_array_equal(softkmeans.assign(Y, C)[0], softkmeans.assign(X, C)[0])


def test_integer_values_are_cast_to_float64_like_dense():
    X, C = sparse_problem(integer=True)
    Xi = X.astype(np.int64)
    D = softkmeans.sq_distances(Xi, C)
    assert D.dtype == np.float64
    np.testing.assert_array_equal(D, softkmeans.sq_distances(Xi.toarray(), C))


def test_kmeans_plusplus_and_critical_sigma():
    X, _ = sparse_problem(n=400, seed=6)
    w = weights(X.shape[0])
    centers, idx = softkmeans.kmeans_plusplus(X, 6, sample_weight=w, random_state=0)
    dense_centers, dense_idx = softkmeans.kmeans_plusplus(
        X.toarray(), 6, sample_weight=w, random_state=0
    )
    np.testing.assert_array_equal(idx, dense_idx)
    np.testing.assert_array_equal(centers, dense_centers)
    for Y in (X, sp.random(300, 700, density=0.02, random_state=1, format="csr")):
        # d = 23: the covariance formed; d = 700: its top eigenvalue by Lanczos.
        expected = ref.critical_sigma(Y.toarray(), sample_weight=weights(Y.shape[0]))
        got = softkmeans.critical_sigma(Y, sample_weight=weights(Y.shape[0]))
        assert_rel_close(got, expected, np.float64, f"critical_sigma d={Y.shape[1]}")


# ------------------------------------------------------------------ bad input


def _error_of(f, *args):
    with pytest.raises((TypeError, ValueError)) as info:
        f(*args)
    return info.type, str(info.value)


@pytest.mark.parametrize("bad", ["nan", "inf", "complex", "huge", "empty", "columns"])
def test_bad_sparse_input_errors_like_dense(bad):
    X, C = sparse_problem(n=20, d=6, k=2)
    if bad in ("nan", "inf"):
        X = X.copy()
        X.data[4] = np.nan if bad == "nan" else np.inf
    elif bad == "complex":
        X = X.astype(np.complex128)
    elif bad == "huge":
        X = X.copy()
        X.data[0] = 1e200
    elif bad == "empty":
        X = sp.csr_matrix((0, 6))
    elif bad == "columns":
        C = C[:, :5]
    sparse_error = _error_of(softkmeans.assign, X, C)
    dense_error = _error_of(softkmeans.assign, X.toarray(), C)
    assert sparse_error == dense_error
    assert _error_of(ref.assign, X, C) == dense_error


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_out_of_range_indices_are_refused(index_dtype):
    X, C = sparse_problem(n=20, d=6, k=2)
    bad = X.copy()
    bad.indices = bad.indices.astype(index_dtype)
    bad.indptr = bad.indptr.astype(index_dtype)
    bad.indices[3] = np.iinfo(index_dtype).max  # an overflowed 64-bit (or 32-bit) index
    with pytest.raises(ValueError, match="indices must be in"):
        softkmeans.assign(bad, C)
    bad.indices[3] = -1
    with pytest.raises(ValueError, match="indices must be in"):
        softkmeans.centroid_step(bad, C, kind="hard")


def test_the_binding_refuses_non_canonical_structure():
    """The core indexes with the structure unchecked: the binding checks it first."""
    X, C = sparse_problem(n=20, d=6, k=2)
    indices = X.indices.copy()
    a = X.indptr[int(np.flatnonzero(np.diff(X.indptr) >= 2)[0])]
    indices[a], indices[a + 1] = indices[a + 1], indices[a]
    with pytest.raises(ValueError, match="strictly increasing"):
        softkmeans._core.csr_assign(X.data, indices, X.indptr, X.shape[1], C, 1)
    with pytest.raises(ValueError, match="indptr"):
        softkmeans._core.csr_assign(X.data, X.indices, X.indptr[::-1].copy(), 6, C, 1)


def test_the_bindings_structure_check_on_row_boundaries():
    """The binding's fast check counts the places where columns do not increase and
    requires each to start a non-empty row: valid matrices whose rows start below the
    previous row's last column (after empty rows too) pass, and every fault is named."""
    C = np.zeros((2, 6))
    data = np.ones(7)
    indptr = np.array([0, 3, 3, 3, 5, 7])  # rows 1 and 2 empty
    indices = np.array([2, 4, 5, 0, 5, 1, 5])  # each row starts below the last one's end
    for itype in (np.int32, np.int64):
        ind, ptr = indices.astype(itype), indptr.astype(itype)
        labels, _ = softkmeans._core.csr_assign(data, ind, ptr, 6, C, 1)
        np.testing.assert_array_equal(labels, np.zeros(5))
        faults = {
            "strictly increasing": (ind.copy(), ptr),  # a repeated column within a row
            "out of range": (ind.copy(), ptr),
            "indptr must be non-decreasing": (ind, ptr.copy()),
        }
        faults["strictly increasing"][0][4] = 0  # row 3 is (0, 0)
        faults["out of range"][0][6] = 6
        faults["indptr must be non-decreasing"][1][2] = 4
        for message, (bad_ind, bad_ptr) in faults.items():
            with pytest.raises(ValueError, match=message):
                softkmeans._core.csr_assign(data, bad_ind, bad_ptr, 6, C, 1)
        negative = ind.copy()
        negative[0] = -1
        with pytest.raises(ValueError, match="out of range"):
            softkmeans._core.csr_assign(data, negative, ptr, 6, C, 1)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_second_moment_matvec(dtype, index_dtype):
    """The product behind lambda_max of a sparse X: X^T diag(w) X v in float64 from the
    stored entries, the same bits on any thread count (the large case runs on a team)."""
    rng = np.random.default_rng(4)
    small, _ = sparse_problem(n=600, d=40, dtype=dtype, seed=3)
    large = sp.random(20_000, 300, density=0.1, random_state=5, format="csr", dtype=dtype)
    for X in (small, large):
        X = X.copy()
        X.indices = X.indices.astype(index_dtype)
        X.indptr = X.indptr.astype(index_dtype)
        w = weights(X.shape[0])
        v = rng.normal(size=X.shape[1])
        X64 = X.astype(np.float64)
        expected = X64.T @ (w * (X64 @ v))
        runs = [_native.csr_second_moment_matvec(X, w, v, t) for t in THREADS]
        scale = np.abs(X64).T @ (w * (np.abs(X64) @ np.abs(v)))  # no cancellation credit
        assert np.all(np.abs(runs[0] - expected) <= 1e-12 * scale + 1e-300)
        assert_identical(runs[0], runs[1], "threads")


# ------------------------------------------------------------------ the estimator


@pytest.mark.parametrize("assignment", KINDS)
def test_estimator_on_sparse_equals_estimator_on_dense(assignment):
    X, C = sparse_problem(n=400, seed=8)
    Xd = X.toarray()
    w = weights(X.shape[0])
    params = dict(n_clusters=C.shape[0], assignment=assignment, init=C, n_init=1)
    sparse_fit = softkmeans.SoftKMeans(**params).fit(X, sample_weight=w)
    dense_fit = softkmeans.SoftKMeans(**params).fit(Xd, sample_weight=w)
    np.testing.assert_array_equal(sparse_fit.labels_, dense_fit.labels_)
    assert sparse_fit.n_iter_ == dense_fit.n_iter_
    rtol = TOLERANCE[np.dtype(np.float64)]
    assert_rel_close(sparse_fit.cluster_centers_, dense_fit.cluster_centers_, np.float64, "C")
    assert abs(sparse_fit.inertia_ - dense_fit.inertia_) <= rtol * dense_fit.inertia_
    assert_rel_close(sparse_fit.critical_sigma_, dense_fit.critical_sigma_, np.float64, "crit")
    np.testing.assert_array_equal(sparse_fit.predict(X), dense_fit.predict(Xd))
    assert_rel_close(sparse_fit.transform(X), dense_fit.transform(Xd), np.float64, "transform")
    assert_rel_close(
        sparse_fit.predict_proba(X), dense_fit.predict_proba(Xd), np.float64, "predict_proba"
    )
    assert_rel_close(sparse_fit.score(X), dense_fit.score(Xd), np.float64, "score")
    np.testing.assert_array_equal(
        softkmeans.SoftKMeans(**params).fit_predict(X), dense_fit.fit_predict(Xd)
    )
    assert_rel_close(
        softkmeans.SoftKMeans(**params).fit_transform(X.tocsc()),
        dense_fit.fit_transform(Xd),
        np.float64,
        "fit_transform",
    )


def test_estimator_default_init_on_sparse():
    X, _ = sparse_problem(n=400, seed=9)
    a = softkmeans.SoftKMeans(5, assignment="hard", random_state=0).fit(X)
    b = softkmeans.SoftKMeans(5, assignment="hard", random_state=0).fit(X.toarray())
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert_rel_close(a.cluster_centers_, b.cluster_centers_, np.float64, "centres")


def test_annealing_and_partial_fit_on_sparse():
    X, _ = sparse_problem(n=300, seed=10)
    a = softkmeans.SoftKMeans(4, anneal=True, random_state=0).fit(X)
    b = softkmeans.SoftKMeans(4, anneal=True, random_state=0).fit(X.toarray())
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert_rel_close(a.cluster_centers_, b.cluster_centers_, np.float64, "annealed centres")
    s = softkmeans.SoftKMeans(4, assignment="hard", random_state=0)
    t = softkmeans.SoftKMeans(4, assignment="hard", random_state=0)
    for start in (0, 150):
        s.partial_fit(X[start : start + 150])
        t.partial_fit(X[start : start + 150].toarray())
    assert_rel_close(s.cluster_centers_, t.cluster_centers_, np.float64, "streamed centres")


def test_hard_fit_on_sparse_equals_sklearn_kmeans_on_sparse():
    """The drop-in on text-like data: unit rows of few terms, centroids that are means of
    random groups (no exact distance ties), scikit-learn's sparse Lloyd from the same init."""
    rng = np.random.default_rng(11)
    X = sp.random(600, 80, density=0.06, random_state=11, format="csr")
    X = sp.csr_matrix(
        sp.diags(1.0 / np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel() + 1e-300)) @ X
    )
    groups = rng.integers(0, 6, size=X.shape[0])
    C = np.stack([np.asarray(X[groups == j].mean(axis=0)).ravel() for j in range(6)])
    ours = softkmeans.SoftKMeans(6, assignment="hard", init=C, n_init=1).fit(X)
    peer = sklearn.cluster.KMeans(6, init=C, n_init=1, algorithm="lloyd").fit(X)
    np.testing.assert_array_equal(ours.labels_, peer.labels_)
    assert ours.n_iter_ == peer.n_iter_
    assert_rel_close(ours.cluster_centers_, peer.cluster_centers_, np.float64, "centres")
    assert abs(ours.inertia_ - peer.inertia_) <= 1e-10 * peer.inertia_
