"""Shared test machinery: the one tolerance table, problem generators, and the
comparison rules that parity tests use (SPEC.md, "Accuracy that parity tests
demand")."""

from __future__ import annotations

import dataclasses
import os
import sys

import numpy as np
import pytest

import softkmeans
from softkmeans import _native

# Relative error allowed between the native core and the float64 reference.
# float32 results are compared with the float64 reference on the same data.
TOLERANCE = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 1e-4}

SIMD_LEVELS = tuple(_native.available_simd_levels())
THREAD_COUNTS = (1, 2, 3)
KINDS = ("hard", "softmax", "entmax15")
DTYPES = (np.float32, np.float64)

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


# Every function of the functional API, called alike: f(api, X, C, sigma, kind, sample_weight)
# with api softkmeans or softkmeans.reference (entmax15 takes X as its scores).
API_CALLS = {
    "sq_distances": lambda api, X, C, s, kind, w: api.sq_distances(X, C),
    "assign": lambda api, X, C, s, kind, w: api.assign(X, C),
    "margins": lambda api, X, C, s, kind, w: api.margins(X, C),
    "entmax15": lambda api, X, C, s, kind, w: api.entmax15(X),
    "responsibilities": lambda api, X, C, s, kind, w: api.responsibilities(X, C, s, kind=kind),
    "objective": lambda api, X, C, s, kind, w: api.objective(X, C, s, kind=kind, sample_weight=w),
    "centroid_step": lambda api, X, C, s, kind, w: api.centroid_step(
        X, C, s, kind=kind, sample_weight=w
    ),
    "gradients": lambda api, X, C, s, kind, w: api.gradients(X, C, s, kind=kind, sample_weight=w),
    "critical_sigma": lambda api, X, C, s, kind, w: api.critical_sigma(X, sample_weight=w),
}


@pytest.fixture(params=SIMD_LEVELS)
def simd_level(request):
    """Runs the test under each SIMD level this machine has, then restores the default."""
    before = _native.selected_simd_level()
    _native.set_simd_level(request.param)
    yield request.param
    _native.set_simd_level(before)


def make_blobs(
    n,
    d,
    k,
    *,
    dtype=np.float64,
    seed=0,
    offset=0.0,
    spread=1.0,
    centre_scale=None,
    centres=None,
    balanced=False,
    integer=False,
):
    """Points around k centres, and k initial centroids drawn near them: the one problem
    generator of the test suite.

    The centres are normal with scale `centre_scale` (default 4 x `spread`), or the given
    `centres` array; each point is its centre plus normal noise of scale `spread`. Points
    pick their centres at random, or `balanced`: n // k points per centre, in centre
    order. `seed` may be a Generator, whose stream the draws then continue. `offset`
    moves everything far from the origin (a stress test of the ||x||^2 + ||c||^2 - 2 x.c
    expansion); `integer` rounds to integer values, which makes distances exact in every
    backend.
    """
    rng = np.random.default_rng(seed)
    if centres is None:
        scale = 4.0 * spread if centre_scale is None else centre_scale
        centres = rng.normal(scale=scale, size=(max(k, 1), d))
    centres = np.asarray(centres, dtype=np.float64)
    m = centres.shape[0]
    labels = np.arange(n) * m // n if balanced else rng.integers(0, m, size=n)
    X = centres[labels] + rng.normal(scale=spread, size=(n, d)) + offset
    C = centres + rng.normal(scale=spread, size=centres.shape) + offset
    if integer:
        X, C = np.round(4 * X), np.round(4 * C)
    return X.astype(dtype), C[:k].astype(dtype)


@dataclasses.dataclass
class Problem:
    """One parity case: data, centroids, temperature, weights and threads."""

    X: np.ndarray
    C: np.ndarray
    sigma: float
    kind: str
    sample_weight: np.ndarray | None
    n_threads: int

    @property
    def Z(self):
        D = softkmeans.reference.sq_distances(self.X, self.C)
        return (-D.astype(np.float64) / (2 * self.sigma**2)).astype(self.X.dtype)

    def as_float64(self):
        return dataclasses.replace(self, X=self.X.astype(np.float64), C=self.C.astype(np.float64))


