"""The hard step with group distance bounds (`_native.hard_stats_bounded`,
cpp/src/impl/bounded.hpp) against the plain hard step (`block_stats`), which the parity tests
hold to the reference.

The bounded step skips a row, or the groups of centroids of a row, when they provably cannot
change its label; so the claim to test is that, along any sequence of centroids, it returns
exactly the labels, N and S of `block_stats` at every step (J within rounding, since skipped
rows add exact distances), and with `exact` J and the minimum margin bit for bit too. The
sequences below include the ones where a wrong skip would show: centroids moved by amounts
near the rounding of the kernel's distances, data far from the origin, exact ties on
integer data, and the Lloyd trajectories a fit takes; each with one group, with the fit's
groups and with many small ones.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import lloyd_step, make_blobs
from softkmeans import SoftKMeans, _native
from softkmeans.fit import driver
from softkmeans.fit.bounded import BoundedHardPass
from softkmeans.sources import ArraySource, RowBlockSource

THREADS = (1, 2)


def _plain(X, C, w, threads):
    stats, labels, _ = _native.block_stats(X, C, "hard", 1.0, w, threads, labels=True)
    return stats, labels


class Bounds:
    """A row state of the bounded step: labels (n,) and lower (n, t), for the groups
    `group` of k centroids (GROUPINGS)."""

    def __init__(self, n, group):
        self.group = np.ascontiguousarray(group, dtype=np.int64)
        self.labels = np.zeros(n, np.int64)
        self.lower = np.zeros((n, int(self.group.max()) + 1))

    def step(self, X, C, C_prev, w, threads, exact=False):
        return _native.hard_stats_bounded(
            X, C, C_prev, w, self.labels, self.lower, self.group, threads, exact=exact
        )


# How the centroids are grouped: one group (Hamerly's bounds), the fit's
# (`centroid_groups`), and groups of 1 to 3 centroids in a scattered order (many groups,
# groups of one, group slots padded in the lane panels, the largest t).
GROUPINGS = ("one", "fit", "small")


def _group(C, how):
    k = C.shape[0]
    if how == "one":
        return np.zeros(k, np.int64)
    if how == "fit":  # as for large centroids (these are small: one group else)
        work = BoundedHardPass.MIN_GROUP_WORK
        try:
            BoundedHardPass.MIN_GROUP_WORK = 1
            return BoundedHardPass.centroid_groups(C)
        finally:
            BoundedHardPass.MIN_GROUP_WORK = work
    t = min(64, max(1, (k + 1) // 2))
    return (np.arange(k) * 7 + 3) % t


def _assert_matches_plain(X, C, C_prev, w, bounds, threads):
    """One bounded call and one exact call checked against block_stats at C (the bounds
    carried on from the first); returns the first's rows computed."""
    before = bounds.labels.copy(), bounds.lower.copy()
    stats, n_computed, n_distances = bounds.step(X, C, C_prev, w, threads)
    ref, ref_labels = _plain(X, C, w, threads)
    np.testing.assert_array_equal(bounds.labels, ref_labels)
    np.testing.assert_array_equal(stats.cluster_weights, ref.cluster_weights)
    np.testing.assert_array_equal(stats.sums, ref.sums)
    assert stats.weight == ref.weight
    if n_distances == X.shape[0] * C.shape[0]:  # every distance computed: block_stats's
        assert stats.distortion == ref.distortion
        assert stats.min_margin == ref.min_margin
    else:
        rtol = 1e-5 if X.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(stats.distortion, ref.distortion, rtol=rtol, atol=1e-300)
    if C_prev is None:
        assert n_computed == X.shape[0]
    # exact: the same call from the same state gives every output of block_stats.
    exact = Bounds(X.shape[0], bounds.group)
    exact.labels[:], exact.lower[:] = before
    e_stats, _, _ = exact.step(X, C, C_prev, w, threads, exact=True)
    np.testing.assert_array_equal(exact.labels, ref_labels)
    np.testing.assert_array_equal(e_stats.sums, ref.sums)
    assert e_stats.distortion == ref.distortion
    assert e_stats.min_margin == ref.min_margin
    return stats, n_computed


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("grouping", GROUPINGS)
@pytest.mark.parametrize("d,k", [(5, 2), (5, 17), (16, 64), (33, 8), (64, 1), (70, 40)])
def test_every_lloyd_step_equals_the_plain_step(simd_level, dtype, threads, grouping, d, k):
    rng = np.random.default_rng(d * 100 + k)
    n = 1500
    X, _ = make_blobs(n, d, max(k // 2, 1), dtype=dtype, seed=rng)
    w = rng.random(n)
    w[::11] = 0.0
    C = X[rng.choice(n, size=k, replace=False)].copy()
    bounds = Bounds(n, _group(C, grouping))
    C_prev, skipped = None, 0
    for _ in range(15):
        stats, n_computed = _assert_matches_plain(X, C, C_prev, w, bounds, threads)
        skipped += n - n_computed
        C_prev, C = C, lloyd_step(stats, C)
    if k > 1:
        assert skipped > 0  # the bounds did skip rows (else this tests nothing)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("offset", [0.0, 1e4])
@pytest.mark.parametrize("scale", [0.0, 1e-9, 1e-7, 1e-5, 1e-3, 1e-1])
@pytest.mark.parametrize("grouping", GROUPINGS)
def test_centroids_moved_by_about_the_rounding_give_the_plain_labels(
    simd_level, dtype, offset, scale, grouping
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
    bounds = Bounds(n, _group(C, grouping))
    _assert_matches_plain(X, C, None, w, bounds, 2)
    for _ in range(4):
        C_next = (C + scale * rng.normal(size=C.shape) * (1 + abs(offset) * 1e-6)).astype(dtype)
        _assert_matches_plain(X, C_next, C, w, bounds, 2)
        C = C_next


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("grouping", GROUPINGS)
def test_exact_ties_on_integer_data_go_to_the_smallest_label(simd_level, threads, grouping):
    """Integer data and centroids: distances are exact, ties are exact; the kernel gives a
    tie to the smallest index, and so must a row that keeps its label by bounds."""
    rng = np.random.default_rng(3)
    n, d, k = 2000, 6, 10
    X = rng.integers(-3, 4, size=(n, d)).astype(np.float64)
    C = rng.integers(-3, 4, size=(k, d)).astype(np.float64)
    w = np.ones(n)
    bounds = Bounds(n, _group(C, grouping))
    _assert_matches_plain(X, C, None, w, bounds, threads)
    for _ in range(6):
        C_next = C.copy()
        moved = rng.integers(k, size=3)
        C_next[moved] += rng.integers(-1, 2, size=(3, d))
        _assert_matches_plain(X, C_next, C, w, bounds, threads)
        C = C_next


def test_labels_and_lower_do_not_depend_on_the_thread_count():
    rng = np.random.default_rng(5)
    X, _ = make_blobs(5000, 20, 12, dtype=np.float32, seed=rng)
    w = np.ones(len(X))
    runs = []
    for threads in (1, 2, 3):
        C = X[:24].copy()
        bounds = Bounds(len(X), _group(C, "small"))
        C_prev, out = None, []
        for _ in range(6):
            stats, n_computed, _ = bounds.step(X, C, C_prev, w, threads)
            out.append((stats, n_computed, bounds.labels.copy(), bounds.lower.copy()))
            C_prev, C = C, lloyd_step(stats, C)
        runs.append(out)
    for other in runs[1:]:
        for (s1, n1, l1, lo1), (s2, n2, l2, lo2) in zip(runs[0], other):
            assert n1 == n2 and s1.distortion == s2.distortion
            np.testing.assert_array_equal(s1.sums, s2.sums)
            np.testing.assert_array_equal(l1, l2)
            np.testing.assert_array_equal(lo1, lo2)


def test_chunks_of_several_tiles_shared_by_threads_give_one_threads_bytes():
    # k d = 262144: 15 chunks (stats_chunks) of 3-4 row tiles. A thread out of chunks
    # assigns the last tiles of the others' (drive_split); their sums stay in row order.
    # 2 threads: 8 chunks against 7, so tiles are shared at every step.
    rng = np.random.default_rng(8)
    n, d, k = 12_000, 128, 2048
    X, _ = make_blobs(n, d, 64, dtype=np.float32, seed=rng)
    w = rng.random(n)
    C0 = X[rng.choice(n, size=k, replace=False)].copy()
    group = _group(C0, "fit")
    runs = {}
    for threads in (1, 2, 3):
        bounds, C, C_prev, out = Bounds(n, group), C0, None, []
        for _ in range(4):
            before = bounds.labels.copy(), bounds.lower.copy()
            stats, n_computed, _ = bounds.step(X, C, C_prev, w, threads)
            exact = Bounds(n, group)
            exact.labels[:], exact.lower[:] = before
            e_stats, _, _ = exact.step(X, C, C_prev, w, threads, exact=True)
            out.append((stats, e_stats, n_computed, bounds.labels.copy(), bounds.lower.copy()))
            C_prev, C = C, lloyd_step(stats, C)
        runs[threads] = out
    for threads in (2, 3):
        for one, many in zip(runs[1], runs[threads]):
            for s1, s2 in ((one[0], many[0]), (one[1], many[1])):
                assert s1.sums.tobytes() == s2.sums.tobytes()
                assert s1.cluster_weights.tobytes() == s2.cluster_weights.tobytes()
                assert (s1.distortion, s1.weight) == (s2.distortion, s2.weight)
                assert s1.min_margin == s2.min_margin or np.isnan(s1.min_margin)
            assert one[2] == many[2]
            assert one[3].tobytes() == many[3].tobytes() and one[4].tobytes() == many[4].tobytes()
    ref, ref_labels = _plain(X, C_prev, w, 1)  # the last step's exact call: block_stats's
    assert runs[2][-1][1].distortion == ref.distortion
    assert runs[2][-1][1].min_margin == ref.min_margin


def _count_calls(monkeypatch, name):
    """Wraps _native.<name>; returns the list that gets one entry per call."""
    calls = []
    wrapped = getattr(_native, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return wrapped(*args, **kwargs)

    monkeypatch.setattr(_native, name, counted)
    return calls


@pytest.fixture
def bounds_everywhere(monkeypatch):
    """The bounded pass for every hard fit with d > 4 (small centroids included, in groups
    as for large ones), its calls counted."""
    monkeypatch.setattr(BoundedHardPass, "MIN_CENTROID_BYTES", 0)
    monkeypatch.setattr(BoundedHardPass, "MIN_GROUP_WORK", 1)
    monkeypatch.setattr(BoundedHardPass, "ROW_OVERHEAD", 0)  # a bounded final pass
    return _count_calls(monkeypatch, "hard_stats_bounded")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d,k", [(8, 5), (40, 30), (24, 130)])
def test_a_hard_fit_is_the_same_with_and_without_bounds(
    monkeypatch, bounds_everywhere, dtype, d, k
):
    rng = np.random.default_rng(d + k)
    X, _ = make_blobs(4000, d, k, dtype=dtype, seed=rng)
    init = X[rng.choice(len(X), size=k, replace=False)].copy()

    def fit():
        return SoftKMeans(k, assignment="hard", init=init, n_init=1, max_iter=100, tol=0).fit(X)

    bounded = fit()
    # The steps, and the final pass where there are groups (else the plain pass).
    grouped = BoundedHardPass.centroid_groups(init).max() > 0
    assert grouped == (k >= 16)
    assert len(bounds_everywhere) == bounded.n_iter_ + grouped
    monkeypatch.setattr(BoundedHardPass, "for_fit", classmethod(lambda cls, *args: None))
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
    X, _ = make_blobs(3000, 6, 3, seed=rng)
    init = np.vstack([X[:3], X[:3].mean(axis=0) + 1e6 * np.ones((2, 6))])  # 2 far, empty
    calls = _count_calls(monkeypatch, "assign")
    bounded = SoftKMeans(5, assignment="hard", init=init, n_init=1, max_iter=30).fit(X)
    assert bounded.n_iter_ >= 2 and len(bounds_everywhere) == bounded.n_iter_  # one group
    assert not calls
    monkeypatch.undo()
    monkeypatch.setattr(BoundedHardPass, "for_fit", classmethod(lambda cls, *args: None))
    plain = SoftKMeans(5, assignment="hard", init=init, n_init=1, max_iter=30).fit(X)
    np.testing.assert_array_equal(bounded.cluster_centers_, plain.cluster_centers_)
    np.testing.assert_array_equal(bounded.labels_, plain.labels_)


def test_the_final_pass_is_plain_where_the_bounds_rule_out_little(monkeypatch):
    """The final pass stays bounded where the centroids barely moved since the last step
    and goes plain (None: the caller's block_stats) where they moved far; the estimated
    share of distances is the kernel's count within 0.15; a fit's outputs are the plain
    fit's either way."""
    monkeypatch.setattr(BoundedHardPass, "MIN_GROUP_WORK", 1)
    rng = np.random.default_rng(3)
    X, _ = make_blobs(5000, 16, 64, dtype=np.float32, seed=rng)
    w = np.ones(len(X))
    C0 = X[rng.choice(len(X), size=64, replace=False)].copy()
    monkeypatch.setattr(BoundedHardPass, "ROW_OVERHEAD", 0.3 * C0.size)  # plain above 0.7
    near, far = C0 + np.float32(1e-3), C0[::-1].copy()  # far: every centroid moves
    for C, plain in ((near, False), (far, True)):
        bounded = BoundedHardPass(X, w, 1)
        bounded(C0)
        share = bounded.computed_share(C)
        probe = BoundedHardPass(X, w, 1)
        probe(C0)
        _, n_distances = probe._step(C, exact=True)
        assert abs(share - n_distances / (len(X) * 64)) < 0.15
        final = bounded.final(C)
        assert (final is None) == plain, share
        if final is not None:
            expected, labels, _ = _native.block_stats(
                X, C, "hard", 1.0, w, 1, sums=False, labels=True
            )
            np.testing.assert_array_equal(final[1], labels)
            assert final[0].distortion == expected.distortion
    # A fit of one step from rows of unclustered X: the centroids move far against the
    # gaps between them, the final pass is plain.
    monkeypatch.setattr(BoundedHardPass, "ROW_OVERHEAD", 6000)
    calls = _count_calls(monkeypatch, "hard_stats_bounded")
    X = rng.normal(size=(20000, 32)).astype(np.float32)
    init = X[rng.choice(len(X), size=512, replace=False)].copy()

    def fit():
        return SoftKMeans(512, assignment="hard", init=init, max_iter=1, tol=0).fit(X)

    one_step = fit()
    assert len(calls) == 1  # the step; the final pass plain
    monkeypatch.setattr(BoundedHardPass, "for_fit", classmethod(lambda cls, *args: None))
    plain = fit()
    np.testing.assert_array_equal(one_step.labels_, plain.labels_)
    assert one_step.inertia_ == plain.inertia_ and one_step.min_margin_ == plain.min_margin_


def test_the_bounded_pass_is_taken_only_where_it_applies():
    X = np.ascontiguousarray(np.random.default_rng(0).normal(size=(50, 8)))
    w = np.ones(50)
    k = BoundedHardPass.MIN_CENTROID_BYTES // (8 * X.itemsize)
    source, X32 = ArraySource(X, w), ArraySource(X.astype(np.float32), w)
    steps = 2
    assert BoundedHardPass.for_fit(source, "hard", k, steps) is not None
    assert BoundedHardPass.for_fit(source, "hard", k - 1, steps) is None
    assert BoundedHardPass.for_fit(X32, "hard", k, steps) is None
    assert BoundedHardPass.for_fit(X32, "hard", 2 * k, steps) is not None
    assert BoundedHardPass.for_fit(source, "softmax", k, steps) is None
    assert BoundedHardPass.for_fit(source, "entmax15", k, steps) is None
    rows = RowBlockSource(np.asfortranarray(X), w)
    assert BoundedHardPass.for_fit(rows, "hard", k, steps) is None
    X4 = ArraySource(np.ascontiguousarray(X[:, : _native.SMALL_DIM]), w)
    assert BoundedHardPass.for_fit(X4, "hard", 10**6, steps) is None
    # One step: bounded only with groups (whose bounds the final pass may read).
    assert BoundedHardPass.group_count(k, 8) == 1
    assert BoundedHardPass.for_fit(source, "hard", k, 1) is None
    wide = ArraySource(np.random.default_rng(1).normal(size=(50, 256)), w)
    assert BoundedHardPass.group_count(k, 256) > 1
    assert BoundedHardPass.for_fit(wide, "hard", k, 1) is not None


def test_a_fit_of_one_step_with_one_group_takes_the_plain_pass(monkeypatch):
    """Its bounds would serve no later pass: no bounded call, the plain fit's outputs."""
    rng = np.random.default_rng(4)
    X, _ = make_blobs(20000, 32, 256, dtype=np.float32, seed=rng)
    init = X[rng.choice(len(X), size=256, replace=False)].copy()
    assert BoundedHardPass.group_count(256, 32) == 1
    calls = _count_calls(monkeypatch, "hard_stats_bounded")

    def fit(max_iter):
        return SoftKMeans(256, assignment="hard", init=init, max_iter=max_iter, tol=0).fit(X)

    one_step = fit(1)
    assert not calls
    two_steps = fit(2)
    assert len(calls) == 2
    monkeypatch.setattr(BoundedHardPass, "for_fit", classmethod(lambda cls, *args: None))
    plain = fit(1)
    np.testing.assert_array_equal(one_step.labels_, plain.labels_)
    np.testing.assert_array_equal(one_step.cluster_centers_, plain.cluster_centers_)
    assert one_step.inertia_ == plain.inertia_ and two_steps.n_iter_ == 2


def test_bad_arguments_are_clear_errors():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 6))
    C = X[:3].copy()
    w = np.ones(20)
    group = np.array([0, 1, 0])
    labels, lower = np.zeros(20, np.int64), np.zeros((20, 2))

    def call(C_prev=C, labels=labels, lower=lower, group=group):
        return _native.hard_stats_bounded(X, C, C_prev, w, labels, lower, group, 1)

    call(C_prev=None)
    bad = labels.copy()
    bad[4] = 3
    with pytest.raises(ValueError, match=r"labels must be in \[0, k\)"):
        call(labels=bad)
    bad[4] = -1
    with pytest.raises(ValueError, match=r"labels must be in \[0, k\)"):
        call(labels=bad)
    with pytest.raises(ValueError, match="C_prev must have the shape of C"):
        call(C_prev=C[:2].copy())
    with pytest.raises(TypeError, match="labels must be a C-contiguous array of dtype int64"):
        call(labels=labels.astype(np.int32))
    with pytest.raises(ValueError, match="lower must have n rows and 1 to 64 columns"):
        call(lower=lower[:5].copy())
    with pytest.raises(ValueError, match="lower must have n rows and 1 to 64 columns"):
        call(lower=np.zeros((20, 65)), group=np.array([0, 64, 1]))
    with pytest.raises(ValueError, match="lower must be 2-dimensional"):
        call(lower=np.zeros(20))
    with pytest.raises(ValueError, match=r"group must be in \[0, t\)"):
        call(group=np.array([0, 2, 1]))
    with pytest.raises(ValueError, match=r"group must be in \[0, t\)"):
        call(group=np.array([0, -1, 1]))
    with pytest.raises(ValueError, match="group must be 1-dimensional with 3 entries"):
        call(group=np.array([0, 1]))
    with pytest.raises(TypeError, match="C_prev must be a C-contiguous array of dtype float64"):
        call(C_prev=C.astype(np.float32))


def test_the_fit_groups_are_balanced_and_keep_near_centroids_together(monkeypatch):
    """centroid_groups: t a power of two <= MAX_GROUPS, k / MIN_GROUP_SIZE and
    k d / MIN_GROUP_WORK, sizes within one of each other, and on well separated clumps of
    centroids, one clump a group."""
    rng = np.random.default_rng(0)
    for k, d, t in ((1, 5, 1), (15, 5, 1), (16, 5, 2), (130, 5, 16), (1024, 5, 64),
                    (256, 64, 1), (512, 64, 2), (1024, 256, 16)):  # fmt: skip
        monkeypatch.setattr(BoundedHardPass, "MIN_GROUP_WORK", 16384 if d > 5 else 1)
        group = BoundedHardPass.centroid_groups(rng.normal(size=(k, d)))
        assert group.dtype == np.int64 and group.max() + 1 == t
        sizes = np.bincount(group)
        assert sizes.max() - sizes.min() <= 1
    monkeypatch.setattr(BoundedHardPass, "MIN_GROUP_WORK", 1)
    clumps = rng.normal(scale=100.0, size=(8, 5))
    which = rng.permutation(np.repeat(np.arange(8), 16))
    C = clumps[which] + rng.normal(size=(128, 5))
    group = BoundedHardPass.centroid_groups(C)
    assert group.max() + 1 == 16
    for c in range(8):  # a clump splits into two groups of its own
        assert len(np.unique(group[which == c])) == 2
        assert not np.isin(group[which == c], group[which != c]).any()


def test_the_driver_hook_is_the_one_the_fit_uses():
    # Guards the monkeypatch target of the tests above: a rename would make them vacuous.
    assert driver.BoundedHardPass is BoundedHardPass
