"""The split-bf16 products on AMX tiles (`cpp/src/amx.cpp`; SPEC.md, "Split-bf16
candidates on matrix units (exact)"): the approximate squared distances are within
`amx_sq_slack` of the exact ones (computed here in float64) on every pair, on random,
clustered, near-tie and adversarial data (norms ~1e4, both signs), at depths of one to
eight tiles; the split is real (the error far below a single bf16 product's); bad input
is refused. The pass that uses them (`assign_projected`) is tested against the plain
pass in tests/test_projected_assignment.py, and with the tiles off in
tests/test_kernel_choices.py. Skipped where the CPU, the build or Linux has no tiles.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import make_blobs
from softkmeans import _core

pytestmark = pytest.mark.skipif(
    not _core._amx_available(),
    reason="no AMX-BF16 tiles here (CPU, build, or Linux's tile permission)",
)


def _problem(name, n, d, k, seed):
    rng = np.random.default_rng(seed)
    if name == "random":
        X, C = rng.normal(size=(n, d)), rng.uniform(-1, 1, size=(k, d))
    elif name == "clustered":
        X, C = make_blobs(n, d, k, dtype=np.float64, seed=seed, offset=50.0)
    elif name == "near-tie":
        # Rows at the midpoint of two dyadic centroids (exactly equidistant), some moved.
        C = rng.integers(-64, 64, size=(k, d)) / 8
        a, b = rng.integers(0, k, size=(2, n))
        X = (C[a] + C[b]) / 2 + (rng.random((n, 1)) < 1 / 3) * rng.normal(scale=1e-6, size=(n, d))
    else:  # adversarial: norms ~1e4 a coordinate, both signs, differences of order one
        signs = rng.choice([-1.0, 1.0], size=(4, d))
        C = 1e4 * signs[rng.integers(0, 4, size=k)] + rng.normal(size=(k, d))
        X = 1e4 * signs[rng.integers(0, 4, size=n)] + rng.normal(size=(n, d))
    return X.astype(np.float32), C.astype(np.float32)


def _exact(X, C, shift):
    X64, C64, s64 = (a.astype(np.float64) for a in (X, C, shift))
    D = ((X64[:, None, :] - C64[None, :, :]) ** 2).sum(axis=2)
    xu = np.sqrt(((X64 - s64) ** 2).sum(axis=1)) * (1 + 1e-12)
    cu = np.sqrt(((C64 - s64) ** 2).sum(axis=1)) * (1 + 1e-12)
    return D, xu, cu


@pytest.mark.parametrize("shift_kind", ["zero", "mean", "far"])
@pytest.mark.parametrize("name", ["random", "clustered", "near-tie", "adversarial"])
@pytest.mark.parametrize(("n", "d", "k"), [(300, 33, 37), (200, 128, 130), (130, 7, 9),
                                           (70, 256, 40)])  # fmt: skip
def test_bound_holds_on_every_pair(name, shift_kind, n, d, k):
    X, C = _problem(name, n, d, k, seed=n + d + k)
    shift = {"zero": np.zeros((1, d)), "mean": C.mean(axis=0, keepdims=True),
             "far": np.full((1, d), -3e3)}[shift_kind].astype(np.float32)  # fmt: skip
    approx = _core._amx_distances(X, C, shift)
    assert approx is not None and approx.shape == (n, k)
    exact, xu, cu = _exact(X, C, shift)
    slack = np.vectorize(lambda a, b, e: _core._amx_sq_slack(a, b, e, d))(
        xu[:, None], cu[None, :], exact
    )
    err = np.abs(approx.astype(np.float64) - exact)
    assert np.all(err <= slack), f"worst error / slack {np.max(err / slack):.3g}"
    # The split's worth: a single bf16 product errs by up to 2^-8 of ||x - s|| ||c - s||;
    # the three products' bound is about 2^-13 of it, and the error below that.
    scale = xu[:, None] * cu[None, :] + xu[:, None] ** 2 + cu[None, :] ** 2
    assert np.max(slack / scale) < 2.0**-12
    assert np.max(err / scale) < 2.0**-13


def test_rows_beyond_the_products_range_decline():
    """A row or centroid 2^50 from the shift: None (the caller's float path)."""
    X, C = _problem("random", 40, 33, 20, seed=1)
    far = X.copy()
    far[3, 5] = 2.0**51
    assert _core._amx_distances(far, C, np.zeros((1, 33), np.float32)) is None
    assert _core._amx_distances(X, far, np.zeros((1, 33), np.float32)) is None


def test_entry_rejects_bad_input():
    X = np.ones((5, 8), dtype=np.float32)
    s = np.zeros((1, 8), np.float32)
    with pytest.raises(TypeError, match="X must"):
        _core._amx_distances(X.astype(np.float64), X, s)
    with pytest.raises(ValueError, match="C and shift"):
        _core._amx_distances(X, X[:, :6].copy(), s)
    with pytest.raises(ValueError, match="C and shift"):
        _core._amx_distances(X, X, np.zeros((1, 7), np.float32))
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        _core._amx_distances(bad, X, s)
