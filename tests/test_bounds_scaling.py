"""Issue 24, items 1 and 2: the bounded hard step with up to 64 centroid groups at large k,
and the group-pruned exact assignment (`_native.assign_grouped`,
cpp/src/impl/group_pruned.hpp), each against the plain pass (`block_stats`, `assign`),
which the parity tests hold to the reference. The claims: bit-for-bit the plain pass's
labels, sums and minima, at every SIMD level and thread count; and, on clustered data, few
distances computed."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import lloyd_step, make_blobs
from softkmeans import SoftKMeans, _native
from softkmeans.centroid_groups import ball_groups, principal_axis_groups
from softkmeans.fit.bounded import BoundedHardPass
from softkmeans.sources import reads, source_of
from softkmeans.sources.nearest import NearestCentroid

GROUP_COUNTS = (1, 8, 16, 32, 64)


def _bounded_trajectory(X, C, t, threads, steps):
    """Lloyd steps from C taken by the bounded step (t groups) and by block_stats, checked
    equal at every step (labels, N, S), and the exact final pass's J and margin; returns
    the fraction of the n k distances each bounded step computed."""
    n, k = X.shape[0], C.shape[0]
    w = np.ones(n)
    group = principal_axis_groups(C, t)
    labels, lower = np.zeros(n, np.int64), np.zeros((n, t))
    C_prev, fractions = None, []
    for _ in range(steps):
        stats, _, n_distances = _native.hard_stats_bounded(
            X, C, C_prev, w, labels, lower, group, threads
        )
        ref, ref_labels, _ = _native.block_stats(X, C, "hard", 1.0, w, threads, labels=True)
        np.testing.assert_array_equal(labels, ref_labels)
        np.testing.assert_array_equal(stats.cluster_weights, ref.cluster_weights)
        np.testing.assert_array_equal(stats.sums, ref.sums)
        fractions.append(n_distances / (n * k))
        C_prev, C = C, lloyd_step(stats, C)
    stats, _, _ = _native.hard_stats_bounded(
        X, C, C_prev, w, labels, lower, group, threads, exact=True
    )
    ref, ref_labels, _ = _native.block_stats(X, C, "hard", 1.0, w, threads, labels=True)
    np.testing.assert_array_equal(labels, ref_labels)
    assert stats.distortion == ref.distortion
    assert stats.min_margin == ref.min_margin
    return fractions


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", (1, 2))
@pytest.mark.parametrize("t", GROUP_COUNTS)
def test_bounded_steps_over_many_groups_equal_the_plain_steps(simd_level, dtype, threads, t):
    """k = 1024 centroids in 1 to 64 groups, 5 Lloyd steps from a perturbed start."""
    X, C = make_blobs(1200, 8, 1024, dtype=dtype, seed=t)
    fractions = _bounded_trajectory(X, C, t, threads, steps=5)
    assert min(fractions[1:]) < 1.0  # the bounds skipped distances (else this tests nothing)


def test_bounded_steps_at_k_4096_equal_the_plain_steps():
    X, C = make_blobs(1500, 6, 4096, dtype=np.float32, seed=1)
    _bounded_trajectory(X, C, 64, 2, steps=4)


# The clustered fixture of the distance count: n = 20,000 rows, d = 16, 1024 normal
# centres of scale 10 (noise scale 1), rows assigned to centres at random, the start
# C near the centres (noise scale 1: make_blobs's); float32, 64 groups, 2 threads.
def test_a_clustered_fit_computes_at_most_5_percent_of_the_distances_from_step_3():
    X, C = make_blobs(20_000, 16, 1024, dtype=np.float32, seed=3, centre_scale=10.0)
    fractions = _bounded_trajectory(X, C, 64, 2, steps=8)
    assert fractions[0] == 1.0
    assert max(fractions[2:]) <= 0.05, fractions


def test_a_fit_with_64_groups_is_the_plain_fit(monkeypatch):
    """The estimator: labels, centroids, iteration count and inertia bit for bit."""
    X, C = make_blobs(3000, 8, 512, dtype=np.float32, seed=5)
    kw = dict(n_clusters=512, assignment="hard", init=C, n_init=1, max_iter=20, n_threads=2)
    monkeypatch.setattr(BoundedHardPass, "MIN_GROUP_WORK", 1)
    monkeypatch.setattr(BoundedHardPass, "MIN_GROUP_SIZE", 8)
    monkeypatch.setattr(BoundedHardPass, "MAX_GROUPS", 64)
    assert BoundedHardPass.centroid_groups(C).max() == 63
    bounded = SoftKMeans(**kw).fit(X)
    monkeypatch.setattr(BoundedHardPass, "for_fit", classmethod(lambda cls, *args: None))
    plain = SoftKMeans(**kw).fit(X)
    np.testing.assert_array_equal(bounded.labels_, plain.labels_)
    np.testing.assert_array_equal(bounded.cluster_centers_, plain.cluster_centers_)
    assert bounded.n_iter_ == plain.n_iter_
    assert bounded.inertia_ == plain.inertia_


# ---- the group-pruned assignment ----


def _near_ties(dtype, k, d, n, rng):
    """Integer centroids with duplicates (in different groups), rows exactly on the
    midpoints of pairs of centroids (equidistant from both), rows on centroids."""
    C = rng.integers(-6, 7, size=(k, d)).astype(np.float64)
    C[k // 2 : k // 2 + k // 8] = C[: k // 8]  # duplicated centroids
    i, j = rng.integers(k, size=(2, n))
    X = (C[i] + C[j]) / 2.0
    X[::5] = C[i[::5]]
    return np.ascontiguousarray(X, dtype=dtype), np.ascontiguousarray(C, dtype=dtype)


def _data(kind, dtype, rng):
    k, d, n = 2048, 12, 3000
    if kind == "clustered":  # clusters within 64 clusters (bench/ivf_kernels.clustered)
        centres = rng.normal(size=(64, d))[np.arange(k) % 64] + rng.normal(0, 0.3, (k, d))
        return make_blobs(n, d, k, dtype=dtype, seed=rng, centres=centres, spread=0.1)
    if kind == "uniform":
        X = rng.random((n, d)).astype(dtype)
        return X, rng.random((k, d)).astype(dtype)
    if kind == "far":  # far from the origin: the expansion's rounding at its largest
        X, C = make_blobs(n, d, k, dtype=dtype, seed=rng, offset=1e3)
        return X, C
    return _near_ties(dtype, k, d, n, rng)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", (1, 2))
@pytest.mark.parametrize("kind", ["clustered", "uniform", "far", "near_ties"])
@pytest.mark.parametrize("grouping", ["balls", "scattered"])
def test_group_pruned_assignment_is_the_plain_assignment(
    simd_level, dtype, threads, kind, grouping
):
    rng = np.random.default_rng(11)
    X, C = _data(kind, dtype, rng)
    k = C.shape[0]
    # Balls: the policy's groups; scattered: groups of no locality (wide balls, little
    # pruning, every path of the merge).
    group = ball_groups(C, 64) if grouping == "balls" else (np.arange(k) * 37 + 5) % 64
    labels, dist, n_distances = _native.assign_grouped(X, C, group, threads)
    ref_labels, ref_dist = _native.assign(X, C, threads)
    np.testing.assert_array_equal(labels, ref_labels)
    np.testing.assert_array_equal(dist, ref_dist)
    assert dist.dtype == X.dtype
    if kind == "clustered" and grouping == "balls":
        assert n_distances < 0.5 * X.shape[0] * k  # it pruned (else this tests nothing)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", (1, 2))
@pytest.mark.parametrize("per_group", [1, 2])
@pytest.mark.parametrize("values", ["integer", "float"])
def test_group_pruned_ties_between_groups_of_one_or_two_centroids(
    simd_level, dtype, threads, per_group, values
):
    """Groups of one or two centroids (radius 0 or about half a distance), numbered against
    the centroids' order: a row on duplicated centroids (or, integer, equidistant from two)
    has the bound of the group of the smaller index equal to its best distance up to
    rounding, and only the rounding margin keeps that group from being pruned. Float
    values far from the origin make the engines' roundings differ."""
    rng = np.random.default_rng(per_group)
    if values == "integer":
        X, C = _near_ties(dtype, 64, 9, 4000, rng)
    else:
        C = rng.normal(scale=10.0, size=(64, 9)) + 100.0
        C[32:] = C[:32]
        X = C[rng.integers(64, size=4000)] + rng.normal(scale=1e-3, size=(4000, 9))
        X, C = X.astype(dtype), C.astype(dtype)
    group = (63 - np.arange(64)) // per_group
    labels, dist, _ = _native.assign_grouped(X, C, group, threads)
    ref_labels, ref_dist = _native.assign(X, C, threads)
    np.testing.assert_array_equal(labels, ref_labels)
    np.testing.assert_array_equal(dist, ref_dist)


