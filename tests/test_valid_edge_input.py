"""Valid but unusual input over every public function, in both backends: lossless
conversions (bool, int, uint, float16, lists) give the float64 result; layouts
(non-contiguous, Fortran, negatively strided, read-only, byte-swapped, zero-stride) give the
contiguous array's result; degenerate problems (k > n, k = n, all points identical,
duplicate centroids, one centroid, zero weights, n = 1, d = 1, extreme entmax15 scores) give
the documented results, computed here by hand. The bad-input battery is test_bad_input.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import softkmeans
from conftest import API_CALLS, assert_identical
from softkmeans import _validation, reference

BACKENDS = {"native": softkmeans, "reference": reference}
KINDS = ("hard", "softmax", "entmax15")
XC_FUNCS = {name: f for name, f in API_CALLS.items() if name not in ("entmax15", "critical_sigma")}
SIGMA_FUNCS = ("responsibilities", "objective", "centroid_step", "gradients")


def _backend_params():
    return pytest.mark.parametrize("backend", list(BACKENDS))


# ---------------------------------------------------------------------------------------
# Conversions: lossless ones give the float64 result, layouts give the contiguous result
# ---------------------------------------------------------------------------------------

XI = np.array([[0, 1], [2, 3], [4, 4], [9, 1], [3, 7], [8, 8]], dtype=np.int64)
CI = np.array([[1, 1], [8, 2], [4, 6]], dtype=np.int64)
WI = np.array([1, 2, 1, 3, 1, 2], dtype=np.int64)


def _call_all(api, X, C, w=None, s=1.3):
    """Every function of (X, C) in every kind, plus critical_sigma."""
    out = []
    for fname, f in XC_FUNCS.items():
        for kind in KINDS if fname in SIGMA_FUNCS else ("softmax",):
            out.append((f"{fname}-{kind}", f(api, X, C, s, kind, w)))
    out.append(("critical_sigma", api.critical_sigma(X, sample_weight=w)))
    return out


def _assert_all_identical(got, expected):
    for (name, a), (_, b) in zip(got, expected):
        assert_identical(a, b, name)


def _same_conversion(conv):
    return lambda: (conv(XI), conv(CI), conv(WI))


# (X, C, sample_weight) in lossless forms. "each-its-own": X, C and sample_weight of
# different dtypes each convert to float64 on their own.
LOSSLESS = {
    "int32": _same_conversion(lambda a: a.astype(np.int32)),
    "uint8": _same_conversion(lambda a: a.astype(np.uint8)),
    "uint64": _same_conversion(lambda a: a.astype(np.uint64)),
    "int16": _same_conversion(lambda a: a.astype(np.int16)),
    "float16": _same_conversion(lambda a: a.astype(np.float16)),
    "list": _same_conversion(lambda a: a.tolist()),
    "float64-bigendian": _same_conversion(lambda a: a.astype(">f8")),
    "int32-be": _same_conversion(lambda a: a.astype(">i4")),
    "each-its-own": lambda: (XI.astype(np.int32), CI.astype(np.int64), WI.astype(np.uint8)),
    "bool": lambda: (XI > 3, CI > 3, np.array([True, False, True, True, False, True])),
}


@_backend_params()
@pytest.mark.parametrize("form", list(LOSSLESS))
def test_lossless_conversions_equal_float64(backend, form):
    """Every function gives the result of the same values as float64 arrays."""
    api = BACKENDS[backend]
    X, C, w = LOSSLESS[form]()
    expected = _call_all(api, *(np.asarray(a).astype(np.float64) for a in (X, C, w)))
    _assert_all_identical(_call_all(api, X, C, w), expected)


@_backend_params()
def test_dtypes_of_outputs(backend):
    """float32 stays float32 (C is cast to X's dtype), float64 and converted types give float64."""
    api = BACKENDS[backend]
    for Xd, Cd, expected in [
        (np.float32, np.float64, np.float32),
        (np.float32, np.int64, np.float32),
        (">f4", np.float32, np.float32),
        (np.float64, np.float32, np.float64),
        (np.int64, np.float32, np.float64),
        (np.float16, np.float16, np.float64),
    ]:
        D = api.sq_distances(XI.astype(Xd), CI.astype(Cd))
        assert D.dtype == expected, (Xd, Cd, D.dtype)
        step = api.centroid_step(XI.astype(Xd), CI.astype(Cd), 1.0)
        assert step.centroids.dtype == expected
        assert step.cluster_weights.dtype == np.float64
        assert step.empty.dtype == np.bool_
        labels, mind = api.assign(XI.astype(Xd), CI.astype(Cd))
        assert labels.dtype == np.int64 and mind.dtype == expected


def _layouts(a):
    """The same values as `a` in layouts that are not C-contiguous (or not writeable)."""
    big = np.zeros((a.shape[0] * 2, a.shape[1] * 3), dtype=a.dtype)
    big[::2, ::3] = a
    rev = np.ascontiguousarray(a[::-1, ::-1])[::-1, ::-1]
    ro = a.copy()
    ro.flags.writeable = False
    return {
        "strided": big[::2, ::3],
        "fortran": np.asfortranarray(a),
        "negative-strides": rev,
        "reversed-rows": np.ascontiguousarray(a[::-1])[::-1],
        "read-only": ro,
        "transposed-view": np.ascontiguousarray(a.T).T,
    }


@_backend_params()
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "layout",
    ["strided", "fortran", "negative-strides", "reversed-rows", "read-only", "transposed-view"],
)
def test_layouts_give_the_contiguous_result(backend, dtype, layout):
    api = BACKENDS[backend]
    X, C = XI.astype(dtype) / 3, CI.astype(dtype) / 3
    w = WI.astype(np.float64)
    wl = np.zeros(2 * len(w))
    wl[::2] = w
    expected = _call_all(api, X, C, w)
    Xl, Cl = _layouts(X)[layout], _layouts(C)[layout]
    assert not (Xl.flags.c_contiguous and Xl.flags.writeable)
    _assert_all_identical(_call_all(api, Xl, Cl, wl[::2]), expected)
    if dtype == np.float64:  # Z through entmax15
        Z = -api.sq_distances(X, C)
        assert_identical(api.entmax15(_layouts(Z)[layout]), api.entmax15(Z), "entmax15")


