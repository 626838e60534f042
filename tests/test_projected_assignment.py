"""The projection-pruned exact assignment (issue 35, item 3; `cpp/src/impl/projected.hpp`):
labels and minimum squared distances bit for bit the plain pass's (`_native.assign`), and
with margins the second smallest wherever the kernel says it is exact (else a bound below
the plain pass's margin), on clustered, uniform, near-tie, adversarial (every centroid
within rounding of the row's nearest; rows far from the plain pass's shift, whose
rounding decides their label) and real-descriptor data (`bench/ivf.py`'s
patches, from two photographs), float32 and float64, 1-3 threads, every SIMD level; and
the policy that takes it (`NearestCentroid`: the balls first, the projection where they
do not prune).
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

from softkmeans import SoftKMeans, _native
from softkmeans.centroid_groups import principal_projection
from softkmeans.sources.nearest import NearestCentroid

IVF = os.path.join(os.path.dirname(__file__), os.pardir, "bench", "ivf.py")


@pytest.fixture(scope="module")
def descriptors():
    """(X (2000, 128), C (128, 128)) float64: patch descriptors made as `bench/ivf.py`
    makes them (two photographs, axes from 4000 patches) and centroids fitted to them."""
    pytest.importorskip("skimage")
    spec = importlib.util.spec_from_file_location("ivf_bench", IVF)
    ivf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ivf)
    X = ivf.Descriptors(photographs=("camera", "coffee"), sample=4000).rows(2000)
    model = SoftKMeans(128, assignment="hard", max_iter=5, random_state=0, n_threads=2).fit(X)
    return X.astype(np.float64), np.asarray(model.cluster_centers_, np.float64)


def _data(kind, rng, n=2000, d=40, k=96):
    if kind == "clustered":
        centres = rng.normal(size=(8, d))[np.arange(k) % 8] + rng.normal(0, 0.3, (k, d))
        X = centres[rng.integers(k, size=n)] + rng.normal(0, 0.1, (n, d))
        C = centres + rng.normal(0, 0.05, (k, d))
    elif kind == "uniform":
        X, C = rng.random((n, d)), rng.random((k, d))
    elif kind == "near_ties":
        # Rows within 1e-4 of midpoints of integer centroids, some centroids repeated
        # (exact ties: the smaller index wins) and rows on centroids (distance 0).
        C = rng.integers(-6, 7, size=(k, d)).astype(np.float64)
        C[1::9] = C[0::9][: len(C[1::9])]
        i, j = rng.integers(k, size=(2, n))
        X = (C[i] + C[j]) / 2.0 + rng.normal(scale=1e-4, size=(n, d))
        X[::11] = C[i[::11]]
    elif kind == "far_pairs":
        # Two clusters of centroids 2000 apart, rows within about 1 of the first's: the
        # products (~1e6) dwarf the distances, and the split-bf16 tiles' error (about
        # 1e-4 of them) would drop the nearest from a threshold that left it out. Each
        # base has k / 16 copies 0.05 apart in one lane (j = 16 t + b), so that its
        # lane's winner is mostly not the nearest copy. At d = 16 (4 axes): at d = 40 the
        # plain pass's own rounding allowance covered the tiles' error.
        d = 16
        base = rng.normal(size=(16, d))
        base[:, 0] += np.where(np.arange(16) % 2 == 0, 1000.0, -1000.0)
        C = base[np.arange(k) % 16] + rng.normal(scale=0.05, size=(k, d))
        X = base[2 * rng.integers(8, size=n)] + rng.normal(scale=0.05, size=(n, d))
    else:  # "sphere": every centroid at distance 1 (to rounding) from rows near 0, in the
        # span of the first 8 axes: the augmented distances are the distances, and which
        # centroid is nearest is decided by the kernel's rounding alone.
        U = rng.normal(size=(k, 8))
        U /= np.linalg.norm(U, axis=1, keepdims=True)
        C = np.zeros((k, d))
        C[:, :8] = U * (1.0 + 1e-7 * rng.normal(size=(k, 1)))
        X = np.zeros((n, d))
        X[:, :8] = rng.normal(scale=1e-7, size=(n, 8))
    return X, C


def _check(X, C, Q, mu, threads):
    """The projected pass (plain and with margins) against the plain pass."""
    labels, dist = _native.assign(X, C, threads)
    got_labels, got_dist, n_distances = _native.assign_projected(X, C, Q, mu, threads)
    np.testing.assert_array_equal(got_labels, labels)
    np.testing.assert_array_equal(got_dist, dist)
    lab2, m1, second, beyond, _ = _native.assign_projected(X, C, Q, mu, threads, margins=True)
    np.testing.assert_array_equal(lab2, labels)
    np.testing.assert_array_equal(m1, dist)
    margins = _native.margins(X, C, threads)
    exact = second.astype(np.float64) <= beyond
    np.testing.assert_array_equal((second - m1)[exact], margins[exact])
    assert np.all(beyond[~exact] - m1[~exact] <= margins[~exact])
    return n_distances


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("kind", ["clustered", "uniform", "near_ties", "sphere", "far_pairs"])
def test_projected_assignment_is_the_plain_pass(simd_level, kind, threads, dtype):
    X, C = _data(kind, np.random.default_rng(7))
    X, C = X.astype(dtype), C.astype(dtype)
    Q, mu = principal_projection(C, 4 if kind == "far_pairs" else 10)
    _check(X, C, Q, mu, threads)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 3])
def test_projected_assignment_of_real_descriptors(descriptors, threads, dtype):
    """Patches: the projection on 31 axes prunes most distances (bench/ivf_kernels.py
    times it), and every label and minimum is the plain pass's."""
    X, C = (a.astype(dtype) for a in descriptors)
    Q, mu = principal_projection(C, 31)
    n_distances = _check(X, C, Q, mu, threads)
    assert n_distances < 0.5 * X.shape[0] * C.shape[0]


