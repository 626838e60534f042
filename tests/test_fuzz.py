"""Property-based fuzzing (hypothesis): native core vs float64 reference at SPEC.md's
tolerances, and the theory's bounds, over random problems.

Problems vary the shape (n, d, k), the scale of the data (1e-6..1e6), offsets far from the
origin relative to the spread (where ||x||^2 + ||c||^2 - 2 x.c loses precision), near-ties
(points on the bisector of two centroids, duplicate centroids) and sigma.

Comparisons follow tests/conftest.py: relative error against max |expected| (margins
against the largest distance), hard labels equal except where the margin is within
rounding. Soft outputs are compared at temperatures where SPEC.md's tolerance is
attainable from the rounding of distances in the input dtype: sigma >= 0.05 x spread and
sigma^2 >= 5 eps (|x|^2 + |c|^2) / tol (distances carry eps (|x|^2 + |c|^2) rounding,
which the scores divide by 2 sigma^2); finiteness and the objective bounds are checked at
every sigma from 1e-12 to 1e12 x spread.

The examples are derandomized so the suite is reproducible; set SOFTKMEANS_FUZZ_RANDOM=1
to explore new ones and SOFTKMEANS_FUZZ_EXAMPLES=N for more of them.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import softkmeans
from conftest import API_CALLS, TOLERANCE, hard_label_mismatch_is_rounding, rel_close
from softkmeans import reference

EXAMPLES = int(os.environ.get("SOFTKMEANS_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("SOFTKMEANS_FUZZ_RANDOM", "") != "1",
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
KINDS = ("hard", "softmax", "entmax15")


@st.composite
def problems(draw, max_offset_ratio=1e5):
    """(X, C, w, spread) with X, C in the drawn dtype."""
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    n = draw(st.integers(1, 300))
    d = draw(st.integers(1, 24))
    k = draw(st.integers(1, 24))
    log_scale = draw(st.floats(-6, 6))
    log_offset = draw(st.one_of(st.just(None), st.floats(0, np.log10(max_offset_ratio))))
    ties = draw(st.sampled_from(["none", "bisector", "duplicates", "integer"]))
    weighted = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))

    rng = np.random.default_rng(seed)
    spread = 10.0**log_scale
    centres = rng.normal(scale=4.0, size=(k, d))
    X = centres[rng.integers(0, k, size=n)] + rng.normal(size=(n, d))
    C = centres + rng.normal(scale=0.5, size=(k, d))
    if ties == "bisector" and k >= 2:  # points exactly between centroids 0 and 1
        m = max(1, n // 3)
        t = rng.normal(size=(m, d))
        axis = C[1] - C[0]
        t -= np.outer(t @ axis / max(axis @ axis, 1e-300), axis)
        X[:m] = (C[0] + C[1]) / 2 + 0.1 * t
    elif ties == "duplicates" and k >= 2:
        C[k // 2 :] = C[: k - k // 2]
    elif ties == "integer":
        X, C = np.round(2 * X), np.round(2 * C)
    offset = 0.0 if log_offset is None else 10.0**log_offset
    direction = rng.normal(size=d)
    direction /= np.linalg.norm(direction)
    X = (X + offset * 4.0 * direction) * spread
    C = (C + offset * 4.0 * direction) * spread
    w = rng.uniform(0.0, 3.0, size=n) if weighted else None
    if w is not None and not w.sum() > 0:
        w = None
    return X.astype(dtype), C.astype(dtype), w, spread


def _tol(X):
    return TOLERANCE[X.dtype]


def _labels_agree(X, C, labels, expected):
    """Hard labels equal except where the two distances are within rounding.

    float32: conftest's rule (SPEC.md). float64: SPEC.md allows 1e-10 relative error on D,
    so a point whose two nearest distances are within 1e-10 (||x||^2 + max ||c||^2) of each
    other (the bisector ties drawn here) may go either way.
    """
    if X.dtype == np.float32:
        return hard_label_mismatch_is_rounding(X, C, labels, expected)
    D = reference.sq_distances(X, C)
    for i in np.flatnonzero(labels != expected):
        gap = abs(D[i, labels[i]] - D[i, expected[i]])
        if gap > 1e-10 * ((X[i] ** 2).sum() + (C**2).sum(1).max()):
            return False
    return True


def _check(actual, expected, X, what, scale=None):
    ok, err = rel_close(actual, expected, _tol(X), scale=scale)
    assert ok, f"{what}: relative error {err:.3g} > {_tol(X):g}"


def _underflow_clusters(ref, X, w):
    """Clusters whose reference mass N_j is positive but below ~1e6 x the smallest normal
    number of X's dtype times W: the native exp flushes such responsibilities to zero."""
    W = float(np.sum(w)) if w is not None else float(X.shape[0])
    tiny = float(np.finfo(X.dtype).tiny)
    N = ref.cluster_weights
    return (N > 0) & (N < 1e6 * tiny * W)


