"""The balanced hard assignment as one pass and a repair (SPEC.md, "Balanced assignments
as one pass"; softkmeans.fit.balanced_repair).

Oracles: the fused native pass against its definition on the kernel's own distances
(`_balance.biased_argmin` on `_native.sq_distances`, NumPy) and against the plain hard
step at zero offsets; the repaired assignment against the assignment problem with each
cluster expanded into its count of slots (scipy's linear_sum_assignment), on the same
kernel distances, for every local input kind and thread count.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from conftest import DTYPES, THREAD_COUNTS, lp_optimum, unequal_blobs
from softkmeans import _balance, _native, sources
from softkmeans._balance import check_targets, integer_targets
from softkmeans.fit import balanced_repair
from softkmeans.fit.balanced import BalancedProblem
from softkmeans.sources import dense


@pytest.fixture
def simd_levels():
    before = _native.selected_simd_level()
    yield _native.available_simd_levels()
    _native.set_simd_level(before)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d, k", [(3, 5), (16, 20), (40, 7)])
def test_fused_pass_is_its_definition_bit_for_bit(dtype, d, k, simd_levels):
    X, C = unequal_blobs(3000, d, k, seed=d, dtype=dtype)
    g = np.random.default_rng(1).normal(scale=3.0, size=k)
    g[2] = g[1] + 1e-3  # offsets near one another: close biased costs
    w = np.ones(X.shape[0])
    for level in simd_levels:
        _native.set_simd_level(level)
        D = _native.sq_distances(X, C, 1)
        want_labels, want_gap = _balance.biased_argmin(D, g)
        for n_threads in THREAD_COUNTS:
            labels, gap, dist, stats = _native.biased_hard_stats(X, C, g, w, n_threads)
            assert np.array_equal(labels, want_labels), (level, n_threads)
            assert np.array_equal(_balance.biased_labels(D, g), labels)  # (the labels alone)
            assert np.array_equal(gap, want_gap), (level, n_threads)
            assert np.array_equal(dist, D[np.arange(D.shape[0]), want_labels])
            assert np.array_equal(stats.cluster_weights, np.bincount(want_labels, minlength=k))
            S = np.zeros((k, d))
            np.add.at(S, want_labels, X.astype(np.float64))
            np.testing.assert_allclose(stats.sums, S, rtol=1e-5 if dtype == np.float32 else 1e-12)
            J = float(dist.astype(np.float64).sum())
            assert stats.distortion == pytest.approx(J, rel=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_pass_at_zero_offsets_is_the_hard_step(dtype):
    # Same accumulator, same order: every output the plain hard step's bits.
    X, C = unequal_blobs(2000, 16, 20, seed=2, dtype=dtype)
    w = np.random.default_rng(0).integers(0, 3, size=X.shape[0]).astype(np.float64)
    for n_threads in THREAD_COUNTS:
        labels, _, _, stats = _native.biased_hard_stats(X, C, np.zeros(20), w, n_threads)
        plain, plain_labels, _ = _native.block_stats(X, C, "hard", 0.0, w, 1, labels=True)
        assert np.array_equal(labels, plain_labels)
        assert stats.weight == plain.weight and stats.distortion == plain.distortion
        assert np.array_equal(stats.cluster_weights, plain.cluster_weights)
        assert np.array_equal(stats.sums, plain.sums)


def _as_kind(X, kind, tmp_path, monkeypatch):
    if kind == "csr":
        return sp.csr_matrix(X)
    if kind == "memmap":
        path = tmp_path / "X.npy"
        np.save(path, X)
        return np.load(path, mmap_mode="r")
    if kind == "blocks":  # a Fortran array read in row blocks of ~10 rows: merged passes
        monkeypatch.setattr(dense, "ROW_BLOCK_BYTES", 10 * X.shape[1] * X.itemsize)
        return np.asfortranarray(X)
    return X


TARGETS = [{"balance": "equal"}, {"balance": [6.0, 12.0, 18.0, 27.0]}, {"max_cluster_size": 18}]


@pytest.mark.parametrize("targets", TARGETS, ids=["equal", "masses", "capacities"])
@pytest.mark.parametrize("kind", ["array", "memmap", "blocks", "csr"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_threads", THREAD_COUNTS)
def test_repaired_assignment_is_the_lp_optimum(
    targets, kind, dtype, n_threads, tmp_path, monkeypatch
):
    n, k = 63, 4
    X, C = unequal_blobs(n, 3, k, seed=3, dtype=dtype)
    source = sources.source_of(_as_kind(X, kind, tmp_path, monkeypatch), n_threads=n_threads)
    spec = check_targets(targets.get("balance"), targets.get("max_cluster_size"), k, n, n, True)
    problem = BalancedProblem(source, spec)
    assert problem.repair is not None
    labels, g, own = problem.solve(C, offsets=True)
    D = _native.sq_distances(sp.csr_matrix(X) if kind == "csr" else X, C, 1).astype(np.float64)
    counts = np.bincount(labels, minlength=k)
    if "max_cluster_size" in targets:
        assert counts.max() <= 18
        # the optimum over capacities: slack slots of cost 0 for the spare room
        Dz = np.vstack([D, np.zeros((18 * k - n, k))])
        best = lp_optimum(Dz, np.full(k, 18))
    else:
        assert np.array_equal(counts, integer_targets(spec.masses, n))
        best = lp_optimum(D, counts)
    cost = float(D[np.arange(n), labels].sum())
    assert cost == pytest.approx(best, rel=1e-12, abs=1e-12)
    assert np.array_equal(own, D[np.arange(n), labels])
    stats = problem.stats
    assert np.array_equal(stats.cluster_weights, counts)
    S = np.zeros((k, 3))
    np.add.at(S, labels, X.astype(np.float64))
    np.testing.assert_allclose(stats.sums, S, rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_warm_start_is_the_cold_solve(dtype, monkeypatch):
    # Along a path of centroids, the solve from the last offsets (a thin boundary) gives
    # the labels of a solve from zero offsets (every row repaired at first). The band
    # and the rows a move are pinned: the boundary's width is theirs (at the shipped band,
    # tuned at 1e6 rows, these 3,000 rows' warm boundaries are 689-785), the test is of
    # the warm start that the band is taken from.
    monkeypatch.setattr(balanced_repair, "ROWS_PER_MOVE", 1)
    monkeypatch.setattr(balanced_repair, "BAND_FACTOR", 2.0)
    n, k = 3000, 6
    X, C = unequal_blobs(n, 4, k, seed=4, dtype=dtype)
    source = sources.source_of(X)
    counts = integer_targets(np.full(k, n / k), n)
    warm = balanced_repair.CountsRepair(source, counts)
    drift = np.random.default_rng(5).normal(scale=0.02, size=C.shape)
    boundaries = []
    for t in range(5):
        Ct = (C + t * drift).astype(dtype)
        labels, _, stats, own = warm.solve(Ct)
        boundaries.append(warm.last[0].size)
        cold = balanced_repair.CountsRepair(source, counts)
        cold_labels, _, cold_stats, cold_own = cold.solve(Ct)
        assert np.array_equal(labels, cold_labels), t
        assert np.array_equal(own, cold_own), t
        assert stats.distortion == pytest.approx(cold_stats.distortion, rel=1e-12)
    assert max(boundaries[1:]) < n // 4, boundaries  # the warm solves repaired few rows


def test_the_repair_widens_a_boundary_that_was_too_thin(monkeypatch):
    # A warm solve with no band and one row per move: the first repair that reaches the
    # counts leaves out rows that the offsets' change reaches; the check must see it and
    # repair again, ending at the optimum.
    monkeypatch.setattr(balanced_repair, "ROWS_PER_MOVE", 1)
    monkeypatch.setattr(balanced_repair, "BAND_FACTOR", 0.0)
    calls = []
    repair = balanced_repair.CountsRepair._repair

    def counted(self, *args):
        out = repair(self, *args)
        calls.append((args[-1].size, out is not None))
        return out

    monkeypatch.setattr(balanced_repair.CountsRepair, "_repair", counted)
    n, k = 500, 6
    X, C = unequal_blobs(n, 4, k, seed=1)
    counts = integer_targets(np.full(k, n / k), n)
    solver = balanced_repair.CountsRepair(sources.source_of(X), counts)
    solver.solve(C)
    calls.clear()
    C = C + np.random.default_rng(5).normal(scale=0.05, size=C.shape)
    labels, _, _, _ = solver.solve(C)
    D = _native.sq_distances(X, C, 1)
    assert np.array_equal(np.bincount(labels, minlength=k), counts)
    assert float(D[np.arange(n), labels].sum()) == pytest.approx(lp_optimum(D, counts), rel=1e-12)
    repaired = [rows for rows, done in calls if done]
    assert len(repaired) > 1 and repaired[-1] < n, calls  # widened, yet not to every row


INTERRUPT_CHILD = r"""
import json, os, signal, sys, threading, time
import numpy as np
from softkmeans import SoftKMeans, _native