def test_group_pruned_assignment_of_one_row_one_group_and_tiny_groups():
    rng = np.random.default_rng(2)
    X, C = make_blobs(9000, 7, 70, dtype=np.float32, seed=rng)
    for group in (np.zeros(70, np.int64), np.arange(70) % 64, np.full(70, 63)):
        for rows in (X[:1], X):
            labels, dist, _ = _native.assign_grouped(rows, C, group, 1)
            ref_labels, ref_dist = _native.assign(rows, C, 1)
            np.testing.assert_array_equal(labels, ref_labels)
            np.testing.assert_array_equal(dist, ref_dist)


def test_predict_takes_the_group_pruned_pass_at_large_k(monkeypatch):
    k = NearestCentroid.MIN_CENTROIDS
    X, C = make_blobs(4 * k, 10, k, dtype=np.float32, seed=4, balanced=True, centre_scale=20.0)
    calls = []
    pruned = _native.assign_grouped
    monkeypatch.setattr(_native, "assign_grouped", lambda *a: calls.append(1) or pruned(*a))
    labels = reads.labels(source_of(X), C)
    assert calls
    np.testing.assert_array_equal(labels, _native.assign(X, C, 0)[0])
    model = SoftKMeans(n_clusters=k, assignment="hard", init=C, max_iter=1).fit(X)
    np.testing.assert_array_equal(model.predict(X), _native.assign(X, model.cluster_centers_, 0)[0])


