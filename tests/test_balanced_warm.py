"""Warm balanced solves through every shortcut of `softkmeans.fit.balanced_repair` (the
presolve decided on a sample, Newton on a subset of rows and restarted, a first boundary
capped, the repair's rounds over the rows its offsets' change leaves unsure) against the
assignment problem solved exactly from nothing: scipy's linear_sum_assignment on the
kernel's distances with each cluster expanded into its count of slots.
"""

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from conftest import DTYPES, unequal_blobs
from softkmeans import _native, sources
from softkmeans._balance import check_targets, integer_targets
from softkmeans.fit import balanced, balanced_repair


def _exact_labels(D, counts):
    """The labels of the least-cost assignment with these counts (unique on continuous
    data): an exact solver, independent of the repair."""
    slots = np.repeat(np.arange(D.shape[1]), counts)
    rows, cols = linear_sum_assignment(D[:, slots])
    labels = np.empty(D.shape[0], dtype=np.int64)
    labels[rows] = slots[cols]
    return labels


def _assert_exact_along(solver, X, C, drift, counts):
    """Solves at C plus each partial sum of drift (steps, k, d), in X's dtype, and checks
    each against the exact assignment: its labels, counts, D at the labels and cost."""
    n, k = X.shape[0], C.shape[0]
    for t in range(drift.shape[0]):
        Ct = (C + drift[: t + 1].sum(axis=0)).astype(X.dtype)
        labels, _, stats, own = solver.solve(Ct)
        D = _native.sq_distances(X, Ct, 1).astype(np.float64)
        exact = _exact_labels(D, counts)
        assert np.array_equal(np.bincount(labels, minlength=k), counts), t
        assert np.array_equal(labels, exact), (t, int((labels != exact).sum()))
        assert np.array_equal(own, D[np.arange(n), labels]), t
        assert stats.distortion == pytest.approx(float(D[np.arange(n), exact].sum()), rel=1e-9)


def _counted(monkeypatch, owner, name, record):
    """Wraps owner.name to append what record(args, result) gives to a list."""
    calls = []
    fn = getattr(owner, name)

    def wrapped(*args, **kwargs):
        out = fn(*args, **kwargs)
        calls.append(record(args, out))
        return out

    monkeypatch.setattr(owner, name, wrapped)
    return calls


@pytest.mark.parametrize("recheck, newton_again", [(False, 0), (True, 0), (True, 2)],
                         ids=["newton-margins", "recheck-pass", "recheck-newton"])  # fmt: skip
