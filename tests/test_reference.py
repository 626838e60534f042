"""Tests of the pure-NumPy reference (softkmeans.reference) against independent computations.

Nothing here compares the reference with itself: distances, assignments and margins are
recomputed with Python loops, softmax with scipy, entmax15 by bisection, gradients by
central finite differences, the critical temperature with numpy.linalg.eigvalsh, and a
tiny case is worked out by hand. Property tests (hypothesis) check the bounds and limits
that SPEC.md states.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp, softmax

import softkmeans.reference as ref
from softkmeans._types import StepResult

KINDS = ("hard", "softmax", "entmax15")
SOFT_KINDS = ("softmax", "entmax15")
PROPERTY = settings(max_examples=50, deadline=None)


# ---------------------------------------------------------------------------------------
# Independent helpers
# ---------------------------------------------------------------------------------------


def loop_sq_distances(X, C):
    """D_ij by a double loop over Python floats."""
    X = np.asarray(X, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    D = np.empty((X.shape[0], C.shape[0]))
    for i, x in enumerate(X.tolist()):
        for j, c in enumerate(C.tolist()):
            D[i, j] = sum((a - b) ** 2 for a, b in zip(x, c))
    return D


def loop_assign(D):
    """argmin per row, ties to the smallest index, by a strict-less-than scan."""
    labels, mins = [], []
    for row in D.tolist():
        best = 0
        for j in range(1, len(row)):
            if row[j] < row[best]:
                best = j
        labels.append(best)
        mins.append(row[best])
    return np.array(labels), np.array(mins)


def loop_margins(D):
    return np.array([sorted(row)[1] - sorted(row)[0] for row in D.tolist()])


def loop_lloyd_step(X, C, w):
    """Lloyd's update by explicit accumulation; returns (centroids, N)."""
    _, d = X.shape
    k = C.shape[0]
    labels, _ = loop_assign(loop_sq_distances(X, C))
    N = [0.0] * k
    S = [[0.0] * d for _ in range(k)]
    for x, wi, a in zip(X.tolist(), w.tolist(), labels.tolist()):
        N[a] += wi
        for col in range(d):
            S[a][col] += wi * x[col]
    out = np.array(C, dtype=np.float64)
    for j in range(k):
        if N[j] > 0:
            out[j] = np.array(S[j]) / N[j]
    return out, np.array(N)


def bisect_entmax15(Z):
    """entmax15 by bisection on tau: sum_j [z_j/2 - tau]_+^2 = 1, one row at a time.

    f(tau) = sum_j [u_j - tau]_+^2 - 1 is decreasing, f(max u - 1) >= 0, f(max u) = -1.
    """
    Z = np.asarray(Z, dtype=np.float64)
    out = np.empty_like(Z)
    for i, z in enumerate(Z):
        u = z / 2.0
        lo, hi = u.max() - 1.0, u.max()
        for _ in range(300):
            mid = 0.5 * (lo + hi)
            if mid in (lo, hi):
                break
            if np.sum(np.maximum(u - mid, 0.0) ** 2) >= 1.0:
                lo = mid
            else:
                hi = mid
        out[i] = np.maximum(u - 0.5 * (lo + hi), 0.0) ** 2
    return out


def weighted_covariance(X, w):
    """Population covariance with weights, via numpy.cov (independent of the reference)."""
    return np.atleast_2d(np.cov(X.T, aweights=w, bias=True))