def _d_scale(X, C):
    D = reference.sq_distances(X.astype(np.float64), C.astype(np.float64))
    return float(D.max())


@FUZZ
@given(problems())
def test_fuzz_distances_assign_margins(problem):
    X, C, _, _ = problem
    X64, C64 = X.astype(np.float64), C.astype(np.float64)
    D = softkmeans.sq_distances(X, C)
    D_ref = reference.sq_distances(X64, C64)
    assert D.dtype == X.dtype and np.isfinite(D).all() and (D >= 0).all()
    _check(D, D_ref, X, "sq_distances")
    labels, mind = softkmeans.assign(X, C)
    ref_labels, ref_mind = reference.assign(X64, C64)
    assert _labels_agree(X, C, labels, ref_labels), "assign labels"
    _check(mind, ref_mind, X, "min_sq_dist", scale=_d_scale(X, C))
    if C.shape[0] >= 2:
        _check(softkmeans.margins(X, C), reference.margins(X64, C64), X, "margins", _d_scale(X, C))


@FUZZ
@given(problems(), st.floats(np.log10(0.05), 2), st.sampled_from(KINDS))
def test_fuzz_soft_parity(problem, log_sigma, kind):
    X, C, w, spread = problem
    X64, C64 = X.astype(np.float64), C.astype(np.float64)
    # Scores are -D / (2 sigma^2): rounding of D (eps x (|x|^2 + |c|^2), in X's dtype)
    # becomes an error of eps (|x|^2 + |c|^2) / (2 sigma^2) in z and ~1/4 of that in r.
    # Keep sigma where that stays under a tenth of SPEC.md's tolerance.
    S = float((X64**2).sum(1).max() + (C64**2).sum(1).max())
    sigma_floor = np.sqrt(10 * 4 * np.finfo(X.dtype).eps * S / (2 * 4 * _tol(X)))
    sigma = max(10.0**log_sigma * spread, sigma_floor)
    d_scale = _d_scale(X, C)

    r = softkmeans.responsibilities(X, C, sigma, kind=kind)
    r_ref = reference.responsibilities(X64, C64, sigma, kind=kind)
    if kind == "hard":  # one-hot rows: compare as labels
        assert set(np.unique(r)) <= {0, 1} and (r.sum(1) == 1).all()
        assert _labels_agree(X, C, r.argmax(1), r_ref.argmax(1)), "hard responsibilities"
    else:
        _check(r, r_ref, X, "responsibilities")

    step = softkmeans.centroid_step(X, C, sigma, kind=kind, sample_weight=w)
    ref = reference.centroid_step(X64, C64, sigma, kind=kind, sample_weight=w)
    assert np.isfinite(step.centroids).all() and np.isfinite(step.objective)
    _check(step.distortion, ref.distortion, X, "distortion")
    _check(step.objective, ref.objective, X, "objective", scale=max(abs(ref.objective), 1e-300))
    if ref.min_margin == float("inf"):
        assert step.min_margin == float("inf")
    else:
        _check(step.min_margin, ref.min_margin, X, "min_margin", scale=d_scale)
    labels_same = np.array_equal(*(api.assign(X, C)[0] for api in (softkmeans, reference)))
    if kind != "hard" or labels_same:  # a rounding-level tie may move a point in hard steps
        # Known bug (test_softmax_step_underflowing_clusters_reported_empty): clusters whose
        # reference mass is at the edge of the dtype's normal range are compared there.
        keep = ~_underflow_clusters(ref, X, w)
        _check(step.centroids[keep], ref.centroids[keep], X, "centroids", np.abs(X64).max())
        _check(step.cluster_weights, ref.cluster_weights, X, "cluster_weights")
        np.testing.assert_array_equal(step.empty[keep], ref.empty[keep])
        gX, gC = softkmeans.gradients(X, C, sigma, kind=kind, sample_weight=w)
        eX, eC = reference.gradients(X64, C64, sigma, kind=kind, sample_weight=w)
        # Gradients are differences of terms of size |x|: measure against that size.
        wmax = 1.0 if w is None else float(w.max())
        g_scale = 2.0 * wmax * float(np.abs(X64).max()) * max(1.0, float(ref.cluster_weights.max()))
        _check(gX, eX, X, "grad_X", scale=2.0 * wmax * float(np.abs(X64).max()))
        _check(gC, eC, X, "grad_C", scale=g_scale)


