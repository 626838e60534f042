"""The bf16 candidate pass (SPEC.md, "Reduced-precision candidates (exact)"; issue 23 item 2).

(a) Its bound against an exhaustive scan: for every pair, |D~ - D| <= eps against the exact
distance (float64 of the float inputs) and against the float path's distance
(`sq_distances` at the pass-free level), and the candidates hold every centroid the float
path's two smallest distances could come from, and the exact argmin. (b) Whole hard fits
and the row reductions give the same bytes with the pass on and off, at 1 and 2 threads,
and the same as the scalar level (the oracle). Skipped where the CPU lacks AVX512_BF16.
"""

from __future__ import annotations

import numpy as np
import pytest

import softkmeans
from conftest import make_blobs
from softkmeans import _core, _native
from softkmeans.fit.bounded import BoundedHardPass

pytestmark = pytest.mark.skipif(
    not _native.bf16_available(), reason="the CPU (or build) has no AVX512_BF16"
)


@pytest.fixture
def bf16_switch():
    """Restores the pass's switch and the SIMD level after the test."""
    level, on = _native.selected_simd_level(), _native.bf16_enabled()
    yield _native.set_bf16_enabled
    _native.set_simd_level(level)
    _native.set_bf16_enabled(on)


def _near_ties(rng, n, d, k):
    """Rows at the midpoint of two centroids (dyadic values: exactly equidistant), a third
    of them moved by one ulp in one coordinate."""
    C = rng.integers(-64, 64, size=(k, d)).astype(np.float32) / 8
    a, b = rng.integers(0, k, size=n), rng.integers(0, k, size=n)
    X = ((C[a] + C[b]) / 2).astype(np.float32)
    nudge = rng.random(n) < 1 / 3
    col = rng.integers(0, d, size=n)
    X[nudge, col[nudge]] = np.nextafter(X[nudge, col[nudge]], np.float32(np.inf))
    return X, C


def _adversarial(rng, n, d, k):
    """Norms ~1e4 in every coordinate, both signs, differences of order one: the norm
    expansion cancels all but a few bits of the dot product."""
    signs = rng.choice([-1.0, 1.0], size=(4, d))
    C = 1e4 * signs[rng.integers(0, 4, size=k)] + rng.normal(size=(k, d))
    X = 1e4 * signs[rng.integers(0, 4, size=n)] + rng.normal(size=(n, d))
    return X.astype(np.float32), C.astype(np.float32)


def _problem(name, n, d, k, seed):
    rng = np.random.default_rng(seed)
    if name == "random":
        return (
            rng.normal(size=(n, d)).astype(np.float32),
            rng.uniform(-1, 1, size=(k, d)).astype(np.float32),
        )
    if name == "clustered":
        return make_blobs(n, d, k, dtype=np.float32, seed=seed, offset=50.0)
    if name == "near-tie":
        return _near_ties(rng, n, d, k)
    return _adversarial(rng, n, d, k)


@pytest.mark.parametrize("name", ["random", "clustered", "near-tie", "adversarial"])
@pytest.mark.parametrize(("n", "d", "k"), [(300, 33, 37), (200, 64, 130), (130, 7, 9)])
def test_bound_holds_on_every_pair(name, n, d, k, bf16_switch):
    X, C = _problem(name, n, d, k, seed=n + d + k)
    got = _core._bf16_distance_bounds(X, C)
    assert got is not None
    approx, eps, cand = got
    X64, C64 = X.astype(np.float64), C.astype(np.float64)
    exact = ((X64[:, None, :] - C64[None, :, :]) ** 2).sum(axis=2)
    assert np.all(np.abs(approx - exact) <= eps), "bound against the exact distance"
    _native.set_simd_level("avx512")
    bf16_switch(False)
    float_path = softkmeans.sq_distances(X, C).astype(np.float64)
    assert np.all(np.abs(approx - float_path) <= eps), "bound against the float path"
    # Every centroid at or below the float path's second smallest distance of its row.
    second = np.sort(float_path, axis=1)[:, min(1, k - 1)]
    needed = float_path <= second[:, None]
    assert np.all(cand[needed]), "a centroid of the float path's two smallest left out"
    assert np.all(cand[exact == exact.min(axis=1, keepdims=True)]), "the exact argmin left out"