@_backend_params()
def test_read_only_inputs_are_not_modified(backend):
    api = BACKENDS[backend]
    X, C, w = XI.astype(float), CI.astype(float), WI.astype(float)
    for a in (X, C, w):
        a.flags.writeable = False
    before = [X.copy(), C.copy(), w.copy()]
    _call_all(api, X, C, w)
    for a, b in zip((X, C, w), before):
        np.testing.assert_array_equal(a, b)


@_backend_params()
def test_broadcast_zero_stride_inputs(backend):
    """A view with stride 0 (np.broadcast_to) works and equals its materialized copy."""
    api = BACKENDS[backend]
    X = np.broadcast_to(np.array([1.0, 2.0]), (5, 2))
    C = np.array([[0.0, 0.0], [1.0, 2.5]])
    _assert_all_identical(_call_all(api, X, C), _call_all(api, X.copy(), C))


def test_no_copy_when_already_valid():
    for dtype in (np.float32, np.float64):
        a = np.ones((4, 3), dtype=dtype)
        assert _validation.check_data(a) is a
        assert _validation.check_centroids(a, a) is a
        Z = np.zeros((4, 3), dtype=dtype)
        assert _validation.check_scores(Z) is Z
    w = np.ones(4)
    assert _validation.check_sample_weight(w, 4) is w


def test_validated_arrays_are_c_contiguous_and_canonical():
    """The binding dispatches on dtype identity: byte-swapped input must come out canonical."""
    for src, expected in [(">f4", np.float32), (">f8", np.float64), ("<f4", np.float32)]:
        a = _validation.check_data(np.ones((3, 2), dtype=src))
        assert a.dtype is np.dtype(expected) and a.flags.c_contiguous


# ---------------------------------------------------------------------------------------
# Degenerate but valid problems: documented results, computed by hand
# ---------------------------------------------------------------------------------------


