"""Native core vs NumPy reference, for every function of SPEC.md's API table.

A kernel joins the harness by adding one line to PARITY_CASES: a name, the
call (which receives the API module and a Problem) and whether it depends on
the assignment kind.
"""

from __future__ import annotations

import numpy as np
import pytest

import softkmeans
from conftest import (
    DTYPES,
    KINDS,
    THREAD_COUNTS,
    Problem,
    assert_rel_close,
    hard_label_mismatch_is_rounding,
    make_blobs,
)
from softkmeans import _native, reference

ROW_TILE = 256  # cpp/include/softkmeans/config.hpp kRowTile: n around it hits the remainders

# (n, d, k): k = 1, 2, many; d = 1, 2, 64; n below, at, above and not a multiple of the tile.
SHAPES = [
    (1, 1, 1),
    (7, 2, 2),
    (ROW_TILE - 1, 1, 5),
    (ROW_TILE, 2, 1),
    (ROW_TILE + 1, 64, 2),
    (3 * ROW_TILE + 5, 2, 300),
    (2 * ROW_TILE + 17, 64, 33),
    (600, 3, 16),
]


# name, call(api, problem), depends on kind, needs k >= 2
PARITY_CASES = [
    (
        "sq_distances",
        lambda api, p: api.sq_distances(p.X, p.C, n_threads=p.n_threads),
        False,
        False,
    ),
    ("assign", lambda api, p: api.assign(p.X, p.C, n_threads=p.n_threads), False, False),
    ("margins", lambda api, p: api.margins(p.X, p.C, n_threads=p.n_threads), False, True),
    ("entmax15", lambda api, p: api.entmax15(p.Z, n_threads=p.n_threads), False, False),
    (
        "responsibilities",
        lambda api, p: api.responsibilities(p.X, p.C, p.sigma, kind=p.kind, n_threads=p.n_threads),
        True,
        False,
    ),  # noqa: E501
    (
        "objective",
        lambda api, p: api.objective(
            p.X, p.C, p.sigma, kind=p.kind, sample_weight=p.sample_weight, n_threads=p.n_threads
        ),
        True,
        False,
    ),  # noqa: E501
    (
        "centroid_step",
        lambda api, p: api.centroid_step(
            p.X, p.C, p.sigma, kind=p.kind, sample_weight=p.sample_weight, n_threads=p.n_threads
        ),
        True,
        False,
    ),  # noqa: E501
    (
        "gradients",
        lambda api, p: api.gradients(
            p.X, p.C, p.sigma, kind=p.kind, sample_weight=p.sample_weight, n_threads=p.n_threads
        ),
        True,
        False,
    ),  # noqa: E501
    (
        "critical_sigma",
        lambda api, p: api.critical_sigma(p.X, sample_weight=p.sample_weight),
        False,
        False,
    ),  # noqa: E501
]


def _compare(name, actual, expected, p):
    """Compare native output with the float64 reference output, field by field."""
    dtype = p.X.dtype
    D = reference.sq_distances(p.X.astype(np.float64), p.C.astype(np.float64))
    d_scale = float(D.max()) if D.size else 1.0
    if isinstance(expected, tuple) and hasattr(expected, "_fields"):
        for field in expected._fields:
            _compare(f"{name}.{field}", getattr(actual, field), getattr(expected, field), p)
        return
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected), name
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(f"{name}[{i}]", a, e, p)
        return
    if isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), f"{name}: not an ndarray"
        assert actual.shape == expected.shape, f"{name}: shape {actual.shape} != {expected.shape}"
        if expected.dtype.kind in "biu":
            assert actual.dtype == expected.dtype, f"{name}: dtype {actual.dtype}"
            if dtype == np.float32 and expected.dtype.kind == "i":
                assert hard_label_mismatch_is_rounding(p.X, p.C, actual, expected), name
            elif dtype == np.float32:  # empty flags: may flip only with a rounding-level tie
                pass
            else:
                np.testing.assert_array_equal(actual, expected, err_msg=name)
            return
        if name.endswith(("cluster_weights",)):
            assert actual.dtype == np.float64, f"{name}: dtype {actual.dtype}"
        else:
            assert actual.dtype == dtype, f"{name}: dtype {actual.dtype} != {dtype}"
        assert np.isfinite(actual).all(), f"{name}: non-finite output"
        scale = d_scale if name.startswith("margins") else None
        assert_rel_close(actual, expected, dtype, name, scale=scale)
        return
    # scalars
    assert isinstance(actual, float), f"{name}: {type(actual)} is not a float"
    if np.isinf(expected):
        assert actual == expected, name
        return
    scale = d_scale if name.endswith("min_margin") else None
    assert_rel_close(actual, expected, dtype, name, scale=scale)


