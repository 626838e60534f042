"""The oracle of `softkmeans reproduce` (softkmeans.experiments.oracle): independent of the
library it judges, and right on cases known by hand."""

from __future__ import annotations

import ast
import inspect
import math

import numpy as np
import pytest

import softkmeans as sk
from softkmeans.experiments import oracle as O


def test_oracle_imports_numpy_and_scipy_only():
    tree = ast.parse(inspect.getsource(O))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import would reach softkmeans"
            names.add(node.module.split(".")[0])
    assert names <= {"__future__", "numpy", "scipy"}, names


def test_entmax15_by_hand():
    # z = (0, -1): u = (0, -1/2); two entries in the support, tau solves
    # tau^2 + (1/2 + tau)^2 = 1, tau = (-1/2 - sqrt(7/4)) / 2.
    tau = (-0.5 - math.sqrt(1.75)) / 2
    want = np.array([[tau**2, (0.5 + tau) ** 2]])
    np.testing.assert_allclose(O.entmax15(np.array([[0.0, -1.0]])), want, rtol=1e-14)
    # a gap of 2 or more in z: one-hot, exactly
    np.testing.assert_array_equal(O.entmax15(np.array([[0.0, -2.0, -5.0]])), [[1.0, 0.0, 0.0]])


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
def test_entmax15_sort_equals_bisection(scale):
    rng = np.random.default_rng(0)
    Z = scale * rng.normal(size=(200, 7))
    Z[:20, 1] = Z[:20, 0]  # exact ties
    r = O.entmax15(Z)
    np.testing.assert_allclose(r.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(r, O.entmax15_bisect(Z), atol=1e-12)


def test_softmax_objective_and_step_by_hand():
    X = np.array([[0.0], [2.0]])
    C = np.array([[0.0], [2.0]])
    sigma = 1.0  # T = 2: D = [[0, 4], [4, 0]], lse = log(1 + e^-2)
    lse = math.log(1 + math.exp(-2))
    assert O.objective(X, C, sigma, "softmax") == pytest.approx(-2 * 2 * lse, rel=1e-14)
    r = O.softmax(O.sq_distances(X, C), sigma)
    np.testing.assert_allclose(r[0], [1 / (1 + math.exp(-2)), math.exp(-2) / (1 + math.exp(-2))])
    new, N = O.step(X, C, sigma, "softmax")
    np.testing.assert_allclose(N, [1.0, 1.0])
    np.testing.assert_allclose(new[:, 0], [2 * r[1, 0], 2 * r[1, 1]], rtol=1e-14)
    assert O.objective(X, C, kind="hard") == 0.0


def test_one_hot_rows_give_lloyds_step_bit_for_bit():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 3))
    C = X[:4].copy()
    D = O.sq_distances(X, C)
    sigma = 0.999 * math.sqrt(O.margins(D).min()) / 2
    np.testing.assert_array_equal(O.step(X, C, sigma, "entmax15")[0], O.step(X, C, kind="hard")[0])


def test_oracle_agrees_with_the_library():
    # Parity, the other way round from the implementation-check rows: a sanity check
    # that the oracle computes SPEC.md's quantities.
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 5))
    C = X[:6] + 0.1
    for kind in ("hard", "softmax", "entmax15"):
        sigma = None if kind == "hard" else 0.7
        assert O.objective(X, C, sigma, kind) == pytest.approx(
            sk.objective(X, C, sigma, kind=kind), rel=1e-10
        )
        np.testing.assert_allclose(
            O.step(X, C, sigma, kind)[0],
            sk.centroid_step(X, C, sigma, kind=kind).centroids,
            rtol=1e-10,
            atol=1e-12,
        )
    assert math.sqrt(O.covariance_top(X)) == pytest.approx(sk.critical_sigma(X), rel=1e-12)
    np.testing.assert_allclose(O.margins(O.sq_distances(X, C)), sk.margins(X, C), atol=1e-10)


def test_cold_softmax_keeps_exact_ties_exact():
    # z = -D / T is ~ -1e10 here: shifting by the row minimum before dividing keeps a tie
    # at exactly 1/2 (unshifted, logsumexp's rounding at 1e10 moves it by ~1e-6).
    X = np.array([[0.0], [10.0]])
    C = np.array([[-1.0], [1.0], [100.0]])
    r = O.softmax(O.sq_distances(X, C), 1e-5)
    assert r[0, 0] == 0.5 and r[0, 1] == 0.5 and r[1, 1] == 1.0


def test_lanczos_hessian_eigenvalue_is_deterministic():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 30))
    C = X[:15] + 0.05
    values = {O.softmax_hessian_min(X, C, 2.0, dense_max=1) for _ in range(3)}
    assert len(values) == 1