@_backend_params()
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_k_greater_than_n_leaves_clusters_empty(backend, dtype):
    """k > n is a valid step: points pick their nearest centroids, the others are empty."""
    api = BACKENDS[backend]
    X = np.array([[0.0], [10.0]], dtype=dtype)
    C = np.array([[0.0], [1.0], [9.0], [10.0], [20.0]], dtype=dtype)
    step = api.centroid_step(X, C, kind="hard")
    np.testing.assert_array_equal(step.empty, [False, True, True, False, True])
    np.testing.assert_array_equal(step.cluster_weights, [1, 0, 0, 1, 0])
    np.testing.assert_array_equal(step.centroids, C)  # the occupied ones are already at the mean
    assert step.distortion == 0.0 and step.objective == 0.0
    assert step.min_margin == 1.0  # both points: next centroid at distance 1
    labels, mind = api.assign(X, C)
    np.testing.assert_array_equal(labels, [0, 3])
    # entmax15 at small sigma: one-hot, identical to hard (Delta = 1 >= 4 sigma^2).
    step_e = api.centroid_step(X, C, 0.1, kind="entmax15")
    np.testing.assert_array_equal(step_e.empty, step.empty)
    # softmax at a moderate sigma: every cluster gets some mass, none empty, N sums to W = 2.
    step_s = api.centroid_step(X, C, 3.0, kind="softmax")
    assert not step_s.empty.any()
    assert abs(step_s.cluster_weights.sum() - 2.0) < 1e-6
    r = api.responsibilities(X, C, 3.0, kind="softmax")
    assert r.shape == (2, 5)


