"""The hard step with distance bounds (`_native.hard_stats_bounded`, cpp/src/impl/bounded.hpp)
against the plain hard step (`block_stats`), which the parity tests hold to the reference.

The bounded step skips a row when its label provably cannot change; so the claim to test is
that, along any sequence of centroids, it returns exactly the labels, N and S of
`block_stats` at every step (J within rounding, since skipped rows add exact distances). The
sequences below include the ones where a wrong skip would show: centroids moved by amounts
near the rounding of the kernel's distances, data far from the origin, exact ties on
integer data, and the Lloyd trajectories a fit takes.
"""

from __future__ import annotations

import numpy as np
import pytest

from softkmeans import SoftKMeans, _driver, _native
from softkmeans._driver import _BoundedHardPass

THREADS = (1, 2)


def _plain(X, C, w, threads):
    stats, labels, _ = _native.block_stats(X, C, "hard", 1.0, w, threads, labels=True)
    return stats, labels


def _assert_matches_plain(X, C, C_prev, w, labels, lower, threads):
    """One bounded call checked against block_stats at C; returns the rows computed."""
    stats, n_computed = _native.hard_stats_bounded(X, C, C_prev, w, labels, lower, threads)
    ref, ref_labels = _plain(X, C, w, threads)
    np.testing.assert_array_equal(labels, ref_labels)
    np.testing.assert_array_equal(stats.cluster_weights, ref.cluster_weights)
    np.testing.assert_array_equal(stats.sums, ref.sums)
    assert stats.weight == ref.weight
    if C_prev is None:  # every row computed: every output is block_stats's
        assert n_computed == X.shape[0]
        assert stats.distortion == ref.distortion
        assert stats.min_margin == ref.min_margin
    else:
        rtol = 1e-5 if X.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(stats.distortion, ref.distortion, rtol=rtol, atol=1e-300)
    return stats, n_computed


def _lloyd(stats, C):
    N = stats.cluster_weights
    out = np.array(C, copy=True)
    held = N > 0
    out[held] = (stats.sums[held] / N[held, None]).astype(C.dtype)
    return out