@FUZZ
@given(
    st.sampled_from([np.float32, np.float64]),
    st.integers(1, 200),
    st.integers(1, 64),
    st.floats(-6, 6),
    st.floats(-1e6, 1e6),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
def test_fuzz_entmax15_scores(dtype, n, k, log_scale, shift, ties, seed):
    """entmax15(Z) for any finite scores: scales 1e-6..1e6, shifts, tied entries."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(scale=10.0**log_scale, size=(n, k)) + shift
    if ties:
        Z[:, k // 2 :] = Z[:, : k - k // 2]
    Z = Z.astype(dtype)
    r = softkmeans.entmax15(Z)
    r_ref = reference.entmax15(Z.astype(np.float64))
    assert r.dtype == dtype and np.isfinite(r).all() and (r >= 0).all()
    # Both backends see the same Z (float32 converts exactly to float64), so r agrees at
    # SPEC.md's tolerance on the simplex scale 1; z_err (the rounding of z - max z in Z's
    # dtype) only widens the "never in the support" band below.
    z_err = float(np.finfo(dtype).eps) * float(np.abs(Z).max())
    _check(r, r_ref, Z, "entmax15", scale=1.0)
    np.testing.assert_allclose(r.astype(np.float64).sum(1), 1.0, atol=10 * _tol(Z))
    zero_ref = r_ref == 0
    far = Z.astype(np.float64) <= Z.max(1, keepdims=True).astype(np.float64) - 2 - 4 * z_err
    np.testing.assert_array_equal(r[far], 0)  # SPEC.md: never in the support
    assert zero_ref[far].all()


@FUZZ
@given(problems(), st.floats(-12, 12), st.sampled_from(["softmax", "entmax15"]))
def test_fuzz_bounds_at_any_sigma(problem, log_sigma, kind):
    """Finite outputs and SPEC.md's bounds for sigma from 1e-12 to 1e12 x spread."""
    X, C, w, spread = problem
    sigma = 10.0**log_sigma * spread
    n, k = X.shape[0], C.shape[0]
    W = float(w.sum()) if w is not None else float(n)
    r = softkmeans.responsibilities(X, C, sigma, kind=kind)
    assert np.isfinite(r).all() and (r >= 0).all()
    np.testing.assert_allclose(r.astype(np.float64).sum(1), 1.0, atol=10 * _tol(X))
    step = softkmeans.centroid_step(X, C, sigma, kind=kind, sample_weight=w)
    for a in (step.centroids, step.cluster_weights, step.objective, step.distortion):
        assert np.isfinite(a).all()
    J = reference.objective(X, C, kind="hard", sample_weight=w)
    value = step.objective
    T = 2.0 * sigma * sigma
    bound = T * W * (np.log(k) if kind == "softmax" else (4 / 3) * (1 - k**-0.5))
    slack = _tol(X) * (abs(J) + abs(value)) + 1e-300
    assert J - value >= -slack, f"objective {value} above J {J}"
    assert J - value <= bound * (1 + _tol(X)) + slack, f"J - objective {J - value} > {bound}"
    gX, gC = softkmeans.gradients(X, C, sigma, kind=kind, sample_weight=w)
    assert np.isfinite(gX).all() and np.isfinite(gC).all()


@FUZZ
@given(problems(max_offset_ratio=1.0), st.sampled_from(["softmax", "entmax15"]))
def test_fuzz_entmax15_exact_recovery_and_softmax_rate(problem, kind):
    """Below sqrt(Delta_min)/2, entmax15's step is Lloyd's step (SPEC.md); softmax's step is
    within O((k - 1) exp(-Delta_min / (2 sigma^2))) of it."""
    X, C, w, _ = problem
    if C.shape[0] < 2:
        return
    X = X.astype(np.float64)
    C = C.astype(np.float64)
    hard = reference.centroid_step(X, C, kind="hard", sample_weight=w)
    delta = hard.min_margin
    # The 1% gap below the threshold must dwarf the rounding of D (~1e-16 (|x|^2 + |c|^2)):
    # bisector ties can put Delta_min at rounding level, where the threshold is moot.
    S = float((X**2).sum(1).max() + (C**2).sum(1).max())
    if not delta > 1e-9 * S:
        return
    sigma = 0.5 * np.sqrt(delta) * 0.99
    step = softkmeans.centroid_step(X, C, sigma, kind=kind, sample_weight=w)
    scale = float(np.abs(X).max())
    if kind == "entmax15":
        _check(step.centroids, hard.centroids, X, "entmax15 below threshold", scale=scale)
    else:
        k = C.shape[0]
        rate = (k - 1) * np.exp(-delta / (2 * sigma**2))  # = (k - 1) e^-2 here
        wsum = float(np.sum(w)) if w is not None else float(X.shape[0])
        occupied = hard.cluster_weights > 0
        # Each wrong responsibility is <= rate, so N and S move by <= rate * W, rate * W |x|.
        n_min = float(hard.cluster_weights[occupied].min()) if occupied.any() else 1.0
        allowed = 2 * rate * wsum * 2 * scale / max(n_min - rate * wsum, 1e-300) + 1e-9 * scale
        if n_min > 2 * rate * wsum:
            diff = np.abs(step.centroids[occupied] - hard.centroids[occupied]).max()
            assert diff <= allowed, f"softmax step {diff:.3g} from Lloyd's, bound {allowed:.3g}"


_ODD_VALUES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-300, 1e300, -1.0]


