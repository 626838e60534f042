"""Tests of the pure-NumPy reference (softkmeans.reference) against independent computations.

Nothing here compares the reference with itself: distances, assignments and margins are
recomputed with Python loops, softmax with scipy, entmax15 by bisection, gradients by
central finite differences, the critical temperature with numpy.linalg.eigvalsh, and a
tiny case is worked out by hand. Property tests (hypothesis) check the bounds and limits
that SPEC.md states.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from reference_oracles import (
    KINDS,
    PROPERTY,
    bisect_entmax15,
    loop_assign,
    loop_lloyd_step,
    loop_margins,
    loop_sq_distances,
    problems,
    random_problem,
    weighted_covariance,
)
from scipy.special import logsumexp, softmax

import softkmeans.reference as ref
from softkmeans._types import StepResult

# ---------------------------------------------------------------------------------------
# A tiny case computed by hand
# ---------------------------------------------------------------------------------------

# 1-D points 0, 1, 2, 6 and centroids 0, 4. The point 2 is tied (D = 4, 4).
HAND_X = np.array([[0.0], [1.0], [2.0], [6.0]])
HAND_C = np.array([[0.0], [4.0]])


def test_hand_distances_labels_margins():
    D = ref.sq_distances(HAND_X, HAND_C)
    np.testing.assert_array_equal(D, [[0, 16], [1, 9], [4, 4], [36, 4]])
    labels, mins = ref.assign(HAND_X, HAND_C)
    np.testing.assert_array_equal(labels, [0, 0, 0, 1])  # the tie goes to centroid 0
    assert labels.dtype == np.int64
    np.testing.assert_array_equal(mins, [0, 1, 4, 4])
    np.testing.assert_array_equal(ref.margins(HAND_X, HAND_C), [16, 8, 0, 32])


def test_hand_lloyd_step_unweighted():
    step = ref.centroid_step(HAND_X, HAND_C, kind="hard")
    assert isinstance(step, StepResult)
    np.testing.assert_array_equal(step.centroids, [[1.0], [6.0]])  # (0+1+2)/3, 6/1
    np.testing.assert_array_equal(step.cluster_weights, [3.0, 1.0])
    assert step.objective == 9.0 and step.distortion == 9.0  # 0 + 1 + 4 + 4
    assert step.min_margin == 0.0
    np.testing.assert_array_equal(step.empty, [False, False])
    assert ref.objective(HAND_X, HAND_C, kind="hard") == 9.0
    grad_X, grad_C = ref.gradients(HAND_X, HAND_C, kind="hard")
    np.testing.assert_array_equal(grad_C, [[-6.0], [-4.0]])  # 2(3*0 - 3), 2(1*4 - 6)
    np.testing.assert_array_equal(grad_X, [[0.0], [2.0], [4.0], [4.0]])  # 2(x - c_a)


def test_hand_lloyd_step_weighted():
    w = np.array([1.0, 3.0, 0.0, 2.0])  # the tied point has weight 0
    step = ref.centroid_step(HAND_X, HAND_C, kind="hard", sample_weight=w)
    np.testing.assert_array_equal(step.centroids, [[0.75], [6.0]])  # 3/4, 12/2
    np.testing.assert_array_equal(step.cluster_weights, [4.0, 2.0])
    assert step.objective == 11.0  # 1*0 + 3*1 + 0*4 + 2*4
    assert step.min_margin == 8.0  # the zero-weight point's margin 0 is excluded
    grad_X, grad_C = ref.gradients(HAND_X, HAND_C, kind="hard", sample_weight=w)
    np.testing.assert_array_equal(grad_C, [[-6.0], [-8.0]])  # 2(4*0 - 3), 2(2*4 - 12)
    np.testing.assert_array_equal(grad_X, [[0.0], [6.0], [0.0], [8.0]])  # 2 w (x - c_a)


def test_hand_soft_kinds():
    # x = 0, centroids 0 and 2: D = (0, 4). At sigma = 1, z = (0, -2).
    X, C = np.array([[0.0]]), np.array([[0.0], [2.0]])
    e = math.exp(-2.0)
    r = ref.responsibilities(X, C, 1.0, kind="softmax")
    np.testing.assert_allclose(r, [[1 / (1 + e), e / (1 + e)]], rtol=1e-15)
    F = ref.objective(X, C, 1.0, kind="softmax")
    assert F == pytest.approx(-2.0 * math.log(1.0 + e), rel=1e-14)  # -2 sigma^2 lse
    # Delta = 4 = 4 sigma^2: u = (0, -1), exactly at the entmax15 threshold -> one-hot.
    np.testing.assert_array_equal(ref.responsibilities(X, C, 1.0, kind="entmax15"), [[1, 0]])
    assert ref.objective(X, C, 1.0, kind="entmax15") == 0.0  # G = J = 0
    assert ref.responsibilities(X, C, 1.01, kind="entmax15")[0, 1] > 0.0
    # Two scores with gap g = u_1 - u_2 < 1: t = u_1 - tau solves t^2 + (t - g)^2 = 1,
    # t = (g + sqrt(2 - g^2)) / 2.
    for g in (0.0, 0.25, 0.5, 0.9):
        t = (g + math.sqrt(2.0 - g * g)) / 2.0
        out = ref.entmax15(np.array([[3.0, 3.0 - 2.0 * g]]))
        np.testing.assert_allclose(out, [[t * t, (t - g) ** 2]], rtol=1e-14, atol=1e-16)
    # At sigma = 2, 2 sigma^2 = 8, r = (t^2, (t - g)^2) with g = 4 / 16 = 0.25 and
    # H = (4/3)(1 - r_1^1.5 - r_2^1.5); G = 4 r_2 - 8 H.
    g = 0.25
    t = (g + math.sqrt(2.0 - g * g)) / 2.0
    r1, r2 = t * t, (t - g) ** 2
    G = 4.0 * r2 - 8.0 * (4.0 / 3.0) * (1.0 - r1**1.5 - r2**1.5)
    assert ref.objective(X, C, 2.0, kind="entmax15") == pytest.approx(G, rel=1e-13)


def test_hand_ties_shared_equally_at_any_sigma():
    # x = 1 is equidistant from 0 and 2.
    X, C = np.array([[1.0]]), np.array([[0.0], [2.0]])
    for sigma in (1e-12, 1e-3, 1.0, 1e3, 1e12):
        r = ref.responsibilities(X, C, sigma, kind="softmax")
        np.testing.assert_array_equal(r, [[0.5, 0.5]])  # exp(0) / (exp(0) + exp(0))
        # entmax15: tau = -sqrt(1/2), r = 1/2 up to the rounding of sqrt(1/2)^2
        r = ref.responsibilities(X, C, sigma, kind="entmax15")
        assert r[0, 0] == r[0, 1] == pytest.approx(0.5, rel=4e-16)


def test_entmax15_uniform_row():
    for k in (1, 2, 5, 17):
        np.testing.assert_allclose(ref.entmax15(np.full((2, k), -3.5)), 1.0 / k, rtol=1e-14)


# ---------------------------------------------------------------------------------------
# Distances, assignments, margins against Python loops
# ---------------------------------------------------------------------------------------

SHAPES = [(1, 1, 1), (5, 1, 3), (7, 3, 1), (13, 4, 6), (40, 2, 9)]


@pytest.mark.parametrize("n,d,k", SHAPES)
def test_sq_distances_match_loop(n, d, k):
    X, C, _ = random_problem(n * 100 + d * 10 + k, n, d, k)
    np.testing.assert_allclose(ref.sq_distances(X, C), loop_sq_distances(X, C), rtol=1e-14)
    # integer-valued inputs: every operation is exact
    Xi, Ci = np.round(X * 10), np.round(C * 10)
    np.testing.assert_array_equal(ref.sq_distances(Xi, Ci), loop_sq_distances(Xi, Ci))


def test_sq_distances_chunked(monkeypatch):
    X, C, _ = random_problem(3, 53, 3, 4)
    monkeypatch.setattr(ref, "_CHUNK_ELEMENTS", 30)  # 2 rows per chunk, last one partial
    np.testing.assert_allclose(ref.sq_distances(X, C), loop_sq_distances(X, C), rtol=1e-14)
    labels, _ = ref.assign(X, C)
    np.testing.assert_array_equal(labels, loop_assign(loop_sq_distances(X, C))[0])


def test_sq_distances_no_cancellation():
    # Far from the origin the norm expansion loses every digit; the direct formula does not.
    X = np.array([[1e8 + 1.0, 1e8]])
    C = np.array([[1e8, 1e8], [1e8 + 3.0, 1e8 - 1.0]])
    np.testing.assert_array_equal(ref.sq_distances(X, C), [[1.0, 5.0]])


@pytest.mark.parametrize("n,d,k", SHAPES)
def test_assign_matches_loop_with_ties(n, d, k):
    rng = np.random.default_rng(n + d + k)
    X = rng.integers(-3, 4, size=(n, d)).astype(np.float64)
    C = rng.integers(-3, 4, size=(k, d)).astype(np.float64)
    C = np.concatenate([C, C[::-1]])  # duplicated centroids: ties everywhere
    D = loop_sq_distances(X, C)
    want_labels, want_min = loop_assign(D)
    labels, mins = ref.assign(X, C)
    np.testing.assert_array_equal(labels, want_labels)
    np.testing.assert_array_equal(mins, want_min)
    hard = ref.responsibilities(X, C, kind="hard")
    np.testing.assert_array_equal(hard, np.eye(C.shape[0])[want_labels])


@pytest.mark.parametrize("n,d,k", [s for s in SHAPES if s[2] >= 2])
def test_margins_match_loop(n, d, k):
    X, C, _ = random_problem(7 * n + k, n, d, k, scale=3.0)
    D = loop_sq_distances(X, C)
    np.testing.assert_allclose(ref.margins(X, C), loop_margins(D), rtol=1e-12, atol=1e-13)
    Xi, Ci = np.round(X), np.round(C)
    np.testing.assert_array_equal(ref.margins(Xi, Ci), loop_margins(loop_sq_distances(Xi, Ci)))


def test_margins_need_two_centroids():
    with pytest.raises(ValueError):
        ref.margins(np.zeros((3, 2)), np.zeros((1, 2)))
    step = ref.centroid_step(np.ones((3, 2)), np.zeros((1, 2)), 1.0)
    assert step.min_margin == math.inf


# ---------------------------------------------------------------------------------------
# Softmax against scipy
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("rel_sigma", [1e-2, 0.3, 1.0, 5.0, 1e3])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e4])
def test_softmax_matches_scipy(rel_sigma, scale):
    X, C, w = random_problem(11, 25, 3, 5, scale=scale, weights=True)
    sigma = rel_sigma * scale
    Z = -loop_sq_distances(X, C) / (2.0 * sigma**2)
    r = ref.responsibilities(X, C, sigma, kind="softmax")
    np.testing.assert_allclose(r, softmax(Z, axis=1), rtol=1e-10, atol=1e-300)
    F_want = float(np.sum(w * (-2.0 * sigma**2) * logsumexp(Z, axis=1)))
    F = ref.objective(X, C, sigma, kind="softmax", sample_weight=w)
    assert F == pytest.approx(F_want, rel=1e-11)


# ---------------------------------------------------------------------------------------
# entmax15: sort-based vs bisection, candidate filter vs full sort, exact zeros
# ---------------------------------------------------------------------------------------


@st.composite
def score_matrices(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(1, 6))
    k = draw(st.integers(1, 12))
    scale = 10.0 ** draw(st.integers(-3, 3))
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, k)) * scale
    if draw(st.booleans()):  # small integers: exact ties and exact gaps of 2
        Z = rng.integers(-4, 3, size=(n, k)).astype(np.float64)
    return Z + draw(st.sampled_from([0.0, 7.0, -1e3]))


@PROPERTY
@given(score_matrices())
def test_entmax15_matches_bisection(Z):
    r = ref.entmax15(Z)
    np.testing.assert_allclose(r, bisect_entmax15(Z), rtol=0, atol=1e-10)


@PROPERTY
@given(score_matrices())
def test_entmax15_candidate_filter_equals_full_sort(Z):
    np.testing.assert_allclose(
        ref._entmax15_filtered(Z), ref._entmax15_full_sort(Z), rtol=1e-13, atol=1e-15
    )


@PROPERTY
@given(score_matrices())
def test_entmax15_exact_zeros_and_simplex(Z):
    r = ref.entmax15(Z)
    assert np.all(r >= 0.0)
    np.testing.assert_allclose(r.sum(axis=1), 1.0, rtol=0, atol=1e-13)
    zmax = Z.max(axis=1, keepdims=True)
    far = Z < zmax - 2.0 - 1e-9 * (1.0 + np.abs(zmax))
    assert np.all(r[far] == 0.0)
    # entries that bisection puts clearly outside the support are exact zeros too
    tau_lo = np.empty(Z.shape[0])
    for i, z in enumerate(Z):
        u = z / 2.0
        lo, hi = u.max() - 1.0, u.max()
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if np.sum(np.maximum(u - mid, 0.0) ** 2) >= 1.0:
                lo = mid
            else:
                hi = mid
        tau_lo[i] = lo
    outside = Z / 2.0 < tau_lo[:, None] - 1e-9 * (1.0 + np.abs(zmax))
    assert np.all(r[outside] == 0.0)


def test_entmax15_wide_rows():
    # A full sort sees entries far below the support; they must not disturb tau.
    Z = np.array(
        [
            [0.0, -0.5, -1e20, 0.3, -1e300],
            [1e15, 1e15 - 1.0, 1e15 - 1.5, -1e15, 0.0],
            [1.7e308, 1.7e308 - 1e293, -1.7e308, 1.7e308, 0.0],
        ]
    )
    # Bisection on z/2 would be as coarse as the spacing of doubles near max(z)/2; the
    # row maxima are shifted out first (entmax15 is shift-invariant, and these
    # subtractions are exact here).
    want = bisect_entmax15(Z[:2] - Z[:2].max(axis=1, keepdims=True))
    # Row 1 by hand: u = (0, -1/2, -3/4, ...), t = -tau solves
    # t^2 + (t - 1/2)^2 + (t - 3/4)^2 = 1, i.e. 3 t^2 - 2.5 t - 0.1875 = 0.
    t = (2.5 + math.sqrt(8.5)) / 6.0
    np.testing.assert_allclose(want[1], [t**2, (t - 0.5) ** 2, (t - 0.75) ** 2, 0, 0], atol=1e-12)
    # Row 2 spans the float64 range: a two-way tie at the top, every other gap >= 1e293.
    want = np.vstack([want, [0.5, 0.0, 0.0, 0.5, 0.0]])
    with np.errstate(all="raise"):
        np.testing.assert_allclose(ref.entmax15(Z), want, atol=1e-10)
        np.testing.assert_allclose(ref._entmax15_filtered(Z), want, atol=1e-10)


@PROPERTY
@given(problems(max_k=6), st.floats(-3, 3), st.sampled_from(KINDS))
def test_rows_on_simplex(problem, log_rel_sigma, kind):
    X, C, _, scale = problem
    sigma = scale * 10.0**log_rel_sigma
    r = ref.responsibilities(X, C, sigma, kind=kind)
    assert np.all(r >= 0.0) and np.all(r <= 1.0)
    np.testing.assert_allclose(r.sum(axis=1), 1.0, rtol=0, atol=1e-13)


# ---------------------------------------------------------------------------------------
# Gradients against central finite differences
# ---------------------------------------------------------------------------------------


def clustered_problem(seed):
    """Three well-separated blobs in 2-D and centroids near their centres."""
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    X = centers[rng.integers(0, 3, size=24)] + rng.normal(size=(24, 2))
    C = centers + rng.normal(scale=0.5, size=(3, 2))
    w = rng.uniform(0.5, 2.0, size=24)
    w[:3] = 0.0
    return X, C, w


def central_differences(f, A, h):
    g = np.zeros_like(A)
    for idx in np.ndindex(A.shape):
        Ap, Am = A.copy(), A.copy()
        Ap[idx] += h
        Am[idx] -= h
        g[idx] = (f(Ap) - f(Am)) / (2.0 * h)
    return g


@pytest.mark.parametrize("kind,sigma", [("hard", None), ("softmax", 1.0), ("softmax", 4.0),
                                        ("entmax15", 4.0), ("entmax15", 6.0)])  # fmt: skip
def test_gradients_match_finite_differences(kind, sigma):
    X, C, w = clustered_problem(5)
    if kind == "hard":  # J is differentiable away from ties: margins must dwarf h
        assert loop_margins(loop_sq_distances(X, C)).min() > 1.0
    if kind == "entmax15":  # the test must see rows with several entries in the support
        r = ref.responsibilities(X, C, sigma, kind=kind)
        assert np.any(np.sum(r > 0, axis=1) > 1)
    grad_X, grad_C = ref.gradients(X, C, sigma, kind=kind, sample_weight=w)
    h = 1e-5

    def f_of_C(Cv):
        return ref.objective(X, Cv, sigma, kind=kind, sample_weight=w)

    def f_of_X(Xv):
        return ref.objective(Xv, C, sigma, kind=kind, sample_weight=w)

    fd_C = central_differences(f_of_C, C, h)
    fd_X = central_differences(f_of_X, X, h)
    np.testing.assert_allclose(grad_C, fd_C, rtol=1e-5, atol=1e-5 * np.abs(fd_C).max())
    np.testing.assert_allclose(grad_X, fd_X, rtol=1e-5, atol=1e-5 * np.abs(fd_X).max())
    np.testing.assert_array_equal(grad_X[:3], 0.0)  # zero-weight points


def test_softmax_gradient_tends_to_kmeans_gradient():
    X, C, w = clustered_problem(8)
    labels, _ = loop_assign(loop_sq_distances(X, C))
    grad_X, grad_C = ref.gradients(X, C, 1e-3, kind="softmax", sample_weight=w)
    np.testing.assert_allclose(grad_X, 2.0 * w[:, None] * (X - C[labels]), rtol=1e-12)
    lloyd, N = loop_lloyd_step(X, C, w)
    np.testing.assert_allclose(grad_C, 2.0 * N[:, None] * (C - lloyd), rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------
# Critical temperature against eigvalsh
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2, 4])
@pytest.mark.parametrize("weighted", [False, True])
def test_critical_sigma_matches_eigvalsh(d, weighted):
    rng = np.random.default_rng(d)
    X = rng.normal(size=(30, d)) * rng.uniform(0.1, 5.0, size=d) + 100.0
    w = rng.integers(0, 5, size=30).astype(np.float64) if weighted else np.ones(30)
    w[0] = 1.0
    lam = np.linalg.eigvalsh(weighted_covariance(X, w))[-1]
    sw = w if weighted else None
    assert ref.critical_sigma(X, sample_weight=sw) == pytest.approx(math.sqrt(lam), rel=1e-12)
    assert isinstance(ref.critical_sigma(X), float)
