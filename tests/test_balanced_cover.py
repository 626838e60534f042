"""A candidate column more for the clusters short of rows that few rows hold
(`softkmeans.fit.balanced_start.cover_short`, SPEC.md "Balanced assignments as one
pass"): Newton on candidates cannot move more rows to a cluster than hold it.

Oracles: the kernel's distances to every centroid (`_native.sq_distances`) with NumPy's
definitions of the regret and of the pass's floor, and the assignment problem expanded
into slots (scipy's linear_sum_assignment) for the solve that takes that path.
"""

import numpy as np
import pytest

from conftest import DTYPES, lp_optimum
from softkmeans import _native, sources
from softkmeans._balance import integer_targets
from softkmeans.fit import balanced_repair, balanced_start
from softkmeans.fit.balanced_passes import BiasedPass

M = 8


def _blobs_and_far(n, d, blobs, far, dtype, seed):
    """X (n, d) around `blobs` centres and C: those centres, then `far` centroids far
    from every row (held by no row's M best columns at zero offsets)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=6.0, size=(blobs, d))
    X = centres[rng.integers(0, blobs, n)] + rng.normal(size=(n, d))
    away = 20.0 + 5.0 * np.arange(far)[:, None] + rng.normal(size=(far, d))
    return X.astype(dtype), np.vstack([centres, away]).astype(dtype)


def _pass(X, C, g):
    w = np.ones(X.shape[0])
    return BiasedPass(*_native.biased_hard_stats_candidates(X, C, g, w, 1, M, np.inf))


def _covered(X, C, g, targets):
    p = _pass(X, C, g)
    wider = balanced_start.cover_short(
        p, g, targets, p.labels,
        lambda rows: _native.sq_distances(X[rows], C, 1),
        lambda J: _native.sq_distances(X, C[J], 1).astype(np.float64),
    )  # fmt: skip
    return p, wider


def _check_is_a_pass_of_candidates(p, wider, X, C, g):
    """Each row: its label among its candidates, -1 only in a tail, the candidates' D the
    kernel's bits, and every other column's biased value (in X's dtype) at or above its
    floor."""
    D = _native.sq_distances(X, C, 1)
    n, k = D.shape
    cand, held = wider.cand, wider.cand >= 0
    assert (cand == p.labels[:, None]).any(axis=1).all()
    assert not (~held[:, :-1] & held[:, 1:]).any()  # (no column after a -1)
    rows = np.nonzero(held)[0]
    assert np.array_equal(wider.cand_dist[held], D[rows, cand[held]])
    v = D - g.astype(D.dtype)
    outside = np.ones((n, k), dtype=bool)
    outside[rows, cand[held]] = False
    assert (v[outside] >= np.broadcast_to(wider.floor[:, None], (n, k))[outside]).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_short_cluster_gains_its_rows_of_least_regret(dtype):
    n, k = 2400, 13
    X, C = _blobs_and_far(n, 4, 12, 1, dtype, seed=1)
    g = np.random.default_rng(2).normal(scale=0.5, size=k)
    targets = integer_targets(np.full(k, n / k), n)
    p, wider = _covered(X, C, g, targets)
    assert wider is not None
    held_before = (p.cand == 12).any(axis=1)
    assert held_before.sum() < balanced_start.COVER * targets[12]
    # the rows of least regret D_ij - g_j - min_l (D_il - g_l) among those lacking j
    D = _native.sq_distances(X, C, 1).astype(np.float64)
    regret = D[:, 12] - g[12] - (D - g).min(axis=1)
    regret[held_before] = np.inf
    count = max(targets[12], balanced_start.COVER * targets[12] - held_before.sum())
    want = np.sort(np.argsort(regret, kind="stable")[:count])
    gained = np.flatnonzero((wider.cand == 12).any(axis=1) & ~held_before)
    assert np.array_equal(gained, want)
    _check_is_a_pass_of_candidates(p, wider, X, C, g)
    # the others' candidates and floors untouched
    same = np.setdiff1d(np.arange(n), want)
    assert np.array_equal(wider.cand[same], p.cand[same])
    assert np.array_equal(wider.floor[same], p.floor[same])


@pytest.mark.parametrize("dtype", DTYPES)
def test_several_short_clusters_keep_the_floor_below_every_other_column(dtype):
    # The second cluster's rows give up their M - 1-th column, below their floor: the
    # floor must come down to it.
    n, k = 2400, 15
    X, C = _blobs_and_far(n, 4, 12, 3, dtype, seed=4)
    g = np.zeros(k)
    targets = integer_targets(np.full(k, n / k), n)
    p, wider = _covered(X, C, g, targets)
    assert wider is not None
    for j in (12, 13, 14):
        assert (wider.cand == j).any(axis=1).sum() >= targets[j]
    assert (wider.floor < p.floor).any()
    _check_is_a_pass_of_candidates(p, wider, X, C, g)


def test_no_cover_where_every_short_cluster_is_held_by_many_rows():
    n, k = 2400, 12
    X, C = _blobs_and_far(n, 4, 12, 0, np.float64, seed=5)
    targets = integer_targets(np.full(k, n / k), n)
    _, wider = _covered(X, C, np.zeros(k), targets)
    assert wider is None


def test_newton_reaches_the_counts_once_the_short_clusters_are_held():
    # Without the cover no row holds the far clusters: Newton cannot give them rows.
    n, k = 2400, 14
    X, C = _blobs_and_far(n, 4, 12, 2, np.float64, seed=6)
    g = np.zeros(k)
    targets = integer_targets(np.full(k, n / k), n)
    p, wider = _covered(X, C, g, targets)

    def newton_error(q):
        return _native.balanced_newton(q.cand, q.cand_dist, targets, g.copy(), 30, 0, None,
                                       1, None, outputs=False)[0]  # fmt: skip

    assert newton_error(p) >= targets[12] + targets[13]
    assert newton_error(wider) < 0.1 * (targets[12] + targets[13])


def test_a_solve_that_takes_the_cover_ends_at_the_optimum(monkeypatch):
    n, k = 1200, 20
    X, C = _blobs_and_far(n, 4, 18, 2, np.float64, seed=7)
    counts = integer_targets(np.full(k, n / k), n)
    calls = []
    cover = balanced_start.cover_short
    monkeypatch.setattr(
        balanced_start, "cover_short", lambda *a: calls.append(cover(*a)) or calls[-1]
    )
    labels, _, _, own = balanced_repair.CountsRepair(sources.source_of(X), counts).solve(C)
    assert any(c is not None for c in calls), "the cover did not run"
    D = _native.sq_distances(X, C, 1)
    assert np.array_equal(np.bincount(labels, minlength=k), counts)
    assert np.array_equal(own, D[np.arange(n), labels])
    assert float(D[np.arange(n), labels].sum()) == pytest.approx(lp_optimum(D, counts), rel=1e-12)