def rel_close(actual, expected, rtol, scale=None):
    """max |actual - expected| <= rtol * scale (default scale: max |expected|, at least tiny)."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if scale is None:
        scale = float(np.max(np.abs(expected))) if expected.size else 1.0
    scale = max(scale, np.finfo(np.float64).tiny)
    err = float(np.max(np.abs(actual - expected))) if expected.size else 0.0
    return err <= rtol * scale, err / scale


def assert_rel_close(actual, expected, dtype, what, scale=None):
    rtol = TOLERANCE[np.dtype(dtype)]
    ok, rel = rel_close(actual, expected, rtol, scale)
    assert ok, f"{what}: relative error {rel:.3g} > {rtol:g}"


def hard_label_mismatch_is_rounding(X, C, labels, expected):
    """float32 labels may differ only where the two nearest distances are within rounding."""
    X64, C64 = X.astype(np.float64), C.astype(np.float64)
    D = ((X64[:, None, :] - C64[None, :, :]) ** 2).sum(-1)
    bad = np.flatnonzero(labels != expected)
    for i in bad:
        gap = abs(D[i, labels[i]] - D[i, expected[i]])
        scale = (X64[i] ** 2).sum() + (C64**2).sum(1).max()
        if gap > 1e-5 * scale:
            return False
    return True


def _flatten(result):
    """Arrays and floats of any (nested tuple) result, as a list, for exact comparisons."""
    if isinstance(result, tuple):
        return [x for part in result for x in _flatten(part)]
    return [result]


def assert_identical(got, expected, what, *, nan_equal=False):
    """Bit-for-bit equality of two results (arrays: same dtype and values)."""
    got, expected = _flatten(got), _flatten(expected)
    assert len(got) == len(expected), what
    for a, b in zip(got, expected):
        if isinstance(b, np.ndarray):
            assert isinstance(a, np.ndarray) and a.dtype == b.dtype, f"{what}: dtype"
            np.testing.assert_array_equal(a, b, err_msg=what)
        else:
            assert a == b or (nan_equal and a != a and b != b), f"{what}: {a!r} != {b!r}"


def shuffled_batches(X, n_passes=5, batch=4096, seed=0):
    """A stationary stream: n_passes passes over X in a fresh random order each, as
    C-contiguous batches of `batch` rows (the streaming tests' input)."""
    rng = np.random.default_rng(seed)
    for _ in range(n_passes):
        order = rng.permutation(X.shape[0])
        for s in range(0, X.shape[0], batch):
            yield np.ascontiguousarray(X[order[s : s + batch]])


def only_reader(monkeypatch, reader):
    """softkmeans.reading takes the first installed of pandas, pyarrow and numpy.loadtxt for
    text files: hide the readers before `reader` (skip if it is not installed)."""
    if reader != "numpy.loadtxt":
        pytest.importorskip(reader.split(".")[0])
    if reader != "pandas.read_csv":
        monkeypatch.setitem(sys.modules, "pandas", None)
    if reader == "numpy.loadtxt":
        monkeypatch.setitem(sys.modules, "pyarrow", None)


def bits_of(out):
    """Every array and number of a result, as (bytes, dtype, shape), in a flat list (a
    NamedTuple's fields, tuples and lists walked; sparse matrices made dense)."""
    if hasattr(out, "_fields"):
        return [b for f in out._fields for b in bits_of(getattr(out, f))]
    if isinstance(out, (tuple, list)):
        return [b for o in out for b in bits_of(o)]
    if hasattr(out, "toarray"):
        out = out.toarray()
    a = np.asarray(out)
    return [(a.tobytes(), a.dtype.str, a.shape)]


def assert_same_bits(ref, got, what):
    """ref, got: `bits_of` lists of two runs; fails at the first output whose dtype, shape
    or bytes differ, saying in how many entries and by how much."""
    assert len(got) == len(ref), (what, len(ref), len(got))
    for i, (a, b) in enumerate(zip(ref, got)):
        assert a[1:] == b[1:], (what, i, a[1:], b[1:])
        if a[0] != b[0]:
            x = np.frombuffer(a[0], dtype=a[1]).astype(np.float64)
            y = np.frombuffer(b[0], dtype=b[1]).astype(np.float64)
            diff = np.flatnonzero(x != y)
            pytest.fail(
                f"{what}: output {i} differs in {diff.size} of {x.size} entries "
                f"(max |diff| {np.max(np.abs(x[diff] - y[diff])):.3g})"
            )


def lloyd_step(stats, C):
    """Lloyd's step from block statistics: each centroid with weight moves to the mean of
    its rows (S_j / N_j, in C's dtype); an empty one stays (the bounded-step tests walk
    the trajectories a fit takes with it)."""
    N = stats.cluster_weights
    out = np.array(C, copy=True)
    held = N > 0
    out[held] = (stats.sums[held] / N[held, None]).astype(C.dtype)
    return out


def unequal_blobs(n, d, k, seed=0, dtype=np.float64):
    """(X (n, d), C (k, d) drawn from X): k blobs whose sizes grow as j^2, the balanced
    tests' data (cluster sizes far from equal, so the balanced assignment moves rows)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d)) * 4
    p = np.arange(1, k + 1, dtype=float) ** 2
    X = centres[rng.choice(k, size=n, p=p / p.sum())] + rng.normal(size=(n, d))
    return X.astype(dtype), X[rng.choice(n, k, replace=False)].astype(dtype)


def lp_optimum(D, counts):
    """The least cost of an assignment of the rows of D (n, k) with these counts (an
    exact solver, scipy's linear_sum_assignment, on the expanded problem)."""
    from scipy.optimize import linear_sum_assignment

    slots = np.repeat(np.arange(D.shape[1]), counts)
    rows, cols = linear_sum_assignment(D[:, slots])
    return float(D[rows, slots[cols]].sum())


@pytest.fixture(scope="module")
def client():
    """A Client of a 2-process LocalCluster, one thread a worker (the Dask passes' tests),
    one per test module that asks for it."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    with cluster, distributed.Client(cluster) as c:
        yield c


def chunked_source(X, w, chunks):
    """An in-memory X (and weights w, None: unit) read in the given row chunks, those of
    a Dask array of X: the in-process runner over the Dask runner's blocks."""
    from softkmeans.sources import dense

    class ChunkedSource(dense.ArraySource):
        def blocks(self):
            for start, stop in zip(bounds[:-1], bounds[1:]):
                yield int(start), int(stop), self.data[start:stop]

    bounds = np.concatenate([[0], np.cumsum(chunks)])
    return ChunkedSource(X, w, n_threads=1, checked=True)