@st.composite
def odd_arrays(draw, ndim):
    """Arrays that are often invalid: odd dtypes, empty or wrong shapes, odd values."""
    dtype = draw(
        st.sampled_from(
            [np.float64, np.float32, np.float16, np.int64, np.uint8, np.bool_, object, complex]
        )
    )
    nd = draw(st.sampled_from([ndim, ndim, ndim, ndim - 1, ndim + 1]))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=nd, max_size=nd)))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    a = rng.normal(scale=3.0, size=shape)
    if a.size and draw(st.booleans()):
        a.flat[draw(st.integers(0, a.size - 1))] = draw(st.sampled_from(_ODD_VALUES))
    with np.errstate(all="ignore"):
        if np.dtype(dtype).kind in "iub":
            a = np.nan_to_num(a, nan=0.0, posinf=0.0, neginf=0.0)
        a = a.astype(dtype)
    if a.ndim >= 1 and a.shape[0] > 1 and draw(st.booleans()):
        a = a[::-1]
    return a


_CALLS = API_CALLS


def _outcome(call):
    try:
        return "ok", call()
    except (TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)


@settings(FUZZ, max_examples=3 * EXAMPLES)
@given(
    st.sampled_from(sorted(_CALLS)),
    odd_arrays(2),
    odd_arrays(2),
    st.one_of(st.none(), odd_arrays(1)),
    st.sampled_from([None, *_ODD_VALUES, 0.5, 2.0, "1", True]),
    st.sampled_from(KINDS),
)
def test_fuzz_bad_input_same_behaviour(name, X, C, w, sigma, kind):
    """Random, mostly invalid input: both backends raise the same exception with the same
    message, or both succeed with the same finite results. Nothing crashes."""
    f = _CALLS[name]
    native = _outcome(lambda: f(softkmeans, X, C, sigma, kind, w))
    ref = _outcome(lambda: f(reference, X, C, sigma, kind, w))
    event(f"{name}: {native[0]}")
    assert native[0] == ref[0], f"native {native} vs reference {ref}"
    if native[0] != "ok":
        assert native[1] == ref[1]
        return
    got = native[1] if isinstance(native[1], tuple) else (native[1],)
    exp = ref[1] if isinstance(ref[1], tuple) else (ref[1],)
    for a, e in zip(got, exp):
        a64 = np.asarray(a, dtype=np.float64)
        e64 = np.asarray(e, dtype=np.float64)
        assert a64.shape == e64.shape
        if name == "centroid_step" and np.isinf(e64).all():  # min_margin with k == 1
            assert np.array_equal(a64, e64)
            continue
        assert np.isfinite(a64).all(), f"{name}: non-finite output"
        # Loose: inputs here can be near-degenerate (ties, huge/tiny values); the exact
        # parity is the business of the tests above.
        np.testing.assert_allclose(a64, e64, rtol=1e-3, atol=1e-3 * max(1.0, np.abs(e64).max()))


