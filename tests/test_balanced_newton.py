"""The Newton start of the balanced repair (softkmeans.fit.balanced_repair, SPEC.md
"Balanced assignments as one pass"): the fused pass's candidates, damped Newton on the
dual over them (`_native.balanced_newton`), then the exact repair.

Oracles: the candidates against a stable sort of the kernel's biased distances
(NumPy); Newton's labels, D and gaps against their definition at the offsets it
returns (NumPy); the solve against the assignment problem with each cluster expanded
into its count of slots (scipy's linear_sum_assignment) and against the repair with no
Newton start (the optimum is unique on continuous data).
"""

from types import SimpleNamespace

import numpy as np
import pytest

from conftest import DTYPES, THREAD_COUNTS, lp_optimum, unequal_blobs
from softkmeans import _native, sources
from softkmeans._balance import integer_targets
from softkmeans.fit import balanced_repair


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [1, 3, 7])
@pytest.mark.parametrize("band", [np.inf, 6.0])
def test_candidates_are_the_m_best_biased_columns(dtype, m, band):
    X, C = unequal_blobs(2000, 5, 7, seed=m, dtype=dtype)
    g = np.random.default_rng(2).normal(scale=4.0, size=7)
    g[3] = g[4]  # equal offsets: ties between columns go to the smaller j
    D = _native.sq_distances(X, C, 1)
    v = D - g.astype(dtype)
    order = np.argsort(v, axis=1, kind="stable")[:, :m]
    sorted_v = np.take_along_axis(v, order, axis=1)
    bar = sorted_v[:, :1] + dtype(band)  # the row's best + band, in X's dtype
    held = sorted_v < bar
    want = np.where(held, order, -1)
    want_floor = np.where(held[:, -1], sorted_v[:, -1], bar[:, 0])
    assert (held.sum(1) < m).any() == (np.isfinite(band) and m > 1)  # the band cuts some rows
    for n_threads in THREAD_COUNTS:
        w = np.ones(X.shape[0])
        labels, _, _, _, cand, cand_dist, floor = _native.biased_hard_stats_candidates(
            X, C, g, w, n_threads, m, band
        )
        assert cand.dtype == np.int32 and np.array_equal(cand, want)
        assert np.array_equal(cand[:, 0], labels)
        got = np.where(held, np.take_along_axis(D, order, axis=1), 0)
        assert np.array_equal(cand_dist, got)
        assert floor.dtype == dtype and np.array_equal(floor, want_floor)


