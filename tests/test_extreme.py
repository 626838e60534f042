"""Extreme temperatures: sigma from 1e-12 to 1e12 times the data's scale (SPEC.md, "No NaN
or Inf in any output for finite inputs and sigma in [1e-12, 1e12] times the data's scale").

For both dtypes, every kind, every function and both backends:
- every output is finite;
- rows of r are on the simplex;
- the objectives stay within SPEC.md's bounds:
  0 <= J - F_sigma <= 2 sigma^2 W log k  and  0 <= J - G_sigma <= 2 sigma^2 W (4/3)(1 - k^-1/2);
- sigma -> 0: softmax and entmax15 become hard (ties shared equally), the step becomes Lloyd's,
  the data gradient tends to 2 w_i (x_i - c_{a_i});
- sigma -> inf: r becomes uniform 1/k and every centroid moves to the weighted mean;
- the native core agrees with the float64 reference at SPEC.md's tolerances.
Expected values come from these limits, computed here with NumPy, never from the code.
"""

from __future__ import annotations

import numpy as np
import pytest

import softkmeans
from conftest import DTYPES, TOLERANCE, make_blobs, rel_close
from softkmeans import reference

BACKENDS = {"native": softkmeans, "reference": reference}
SOFT = ("softmax", "entmax15")
SIGMA_FACTORS = (1e-12, 1e-8, 1e-4, 1e-1, 1.0, 1e4, 1e8, 1e12)
DATA_SCALES = (1e-6, 1.0, 1e6)
BOUND = {
    "softmax": lambda k: np.log(k),
    "entmax15": lambda k: (4.0 / 3.0) * (1.0 - k**-0.5),
}


def _problem(dtype, scale, n=150, d=3, k=5, seed=0):
    X, C = make_blobs(n, d, k, dtype=np.float64, seed=seed, spread=1.0)
    rng = np.random.default_rng(seed + 1)
    w = rng.uniform(0.2, 3.0, size=n)
    return (X * scale).astype(dtype), (C * scale).astype(dtype), w


def _exact64(X, C):
    X64, C64 = X.astype(np.float64), C.astype(np.float64)
    return ((X64[:, None, :] - C64[None, :, :]) ** 2).sum(-1)


def _finite(*arrays):
    for a in arrays:
        assert np.isfinite(np.asarray(a, dtype=np.float64)).all(), "non-finite output"


