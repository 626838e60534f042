"""The same bits at every SIMD level (SPEC.md, "Determinism across machines"; issue 23, item 3).

Every entry point, kind and dtype, dense and CSR, is run at every SIMD level this machine
has (scalar, AVX2, AVX-512) and the output bytes are compared: the exp, the reductions and
the merge orders are defined independently of the vector width, so the levels, and with
them the x86-64 machines, agree bit for bit. The shapes hit the tile remainders (n not a
multiple of the row tile or of the micro-kernel's rows, k not a multiple of any vector
width, d odd) and both distance paths (the direct differences for d <= 4, the norm
expansion above).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import softkmeans
from conftest import DTYPES, KINDS, SIMD_LEVELS, assert_same_bits, bits_of, make_blobs
from softkmeans import _native

pytestmark = pytest.mark.skipif(len(SIMD_LEVELS) < 2, reason="one SIMD level on this machine")

# (n, d, k): the direct path (d <= 4) and the expansion, k below and above one vector of
# every width and the lane-accumulator threshold, n over several row tiles with remainders;
# k = 403: softmax distance blocks shorter than a row tile (their rows depend on the width).
SHAPES = [
    (1_037, 3, 5),
    (2_111, 4, 37),
    (1_543, 13, 7),
    (1_201, 37, 71),
    (611, 67, 19),
    (733, 9, 403),
]
SHAPE_IDS = [f"n{n}-d{d}-k{k}" for n, d, k in SHAPES]


def _problem(shape, dtype, sparse):
    n, d, k = shape
    X, C = make_blobs(n, d, k, dtype=dtype, seed=n + 7 * d + k)
    if sparse:
        rng = np.random.default_rng(d)
        X = np.where(rng.random(X.shape) < 0.3, X, 0).astype(dtype)
        X = sp.csr_matrix(X)
    w = np.random.default_rng(1).uniform(0.0, 2.0, size=n)
    D = softkmeans.sq_distances(X, C)
    # A width where softmax and entmax15 rows keep several nonzero entries.
    sigma = 0.5 * float(np.sqrt(np.median(D.min(axis=1)) + 1e-3))
    return X, C, w, sigma


def _at_each_level(call):
    """call() at every SIMD level; the selected level restored afterwards."""
    before = _native.selected_simd_level()
    try:
        out = {}
        for level in SIMD_LEVELS:
            _native.set_simd_level(level)
            out[level] = bits_of(call())
        return out
    finally:
        _native.set_simd_level(before)


def _assert_same(results):
    levels = list(results)
    ref = results[levels[0]]
    for level in levels[1:]:
        assert_same_bits(ref, results[level], f"{levels[0]} vs {level}")


KIND_FREE_CALLS = {
    "sq_distances": lambda X, C: softkmeans.sq_distances(X, C),
    "assign": lambda X, C: softkmeans.assign(X, C),
    "margins": lambda X, C: softkmeans.margins(X, C),
}
KIND_CALLS = {
    "responsibilities": lambda X, C, s, kind, w: softkmeans.responsibilities(X, C, s, kind=kind),
    "objective": lambda X, C, s, kind, w: softkmeans.objective(X, C, s, kind=kind, sample_weight=w),
    "centroid_step": lambda X, C, s, kind, w: softkmeans.centroid_step(
        X, C, s, kind=kind, sample_weight=w
    ),
    "gradients": lambda X, C, s, kind, w: softkmeans.gradients(X, C, s, kind=kind, sample_weight=w),
}


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("entry", list(KIND_FREE_CALLS))
def test_distances_same_bits_at_every_level(entry, dtype, shape, sparse):
    X, C, _, _ = _problem(shape, dtype, sparse)
    _assert_same(_at_each_level(lambda: KIND_FREE_CALLS[entry](X, C)))


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("entry", list(KIND_CALLS))
def test_entry_point_same_bits_at_every_level(entry, dtype, kind, shape, sparse):
    X, C, w, sigma = _problem(shape, dtype, sparse)
    _assert_same(_at_each_level(lambda: KIND_CALLS[entry](X, C, sigma, kind, w)))


@pytest.mark.parametrize("shape", [(301, 5), (1_000, 17), (97, 130)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
def test_entmax15_same_bits_at_every_level(dtype, shape):
    Z = np.random.default_rng(shape[1]).normal(scale=2.0, size=shape).astype(dtype)
    Z[::7, 1] = Z[::7, 0]  # ties
    _assert_same(_at_each_level(lambda: softkmeans.entmax15(Z)))


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
def test_critical_sigma_and_seeding_same_bits_at_every_level(dtype, sparse):
    X, _, w, _ = _problem(SHAPES[3], dtype, sparse)
    _assert_same(_at_each_level(lambda: softkmeans.critical_sigma(X, sample_weight=w)))
    _assert_same(
        _at_each_level(lambda: softkmeans.kmeans_plusplus(X, 23, sample_weight=w, random_state=3))
    )


FITS = {
    "hard": dict(assignment="hard"),
    "softmax": dict(assignment="softmax"),
    "entmax15": dict(assignment="entmax15"),
    "anneal": dict(assignment="softmax", anneal=True),
}


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[3]], ids=[SHAPE_IDS[1], SHAPE_IDS[3]])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("fit", list(FITS))
def test_fit_same_bits_at_every_level(fit, dtype, shape, sparse):
    X, _, w, _ = _problem(shape, dtype, sparse)
    k = 8

    def run():
        est = softkmeans.SoftKMeans(k, random_state=0, n_init=1, max_iter=30, **FITS[fit])
        est.fit(X, sample_weight=w)
        return (
            est.cluster_centers_,
            est.labels_,
            est.inertia_,
            est.objective_,
            est.sigma_,
            est.n_iter_,
            est.predict_proba(X) if fit != "hard" else est.predict(X),
        )

    _assert_same(_at_each_level(run))