def test_newton_outputs_are_their_definition_and_near_the_counts():
    # Every column a candidate (a cold start: the best few at g = 0 may not hold the
    # rows that a small cluster needs).
    n, k, m = 20_000, 12, 12
    X, C = unequal_blobs(n, 4, k, seed=3)
    targets = integer_targets(np.full(k, n / k), n)
    g0 = np.zeros(k)
    labels0, _, _, _, cand, cand_dist, _ = _native.biased_hard_stats_candidates(
        X, C, g0, np.ones(n), 1, m
    )
    before = int(np.abs(np.bincount(labels0, minlength=k) - targets).sum())
    err, g, labels, own, gap, evals = _native.balanced_newton(cand, cand_dist, targets, g0, 30)
    v = cand_dist - g[cand]
    order = np.argsort(v, axis=1)
    best = np.take_along_axis(cand, order[:, :1], axis=1)[:, 0]
    vs = np.take_along_axis(v, order, axis=1)
    assert not (vs[:, 0] == vs[:, 1]).any()  # continuous data: no ties to break
    assert np.array_equal(labels, best)
    assert np.array_equal(own, np.take_along_axis(cand_dist, order[:, :1], axis=1)[:, 0])
    assert np.allclose(gap, vs[:, 1] - vs[:, 0], rtol=0, atol=1e-9)
    assert err == int(np.abs(np.bincount(labels, minlength=k) - targets).sum())
    assert evals > 1
    assert err < before / 20, (before, err)  # many rows a step: most of the error gone


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [2, 4, 6])
def test_newton_started_solve_is_the_lp_optimum(dtype, m, monkeypatch):
    # Few candidates (m = 2: the bound on the columns outside decides many rows), every
    # thread count: sizes exact and the least cost of the expanded assignment problem.
    monkeypatch.setattr(balanced_repair, "CANDIDATES", m)
    monkeypatch.setattr(balanced_repair, "NEWTON_MIN_K", 0)  # the Newton start at any k
    calls = []
    newton = balanced_repair._newton_start
    monkeypatch.setattr(balanced_repair, "_newton_start", lambda *a: calls.append(1) or newton(*a))
    n, k = 240, 6
    X, C = unequal_blobs(n, 3, k, seed=11, dtype=dtype)
    counts = integer_targets(np.arange(1, k + 1) * (n / 21), n)
    D = _native.sq_distances(X, C, 1).astype(np.float64)
    best = lp_optimum(D, counts)
    for n_threads in THREAD_COUNTS:
        source = sources.source_of(X, n_threads=n_threads)
        labels, _, stats, own = balanced_repair.CountsRepair(source, counts).solve(C)
        assert np.array_equal(np.bincount(labels, minlength=k), counts)
        assert float(D[np.arange(n), labels].sum()) == pytest.approx(best, rel=1e-12)
        assert np.array_equal(own, D[np.arange(n), labels])
        assert np.array_equal(stats.cluster_weights, counts)
        S = np.zeros((k, 3))
        np.add.at(S, labels, X.astype(np.float64))
        np.testing.assert_allclose(stats.sums, S, rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert calls, "the Newton start did not run"


def test_newton_start_gives_the_labels_of_the_plain_repair(monkeypatch):
    # Along a path of centroids (warm starts), with and without the Newton start: the
    # same labels at every step (continuous data: the optimum is unique).
    monkeypatch.setattr(balanced_repair, "NEWTON_MIN_K", 0)  # the Newton start at any k
    n, k = 4000, 8
    X, C = unequal_blobs(n, 5, k, seed=6)
    counts = integer_targets(np.full(k, n / k), n)
    source = sources.source_of(X)
    with_newton = balanced_repair.CountsRepair(source, counts)
    drift = np.random.default_rng(7).normal(scale=0.3, size=C.shape)
    paths = []
    for newton_error in (1, np.inf):
        monkeypatch.setattr(balanced_repair, "NEWTON_ERROR", newton_error)
        solver = balanced_repair.CountsRepair(source, counts)
        paths.append([solver.solve(C + t * drift)[0] for t in range(4)])
    for t, (a, b) in enumerate(zip(*paths)):
        assert np.array_equal(a, b), t
    assert with_newton.m == min(k, balanced_repair.CANDIDATES)


@pytest.mark.parametrize("seed", [0, 1])
def test_warm_solves_with_narrow_candidates_are_the_lp_optimum(seed, monkeypatch):
    # Two candidates a row within a narrow band: most columns lie beyond them and the
    # floor (less the offsets' rise since the pass) must bound them; the centroids jump
    # between solves, so the offsets move far.
    monkeypatch.setattr(balanced_repair, "CANDIDATES", 2)
    monkeypatch.setattr(balanced_repair, "NEWTON_MIN_K", 0)  # the Newton start at any k
    monkeypatch.setattr(balanced_repair, "CANDIDATE_BAND", 0.25)
    monkeypatch.setattr(balanced_repair, "PRESOLVE_BAND", 0.05)
    monkeypatch.setattr(balanced_repair, "PRESOLVE_ROWS", 40)  # the sample's offsets first
    monkeypatch.setattr(balanced_repair, "ROWS_PER_MOVE", 1)  # a thin boundary
    n, k = 400, 6
    X, C = unequal_blobs(n, 3, k, seed=20 + seed)
    counts = integer_targets(np.arange(1, k + 1) * (n / 21), n)
    solver = balanced_repair.CountsRepair(sources.source_of(X), counts)
    jump = np.random.default_rng(seed).normal(scale=1.5, size=(4,) + C.shape)
    for t in range(4):
        Ct = C + jump[t]
        labels = solver.solve(Ct)[0]
        D = _native.sq_distances(X, Ct, 1)
        assert np.array_equal(np.bincount(labels, minlength=k), counts), t
        cost = float(D[np.arange(n), labels].sum())
        assert cost == pytest.approx(lp_optimum(D, counts), rel=1e-12), t


@pytest.mark.parametrize("reach", [4.0, 0.05])
def test_pair_started_solves_give_the_labels_of_the_plain_repair(reach, monkeypatch):
    # Warm solves along a path of centroids, Newton reading the rows near a tie with
    # their next cluster by that pair's last change (every warm solve; reach 0.05: too
    # few rows, so they are widened and over-full clusters lend theirs), against the
    # repair with no Newton start: the same labels at every step (the optimum is unique).
    # Three candidates a row: the floor bounds most columns.
    monkeypatch.setattr(balanced_repair, "CANDIDATES", 3)
    monkeypatch.setattr(balanced_repair, "NEWTON_MIN_K", 0)
    monkeypatch.setattr(balanced_repair, "PAIR_ERROR", 1.0)
    monkeypatch.setattr(balanced_repair, "PAIR_REACH", reach)
    calls = []
    pair_start = balanced_repair._pair_newton_start
    monkeypatch.setattr(balanced_repair, "_pair_newton_start",
                        lambda *a: calls.append(1) or pair_start(*a))  # fmt: skip
    n, k = 6000, 10
    X, C = unequal_blobs(n, 5, k, seed=8)
    counts = integer_targets(np.arange(1, k + 1) * (n / 55), n)
    source = sources.source_of(X)
    drift = np.random.default_rng(9).normal(scale=0.2, size=C.shape)
    paths = []
    for newton_error in (1, np.inf):
        monkeypatch.setattr(balanced_repair, "NEWTON_ERROR", newton_error)
        solver = balanced_repair.CountsRepair(source, counts)
        paths.append([solver.solve(C + t * drift)[0] for t in range(6)])
    assert len(calls) >= 3, calls
    for t, (a, b) in enumerate(zip(*paths)):
        assert np.array_equal(a, b), t


def test_newton_in_kept_memory_or_without_outputs_gives_a_fresh_calls_outputs():
    # One scratch through calls of every size, dtype, width and row subset, larger then
    # smaller then larger (memory kept, grown, reused with another's leftovers): each
    # call's outputs are those of a call in its own memory.
    scratch = _native.newton_scratch()
    rng = np.random.default_rng(7)
    for n, m, dtype, some in [(3000, 8, np.float32, False), (500, 3, np.float64, True),
                              (4000, 8, np.float64, True), (1200, 5, np.float32, False),
                              (4000, 8, np.float32, True)]:  # fmt: skip
        k = 9
        X, C = unequal_blobs(n, 4, k, seed=n + m, dtype=dtype)
        g = rng.normal(scale=2.0, size=k)
        fused = _native.biased_hard_stats_candidates(X, C, g, np.ones(n), 1, m, np.inf)
        cand, cand_dist = fused[4], fused[5]
        rows = np.sort(rng.choice(n, size=n // 2, replace=False)) if some else None
        targets = integer_targets(np.full(k, (n if rows is None else rows.size) / k),
                                  n if rows is None else rows.size)  # fmt: skip
        fresh = _native.balanced_newton(cand, cand_dist, targets, g, 10, 0, rows, 2)
        kept = _native.balanced_newton(cand, cand_dist, targets, g, 10, 0, rows, 2, scratch)
        assert fresh[0] == kept[0] and fresh[5] == kept[5]
        for a, b in zip(fresh[1:5], kept[1:5]):
            np.testing.assert_array_equal(a, b)
        # without the rows' outputs: the same offsets, error and evaluations
        bare = _native.balanced_newton(
            cand, cand_dist, targets, g, 10, 0, rows, 2, scratch, outputs=False
        )
        assert bare[0] == fresh[0] and bare[5] == fresh[5] and bare[2:5] == (None,) * 3
        np.testing.assert_array_equal(bare[1], fresh[1])


def test_a_newton_that_stops_before_its_steps_is_not_started_again(monkeypatch):
    # A cluster (2) that no row holds among its candidates: Newton cannot give it rows and
    # stops before its steps are spent; started again it would stop so again. One call.
    # A Newton still moving when its steps are spent (far targets, one step) goes on.
    rng = np.random.default_rng(3)
    n, k = 4000, 4
    cand = np.tile(np.array([0, 1, 3], dtype=np.int32), (n, 1))
    cand_dist = np.sort(rng.random((n, 3)) * 10.0, axis=1)
    labels = np.zeros(n, dtype=np.int64)
    p = SimpleNamespace(labels=labels, cand=cand, cand_dist=cand_dist)  # a pass's fields
    calls = []
    newton = _native.balanced_newton

    def counted(*args, **kwargs):
        out = newton(*args, **kwargs)
        calls.append(out[5])  # its evaluations
        return out

    monkeypatch.setattr(balanced_repair._native, "balanced_newton", counted)
    targets = np.full(k, n // k, dtype=np.int64)
    err, _ = balanced_repair._newton_rows(p, np.zeros(k), targets, 1, None, 1)
    assert err >= n // k  # cluster 2's rows missing
    assert len(calls) == 1 and calls[0] <= balanced_repair.NEWTON_STEPS
    calls.clear()
    monkeypatch.setattr(balanced_repair, "NEWTON_STEPS", 1)
    targets = np.array([n // 2, n // 4, 0, n // 4], dtype=np.int64)
    balanced_repair._newton_rows(p, np.zeros(k), targets, 1, None, 1)
    assert len(calls) > 1 and all(e > 1 for e in calls)  # steps spent: started again