def _tol(dtype):
    return TOLERANCE[np.dtype(dtype)]


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("scale", DATA_SCALES, ids=lambda s: f"scale{s:g}")
@pytest.mark.parametrize("factor", SIGMA_FACTORS, ids=lambda f: f"sigma{f:g}")
def test_finite_on_simplex_and_within_bounds(backend, dtype, scale, factor):
    api = BACKENDS[backend]
    X, C, w = _problem(dtype, scale)
    sigma = factor * scale
    n, k = X.shape[0], C.shape[0]
    D = _exact64(X, C)
    J = float(w @ D.min(1))
    W = float(w.sum())
    T = 2.0 * sigma * sigma
    tol = _tol(dtype)
    for kind in SOFT:
        r = api.responsibilities(X, C, sigma, kind=kind)
        _finite(r)
        assert r.dtype == dtype
        assert (r >= 0).all() and (r <= 1 + tol).all()
        np.testing.assert_allclose(r.astype(np.float64).sum(1), 1.0, rtol=0, atol=10 * tol)

        value = api.objective(X, C, sigma, kind=kind, sample_weight=w)
        _finite(value)
        gap, bound = J - value, T * W * BOUND[kind](k)
        slack = tol * (abs(J) + abs(value)) + 1e-300
        assert -slack <= gap <= bound * (1 + tol) + slack, (kind, J, value, bound)

        step = api.centroid_step(X, C, sigma, kind=kind, sample_weight=w)
        _finite(step.centroids, step.cluster_weights, step.objective, step.distortion)
        _finite(step.min_margin)
        assert step.cluster_weights.sum() == pytest.approx(W, rel=10 * tol)
        assert step.distortion == pytest.approx(J, rel=10 * tol)
        assert step.objective == pytest.approx(value, rel=10 * tol, abs=tol * J)

        gX, gC = api.gradients(X, C, sigma, kind=kind, sample_weight=w)
        _finite(gX, gC)
        assert gX.shape == (n, X.shape[1]) and gC.shape == C.shape


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("scale", DATA_SCALES, ids=lambda s: f"scale{s:g}")
@pytest.mark.parametrize("factor", (1e-12, 1e-8), ids=lambda f: f"sigma{f:g}")
def test_zero_temperature_limit_is_hard(backend, dtype, scale, factor):
    """sigma -> 0: r one-hot at argmin, step = Lloyd's step, F = G = J, grad_X -> K-Means grad."""
    api = BACKENDS[backend]
    X, C, w = _problem(dtype, scale, seed=3)
    sigma = factor * scale
    D = _exact64(X, C)
    a = D.argmin(1)
    n, k = D.shape
    onehot = np.zeros((n, k))
    onehot[np.arange(n), a] = 1.0
    J = float(w @ D.min(1))
    X64, C64 = X.astype(np.float64), C.astype(np.float64)
    N = onehot.T @ w
    lloyd = np.where(
        N[:, None] > 0, (onehot.T @ (w[:, None] * X64)) / np.maximum(N, 1e-300)[:, None], C64
    )
    tol = _tol(dtype)
    for kind in SOFT:
        r = api.responsibilities(X, C, sigma, kind=kind)
        np.testing.assert_allclose(r, onehot, rtol=0, atol=tol)
        value = api.objective(X, C, sigma, kind=kind, sample_weight=w)
        assert value == pytest.approx(J, rel=10 * tol)
        step = api.centroid_step(X, C, sigma, kind=kind, sample_weight=w)
        ok, err = rel_close(step.centroids, lloyd, 10 * tol, scale=float(np.abs(C64).max()))
        assert ok, f"{kind}: step differs from Lloyd's by {err:.3g}"
        np.testing.assert_array_equal(step.empty, N == 0)
        gX, _ = api.gradients(X, C, sigma, kind=kind, sample_weight=w)
        expected = 2.0 * w[:, None] * (X64 - C64[a])
        ok, err = rel_close(gX, expected, 10 * tol)
        assert ok, f"{kind}: data gradient at sigma -> 0 is off by {err:.3g}"


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("scale", DATA_SCALES, ids=lambda s: f"scale{s:g}")
@pytest.mark.parametrize("factor", (1e-12, 1e-8, 1e-4), ids=lambda f: f"sigma{f:g}")
def test_zero_temperature_ties_are_shared_equally(backend, dtype, scale, factor):
    """Duplicate centroids: at sigma -> 0 both soft maps give exactly 1/2 to each copy."""
    api = BACKENDS[backend]
    X, C, w = _problem(dtype, scale, seed=5)
    C = np.concatenate([C, C[[2]]]).astype(dtype)  # centroid 5 duplicates centroid 2
    sigma = factor * scale
    D = _exact64(X, C)
    near2 = D.argmin(1) == 2
    assert near2.any()
    for kind in SOFT:
        r = api.responsibilities(X, C, sigma, kind=kind).astype(np.float64)
        np.testing.assert_array_equal(r[:, 2], r[:, 5])
        np.testing.assert_allclose(r[near2][:, [2, 5]], 0.5, rtol=_tol(dtype))
        step = api.centroid_step(X, C, sigma, kind=kind, sample_weight=w)
        np.testing.assert_allclose(step.centroids[2], step.centroids[5], rtol=_tol(dtype))
        assert step.cluster_weights[2] == pytest.approx(step.cluster_weights[5], rel=_tol(dtype))
        assert step.min_margin == 0.0


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("scale", DATA_SCALES, ids=lambda s: f"scale{s:g}")
@pytest.mark.parametrize("factor", (1e8, 1e12), ids=lambda f: f"sigma{f:g}")
def test_infinite_temperature_limit_is_uniform(backend, dtype, scale, factor):
    """sigma -> inf: r = 1/k, every centroid moves to the weighted mean, N_j = W / k."""
    api = BACKENDS[backend]
    X, C, w = _problem(dtype, scale, seed=7)
    sigma = factor * scale
    k = C.shape[0]
    X64 = X.astype(np.float64)
    mu = (w @ X64) / w.sum()
    tol = _tol(dtype)
    for kind in SOFT:
        r = api.responsibilities(X, C, sigma, kind=kind)
        np.testing.assert_allclose(r, 1.0 / k, rtol=tol)
        step = api.centroid_step(X, C, sigma, kind=kind, sample_weight=w)
        ok, err = rel_close(step.centroids, np.tile(mu, (k, 1)), 10 * tol, scale=np.abs(X64).max())
        assert ok, f"{kind}: centroids not at the mean ({err:.3g})"
        np.testing.assert_allclose(step.cluster_weights, w.sum() / k, rtol=10 * tol)
        assert not step.empty.any()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("scale", DATA_SCALES, ids=lambda s: f"scale{s:g}")