@pytest.mark.parametrize("dtype", DTYPES)
def test_warm_solves_through_every_shortcut_are_the_exact_assignment(
    dtype, recheck, newton_again, monkeypatch
):
    # Along a path of centroids the warm solves take every shortcut (forced by the
    # constants) and still give the exact assignment's labels, counts and cost; with
    # recheck, the repair starts from a pass at Newton's offsets (exact gaps), and with
    # newton_again, where that pass misses the counts, from Newton on candidates taken
    # at those offsets (RECHECK_NEWTONS).
    monkeypatch.setattr(balanced_repair, "RECHECK_ROWS", 0 if recheck else 10**9)
    monkeypatch.setattr(balanced_repair, "RECHECK_NEWTONS", newton_again)
    monkeypatch.setattr(balanced_repair, "PRESOLVE_ROWS", 64)  # the sample's offsets
    monkeypatch.setattr(balanced_repair, "NEWTON_MIN_K", 0)  # the Newton start at any k
    monkeypatch.setattr(balanced_repair, "PRESOLVE_NOISE", 0.0)
    monkeypatch.setattr(balanced_repair, "ROWS_PER_MOVE", 1)  # thin first boundaries
    monkeypatch.setattr(balanced_repair, "BAND_ROWS", 1)
    monkeypatch.setattr(balanced_repair, "UNSURE_PER_ROW", 10**9)  # rounds, not widening
    monkeypatch.setattr(balanced_repair, "NEWTON_REACH", 0.5)  # Newton on some rows
    monkeypatch.setattr(balanced_repair, "NEWTON_AGAIN", 0)  # and restarted
    monkeypatch.setattr(balanced_repair, "CANDIDATES", 2)  # the floor decides many rows
    monkeypatch.setattr(balanced_repair, "CANDIDATE_BAND", 0.25)
    presolves = _counted(monkeypatch, balanced_repair.CountsRepair, "_presolve", lambda a, o: 1)
    rounds = _counted(monkeypatch, balanced_repair.CountsRepair, "_violators",
                      lambda a, o: (a[5].size, o.size))  # fmt: skip
    passes = _counted(monkeypatch, balanced_repair, "biased_pass", lambda a, o: o.cand.shape[1])
    ends = _counted(monkeypatch, balanced_repair.CountsRepair, "solve", lambda a, o: len(passes))
    predicted = _counted(monkeypatch, balanced_repair.CountsRepair, "_predicted",
                         lambda a, o: 1)  # fmt: skip
    newton_rows = _counted(monkeypatch, balanced_repair._native, "balanced_newton",
                           lambda a, o: a[0].shape[0])  # fmt: skip
    n, k = 1500, 6
    X, C = unequal_blobs(n, 3, k, seed=12, dtype=dtype)
    counts = integer_targets(np.arange(1, k + 1) * (n / 21), n)
    solver = balanced_repair.CountsRepair(sources.source_of(X), counts)
    drift = np.random.default_rng(13).normal(scale=0.15, size=(5,) + C.shape)
    _assert_exact_along(solver, X, C, drift, counts)
    assert presolves, "the presolve did not run"
    assert predicted, "the offsets were not moved with the centroids"
    assert (0 in passes) == recheck, passes  # a pass at Newton's offsets, or none
    solves = [passes[a:b] for a, b in zip([0] + ends, ends)]  # each solve's passes
    again = any(a == 0 and b > 0 for one in solves for a, b in zip(one, one[1:]))
    assert again == (newton_again > 0), solves  # candidates taken at Newton's offsets
    if not newton_again:  # (Newton again leaves the rounds nothing to find here)
        assert any(found for _, found in rounds), f"no round found a violator: {rounds}"
    assert 0 < min(newton_rows[1:]) < n, newton_rows  # Newton read a subset of the rows


def test_offsets_moved_with_the_centroids_are_solved_without_blas(monkeypatch):
    # The prediction's k x k solve (`solve_spd`) against LAPACK's, and the solver never
    # calling it: np.linalg's sums follow the BLAS kernel dispatched (the fit's labels at
    # 1e6 rows differed between OpenBLAS's Haswell and SkylakeX kernels).
    rng = np.random.default_rng(3)
    for k in (2, 9, 64):
        edges = rng.integers(0, k, (4 * k, 2))
        L = np.zeros((k, k))
        np.add.at(L, (edges[:, 0], edges[:, 0]), 1.0)
        np.add.at(L, (edges[:, 1], edges[:, 1]), 1.0)
        np.add.at(L, (edges[:, 0], edges[:, 1]), -1.0)
        np.add.at(L, (edges[:, 1], edges[:, 0]), -1.0)
        L[np.diag_indices(k)] += 1e-3 * max(float(np.diag(L).max()), 1.0)
        b = rng.normal(size=k)
        want = np.linalg.solve(L, b)
        np.testing.assert_allclose(balanced_repair.solve_spd(L, b), want, rtol=1e-9, atol=0)

    def no_blas(*args, **kwargs):
        raise AssertionError("np.linalg.solve called by the balanced solver")

    predicted = _counted(monkeypatch, balanced_repair.CountsRepair, "_predicted",
                         lambda args, result: 1)  # fmt: skip
    monkeypatch.setattr(np.linalg, "solve", no_blas)
    n, k = balanced_repair.PRESOLVE_SHARE * balanced_repair.PRESOLVE_ROWS, 6
    X, C = unequal_blobs(n, 3, k, seed=4)
    counts = integer_targets(np.full(k, n / k), n)
    solver = balanced_repair.CountsRepair(sources.source_of(X), counts)
    drift = np.random.default_rng(5).normal(scale=0.05, size=C.shape)
    for t in range(3):
        labels = solver.solve(C + t * drift)[0]
        assert np.array_equal(np.bincount(labels, minlength=k), counts)
    assert len(predicted) == 2