def _blobs(n, d, k, dtype, rng, spread=4.0, offset=0.0):
    centres = rng.normal(scale=spread, size=(k, d))
    X = centres[rng.integers(k, size=n)] + rng.normal(size=(n, d)) + offset
    return np.ascontiguousarray(X, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("d,k", [(5, 2), (5, 17), (16, 64), (33, 8), (64, 1), (70, 40)])
def test_every_lloyd_step_equals_the_plain_step(simd_level, dtype, threads, d, k):
    rng = np.random.default_rng(d * 100 + k)
    n = 1500
    X = _blobs(n, d, max(k // 2, 1), dtype, rng)
    w = rng.random(n)
    w[::11] = 0.0
    C = X[rng.choice(n, size=k, replace=False)].copy()
    labels, lower = np.zeros(n, np.int64), np.zeros(n)
    C_prev, skipped = None, 0
    for _ in range(15):
        stats, n_computed = _assert_matches_plain(X, C, C_prev, w, labels, lower, threads)
        skipped += n - n_computed
        C_prev, C = C, _lloyd(stats, C)
    if k > 1:
        assert skipped > 0  # the bounds did skip rows (else this tests nothing)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("offset", [0.0, 1e4])
@pytest.mark.parametrize("scale", [0.0, 1e-9, 1e-7, 1e-5, 1e-3, 1e-1])
def test_centroids_moved_by_about_the_rounding_give_the_plain_labels(
    simd_level, dtype, offset, scale
):
    """Many rows near the boundary between two centroids, centroids moved by amounts from
    zero to far above the kernel's rounding: a skip taken on a bound that ignored the
    rounding would keep a label the kernel changes."""
    rng = np.random.default_rng(7)
    n, d, k = 3000, 12, 6
    C = (rng.normal(size=(k, d)) + offset).astype(dtype)
    # Rows near the bisector of c_0 and c_1 (nudged to either side by 1e-9 to 1e-3 of
    # their distance: gaps from below to far above the kernel's rounding, within 0.1 of
    # their midpoint across it), and rows around every centroid.
    u = (C[1] - C[0]).astype(np.float64)
    across = rng.normal(scale=0.1, size=(n // 2, d))
    across -= np.outer(across @ u, u) / (u @ u)
    t = (rng.random((n // 2, 1)) - 0.5) * 10.0 ** rng.uniform(-9, -3, size=(n // 2, 1))
    mid = (C[0] + C[1]) / 2.0 + across + t * u
    X = np.vstack([mid, C[rng.integers(k, size=n - n // 2)] + rng.normal(size=(n - n // 2, d))])
    X = np.ascontiguousarray(X, dtype=dtype)
    w = np.ones(n)
    labels, lower = np.zeros(n, np.int64), np.zeros(n)
    _assert_matches_plain(X, C, None, w, labels, lower, 2)
    for _ in range(4):
        C_next = (C + scale * rng.normal(size=C.shape) * (1 + abs(offset) * 1e-6)).astype(dtype)
        _assert_matches_plain(X, C_next, C, w, labels, lower, 2)
        C = C_next


@pytest.mark.parametrize("threads", THREADS)
def test_exact_ties_on_integer_data_go_to_the_smallest_label(simd_level, threads):
    """Integer data and centroids: distances are exact, ties are exact; the kernel gives a
    tie to the smallest index, and so must a row that keeps its label by bounds."""
    rng = np.random.default_rng(3)
    n, d, k = 2000, 6, 10
    X = rng.integers(-3, 4, size=(n, d)).astype(np.float64)
    C = rng.integers(-3, 4, size=(k, d)).astype(np.float64)
    w = np.ones(n)
    labels, lower = np.zeros(n, np.int64), np.zeros(n)
    _assert_matches_plain(X, C, None, w, labels, lower, threads)
    for _ in range(6):
        C_next = C.copy()
        moved = rng.integers(k, size=3)
        C_next[moved] += rng.integers(-1, 2, size=(3, d))
        _assert_matches_plain(X, C_next, C, w, labels, lower, threads)
        C = C_next


def test_labels_and_lower_do_not_depend_on_the_thread_count():
    rng = np.random.default_rng(5)
    X = _blobs(5000, 20, 12, np.float32, rng)
    w = np.ones(len(X))
    runs = []
    for threads in (1, 2, 3):
        C = X[:24].copy()
        labels, lower = np.zeros(len(X), np.int64), np.zeros(len(X))
        C_prev, out = None, []
        for _ in range(6):
            stats, n_computed = _native.hard_stats_bounded(X, C, C_prev, w, labels, lower, threads)
            out.append((stats, n_computed, labels.copy(), lower.copy()))
            C_prev, C = C, _lloyd(stats, C)
        runs.append(out)
    for other in runs[1:]:
        for (s1, n1, l1, lo1), (s2, n2, l2, lo2) in zip(runs[0], other):
            assert n1 == n2 and s1.distortion == s2.distortion
            np.testing.assert_array_equal(s1.sums, s2.sums)
            np.testing.assert_array_equal(l1, l2)
            np.testing.assert_array_equal(lo1, lo2)


def _count_calls(monkeypatch, name):
    """Wraps _native.<name>; returns the list that gets one entry per call."""
    calls = []
    wrapped = getattr(_native, name)

    def counted(*args):
        calls.append(1)
        return wrapped(*args)

    monkeypatch.setattr(_native, name, counted)
    return calls


@pytest.fixture
def bounds_everywhere(monkeypatch):
    """The bounded pass for every hard fit with d > 4 (small centroids included), its calls
    counted."""
    monkeypatch.setattr(_BoundedHardPass, "MIN_CENTROID_BYTES", 0)
    return _count_calls(monkeypatch, "hard_stats_bounded")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d,k", [(8, 5), (40, 30)])
def test_a_hard_fit_is_the_same_with_and_without_bounds(
    monkeypatch, bounds_everywhere, dtype, d, k
):
    rng = np.random.default_rng(d + k)
    X = _blobs(4000, d, k, dtype, rng)
    init = X[rng.choice(len(X), size=k, replace=False)].copy()

    def fit():
        return SoftKMeans(k, assignment="hard", init=init, n_init=1, max_iter=100, tol=0).fit(X)

    bounded = fit()
    assert len(bounds_everywhere) == bounded.n_iter_
    monkeypatch.setattr(_BoundedHardPass, "for_fit", classmethod(lambda cls, *args: None))
    plain = fit()
    np.testing.assert_array_equal(bounded.cluster_centers_, plain.cluster_centers_)
    np.testing.assert_array_equal(bounded.labels_, plain.labels_)
    assert bounded.n_iter_ == plain.n_iter_
    assert bounded.inertia_ == plain.inertia_ and bounded.min_margin_ == plain.min_margin_
    np.testing.assert_array_equal(bounded.history_["shift"], plain.history_["shift"])
    np.testing.assert_allclose(bounded.history_["J"], plain.history_["J"], rtol=1e-5)
    # The first step computes every row (its margin is known); later skipping steps do not.
    assert bounded.history_["min_margin"][0] == plain.history_["min_margin"][0]


def test_a_fit_that_relocates_uses_the_steps_labels(monkeypatch, bounds_everywhere):
    """Empty clusters: the relocation takes the labels of the step (no assign pass) and
    the fit equals the plain one."""
    rng = np.random.default_rng(0)
    X = _blobs(3000, 6, 3, np.float64, rng)
    init = np.vstack([X[:3], X[:3].mean(axis=0) + 1e6 * np.ones((2, 6))])  # 2 far, empty
    calls = _count_calls(monkeypatch, "assign")
    bounded = SoftKMeans(5, assignment="hard", init=init, n_init=1, max_iter=30).fit(X)
    assert bounded.n_iter_ >= 2 and len(bounds_everywhere) == bounded.n_iter_
    assert not calls
    monkeypatch.undo()
    monkeypatch.setattr(_BoundedHardPass, "for_fit", classmethod(lambda cls, *args: None))
    plain = SoftKMeans(5, assignment="hard", init=init, n_init=1, max_iter=30).fit(X)
    np.testing.assert_array_equal(bounded.cluster_centers_, plain.cluster_centers_)
    np.testing.assert_array_equal(bounded.labels_, plain.labels_)


def test_the_bounded_pass_is_taken_only_where_it_applies():
    X = np.ascontiguousarray(np.random.default_rng(0).normal(size=(50, 8)))
    w = np.ones(50)
    k = _BoundedHardPass.MIN_CENTROID_BYTES // (8 * X.itemsize)
    assert _BoundedHardPass.for_fit(X, w, "hard", k, 1) is not None
    assert _BoundedHardPass.for_fit(X, w, "hard", k - 1, 1) is None
    X32 = X.astype(np.float32)
    assert _BoundedHardPass.for_fit(X32, w, "hard", k, 1) is None
    assert _BoundedHardPass.for_fit(X32, w, "hard", 2 * k, 1) is not None
    assert _BoundedHardPass.for_fit(X, w, "softmax", k, 1) is None
    assert _BoundedHardPass.for_fit(X, w, "entmax15", k, 1) is None
    assert _BoundedHardPass.for_fit(np.asfortranarray(X), w, "hard", k, 1) is None
    X4 = np.ascontiguousarray(X[:, : _native.SMALL_DIM])
    assert _BoundedHardPass.for_fit(X4, w, "hard", 10**6, 1) is None


def test_bad_arguments_are_clear_errors():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 6))
    C = X[:3].copy()
    w = np.ones(20)
    labels, lower = np.zeros(20, np.int64), np.zeros(20)
    _native.hard_stats_bounded(X, C, None, w, labels, lower, 1)
    bad = labels.copy()
    bad[4] = 3
    with pytest.raises(ValueError, match=r"labels must be in \[0, k\)"):
        _native.hard_stats_bounded(X, C, C, w, bad, lower, 1)
    bad[4] = -1
    with pytest.raises(ValueError, match=r"labels must be in \[0, k\)"):
        _native.hard_stats_bounded(X, C, C, w, bad, lower, 1)
    with pytest.raises(ValueError, match="C_prev must have the shape of C"):
        _native.hard_stats_bounded(X, C, C[:2].copy(), w, labels, lower, 1)
    with pytest.raises(TypeError, match="labels must be a C-contiguous array of dtype int64"):
        _native.hard_stats_bounded(X, C, C, w, labels.astype(np.int32), lower, 1)
    with pytest.raises(ValueError, match="lower must be 1-dimensional with 20 entries"):
        _native.hard_stats_bounded(X, C, C, w, labels, lower[:5].copy(), 1)
    with pytest.raises(TypeError, match="C_prev must be a C-contiguous array of dtype float64"):
        _native.hard_stats_bounded(X, C, C.astype(np.float32), w, labels, lower, 1)


def test_the_driver_hook_is_the_one_the_fit_uses():
    # Guards the monkeypatch target of the tests above: a rename would make them vacuous.
    assert _driver._BoundedHardPass is _BoundedHardPass