def _far_from_shift(rng, shell, n=600, d=512, p=4, groups=8, per=12, R=100.0):
    """(X, C, Q, mu): groups of `per` centroids on a sphere in the first p axes (Q's),
    each group sharing a residual of norm R in the other axes, rows at their group's
    centre. The augmented coordinates see the distances within a group nearly exactly
    and near the Ea shift, while the plain pass rounds ||x - s||^2 ~ R^2 in d terms.
    shell=False: every centroid of a group at distance 1 (to 1e-3): float32's argmin is
    not the exact one for about half the rows, and a threshold that leaves out the
    plain pass's rounding (KernelSlack) keeps too few of them. shell=True: one at
    distance 1, the others at squared distances in [6, 6.25] (where the float32 slack
    puts lo*^2 here): the rows' second smallest is outside their candidates, and
    beyond is a bound."""
    Q = np.zeros((d, p))
    Q[np.arange(p), np.arange(p)] = 1.0
    r = rng.normal(size=(groups, d))
    r[:, :p] = 0.0
    r *= R / np.linalg.norm(r, axis=1, keepdims=True)
    U = rng.normal(size=(groups * per, p))
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    if shell:
        U *= np.sqrt(rng.uniform(6.0, 6.25, size=(groups * per, 1)))
        U[::per] /= np.linalg.norm(U[::per], axis=1, keepdims=True)
    C = r[np.arange(groups * per) // per]
    C[:, :p] = U
    X = r[rng.integers(groups, size=n)]
    X[:, :p] = rng.normal(scale=1e-3, size=(n, p))
    return X, C, Q, C.mean(axis=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("shell", [False, True])
def test_projected_assignment_keeps_the_centroids_within_the_plain_pass_rounding(
    simd_level, shell, threads, dtype
):
    X, C, Q, mu = _far_from_shift(np.random.default_rng(3), shell)
    X, C = X.astype(dtype), C.astype(dtype)
    if dtype == np.float32 and not shell:  # (the data does what it is for)
        exact = ((X[:, None].astype(np.float64) - C[None].astype(np.float64)) ** 2).sum(-1)
        assert (_native.assign(X, C, 1)[0] != exact.argmin(axis=1)).mean() > 0.2
    _check(X, C, Q, mu, threads)


def test_projected_assignment_allows_for_a_basis_not_quite_orthonormal():
    """Q off orthonormal by 1e-6 (a looser bound), or not at all (no bound: every
    centroid computed): still the plain pass's bits."""
    X, C = _data("clustered", np.random.default_rng(8))
    X, C = X.astype(np.float32), C.astype(np.float32)
    Q, mu = principal_projection(C, 10)
    _check(X, C, Q * (1.0 + 1e-6), mu, 2)
    _check(X, C, 3.0 * Q, mu, 2)


@pytest.mark.parametrize(
    "args,error",
    [
        ((np.zeros((39, 4)), np.zeros(40)), ValueError),  # Q not (d, p)
        ((np.zeros((40, 41)), np.zeros(40)), ValueError),  # p > d
        ((np.zeros((40, 4)), np.zeros(39)), ValueError),  # mu not (d,)
        ((np.zeros((40, 4), np.float32), np.zeros(40)), TypeError),
    ],
)
def test_projected_assignment_rejects_bad_projections(args, error):
    X, C = _data("uniform", np.random.default_rng(9), n=50, k=8)
    with pytest.raises(error):
        _native.assign_projected(X, C, *args, 1)


def _counting(monkeypatch, name):
    calls = []
    kernel = getattr(_native, name)
    monkeypatch.setattr(
        _native, name, lambda X, *a, **kw: calls.append(len(X)) or kernel(X, *a, **kw)
    )
    return calls


def test_predict_takes_the_projection_where_balls_do_not_prune(descriptors, monkeypatch):
    """Real descriptors: the balls' probe computes most distances, the projection's
    prunes, and the rest of the rows take it; labels (and, for a fit's final pass, the
    minimum margin) are the plain pass's."""
    monkeypatch.setattr(NearestCentroid, "MIN_CENTROIDS", 64)
    monkeypatch.setattr(NearestCentroid, "PROBE_ROWS", 256)
    monkeypatch.setattr(NearestCentroid, "MAX_FRACTION", 0.05)  # the balls' probe fails
    monkeypatch.setattr(NearestCentroid, "MAX_PROJECTED_FRACTION", 0.5)  # k = 128: more
    X, C = (a.astype(np.float32) for a in descriptors)
    balls, projected = (
        _counting(monkeypatch, "assign_grouped"),
        _counting(monkeypatch, "assign_projected"),
    )
    nearest = NearestCentroid(C, 2)
    labels, dist = nearest(X)
    assert balls == [256] and projected == [256, X.shape[0] - 512]
    assert nearest.passes == ["projected"]
    np.testing.assert_array_equal(labels, _native.assign(X, C, 2)[0])
    w = np.ones(X.shape[0])
    stats, labels = NearestCentroid(C, 2).hard_stats(X, w)
    plain, plain_labels, _ = _native.block_stats(X, C, "hard", 0.0, w, 2, labels=True)
    np.testing.assert_array_equal(labels, plain_labels)
    assert stats.min_margin == plain.min_margin


def test_predict_keeps_the_balls_where_they_prune(monkeypatch):
    """Clusters within clusters: the balls' probe prunes, no projection is tried."""
    monkeypatch.setattr(NearestCentroid, "MIN_CENTROIDS", 64)
    monkeypatch.setattr(NearestCentroid, "PROBE_ROWS", 256)
    X, C = _data("clustered", np.random.default_rng(10), n=3000)
    balls, projected = (
        _counting(monkeypatch, "assign_grouped"),
        _counting(monkeypatch, "assign_projected"),
    )
    labels, _ = NearestCentroid(C, 2)(X)
    assert sum(balls) == X.shape[0] and projected == []
    np.testing.assert_array_equal(labels, _native.assign(X, C, 2)[0])
