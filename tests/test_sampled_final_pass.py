"""The final pass of a sampled hard fit over every row, group-pruned (issue 24, items 2
and 3): `NearestCentroid.hard_stats` and a sampled fit's ``labels_``, ``min_margin_``
(bit for bit) and ``inertia_`` / ``objective_`` (1e-12 relative) equal the plain pass
(`_native.block_stats`, every distance computed) on clustered, uniform and near-tie
data, with weights (zeros among them: the margin is over w > 0), both dtypes, 1 and 2
threads, every SIMD level. The groupings include groups of one centroid (radius 0), where
a row's second nearest centroid is nearly always in a group the pass leaves out, so its
margin must come from the bound and the rows computed in full.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import make_blobs
from softkmeans import SoftKMeans, _native
from softkmeans.centroid_groups import ball_groups
from softkmeans.sources.nearest import NearestCentroid


class _Fixed:
    """A grouping that always gives `group` (as a `CentroidGrouping` would)."""

    def __init__(self, group):
        self.group = group

    def of(self, C, n_threads):
        return self.group


def _data(kind, dtype, rng, n=3000, d=16, k=64):
    if kind == "clustered":
        centres = rng.normal(size=(16, d))[np.arange(k) % 16] + rng.normal(0, 0.3, (k, d))
        X, C = make_blobs(n, d, k, dtype=np.float64, seed=rng, centres=centres, spread=0.1)
    elif kind == "uniform":
        X, C = rng.random((n, d)), rng.random((k, d))
    else:  # near ties: rows within 1e-4 of midpoints of pairs of integer centroids
        C = rng.integers(-6, 7, size=(k, d)).astype(np.float64)
        i, j = rng.integers(k, size=(2, n))
        X = (C[i] + C[j]) / 2.0 + rng.normal(scale=1e-4, size=(n, d))
    return np.ascontiguousarray(X, dtype=dtype), np.ascontiguousarray(C, dtype=dtype)


def _weights(n, rng):
    w = rng.random(n) + 0.5
    w[::7] = 0.0  # a row of weight 0 has no margin
    return w


def _groupings(C):
    k = C.shape[0]
    return {
        "balls": ball_groups(C, 16),
        "scattered": (np.arange(k) * 37 + 5) % 64,
        "singles": np.arange(k) % 64,  # radius 0: the second nearest is left out
    }


def _assert_plain(stats, labels, plain, plain_labels):
    np.testing.assert_array_equal(labels, plain_labels)
    assert stats.min_margin == plain.min_margin
    assert stats.distortion == pytest.approx(plain.distortion, rel=1e-12, abs=0.0)
    assert stats.objective == stats.distortion
    assert stats.weight == pytest.approx(plain.weight, rel=1e-12)
    assert stats.cluster_weights is None and stats.sums is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kind", ["clustered", "uniform", "near_ties"])
def test_pruned_hard_stats_are_the_plain_pass(simd_level, dtype, threads, kind):
    rng = np.random.default_rng(3)
    X, C = _data(kind, dtype, rng)
    w = _weights(X.shape[0], rng)
    w[np.argmin(_native.margins(X, C, threads))] = 0.0  # the least margin is of w > 0
    plain, plain_labels, _ = _native.block_stats(
        X, C, "hard", 0.0, w, threads, sums=False, labels=True
    )
    for name, group in _groupings(C).items():
        stats, labels = NearestCentroid(C, threads, _Fixed(group)).hard_stats(X, w)
        try:
            _assert_plain(stats, labels, plain, plain_labels)
        except AssertionError as exc:
            raise AssertionError(f"grouping {name}: {exc}") from None


def test_pruned_hard_stats_of_few_dimensions_and_of_one_centroid():
    """d <= SMALL_DIM (the kernel's plain path, no groups to prune), and k = 1 (no margin:
    inf, as the plain pass's)."""
    rng = np.random.default_rng(4)
    for d, k in ((3, 40), (16, 1)):
        X, C = _data("clustered", np.float32, rng, n=500, d=d, k=k)
        w = _weights(500, rng)
        plain, plain_labels, _ = _native.block_stats(X, C, "hard", 0.0, w, 2, labels=True)
        stats, labels = NearestCentroid(C, 2, _Fixed(np.arange(k) % 8)).hard_stats(X, w)
        _assert_plain(stats, labels, plain, plain_labels)


def test_pruned_hard_stats_probe_and_fall_back(monkeypatch):
    """A block larger than two probes: the probe's rows pruned, the rest pruned (clustered)
    or plain (uniform: the probe computes most distances); the statistics merged."""
    monkeypatch.setattr(NearestCentroid, "PROBE_ROWS", 512)
    rng = np.random.default_rng(5)
    for kind in ("clustered", "uniform"):
        X, C = _data(kind, np.float32, rng, n=3000)
        w = _weights(3000, rng)
        plain, plain_labels, _ = _native.block_stats(X, C, "hard", 0.0, w, 2, labels=True)
        nearest = NearestCentroid(C, 2, _Fixed(_groupings(C)["balls"]))
        _assert_plain(*nearest.hard_stats(X, w), plain, plain_labels)
        assert (nearest.group is None) == (kind == "uniform")


def _count_pruned_rows(monkeypatch):
    """The pruned pass from 64 centroids, probing 1024 rows; returns the list of the
    rows' counts of each pruned kernel call (in this process)."""
    monkeypatch.setattr(NearestCentroid, "MIN_CENTROIDS", 64)
    monkeypatch.setattr(NearestCentroid, "PROBE_ROWS", 1024)
    calls = []
    pruned = _native.nearest_two_grouped
    monkeypatch.setattr(
        _native, "nearest_two_grouped", lambda X, *a: calls.append(len(X)) or pruned(X, *a)
    )
    return calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_sampled_fit_labels_every_row_by_the_pruned_pass(monkeypatch, dtype):
    """labels_, inertia_, objective_, min_margin_ of a sampled fit are the plain pass's
    over every row at the fitted centroids, and that pass was the pruned one."""
    calls = _count_pruned_rows(monkeypatch)
    rng = np.random.default_rng(6)
    X, _ = _data("clustered", dtype, rng, n=6000)
    w = _weights(6000, rng)
    model = SoftKMeans(
        128, assignment="hard", max_iter=4, random_state=0, max_points_per_centroid=8
    ).fit(X, sample_weight=w)
    assert sum(calls) == X.shape[0]
    plain, plain_labels, _ = _native.block_stats(
        X, model.cluster_centers_, "hard", 0.0, w, 2, sums=False, labels=True
    )
    np.testing.assert_array_equal(model.labels_, plain_labels)
    assert model.min_margin_ == plain.min_margin
    assert model.inertia_ == pytest.approx(plain.distortion, rel=1e-12, abs=0.0)
    assert model.objective_ == model.inertia_


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pruned_hard_stats_are_the_same_bits_at_every_thread_count_and_simd_level(dtype):
    rng = np.random.default_rng(7)
    X, C = _data("clustered", dtype, rng, n=5000)
    w = _weights(5000, rng)
    group = _groupings(C)["balls"]
    before = _native.selected_simd_level()
    seen = set()
    try:
        for level in _native.available_simd_levels():
            _native.set_simd_level(level)
            for threads in (1, 2, 3):
                stats, labels = NearestCentroid(C, threads, _Fixed(group)).hard_stats(X, w)
                seen.add((stats.distortion, stats.min_margin, labels.tobytes()))
    finally:
        _native.set_simd_level(before)
    assert len(seen) == 1


def test_a_dask_sampled_fit_labels_every_block_by_the_pruned_pass(monkeypatch):
    """The same for `softkmeans.dask` (the local scheduler: the blocks' tasks run in this
    process, where the kernel is counted): each block's final pass is the pruned one,
    and the merged statistics are the plain pass's over every row."""
    da = pytest.importorskip("dask.array")
    from softkmeans.dask import SoftKMeans as DaskSoftKMeans

    calls = _count_pruned_rows(monkeypatch)
    rng = np.random.default_rng(8)
    X, _ = _data("clustered", np.float64, rng, n=6000)
    w = _weights(6000, rng)
    model = DaskSoftKMeans(
        128, assignment="hard", max_iter=4, random_state=0, max_points_per_centroid=8
    ).fit(da.from_array(X, chunks=(2000, 16)), sample_weight=da.from_array(w, chunks=2000))
    assert sum(calls) == X.shape[0]
    plain, plain_labels, _ = _native.block_stats(
        X, model.cluster_centers_, "hard", 0.0, w, 2, sums=False, labels=True
    )
    np.testing.assert_array_equal(np.asarray(model.labels_), plain_labels)
    assert model.min_margin_ == plain.min_margin
    assert model.inertia_ == pytest.approx(plain.distortion, rel=1e-12, abs=0.0)