def test_predict_falls_back_to_the_plain_pass_where_balls_do_not_prune(monkeypatch):
    """Uniform centres in 32 dimensions: the probe computes most distances, the rest of
    the rows take the plain pass; the labels are the plain pass's either way."""
    rng = np.random.default_rng(6)
    k = NearestCentroid.MIN_CENTROIDS
    X, C = rng.random((3 * NearestCentroid.PROBE_ROWS, 32)), rng.random((k, 32))
    rows_pruned = []
    pruned = _native.assign_grouped
    monkeypatch.setattr(
        _native, "assign_grouped", lambda X, *a: rows_pruned.append(len(X)) or pruned(X, *a)
    )
    labels, dist = NearestCentroid(C, 2)(X)
    assert rows_pruned == [NearestCentroid.PROBE_ROWS]
    ref_labels, ref_dist = _native.assign(X, C, 2)
    np.testing.assert_array_equal(labels, ref_labels)
    np.testing.assert_array_equal(dist, ref_dist)


@pytest.mark.parametrize(
    "group,error",
    [
        (np.zeros(5, np.int64), ValueError),  # not k entries
        (np.full(8, 64, np.int64), ValueError),  # out of range
        (np.full(8, -1, np.int64), ValueError),
        (np.zeros(8, np.int32), TypeError),
    ],
)
def test_group_pruned_assignment_rejects_bad_groups(group, error):
    X = np.zeros((4, 6), np.float32)
    C = np.ones((8, 6), np.float32)
    with pytest.raises(error, match="group"):
        _native.assign_grouped(X, C, group, 1)


def test_group_pruned_assignment_rejects_mismatched_centroids():
    X = np.zeros((4, 6), np.float32)
    with pytest.raises(TypeError, match="C"):
        _native.assign_grouped(X, np.ones((8, 6)), np.zeros(8, np.int64), 1)
    with pytest.raises(ValueError, match="columns"):
        _native.assign_grouped(X, np.ones((8, 5), np.float32), np.zeros(8, np.int64), 1)