@pytest.mark.parametrize("factor", SIGMA_FACTORS, ids=lambda f: f"sigma{f:g}")
def test_native_matches_reference_at_extreme_sigma(dtype, scale, factor):
    """Parity at SPEC.md's tolerances, float64 reference on the same data."""
    X, C, w = _problem(dtype, scale, seed=11)
    X64, C64 = X.astype(np.float64), C.astype(np.float64)
    sigma = factor * scale
    tol = _tol(dtype)
    d_scale = float(_exact64(X, C).max())
    for kind in SOFT:
        pairs = [
            ("r", softkmeans.responsibilities(X, C, sigma, kind=kind),
             reference.responsibilities(X64, C64, sigma, kind=kind), None),
            ("objective", softkmeans.objective(X, C, sigma, kind=kind, sample_weight=w),
             reference.objective(X64, C64, sigma, kind=kind, sample_weight=w), None),
        ]  # fmt: skip
        got = softkmeans.centroid_step(X, C, sigma, kind=kind, sample_weight=w)
        exp = reference.centroid_step(X64, C64, sigma, kind=kind, sample_weight=w)
        for field in ("centroids", "cluster_weights", "objective", "distortion"):
            pairs.append((f"step.{field}", getattr(got, field), getattr(exp, field), None))
        pairs.append(("step.min_margin", got.min_margin, exp.min_margin, d_scale))
        gX, gC = softkmeans.gradients(X, C, sigma, kind=kind, sample_weight=w)
        eX, eC = reference.gradients(X64, C64, sigma, kind=kind, sample_weight=w)
        pairs += [("grad_X", gX, eX, None), ("grad_C", gC, eC, None)]
        for name, a, e, s in pairs:
            ok, err = rel_close(a, e, tol, scale=s)
            assert ok, f"{kind} {name}: relative error {err:.3g} > {tol:g}"


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
def test_entmax15_scores_at_extreme_scales(backend, dtype):
    """entmax15(Z) for scores from 1e-30 to 1e30 in magnitude: finite, on the simplex, and
    one-hot once the top gap exceeds 2 (SPEC.md: entries with z_j <= max z - 2 get 0)."""
    api = BACKENDS[backend]
    rng = np.random.default_rng(2)
    base = rng.normal(size=(64, 7))
    top = base.argmax(1)
    for s in (1e-30, 1e-10, 1.0, 1e10, 1e30):
        Z = (base * s).astype(dtype)
        r = api.entmax15(Z).astype(np.float64)
        _finite(r)
        np.testing.assert_allclose(r.sum(1), 1.0, atol=10 * _tol(dtype))
        if s >= 1e10:
            np.testing.assert_array_equal(r.argmax(1), top)
            np.testing.assert_array_equal(r.max(1), 1.0)
        if s <= 1e-10:  # entmax15(z) = 1/k + O(|z|)
            np.testing.assert_allclose(r, 1 / 7, rtol=_tol(dtype), atol=10 * s)


@pytest.mark.parametrize(
    ("scale", "factor"),
    [(1e-150, 1e-6), (1e-150, 1e-12), (1.0, 1e-158), (1.0, 1e-170)],
    ids=["scale1e-150-sigma1e-6", "scale1e-150-sigma1e-12", "sigma1e-158", "sigma1e-170"],
)
def test_entmax15_at_subnormal_temperature(scale, factor):
    """Points on and between two centroids (exact distances): at any sigma this small,
    entmax15 is one-hot at the nearest centroid and shares the tie equally, as SPEC.md's
    sigma -> 0 limit says. Regression: native entmax15 gave NaN rows (0 x inf at zero
    distances) or all-zero rows once 4 sigma^2 was subnormal or underflowed to 0."""
    X = np.array([[0.0], [1.0], [3.0]]) * scale
    C = np.array([[0.0], [2.0]]) * scale
    sigma = factor * scale
    expected = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    # The sort-based threshold may share a tie as (sqrt(1/2))^2, one ulp above 1/2.
    for backend in (reference, softkmeans):
        r = backend.responsibilities(X, C, sigma, kind="entmax15")
        np.testing.assert_allclose(r, expected, rtol=1e-15, atol=0, err_msg=backend.__name__)
    step = softkmeans.centroid_step(X, C, sigma, kind="entmax15")
    assert np.isfinite(step.objective)
    np.testing.assert_allclose(step.cluster_weights, [1.5, 1.5])