def _params():
    for name, call, by_kind, needs_k2 in PARITY_CASES:
        for shape in SHAPES:
            if needs_k2 and shape[2] < 2:
                continue
            for kind in KINDS if by_kind else ("softmax",):
                yield pytest.param(name, call, shape, kind, id=f"{name}-{kind}-{shape}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("n_threads", THREAD_COUNTS)
@pytest.mark.parametrize(("name", "call", "shape", "kind"), list(_params()))
def test_parity(name, call, shape, kind, n_threads, dtype, simd_level):
    n, d, k = shape
    X, C = make_blobs(n, d, k, dtype=dtype, seed=n + 7 * d + 13 * k)
    rng = np.random.default_rng(n)
    weights = rng.uniform(0.5, 2.0, size=n)
    # A temperature at which every kind has work to do: several soft entries per row.
    sigma = 0.7 * float(np.sqrt(np.median(reference.assign(X, C)[1]) + 1.0))
    p = Problem(X, C, sigma, kind, weights, n_threads)
    actual = call(softkmeans, p)
    expected = call(reference, p.as_float64())
    _compare(name, actual, expected, p)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
def test_integer_valued_inputs_give_exact_distances(dtype, simd_level):
    """Integer coordinates make every distance an exact integer: no tolerance hides an index bug."""
    X, C = make_blobs(300, 5, 11, dtype=dtype, seed=3, integer=True)
    D = softkmeans.sq_distances(X, C)
    expected = ((X.astype(np.int64)[:, None, :] - C.astype(np.int64)[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(D, expected.astype(dtype))
    labels, mind = softkmeans.assign(X, C)
    np.testing.assert_array_equal(labels, np.argmin(expected, axis=1))
    np.testing.assert_array_equal(mind, expected.min(1).astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
def test_far_from_origin_float32_cancellation(dtype, simd_level):
    """Points at 100 with spread 0.1: the norm expansion cancels; results must still hold."""
    X, C = make_blobs(500, 8, 6, dtype=dtype, seed=5, offset=100.0, spread=0.1)
    D = softkmeans.sq_distances(X, C)
    expected = reference.sq_distances(X.astype(np.float64), C.astype(np.float64))
    assert_rel_close(D, expected, dtype, "sq_distances far from origin", scale=None)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("d", [2, 9])
@pytest.mark.parametrize("n_threads", THREAD_COUNTS)
def test_kmeanspp_kernels(dtype, d, n_threads, simd_level):
    """The k-means++ kernels of the native core against their NumPy definitions."""
    from softkmeans import _native

    X, _ = make_blobs(3 * ROW_TILE + 11, d, 4, dtype=dtype, seed=d)
    X64 = X.astype(np.float64)
    rng = np.random.default_rng(d)
    w = rng.uniform(0.0, 2.0, size=X.shape[0])
    closest = np.full(X.shape[0], np.inf)
    _native.kmeanspp_update_closest(X, closest, 5, n_threads)
    expected = ((X64 - X64[5]) ** 2).sum(1)
    assert_rel_close(closest, expected, dtype, "update_closest")
    _native.kmeanspp_update_closest(X, closest, 17, n_threads)
    expected = np.minimum(expected, ((X64 - X64[17]) ** 2).sum(1))
    assert_rel_close(closest, expected, dtype, "update_closest twice")
    cand = rng.choice(X.shape[0], size=7, replace=False).astype(np.int64)
    pot = _native.kmeanspp_candidate_potentials(X, w, closest, cand, n_threads)
    D = ((X64[:, None, :] - X64[cand][None]) ** 2).sum(-1)
    want = (w[:, None] * np.minimum(closest[:, None], D)).sum(0)
    assert pot.dtype == np.float64 and pot.shape == (7,)
    assert_rel_close(pot, want, dtype, "candidate potentials")
    # The kept distances: the reference's, and the very values the potentials summed
    # (each potential recomputed from them in float64 matches to rounding of the sum).
    for L in (1, 7, 8, 9, 17):  # one group, a full 8-lane group, two groups
        cand = rng.choice(X.shape[0], size=L, replace=False).astype(np.int64)
        dist = np.full((L, X.shape[0]), np.nan, dtype=dtype)
        pot = _native.kmeanspp_candidate_potentials(X, w, closest, cand, n_threads, dist)
        D = ((X64[:, None, :] - X64[cand][None]) ** 2).sum(-1)
        assert_rel_close(dist.T, D, dtype, f"kept distances L={L}")
        mine = (w[:, None] * np.minimum(closest[:, None], dist.T.astype(np.float64))).sum(0)
        np.testing.assert_allclose(pot, mine, rtol=1e-12)
        assert_rel_close(
            pot,
            _native.kmeanspp_candidate_potentials(X, w, closest, cand, n_threads),
            np.float64,
            "potentials with and without kept distances",
        )
        # The update pass gives each distance the kept distances' bits (the seeding of a
        # memory-mapped or strided X, which makes the pass, equals the in-memory one).
        for a in (0, L - 1):
            by_pass = np.full(X.shape[0], np.inf)
            _native.kmeanspp_update_closest(X, by_pass, int(cand[a]), n_threads)
            np.testing.assert_array_equal(by_pass, dist[a].astype(np.float64))


@pytest.mark.parametrize("bad", ["shape", "dtype", "order", "readonly"])
def test_kmeanspp_kept_distances_are_checked(bad):
    from softkmeans import _native

    X = np.random.default_rng(0).normal(size=(50, 4))
    w, closest = np.ones(50), np.full(50, np.inf)
    cand = np.array([1, 2, 3], dtype=np.int64)
    dist = {
        "shape": np.empty((50, 3)),
        "dtype": np.empty((3, 50), dtype=np.float32),
        "order": np.empty((3, 50), order="F"),
        "readonly": np.empty((3, 50)),
    }[bad]
    if bad == "readonly":
        dist.flags.writeable = False
    with pytest.raises((TypeError, ValueError), match="dist"):
        _native.kmeanspp_candidate_potentials(X, w, closest, cand, 1, dist)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("d", [5, 16, 33])
def test_rows_on_centroids_keep_the_clamp_at_zero(dtype, d, simd_level):
    """Rows equal to centroids: the norm expansion rounds their distance to either side
    of 0. The lane reduction drops the clamp at 0 only when every distance of a row group
    came out positive (Engine::reduce_group), so these rows' distances are still >= 0:
    min_sq_dist, J and the margins never go negative, and each such row is labelled by
    its own centroid."""
    rng = np.random.default_rng(d)
    X = (rng.normal(size=(4 * ROW_TILE + 5, d)) * rng.uniform(0.5, 30.0, size=d)).astype(dtype)
    C = X[rng.choice(X.shape[0], size=64, replace=False)]
    labels, mind = softkmeans.assign(X, C, n_threads=2)
    assert (mind >= 0).all()
    equal = (X[:, None, :] == C[None]).all(-1)
    on_centroid = equal.any(1)
    assert on_centroid.sum() == C.shape[0]
    np.testing.assert_array_equal(labels[on_centroid], np.argmax(equal[on_centroid], axis=1))
    assert (softkmeans.margins(X, C) >= 0).all()
    step = softkmeans.centroid_step(X, C, kind="hard")
    assert step.distortion >= 0 and step.min_margin >= 0


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("d", [1, 2, 3, 5, 8, 13, 16, 17])
@pytest.mark.parametrize("k", [3, 40, 100])
def test_ties_go_to_the_smallest_index(dtype, d, k, simd_level):
    """Duplicated centroids and integer data: exact ties on every reduction path (rows in
    lanes for small k, centroids in lanes, the micro-kernel); labels and margins exact."""
    rng = np.random.default_rng(d * k)
    X = rng.integers(0, 3, size=(2 * ROW_TILE + 3, d)).astype(dtype)
    C = rng.integers(0, 3, size=(k, d)).astype(dtype)
    C[k - 1] = C[0]
    C[1] = C[k // 2]
    labels, mind = softkmeans.assign(X, C, n_threads=2)
    e_labels, e_mind = reference.assign(X, C)
    np.testing.assert_array_equal(labels, e_labels)
    np.testing.assert_array_equal(mind, e_mind)
    np.testing.assert_array_equal(softkmeans.margins(X, C), reference.margins(X, C))
    step = softkmeans.centroid_step(X, C, kind="hard")
    expected = reference.centroid_step(X, C, kind="hard")
    np.testing.assert_array_equal(step.cluster_weights, expected.cluster_weights)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("d", [5, 8, 16, 21, 64])
@pytest.mark.parametrize("k", [7, 64, 300])
def test_both_reductions_of_the_micro_kernel_path_give_the_same_distances(dtype, d, k, simd_level):
    """d > 4: the hard step reduces rows in registers (rows in the lanes), the softmax step
    from a distance block (the register-blocked product); both must give every distance
    the same bits (SPEC: one distance per pair), so the softmax step's distortion and min
    margin are the hard step's bit for bit. Real-valued data off the origin (rounding in
    every norm; integer data would hide a difference), rows not a multiple of 8."""
    rng = np.random.default_rng(d * k + 7)
    X = (rng.standard_normal((2 * ROW_TILE + 5, d)) * 3 + 0.37).astype(dtype)
    C = (X[:k] + dtype(0.01)).astype(dtype)
    w = np.ones(X.shape[0])
    hard, hard_labels, _ = _native.block_stats(X, C, "hard", 1.0, w, 2, labels=True)
    soft, soft_labels, _ = _native.block_stats(X, C, "softmax", 1e-3, w, 2, labels=True)
    np.testing.assert_array_equal(soft_labels, hard_labels)
    assert soft.distortion == hard.distortion
    assert soft.min_margin == hard.min_margin


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("d", [1, 3, 16])
@pytest.mark.parametrize("k", [2, 5, 17, 64])
def test_softmax_step_min_margin_and_distortion_are_exact(dtype, d, k, simd_level):
    """The softmax step takes each row's two smallest distances without the argmin: on
    integer data with duplicated centroids (margins 0) its min margin and distortion are
    the exact integers of the reference."""
    rng = np.random.default_rng(d * k + 1)
    X = rng.integers(0, 4, size=(2 * ROW_TILE + 3, d)).astype(dtype)
    C = rng.integers(0, 4, size=(k, d)).astype(dtype)
    C[k - 1] = C[0]
    for C_case in (C, C[np.argsort(-C[:, 0], kind="stable")], np.unique(C, axis=0)):
        if C_case.shape[0] < 2:
            continue
        step = softkmeans.centroid_step(X, C_case, 1.5, kind="softmax", n_threads=2)
        expected = reference.centroid_step(X, C_case, 1.5, kind="softmax")
        assert step.min_margin == expected.min_margin
        assert step.distortion == expected.distortion