def random_problem(seed, n, d, k, scale=1.0, weights=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * scale
    C = rng.normal(size=(k, d)) * scale
    if weights:
        w = rng.integers(0, 4, size=n).astype(np.float64)
        w[rng.integers(n)] += 1.0  # positive sum
    else:
        w = np.ones(n)
    return X, C, w


@st.composite
def problems(draw, min_k=1, max_k=5, max_n=20, max_d=3, weights=True, centroids_in_data=False):
    """(X, C, w, scale); with centroids_in_data, C is k distinct rows of X (no empty
    Lloyd cluster)."""
    seed = draw(st.integers(0, 2**32 - 1))
    k = draw(st.integers(min_k, max_k))
    n = draw(st.integers(k if centroids_in_data else 1, max(k, max_n)))
    d = draw(st.integers(1, max_d))
    scale = 10.0 ** draw(st.integers(-3, 3))
    X, C, w = random_problem(seed, n, d, k, scale, weights=weights and draw(st.booleans()))
    if centroids_in_data:
        C = X[:k].copy()
    return X, C, w, scale


def one_hot_rows(r):
    """True for rows with one entry exactly 1 and the others exactly 0."""
    return (np.sum(r == 1.0, axis=1) == 1) & (np.sum(r == 0.0, axis=1) == r.shape[1] - 1)


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


# ---------------------------------------------------------------------------------------
# Property tests: bounds and limits from SPEC.md
# ---------------------------------------------------------------------------------------


# 0 <= J - objective <= 2 sigma^2 W x (the largest entropy of k shares): log k for the
# softmax free energy F, 4/3 (1 - k^-1/2) for the Tsallis objective G of entmax15.
MAX_ENTROPY = {"softmax": math.log, "entmax15": lambda k: (4.0 / 3.0) * (1.0 - k**-0.5)}


@PROPERTY
@pytest.mark.parametrize("kind", list(MAX_ENTROPY))
@given(problems(max_k=6), st.floats(-2, 2))
def test_objective_is_within_its_entropy_bound_of_the_distortion(kind, problem, log_rel_sigma):
    X, C, w, scale = problem
    sigma = scale * 10.0**log_rel_sigma
    k = C.shape[0]
    J = float(np.sum(w * loop_sq_distances(X, C).min(axis=1)))
    objective = ref.objective(X, C, sigma, kind=kind, sample_weight=w)
    bound = 2.0 * sigma**2 * w.sum() * MAX_ENTROPY[kind](k)
    tol = 1e-12 * (J + bound) + 1e-300
    assert -tol <= J - objective <= bound + tol


@PROPERTY
@given(problems(min_k=2, max_k=6))
def test_tsallis_equals_distortion_when_one_hot(problem):
    X, C, w, _ = problem
    D = loop_sq_distances(X, C)
    delta_min = loop_margins(D).min()
    assume(delta_min > 0.0)
    sigma = 0.99 * math.sqrt(delta_min) / 2.0
    r = ref.responsibilities(X, C, sigma, kind="entmax15")
    assert np.all(one_hot_rows(r))
    G = ref.objective(X, C, sigma, kind="entmax15", sample_weight=w)
    assert G == ref.objective(X, C, kind="hard", sample_weight=w)
    assert G == pytest.approx(float(np.sum(w * D.min(axis=1))), rel=1e-13)


@PROPERTY
@given(problems(min_k=2, max_k=6), st.data())
def test_entmax15_exact_recovery_threshold_is_sharp(problem, data):
    X, C, _, _ = problem
    margins = loop_margins(loop_sq_distances(X, C))
    candidates = np.nonzero(margins > 0.0)[0]
    assume(candidates.size > 0)
    i = int(data.draw(st.sampled_from(candidates.tolist())))
    sigma_star = math.sqrt(margins[i]) / 2.0
    below = ref.responsibilities(X, C, 0.999 * sigma_star, kind="entmax15")[i : i + 1]
    above = ref.responsibilities(X, C, 1.01 * sigma_star, kind="entmax15")[i : i + 1]
    assert one_hot_rows(below)[0]
    assert not one_hot_rows(above)[0]
    assert np.sum(above > 0.0) >= 2


@PROPERTY
@given(problems(min_k=2, max_k=5, weights=False, centroids_in_data=True), st.floats(3.0, 30.0))
def test_softmax_step_tends_to_lloyd(problem, t):
    X, C, w, scale = problem
    D = loop_sq_distances(X, C)
    delta_min = loop_margins(D).min()
    assume(delta_min > 1e-9 * scale**2)
    lloyd, N_hard = loop_lloyd_step(X, C, w)
    assume(N_hard.min() > 0)
    k = C.shape[0]
    sigma = math.sqrt(delta_min / (2.0 * t))  # exp(-Delta_min / (2 sigma^2)) = exp(-t)
    step = ref.centroid_step(X, C, sigma, kind="softmax", sample_weight=w)
    # Each point's wrong mass is eps_i <= (k-1) exp(-t), and
    # c_j^soft - c_j^hard = sum_i w_i (r_ij^soft - r_ij^hard) (x_i - c_j^hard) / N_j^soft,
    # so the error is at most sum_i w_i eps_i max_i ||x_i - c_j^hard|| / N_j^soft, where
    # N_j^soft >= N_j^hard - sum_i w_i eps_i.
    wrong = w.sum() * (k - 1) * math.exp(-t)
    assume(N_hard.min() > 2.0 * wrong)
    radius = np.sqrt(loop_sq_distances(X, lloyd).max())
    bound = wrong * radius / (N_hard.min() - wrong)
    err = np.sqrt(((step.centroids - lloyd) ** 2).sum(axis=1)).max()
    assert err <= bound + 1e-12 * scale


@PROPERTY
@given(problems(min_k=2, max_k=5))
def test_entmax15_step_equals_lloyd_below_threshold(problem):
    X, C, w, scale = problem
    delta_min = loop_margins(loop_sq_distances(X, C))[w > 0].min()
    assume(delta_min > 0.0)
    sigma = 0.99 * math.sqrt(delta_min) / 2.0
    step = ref.centroid_step(X, C, sigma, kind="entmax15", sample_weight=w)
    lloyd, N = loop_lloyd_step(X, C, w)
    np.testing.assert_allclose(step.centroids, lloyd, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_array_equal(step.cluster_weights, N)
    hard = ref.centroid_step(X, C, kind="hard", sample_weight=w)
    np.testing.assert_array_equal(step.centroids, hard.centroids)  # bit for bit
    assert step.objective == hard.objective
    assert step.min_margin == pytest.approx(delta_min, rel=1e-12)


@PROPERTY
@given(problems(max_k=5), st.sampled_from(KINDS), st.floats(-1, 1))
def test_step_matches_independent_responsibilities(problem, kind, log_rel_sigma):
    X, C, w, scale = problem
    sigma = scale * 10.0**log_rel_sigma
    D = loop_sq_distances(X, C)
    Z = -D / (2.0 * sigma**2)
    if kind == "hard":
        r = np.eye(C.shape[0])[loop_assign(D)[0]]
    elif kind == "softmax":
        r = softmax(Z, axis=1)
    else:
        r = bisect_entmax15(Z)
    N = w @ r
    S = r.T @ (w[:, None] * X)
    step = ref.centroid_step(X, C, sigma, kind=kind, sample_weight=w)
    np.testing.assert_allclose(step.cluster_weights, N, rtol=1e-8, atol=1e-9 * w.sum())
    assume(N.min() > 1e-6 * w.sum())  # centroids well determined
    np.testing.assert_allclose(step.centroids, S / N[:, None], rtol=1e-7, atol=1e-7 * scale)
    assert not step.empty.any()
    J = float(w @ D.min(axis=1))
    assert step.distortion == pytest.approx(J, rel=1e-13)
    assert step.objective == ref.objective(X, C, sigma, kind=kind, sample_weight=w)
    if C.shape[0] == 1:
        assert step.min_margin == math.inf
    else:
        assert step.min_margin == pytest.approx(
            loop_margins(D)[w > 0].min(), rel=1e-9, abs=1e-12 * scale**2
        )


@PROPERTY
@given(problems(max_k=5, max_n=30), st.sampled_from(KINDS), st.floats(-1, 1))
def test_objective_never_increases(problem, kind, log_rel_sigma):
    X, C, w, scale = problem
    sigma = scale * 10.0**log_rel_sigma
    values = []
    for _ in range(8):
        step = ref.centroid_step(X, C, sigma, kind=kind, sample_weight=w)
        values.append(step.objective)
        C = step.centroids
    values.append(ref.objective(X, C, sigma, kind=kind, sample_weight=w))
    size = abs(values[0]) + 2.0 * sigma**2 * w.sum() * math.log(C.shape[0] + 1)
    for before, after in zip(values, values[1:]):
        assert after <= before + 1e-12 * size


@PROPERTY
@given(problems(min_k=2, max_k=4, max_n=12), st.sampled_from(KINDS), st.floats(-1, 1))
def test_integer_weights_equal_duplicated_rows(problem, kind, log_rel_sigma):
    X, C, _, scale = problem
    sigma = scale * 10.0**log_rel_sigma
    rng = np.random.default_rng(X.shape[0])
    counts = rng.integers(0, 4, size=X.shape[0])
    counts[0] = max(counts[0], 1)
    rows = np.repeat(np.arange(X.shape[0]), counts)  # weight 0 drops the row
    Xd, w = X[rows], counts.astype(np.float64)

    size = abs(ref.objective(Xd, C, sigma, kind=kind)) + sigma**2 * w.sum() + 1e-300
    assert ref.objective(X, C, sigma, kind=kind, sample_weight=w) == pytest.approx(
        ref.objective(Xd, C, sigma, kind=kind), rel=1e-12, abs=1e-12 * size
    )
    a = ref.centroid_step(X, C, sigma, kind=kind, sample_weight=w)
    b = ref.centroid_step(Xd, C, sigma, kind=kind)
    # A cluster held only by subnormal responsibilities (scores more than ~708 below the
    # row max) has a centroid S_j / N_j with a few significant digits at best, so w * r and
    # r + r + r round apart there; SPEC.md's exactness is about normal numbers.
    tiny = np.finfo(np.float64).tiny
    assume(not ((b.cluster_weights > 0) & (b.cluster_weights < 1e6 * tiny)).any())
    np.testing.assert_allclose(a.centroids, b.centroids, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(a.cluster_weights, b.cluster_weights, rtol=1e-12, atol=1e-300)
    np.testing.assert_array_equal(a.empty, b.empty)
    assert a.distortion == pytest.approx(b.distortion, rel=1e-12, abs=1e-300)
    assert a.min_margin == pytest.approx(b.min_margin, rel=1e-12, abs=1e-300)

    gXa, gCa = ref.gradients(X, C, sigma, kind=kind, sample_weight=w)
    gXb, gCb = ref.gradients(Xd, C, sigma, kind=kind)
    gtol = 1e-12 * scale * w.sum()
    np.testing.assert_allclose(gCa, gCb, rtol=1e-11, atol=gtol)
    summed = np.zeros_like(gXa)
    np.add.at(summed, rows, gXb)
    np.testing.assert_allclose(gXa, summed, rtol=1e-11, atol=gtol)


@st.composite
def spread_data(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(6, 30))
    d = draw(st.integers(1, 3))
    scale = 10.0 ** draw(st.integers(-2, 2))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.2, 3.0, size=d) * scale + scale
    w = rng.uniform(0.0, 2.0, size=n) if draw(st.booleans()) else np.ones(n)
    return X, w, draw(st.integers(2, 4)), rng


@PROPERTY
@given(spread_data())
def test_critical_temperature_phase_transition(problem):
    X, w, k, rng = problem
    cov = weighted_covariance(X, w)
    evals, evecs = np.linalg.eigh(cov)
    lam, v = evals[-1], evecs[:, -1]
    assume(lam > 0.0)
    assert ref.critical_sigma(X, sample_weight=w) ** 2 == pytest.approx(lam, rel=1e-10)
    mu = (w @ X) / w.sum()
    C0 = np.tile(mu, (k, 1))
    eps = 1e-3 * math.sqrt(lam)

    # Above: the collapsed solution is a fixed point and a strict local minimum of F.
    sigma = math.sqrt(1.1 * lam)
    step = ref.centroid_step(X, C0, sigma, kind="softmax", sample_weight=w)
    np.testing.assert_allclose(step.centroids, C0, rtol=1e-12, atol=1e-12 * math.sqrt(lam))
    F0 = ref.objective(X, C0, sigma, kind="softmax", sample_weight=w)
    for _ in range(3):
        delta = rng.normal(size=C0.shape)
        delta *= eps / np.linalg.norm(delta)
        assert ref.objective(X, C0 + delta, sigma, kind="softmax", sample_weight=w) > F0

    # Below: it is a saddle; splitting two centroids along the top eigenvector lowers F.
    sigma = math.sqrt(0.9 * lam)
    F0 = ref.objective(X, C0, sigma, kind="softmax", sample_weight=w)
    split = C0.copy()
    split[0] += eps * v
    split[1] -= eps * v
    assert ref.objective(X, split, sigma, kind="softmax", sample_weight=w) < F0


# ---------------------------------------------------------------------------------------
# Extremes of sigma and scale; empty clusters
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
@pytest.mark.parametrize("kind", SOFT_KINDS)
def test_no_nan_over_sigma_sweep(scale, kind):
    X, C, w = random_problem(2, 20, 3, 4, scale=scale, weights=True)
    C[3] = C[2]  # exact ties
    labels, _ = loop_assign(loop_sq_distances(X, C))
    for rel in (1e-12, 1e-6, 1e-2, 1.0, 1e2, 1e6, 1e12):
        sigma = rel * scale
        r = ref.responsibilities(X, C, sigma, kind=kind)
        step = ref.centroid_step(X, C, sigma, kind=kind, sample_weight=w)
        gX, gC = ref.gradients(X, C, sigma, kind=kind, sample_weight=w)
        value = ref.objective(X, C, sigma, kind=kind, sample_weight=w)
        for a in (r, step.centroids, gX, gC, np.array([value, step.objective])):
            assert np.all(np.isfinite(a))
        np.testing.assert_allclose(r.sum(axis=1), 1.0, atol=1e-13)
        if rel == 1e-12:  # one-hot, ties between centroids 2 and 3 shared equally
            tied = labels == 2
            want = np.eye(4)[labels]
            np.testing.assert_array_equal(r[~tied], want[~tied])
            assert np.all(r[tied, :2] == 0.0) and np.all(r[tied, 2] == r[tied, 3])
            np.testing.assert_allclose(r[tied, 2:], 0.5, rtol=4e-16)
        if rel == 1e12:
            np.testing.assert_allclose(r, 0.25, rtol=1e-9)


@pytest.mark.parametrize("kind", SOFT_KINDS)
def test_temperature_underflow_is_clean(kind):
    # sigma is valid but 2 sigma^2 underflows to 0 (or nearly): one-hot, ties shared,
    # no NaN, and no floating-point warning on the way.
    X = np.array([[0.0], [1.0], [3.0]])
    C = np.array([[0.0], [2.0], [2.0]])
    for sigma in (1e-150, 1e-160, 1e-170, 1e-200, 5e-324):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r = ref.responsibilities(X, C, sigma, kind=kind)
            step = ref.centroid_step(X, C, sigma, kind=kind)
            gX, gC = ref.gradients(X, C, sigma, kind=kind)
        # D = (0, 4, 4), (1, 1, 1), (9, 1, 1)
        np.testing.assert_array_equal(r[0], [1.0, 0.0, 0.0])
        assert r[1, 0] == r[1, 1] == r[1, 2] == pytest.approx(1.0 / 3.0, rel=1e-15)
        assert r[2, 0] == 0.0 and r[2, 1] == r[2, 2] == pytest.approx(0.5, rel=1e-15)
        assert step.objective == pytest.approx(2.0, rel=1e-15)  # J = 0 + 1 + 1
        for a in (step.centroids, gX, gC):
            assert np.all(np.isfinite(a))


def test_empty_clusters_keep_their_centroid():
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    C = np.array([[0.0, 0.0], [1e3, 1e3], [0.5, 0.5]])
    for kind, sigma in (("hard", None), ("softmax", 1e-2), ("entmax15", 1.0)):
        step = ref.centroid_step(X, C, sigma, kind=kind)
        np.testing.assert_array_equal(step.empty, [False, True, False])
        assert step.cluster_weights[1] == 0.0
        np.testing.assert_array_equal(step.centroids[1], C[1])
        np.testing.assert_allclose(step.cluster_weights.sum(), 3.0, rtol=1e-14)


def test_hard_kind_ignores_sigma():
    X, C, _ = random_problem(4, 10, 2, 3)
    J = float(np.sum(loop_sq_distances(X, C).min(axis=1)))
    assert ref.objective(X, C, kind="hard") == pytest.approx(J, rel=1e-14)
    assert ref.objective(X, C, 123.0, kind="hard") == ref.objective(X, C, None, kind="hard")


# ---------------------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------------------


def test_float32_in_float32_out():
    X64, C64, w = random_problem(9, 15, 3, 4, weights=True)
    X, C = X64.astype(np.float32), C64.astype(np.float32)
    Xu, Cu = X.astype(np.float64), C.astype(np.float64)  # the same data, upcast
    sigma = 0.7
    f32 = dict(rtol=2e-7, atol=1e-7)

    D = ref.sq_distances(X, C)
    assert D.dtype == np.float32
    np.testing.assert_allclose(D, loop_sq_distances(Xu, Cu), **f32)
    labels, mins = ref.assign(X, C)
    assert labels.dtype == np.int64 and mins.dtype == np.float32
    np.testing.assert_array_equal(labels, loop_assign(loop_sq_distances(Xu, Cu))[0])
    m = ref.margins(X, C)
    assert m.dtype == np.float32
    np.testing.assert_allclose(m, loop_margins(loop_sq_distances(Xu, Cu)), **f32)
    Z = ref.entmax15(X)
    assert Z.dtype == np.float32
    np.testing.assert_allclose(Z, bisect_entmax15(Xu), **f32)
    for kind in KINDS:
        r = ref.responsibilities(X, C, sigma, kind=kind)
        assert r.dtype == np.float32
        np.testing.assert_allclose(r, ref.responsibilities(Xu, Cu, sigma, kind=kind), **f32)
        step = ref.centroid_step(X, C, sigma, kind=kind, sample_weight=w)
        step64 = ref.centroid_step(Xu, Cu, sigma, kind=kind, sample_weight=w)
        assert step.centroids.dtype == np.float32
        assert step.cluster_weights.dtype == np.float64
        assert step.empty.dtype == np.bool_
        for name in ("objective", "distortion", "min_margin"):
            assert type(getattr(step, name)) is float
        np.testing.assert_allclose(step.centroids, step64.centroids, **f32)
        assert step.objective == step64.objective  # accumulated in float64 on the same data
        gX, gC = ref.gradients(X, C, sigma, kind=kind, sample_weight=w)
        assert gX.dtype == np.float32 and gC.dtype == np.float32
        value = ref.objective(X, C, sigma, kind=kind)
        assert type(value) is float
    assert type(ref.critical_sigma(X)) is float


def test_float64_in_float64_out():
    X, C, _ = random_problem(1, 6, 2, 3)
    for out in (ref.sq_distances(X, C), ref.margins(X, C), ref.entmax15(X),
                ref.responsibilities(X, C, 1.0), ref.centroid_step(X, C, 1.0).centroids,
                *ref.gradients(X, C, 1.0)):  # fmt: skip
        assert out.dtype == np.float64


# ---------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------

_X = np.zeros((4, 2))
_C = np.ones((3, 2))
_NAN = np.array([[0.0, np.nan], [1.0, 1.0]])

BAD_CALLS = [
    (ValueError, lambda: ref.sq_distances(np.zeros(4), _C)),  # X 1-D
    (ValueError, lambda: ref.assign(_X, np.ones((3, 3)))),  # mismatched d
    (ValueError, lambda: ref.margins(_NAN, _C)),  # NaN in X
    (ValueError, lambda: ref.responsibilities(_X, _NAN, 1.0)),  # NaN in C
    (ValueError, lambda: ref.responsibilities(_X, np.ones((3, 2, 1)), 1.0)),  # C 3-D
    (ValueError, lambda: ref.entmax15(np.zeros(3))),  # Z 1-D
    (ValueError, lambda: ref.entmax15(np.array([[0.0, np.inf]]))),
    (ValueError, lambda: ref.responsibilities(_X, _C)),  # sigma missing for softmax
    (ValueError, lambda: ref.objective(_X, _C, kind="entmax15")),  # sigma missing
    (ValueError, lambda: ref.centroid_step(_X, _C, 0.0)),  # sigma <= 0
    (ValueError, lambda: ref.gradients(_X, _C, -1.0, kind="entmax15")),
    (ValueError, lambda: ref.objective(_X, _C, np.inf)),
    (TypeError, lambda: ref.objective(_X, _C, "1.0")),
    (ValueError, lambda: ref.responsibilities(_X, _C, 1.0, kind="kmeans")),  # bad kind
    (ValueError, lambda: ref.centroid_step(_X, _C, kind="Hard")),
    (ValueError, lambda: ref.objective(_X, _C, 1.0, sample_weight=-np.ones(4))),
    (ValueError, lambda: ref.centroid_step(_X, _C, 1.0, sample_weight=np.ones(3))),
    (ValueError, lambda: ref.gradients(_X, _C, 1.0, sample_weight=np.zeros(4))),
    (ValueError, lambda: ref.sq_distances(_X, _C, n_threads=0)),
    (TypeError, lambda: ref.assign(_X, _C, n_threads=1.5)),
    (TypeError, lambda: ref.sq_distances(_X.astype(complex), _C)),
    (ValueError, lambda: ref.sq_distances(np.zeros((0, 2)), _C)),
    (ValueError, lambda: ref.critical_sigma(np.zeros((2, 2, 2)))),
    (ValueError, lambda: ref.critical_sigma(_NAN)),
    (ValueError, lambda: ref.margins(_X, _C[:1])),  # k < 2
]


@pytest.mark.parametrize("error,call", BAD_CALLS)
def test_validation_errors(error, call):
    with pytest.raises(error):
        call()


THREADED_CALLS = {
    "sq_distances": lambda t: ref.sq_distances(_X, _C, n_threads=t),
    "assign": lambda t: ref.assign(_X, _C, n_threads=t),
    "margins": lambda t: ref.margins(_X, _C, n_threads=t),
    "entmax15": lambda t: ref.entmax15(_X, n_threads=t),
    "responsibilities": lambda t: ref.responsibilities(_X, _C, 1.0, n_threads=t),
    "objective": lambda t: ref.objective(_X, _C, 1.0, kind="entmax15", n_threads=t),
    "centroid_step": lambda t: ref.centroid_step(_X, _C, kind="hard", n_threads=t),
    "gradients": lambda t: ref.gradients(_X, _C, 1.0, n_threads=t),
}


@pytest.mark.parametrize("name", sorted(THREADED_CALLS))
def test_n_threads_validated_everywhere(name):
    call = THREADED_CALLS[name]
    call(None)
    call(2)
    call(np.int64(1))
    with pytest.raises(ValueError):
        call(0)
    with pytest.raises(ValueError):
        call(-1)
    with pytest.raises(TypeError):
        call(True)
    with pytest.raises(TypeError):
        call(2.0)


def test_n_threads_is_accepted_and_ignored():
    X, C, w = random_problem(6, 9, 2, 3, weights=True)
    for kind in KINDS:
        a = ref.centroid_step(X, C, 0.5, kind=kind, sample_weight=w, n_threads=3)
        b = ref.centroid_step(X, C, 0.5, kind=kind, sample_weight=w)
        np.testing.assert_array_equal(a.centroids, b.centroids)


def test_public_names():
    public = {name for name in dir(ref) if not name.startswith("_")}
    api = {"sq_distances", "assign", "margins", "entmax15", "responsibilities", "objective",
           "centroid_step", "gradients", "critical_sigma", "StepResult"}  # fmt: skip
    assert set(ref.__all__) == api
    assert api <= public
    assert ref.StepResult is StepResult