@_backend_params()
def test_k_equal_n(backend):
    api = BACKENDS[backend]
    X = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0]])
    C = X.copy()
    labels, mind = api.assign(X, C)
    np.testing.assert_array_equal(labels, [0, 1, 2])
    np.testing.assert_array_equal(mind, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(api.margins(X, C), [9.0, 9.0, 16.0])
    step = api.centroid_step(X, C, kind="hard")
    np.testing.assert_array_equal(step.centroids, X)
    assert not step.empty.any() and step.objective == 0.0 and step.min_margin == 9.0
    # entmax15 below the exact-recovery threshold sqrt(Delta_min)/2 = 1.5 equals hard.
    np.testing.assert_array_equal(api.responsibilities(X, C, 1.4, kind="entmax15"), np.eye(3))


@_backend_params()
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_all_points_identical(backend, dtype):
    """All D_ij = 0: Delta_min = 0, soft maps share equally, hard picks centroid 0."""
    api = BACKENDS[backend]
    k, n, sigma = 3, 5, 0.5
    X = np.full((n, 2), 7.0, dtype=dtype)
    C = X[:k].copy()
    w = np.arange(1.0, n + 1)
    W = w.sum()
    np.testing.assert_array_equal(api.margins(X, C), np.zeros(n))
    labels, _ = api.assign(X, C)
    np.testing.assert_array_equal(labels, np.zeros(n))
    for kind in ("softmax", "entmax15"):
        r = api.responsibilities(X, C, sigma, kind=kind)
        np.testing.assert_allclose(r, np.full((n, k), 1 / 3), rtol=1e-6)
    T = 2 * sigma**2
    F = api.objective(X, C, sigma, kind="softmax", sample_weight=w)
    np.testing.assert_allclose(F, -T * W * np.log(k), rtol=1e-6)  # J - F attains its bound
    G = api.objective(X, C, sigma, kind="entmax15", sample_weight=w)
    np.testing.assert_allclose(G, -T * W * (4 / 3) * (1 - k**-0.5), rtol=1e-6)
    step = api.centroid_step(X, C, kind="hard", sample_weight=w)
    np.testing.assert_array_equal(step.empty, [False, True, True])
    np.testing.assert_array_equal(step.centroids, C)
    assert step.min_margin == 0.0 and step.distortion == 0.0
    for kind in ("softmax", "entmax15"):
        step = api.centroid_step(X, C, sigma, kind=kind, sample_weight=w)
        np.testing.assert_allclose(step.cluster_weights, np.full(k, W / k), rtol=1e-6)
        np.testing.assert_array_equal(step.centroids, C)
        assert step.min_margin == 0.0
    gX, gC = api.gradients(X, C, sigma, kind="softmax")
    # Zero up to the rounding of sum_j r_ij c_j (r = 1/3 is inexact): |x| = 7 sets the scale.
    np.testing.assert_allclose(gX, 0.0, atol=1e-5 * 7)
    np.testing.assert_allclose(gC, 0.0, atol=1e-5 * 7 * n)
    assert api.critical_sigma(X, sample_weight=w) == 0.0


@_backend_params()
def test_duplicate_centroids_share_and_hard_ties_go_to_smallest_index(backend):
    api = BACKENDS[backend]
    X = np.array([[0.0, 0.0], [0.5, 0.0], [10.0, 0.0], [9.0, 1.0]])
    C = np.array([[0.0, 0.0], [0.0, 0.0], [10.0, 0.0]])
    labels, _ = api.assign(X, C)
    np.testing.assert_array_equal(labels, [0, 0, 2, 2])
    np.testing.assert_array_equal(api.margins(X, C)[:2], [0.0, 0.0])
    for kind in ("softmax", "entmax15"):
        r = api.responsibilities(X, C, 0.05, kind=kind)
        np.testing.assert_array_equal(r[:, 0], r[:, 1])  # identical columns, exactly
        np.testing.assert_allclose(r[:2, :2], 0.5, rtol=1e-12)
    step = api.centroid_step(X, C, kind="hard")
    np.testing.assert_array_equal(step.empty, [False, True, False])
    np.testing.assert_array_equal(step.centroids, [[0.25, 0.0], [0.0, 0.0], [9.5, 0.5]])
    assert step.min_margin == 0.0


@_backend_params()
def test_single_centroid(backend):
    api = BACKENDS[backend]
    X = np.array([[0.0], [2.0], [4.0]])
    C = np.array([[1.0]])
    for kind in ("softmax", "entmax15"):
        np.testing.assert_array_equal(api.responsibilities(X, C, 0.3, kind=kind), np.ones((3, 1)))
        # log k = 0 and H(one-hot) = 0: every objective equals J = 1 + 1 + 9.
        assert api.objective(X, C, 0.3, kind=kind) == pytest.approx(11.0, rel=1e-12)
    step = api.centroid_step(X, C, kind="hard")
    assert step.min_margin == float("inf")
    np.testing.assert_array_equal(step.centroids, [[2.0]])


@_backend_params()
def test_zero_weights_exclude_points(backend):
    """w_i = 0 removes point i: same step as dropping it (margins only over w_i > 0)."""
    api = BACKENDS[backend]
    X = np.array([[0.0], [1.0], [5.0], [100.0]])
    C = np.array([[0.0], [6.0]])
    w = np.array([1.0, 1.0, 1.0, 0.0])
    for kind, s in (("hard", None), ("softmax", 1.0), ("entmax15", 1.0)):
        a = api.centroid_step(X, C, s, kind=kind, sample_weight=w)
        b = api.centroid_step(X[:3], C, s, kind=kind)
        np.testing.assert_allclose(a.centroids, b.centroids, rtol=1e-12)
        assert a.objective == pytest.approx(b.objective, rel=1e-12)
        assert a.min_margin == pytest.approx(b.min_margin, rel=1e-12)
    assert api.critical_sigma(X, sample_weight=w) == pytest.approx(
        api.critical_sigma(X[:3]), rel=1e-12
    )


@_backend_params()
def test_n_equals_one_and_d_equals_one(backend):
    api = BACKENDS[backend]
    X = np.array([[3.0]])
    C = np.array([[1.0], [4.0]])
    np.testing.assert_array_equal(api.sq_distances(X, C), [[4.0, 1.0]])
    np.testing.assert_array_equal(api.margins(X, C), [3.0])
    step = api.centroid_step(X, C, kind="hard")
    np.testing.assert_array_equal(step.empty, [True, False])
    np.testing.assert_array_equal(step.centroids, [[1.0], [3.0]])
    assert api.critical_sigma(X) == 0.0


@_backend_params()
def test_entmax15_extreme_finite_scores(backend):
    """Scores spanning the float64 range: the top entry alone gets everything, no overflow."""
    api = BACKENDS[backend]
    Z = np.array([[1e300, -1e300, 0.0], [-1e308, -1e308, -1e308], [1.0, 1.0, -5.0]])
    r = api.entmax15(Z)
    assert np.isfinite(r).all()
    np.testing.assert_array_equal(r[0], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(r[1], [1 / 3] * 3, rtol=1e-12)
    np.testing.assert_allclose(r[2], [0.5, 0.5, 0.0], rtol=1e-12)