@pytest.mark.parametrize("newton_again", [0, 2])
def test_a_newton_start_worse_than_the_pass_is_not_taken(newton_again, monkeypatch):
    # Newton on candidates can move a cluster's offset past every row's candidates (at
    # 1e6 rows its offsets' pass missed the counts by 1,968,750 rows, and the repair of
    # every row from there took 7 s): planted here as a Newton whose offsets put every
    # row in cluster 0. The repair starts from no more count error than the pass's, and
    # the labels are still the exact assignment's.
    monkeypatch.setattr(balanced_repair, "NEWTON_MIN_K", 0)
    monkeypatch.setattr(balanced_repair, "RECHECK_ROWS", 0)  # every Newton start rechecked
    monkeypatch.setattr(balanced_repair, "RECHECK_NEWTONS", newton_again)
    monkeypatch.setattr(balanced_repair, "PRESOLVE_ROWS", 10**9)  # no sample

    def diverged(p, g, targets, *args, **kwargs):
        g_bad = np.asarray(g, dtype=np.float64).copy()
        g_bad[0] += 1e6
        return balanced_repair.candidates_start(p, g, g_bad)

    monkeypatch.setattr(balanced_repair, "_newton_start", diverged)
    monkeypatch.setattr(balanced_repair, "_pair_newton_start", diverged)
    starts = _counted(monkeypatch, balanced_repair.CountsRepair, "_start",
                      lambda a, o: (a[4], o[2].labels))  # fmt: skip
    n, k = 1500, 6
    X, C = unequal_blobs(n, 3, k, seed=12, dtype=np.float64)
    counts = integer_targets(np.arange(1, k + 1) * (n / 21), n)
    solver = balanced_repair.CountsRepair(sources.source_of(X), counts)
    drift = np.random.default_rng(13).normal(scale=0.15, size=(3,) + C.shape)
    for t in range(3):
        Ct = C + drift[: t + 1].sum(axis=0)
        labels = solver.solve(Ct)[0]
        D = _native.sq_distances(X, Ct, 1)
        assert np.array_equal(labels, _exact_labels(D, counts)), t
    errors = [
        (off, int(np.abs(np.bincount(lab, minlength=k) - counts).sum())) for off, lab in starts
    ]
    assert any(off > 0 for off, _ in errors), errors  # the Newton start was taken up
    assert all(err <= off for off, err in errors), errors


@pytest.mark.parametrize("dtype", DTYPES)
def test_warm_solves_at_more_than_64_clusters_are_the_exact_assignment(dtype):
    # Up to MAX_K_TRANSFER clusters the fit takes the pass and the repair (the Newton
    # tables read by permutes up to 64 clusters, by gathers past them; Dijkstra over
    # every pair of clusters): along a path of centroids each warm solve gives the exact
    # assignment's labels, counts and cost.
    n, k = 1500, 100
    assert k <= balanced.MAX_K_TRANSFER
    X, C = unequal_blobs(n, 6, k, seed=21, dtype=dtype)
    counts = integer_targets(np.full(k, n / k), n)
    source = sources.source_of(X)
    problem = balanced.BalancedProblem(source, check_targets("equal", None, k, n, n, True))
    assert problem.repair is not None  # the fit's path at this k
    solver = balanced_repair.CountsRepair(source, counts)
    drift = np.random.default_rng(22).normal(scale=0.05, size=(4,) + C.shape)
    _assert_exact_along(solver, X, C, drift, counts)
