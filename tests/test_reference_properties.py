"""Property tests of the pure-NumPy reference (softkmeans.reference): the bounds and limits
SPEC.md states (objective within its entropy bound of the distortion, the exact-recovery
threshold, steps tending to Lloyd's, objectives never increasing, integer weights equal to
duplicated rows, the critical temperature's phase transition), checked with hypothesis
against the independent computations of reference_oracles.py; and the extremes of sigma
and scale.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from reference_oracles import (
    KINDS,
    PROPERTY,
    SOFT_KINDS,
    bisect_entmax15,
    loop_assign,
    loop_lloyd_step,
    loop_margins,
    loop_sq_distances,
    one_hot_rows,
    problems,
    random_problem,
    weighted_covariance,
)
from scipy.special import softmax

import softkmeans.reference as ref
from softkmeans._types import StepResult

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
    # A margin is a difference of two distances: each carries a rounding of a few ulps of
    # the squared norms it is formed from, which is no small part of a small margin.
    norms = float((X**2).sum(axis=1).max() + (C**2).sum(axis=1).max())
    assert step.min_margin == pytest.approx(delta_min, rel=1e-12, abs=1e-13 * norms)


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