rng = np.random.default_rng(0)
n, k = 200_000, 64
if sys.argv[1] == "fit":
    p = np.arange(1, k + 1, dtype=float) ** 2
    X = (rng.normal(size=(k, 8)) * 4)[rng.choice(k, size=n, p=p / p.sum())]
    X = (X + rng.normal(size=X.shape)).astype(np.float32)
    run = lambda: SoftKMeans(k, assignment="hard", balance="equal", max_iter=200, tol=0,
                             n_init=1, random_state=0).fit(X)
else:  # one long repair: a cold start ~140,000 moves from equal counts (~10 s)
    D = rng.random((n, k)) * 100 + np.arange(k)
    t = np.full(k, n // k)
    t[: n - t.sum()] += 1
    run = lambda: _native.balanced_counts(D, t, np.zeros(k), np.full(n, -1), 1, np.inf, k, 0.0, 1)
sent = {}

def fire():
    sent["t"] = time.perf_counter()
    os.kill(os.getpid(), signal.SIGINT)

threading.Timer(1.0, fire).start()
t0 = time.perf_counter()
try:
    run()
    time.sleep(2.0)
    print(json.dumps({"interrupted": False, "elapsed": time.perf_counter() - t0}))
except KeyboardInterrupt:
    print(json.dumps({"interrupted": True, "latency": time.perf_counter() - sent["t"]}))
"""


@pytest.mark.parametrize("what", ["fit", "repair"])
def test_ctrl_c_stops_a_balanced_fit_within_a_second(what):
    # A fit (the signal lands in the fused pass, a repair or the Python between them)
    # and one long repair (the shortest paths poll the core's cancel flag between moves)
    # stop within a second of SIGINT (tests/test_interrupt.py).
    import json
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPT_CHILD, what],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["interrupted"], info
    assert info["latency"] < 1.0, info


@pytest.mark.parametrize("targets", TARGETS[:2], ids=["equal", "masses"])
def test_presolved_start_still_ends_at_the_optimum(monkeypatch, targets):
    # A cold start far from the counts takes the offsets of a sample of rows first (at
    # most 40 here, 1 % of the rows' count error): the solve must still be the optimum.
    # One row per move: the repair after it is thin (not every row).
    monkeypatch.setattr(balanced_repair, "PRESOLVE_ROWS", 40)
    monkeypatch.setattr(balanced_repair, "ROWS_PER_MOVE", 1)
    calls = []
    presolve = balanced_repair.CountsRepair._presolve
    monkeypatch.setattr(
        balanced_repair.CountsRepair, "_presolve",
        lambda self, *args: calls.append(1) or presolve(self, *args),
    )  # fmt: skip
    n, k = 600, 4
    X, C = unequal_blobs(n, 3, k, seed=7)
    masses = targets["balance"]
    masses = np.full(k, n / k) if isinstance(masses, str) else np.array(masses) * n / 63
    counts = integer_targets(masses, n)
    labels, _, _, _ = balanced_repair.CountsRepair(sources.source_of(X), counts).solve(C)
    D = _native.sq_distances(X, C, 1)
    assert calls, "the presolve did not run"
    assert np.array_equal(np.bincount(labels, minlength=k), counts)
    assert float(D[np.arange(n), labels].sum()) == pytest.approx(lp_optimum(D, counts), rel=1e-12)


def test_small_solves_read_on_one_thread_and_leave_the_source_alone(monkeypatch):
    # Below SERIAL_SOLVE_WORK multiply-adds a pass, a solve reads on one thread (a copy of
    # the source: the caller's keeps its count for the rest of the fit), and still gives
    # the optimum; at or above it, the source itself.
    n, k = 400, 4
    X, C = unequal_blobs(n, 3, k, seed=12)
    counts = integer_targets(np.full(k, n / k), n)
    source = sources.source_of(X, n_threads=3)
    solver = balanced_repair.CountsRepair(source, counts)
    assert solver.source.n_threads == 1 and source.n_threads == 3
    labels = solver.solve(C)[0]
    D = _native.sq_distances(X, C, 1).astype(np.float64)
    assert np.array_equal(np.bincount(labels, minlength=k), counts)
    assert float(D[np.arange(n), labels].sum()) == pytest.approx(lp_optimum(D, counts), rel=1e-12)
    monkeypatch.setattr(balanced_repair, "SERIAL_SOLVE_WORK", n * k * 3)
    assert balanced_repair.CountsRepair(source, counts).source is source


def test_no_sample_below_a_share_of_the_rows(monkeypatch):
    # The presolve's sample is drawn from PRESOLVE_SHARE x PRESOLVE_ROWS rows on (600 rows:
    # a sample of 40 is, one of 100 is not), of PRESOLVE_LARGE_ROWS rows from PRESOLVE_SHARE
    # x those on (70 of 600 rows; 100 would be more than an eighth); either way the solve
    # is the optimum.
    n, k = 600, 4
    X, C = unequal_blobs(n, 3, k, seed=8)
    counts = integer_targets(np.full(k, n / k), n)
    D = _native.sq_distances(X, C, 1)
    sample = balanced_repair.CountsRepair._sample
    drawn = []

    def sampled(self, C, n, m):
        out = sample(self, C, n, m)
        drawn.append(out[0].shape[0])  # the rows the sample's distances hold
        return out

    monkeypatch.setattr(balanced_repair.CountsRepair, "_sample", sampled)
    for rows, large, want in ((40, 0, 40), (40, 70, 70), (40, 100, 40), (100, 0, None)):
        monkeypatch.setattr(balanced_repair, "PRESOLVE_ROWS", rows)
        monkeypatch.setattr(balanced_repair, "PRESOLVE_LARGE_ROWS", large)
        drawn.clear()
        labels = balanced_repair.CountsRepair(sources.source_of(X), counts).solve(C)[0]
        assert set(drawn) == ({want} if want else set()), (rows, large)
        assert np.array_equal(np.bincount(labels, minlength=k), counts)
        cost = float(D[np.arange(n), labels].sum())
        assert cost == pytest.approx(lp_optimum(D, counts), rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_counts_kernel_moving_many_rows_through_long_edge_lists_is_the_optimum(seed):
    # Every row, every edge, one try (no check to fall back on), from offsets far off: the
    # edge lists hold hundreds of rows each and hundreds of rows move, so each list's heap
    # is refilled from its reserve many times. Complementary slackness on every row and
    # the least cost of the expanded assignment problem.
    rng = np.random.default_rng(seed)
    n, k = 1200, 5
    D = rng.normal(size=(n, k)) ** 2 + rng.uniform(0, 3, size=k)
    counts = integer_targets(np.full(k, n / k), n)
    g = rng.normal(scale=2.0, size=k)
    status, owner, g_out, moves, _ = _native.balanced_counts(
        D, counts, g, np.full(n, -1, dtype=np.int64), 1, np.inf, k, 0.0, 1
    )
    assert status == 0 and moves > 200
    assert np.array_equal(np.bincount(owner, minlength=k), counts)
    value = D - g_out
    assert (value[np.arange(n), owner] <= value.min(axis=1) + 1e-12).all()
    assert float(D[np.arange(n), owner].sum()) == pytest.approx(lp_optimum(D, counts), rel=1e-12)