def test_entry_rejects_bad_input():
    X = np.ones((5, 8), dtype=np.float32)
    with pytest.raises(ValueError, match="columns"):
        _core._bf16_distance_bounds(X[:, :3].copy(), X[:, :3].copy())
    with pytest.raises(TypeError, match="X must"):
        _core._bf16_distance_bounds(X.astype(np.float64), X)
    with pytest.raises(ValueError, match="C must have"):
        _core._bf16_distance_bounds(X, X[:, :6].copy())
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="C must hold finite"):
        _core._bf16_distance_bounds(X, bad)


# (n, d, k, data): the pass engages (softkmeans/config.hpp: d >= 64, k >= 512, k d >=
# 65536); blobs give a few candidates a row, uniform rows many (the float path takes the
# groups where too many remain). k is large for n: the bits, not the clustering, matter.
FIT_SHAPES = [(1_100, 128, 512, "blobs"), (1_300, 64, 1024, "blobs"), (900, 131, 520, "uniform")]


def _fit_data(n, d, k, data):
    if data == "blobs":
        return make_blobs(n, d, k, dtype=np.float32, seed=d)[0]
    return np.random.default_rng(d).uniform(size=(n, d)).astype(np.float32)


def _fit_bytes(X, k, n_threads):
    init = X[np.random.default_rng(k).choice(X.shape[0], size=k, replace=False)]
    m = softkmeans.SoftKMeans(
        n_clusters=k, assignment="hard", init=init, n_init=1, max_iter=8, n_threads=n_threads
    ).fit(X)
    return (m.labels_.tobytes(), m.cluster_centers_.tobytes(), m.inertia_, m.n_iter_)


@pytest.mark.parametrize("bounded", [True, False], ids=["bounded", "plain"])
@pytest.mark.parametrize(("n", "d", "k", "data"), FIT_SHAPES)
def test_fits_are_bitwise_with_and_without(n, d, k, data, bounded, bf16_switch, monkeypatch):
    if not bounded:  # every step by the plain pass, whose rows all go through the bf16 pass
        monkeypatch.setattr(BoundedHardPass, "for_fit", classmethod(lambda cls, *a: None))
    X = _fit_data(n, d, k, data)
    _native.set_simd_level("avx512")
    bf16_switch(True)
    assert _native.bf16_enabled()
    with_pass = [_fit_bytes(X, k, nt) for nt in (1, 2)]
    bf16_switch(False)
    without = _fit_bytes(X, k, 1)
    _native.set_simd_level("scalar")
    oracle = _fit_bytes(X, k, 1)
    for got in with_pass:
        assert got == without, "bf16 pass on != off"
        assert got == oracle, "bf16 pass != the scalar level"


@pytest.mark.parametrize(("n", "d", "k", "data"), FIT_SHAPES)
def test_row_reductions_are_bitwise(n, d, k, data, bf16_switch):
    X = _fit_data(n, d, k, data)
    C = X[np.random.default_rng(1).choice(n, size=k, replace=False)]

    def run(nt):
        labels, mins = softkmeans.assign(X, C, n_threads=nt)
        return labels.tobytes(), mins.tobytes(), softkmeans.margins(X, C, n_threads=nt).tobytes()

    _native.set_simd_level("avx512")
    bf16_switch(True)
    on = [run(1), run(2)]
    bf16_switch(False)
    assert on[0] == on[1] == run(1)


def test_rows_switching_between_the_paths_are_bitwise(bf16_switch):
    """Rows far from every centroid (every centroid a candidate: the lane groups decline,
    and after a few the pass stops trying but every 64th group), then rows among the
    centroids (about 3 candidates: the retries succeed and the pass comes back): each
    lane group by whichever path, the same bytes."""
    d, k = 128, 512
    rng = np.random.default_rng(4)
    near = (rng.normal(size=(6_000, d)) / np.arange(1, d + 1)).astype(np.float32)
    far, _ = make_blobs(6_000, d, k, dtype=np.float32, seed=3, offset=50.0)
    X = np.concatenate([far, near])
    C = near[rng.choice(near.shape[0], size=k, replace=False)]

    def run(nt):
        labels, mins = softkmeans.assign(X, C, n_threads=nt)
        return labels.tobytes(), mins.tobytes()

    _native.set_simd_level("avx512")
    bf16_switch(True)
    on = [run(1), run(2)]
    bf16_switch(False)
    off = run(1)
    _native.set_simd_level("scalar")
    assert on[0] == on[1] == off == run(1)
