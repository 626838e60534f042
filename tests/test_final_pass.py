"""The final pass of a bounded hard fit (`_BoundedHardPass.final`): one more bounded call at
the final centroids, continuing the fit's bounds, instead of a plain `block_stats` pass.

The claims to test: labels_ and min_margin_ are the plain pass's bit for bit, inertia_ (and
objective_, which is J for "hard") within the kernel's rounding of it. min_margin_ rests on
two facts tested here on their own: each skipped row's margin bound (`margin_lower` of
`_native.hard_final_pass_bounded`, KernelSlack::margin_lower) is at most the margin block_stats
computes for that row, and `_native.margins` gives a row the same bits wherever the row is
(so the margins of the gathered rows are block_stats's). The bounds are tested where they
are tight (centroids that did not move), so that a bound overstated by a quarter fails.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_bounded import _blobs, _lloyd

from conftest import hard_distance_rounding
from softkmeans import SoftKMeans, _native
from softkmeans._driver import _BoundedHardPass

THREADS = (1, 2)


def _plain_margins(X, C):
    return _native.margins(X, C, 1).astype(np.float64)


# ------------------------------------------------------------------ the two facts


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("d,k", [(5, 7), (16, 64), (33, 20), (70, 40)])
def test_margins_give_a_row_the_bits_block_stats_gives_it(simd_level, dtype, threads, d, k):
    """The margin of a row does not depend on which rows are computed with it (gathered
    rows, any count), and block_stats's minimum margin is the minimum of these over the
    rows with positive weight."""
    rng = np.random.default_rng(d * k)
    n = 3000
    X = _blobs(n, d, max(k // 2, 1), dtype, rng)
    C = X[rng.choice(n, size=k, replace=False)].copy()
    w = rng.random(n)
    w[::5] = 0.0
    every = _native.margins(X, C, threads)
    for size in (1, 3, 17, 200, n):
        rows = np.sort(rng.choice(n, size=size, replace=False))
        np.testing.assert_array_equal(_native.margins(X[rows], C, threads), every[rows])
    stats, _, _ = _native.block_stats(X, C, "hard", 1.0, w, threads, sums=False)
    assert stats.min_margin == float(every[w > 0].min())


def _bounded_at_rest(X, C, w, threads):
    """A computed call at C, then a final-pass call at C again (no drift: the bounds as
    tight as they get). Returns the margin bounds and whether each row was computed."""
    n = X.shape[0]
    labels, lower = np.zeros(n, np.int64), np.zeros(n)
    _native.hard_stats_bounded(X, C, None, w, labels, lower, threads)
    bound = np.full(n, np.nan)
    stats, n_computed = _native.hard_final_pass_bounded(X, C, C, w, labels, lower, bound, threads)
    return bound, stats, n_computed


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("offset", [0.0, 1e3])
@pytest.mark.parametrize("d,k", [(8, 40), (16, 64), (70, 30)])
def test_margin_bounds_are_below_the_margins_and_tight_at_rest(simd_level, dtype, offset, d, k):
    rng = np.random.default_rng(k + d)
    n = 4000
    X = _blobs(n, d, k // 2, dtype, rng, offset=offset)
    C = X[rng.choice(n, size=k, replace=False)].copy()
    w = np.ones(n)
    margin = _plain_margins(X, C)
    bound, stats, n_computed = _bounded_at_rest(X, C, w, 2)
    assert not np.isnan(bound).any()  # every row gets one
    assert (bound <= margin).all(), "a margin bound above the margin"
    skipped = bound < margin
    assert n - n_computed == skipped.sum() > n // 2
    # Computed rows get their margins; at rest the skipped rows' bounds are nearly them:
    # a bound overstated by a quarter would be above the margin somewhere.
    np.testing.assert_array_equal(bound[~skipped], margin[~skipped])
    assert (bound[skipped] * 1.25 > margin[skipped]).any()
    assert stats.min_margin == margin[~skipped].min(initial=np.inf)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", THREADS)
def test_margin_bounds_hold_along_lloyd_steps(simd_level, dtype, threads):
    """Bounds after drift (and Hamerly's separation test) along a Lloyd trajectory, rows
    near the bisector of two centroids included."""
    rng = np.random.default_rng(11)
    n, d, k = 3000, 12, 24
    X = _blobs(n - 500, d, k // 2, dtype, rng)
    C = X[rng.choice(len(X), size=k, replace=False)].copy()
    mid = (C[0] + C[1]) / 2.0 + rng.normal(scale=1e-3, size=(500, d))
    X = np.ascontiguousarray(np.vstack([X, mid.astype(dtype)]))
    w = rng.random(n)
    labels, lower = np.zeros(n, np.int64), np.zeros(n)
    C_prev, skipped = None, 0
    for _ in range(8):
        bound = np.full(n, np.nan)
        stats, n_computed = _native.hard_final_pass_bounded(
            X, C, C_prev, w, labels, lower, bound, threads
        )
        margin = _plain_margins(X, C)
        assert (bound <= margin).all(), "a margin bound above the margin"
        skipped += n - n_computed
        # The next call continues from where this one left off (the bounds it wrote).
        C_prev, C = C, _lloyd(stats, C)
    assert skipped > n


# ------------------------------------------------------------------ the exact minimum


@pytest.mark.parametrize("first", [0, 1, 5, 1024])
def test_the_exact_minimum_covers_only_rows_with_positive_weight(monkeypatch, first):
    """Bounds that decide nothing (all 0, no computed row): every row with w > 0 is a
    candidate; a zero-weight row with the smallest margin is not one."""
    monkeypatch.setattr(_BoundedHardPass, "FIRST_MARGINS", first)
    rng = np.random.default_rng(4)
    X = _blobs(2000, 10, 6, np.float32, rng)
    C = X[:12].copy()
    margin = _plain_margins(X, C)
    w = np.ones(len(X))
    w[np.argmin(margin)] = 0.0
    bounded = _BoundedHardPass(X, w, 1)
    got = bounded._exact_min_margin(C, np.zeros(len(X)), float("inf"))
    assert got == margin[w > 0].min() > margin.min()
    # A computed minimum below every candidate's margin stands.
    assert bounded._exact_min_margin(C, np.zeros(len(X)), margin.min() / 2) == margin.min() / 2


@pytest.mark.parametrize("first", [1, 1024])
def test_a_skipped_row_just_below_the_computed_minimum_is_found(monkeypatch, first):
    """At rest (the bounds tight), the row with the smallest margin skipped, and a computed
    minimum one ulp above its margin: the completion must find the row. Its bound is within
    a quarter of its margin, so an overstated bound would hide it."""
    monkeypatch.setattr(_BoundedHardPass, "FIRST_MARGINS", first)
    rng = np.random.default_rng(8)
    X = _blobs(3000, 12, 10, np.float64, rng)
    C = X[rng.choice(len(X), size=20, replace=False)].copy()
    w = np.ones(len(X))
    bound, _, _ = _bounded_at_rest(X, C, w, 1)
    margin = _plain_margins(X, C)
    lowest = np.argmin(margin)
    assert bound[lowest] < margin[lowest] < 1.25 * bound[lowest]
    computed_min = float(np.nextafter(margin[lowest], np.inf))
    found = _BoundedHardPass(X, w, 1)._exact_min_margin(C, bound, computed_min)
    assert found == margin[lowest]


def _count_calls(monkeypatch, name):
    """Wraps _native.<name>; returns the list that gets each call's result."""
    calls = []
    wrapped = getattr(_native, name)

    def counted(*args, **kwargs):
        out = wrapped(*args, **kwargs)
        calls.append(out)
        return out

    monkeypatch.setattr(_native, name, counted)
    return calls


def _unbounded(monkeypatch):
    monkeypatch.setattr(_BoundedHardPass, "for_fit", classmethod(lambda cls, *args: None))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d,k,max_iter", [(8, 40, 3), (24, 60, 300), (64, 16, 6)])
@pytest.mark.parametrize("first", [3, 1024])
def test_a_bounded_fit_is_the_plain_fit(monkeypatch, dtype, d, k, max_iter, first):
    """The bounded fit (bounded steps and final pass) against the fit without bounds:
    centroids, labels_, n_iter_, min_margin_ and the history's shifts bit for bit; inertia_
    and objective_ within the kernel's rounding of the plain fit's and of a float64
    computation (skipped rows add their exact distances, computed ones the kernel's)."""
    monkeypatch.setattr(_BoundedHardPass, "MIN_CENTROID_BYTES", 0)
    monkeypatch.setattr(_BoundedHardPass, "FIRST_MARGINS", first)
    rng = np.random.default_rng(d + k)
    n = 5000
    X = _blobs(n, d, k, dtype, rng)
    w = rng.uniform(0.5, 2.0, size=n)
    w[::9] = 0.0
    init = X[rng.choice(n, size=k, replace=False)].copy()

    def fit():
        model = SoftKMeans(k, assignment="hard", init=init, n_init=1, max_iter=max_iter, tol=0)
        return model.fit(X, sample_weight=w)

    passes = _count_calls(monkeypatch, "block_stats")
    steps = _count_calls(monkeypatch, "hard_stats_bounded")
    finals = _count_calls(monkeypatch, "hard_final_pass_bounded")
    bounded = fit()
    assert not passes  # no plain pass: the final one is bounded too
    assert len(steps) == bounded.n_iter_ and len(finals) == 1
    _, final_computed = finals[0]
    assert final_computed < n  # the final pass skipped rows (their margins are bounds)
    _unbounded(monkeypatch)
    plain = fit()
    np.testing.assert_array_equal(bounded.cluster_centers_, plain.cluster_centers_)
    np.testing.assert_array_equal(bounded.labels_, plain.labels_)
    assert bounded.n_iter_ == plain.n_iter_
    assert bounded.min_margin_ == plain.min_margin_
    np.testing.assert_array_equal(bounded.history_["shift"], plain.history_["shift"])
    C = plain.cluster_centers_
    rounding = hard_distance_rounding(X, C, plain.labels_, w)
    exact = float(w @ ((X.astype(np.float64) - C[plain.labels_].astype(np.float64)) ** 2).sum(1))
    assert abs(bounded.inertia_ - plain.inertia_) <= rounding
    assert abs(bounded.inertia_ - exact) <= rounding
    assert abs(plain.inertia_ - exact) <= rounding
    assert bounded.objective_ == bounded.inertia_


def test_a_converged_fit_completes_its_minimum_margin_from_the_bounds(monkeypatch):
    """A fit run to strict convergence: its final pass computes almost no row (the computed
    minimum is then high or +inf), so the minimum margin comes from the bounds' candidates,
    the first FIRST_MARGINS of them before the rest."""
    monkeypatch.setattr(_BoundedHardPass, "MIN_CENTROID_BYTES", 0)
    monkeypatch.setattr(_BoundedHardPass, "FIRST_MARGINS", 50)
    rng = np.random.default_rng(2)
    X = _blobs(6000, 20, 30, np.float32, rng)
    init = X[rng.choice(len(X), size=30, replace=False)].copy()
    margins = _count_calls(monkeypatch, "margins")
    finals = _count_calls(monkeypatch, "hard_final_pass_bounded")
    model = SoftKMeans(30, assignment="hard", init=init, n_init=1, max_iter=300, tol=0)
    bounded = model.fit(X)
    assert bounded.history_["shift"][-1] == 0.0  # converged: the final pass is at rest
    assert finals[0][1] < 60
    assert len(margins) >= 1
    _unbounded(monkeypatch)
    plain = SoftKMeans(30, assignment="hard", init=init, n_init=1, max_iter=300, tol=0).fit(X)
    np.testing.assert_array_equal(bounded.labels_, plain.labels_)
    assert bounded.min_margin_ == plain.min_margin_
    assert bounded.min_margin_ == _plain_margins(X, plain.cluster_centers_).min()


def test_bad_margin_lower_arguments_are_clear_errors():
    X = np.random.default_rng(0).normal(size=(20, 6))
    memory = np.zeros(40)
    lower = memory[:20]
    state = (X, X[:3].copy(), None, np.ones(20), np.zeros(20, np.int64), lower)

    def call(margin_lower):
        _native.hard_final_pass_bounded(*state, margin_lower, 1)

    call(memory[20:])
    with pytest.raises(TypeError, match="margin_lower must be a C-contiguous array of dtype"):
        call(np.zeros(20, np.float32))
    with pytest.raises(ValueError, match="margin_lower must be 1-dimensional with 20 entries"):
        call(np.zeros(19))
    read_only = np.zeros(20)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="margin_lower must be writeable"):
        call(read_only)
    for overlapping in (lower, memory[10:30]):
        with pytest.raises(ValueError, match="margin_lower must not overlap lower"):
            call(overlapping)