# ---------------------------------------------------------------------------------------
# Regressions for bugs the fuzzing found
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", [softkmeans, reference], ids=["native", "reference"])
@pytest.mark.parametrize(
    ("dtype", "gap", "empty"),
    [
        # exp(-gap) below the dtype's smallest normal number: 0 by SPEC.md, cluster empty
        (np.float64, 709.0, True),
        (np.float64, 740.0, True),
        (np.float32, 88.0, True),
        (np.float32, 100.0, True),
        # exp(-gap) a normal number: the cluster has mass and moves to the point
        (np.float64, 700.0, False),
        (np.float32, 80.0, False),
    ],
)
def test_softmax_mass_below_smallest_normal_is_zero(backend, dtype, gap, empty):
    """One point at 0, centroids at 0 and at distance sqrt(2 gap), sigma = 1: z = -gap for
    the second. Its mass exp(-gap) / (1 + exp(-gap)) is 0 by SPEC.md when exp(-gap) is
    below the smallest normal number of the data's dtype (the fuzzer found the native core
    flushing it while the reference kept the subnormal: the backends disagreed on emptiness);
    both backends must agree, on both sides of that boundary."""
    X = np.array([[0.0]], dtype=dtype)
    C = np.array([[0.0], [np.sqrt(2 * gap)]], dtype=dtype)
    assert (np.exp(-gap) < np.finfo(dtype).tiny) == empty  # the case is on the stated side
    step = backend.centroid_step(X, C, 1.0, kind="softmax")
    assert bool(step.empty[1]) == empty
    assert (step.cluster_weights[1] == 0.0) == empty
    expected_c1 = C[1, 0] if empty else 0.0
    np.testing.assert_array_equal(step.centroids, np.array([[0.0], [expected_c1]], dtype))
