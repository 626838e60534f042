"""`softkmeans reproduce`: the quick run end to end, and claims 1-4 on cases known by hand.

Each claim also gets a planted violation that must FAIL, so these tests can fail.
"""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

import softkmeans as sk
from conftest import make_blobs
from softkmeans import cli, experiments
from softkmeans.experiments import (
    _common,
    claim1_bounds,
    claim2_gamma,
    claim3_critical,
    claim4_preconditioned,
    datasets,
    report,
)


def _ctx():
    return _common.Context(quick=True, out_dir=None)


HOST = _common.IDENTITY_HOST  # the data set that carries each claim's one identity row


def _ds(X, name="toy"):
    return _common.Dataset(
        name=name,
        X=np.ascontiguousarray(X, dtype=np.float64),
        source="test",
        licence="CC0",
        standardized=False,
        real=False,
    )


def _blobs():
    """60 points around each of 3 centres in 3-D, centres 8 noise widths apart."""
    return make_blobs(180, 3, 3, centre_scale=8.0, balanced=True)[0]


# --------------------------------------------------------------------------- the quick run


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    lines = []
    rows = experiments.run_all(True, out, progress=lines.append, threads=1)
    return out, rows, lines


def test_quick_run_through_the_command_line(tmp_path, capsys):
    # The command itself, on one claim and one data set (the full --quick run is below).
    code = cli.main(
        [
            "reproduce",
            "--quick",
            "--out",
            str(tmp_path),
            "--claims",
            "1",
            "--datasets",
            "iris",
            "--threads",
            "1",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0, out
    assert "claim 1 (Sandwich bounds) on iris" in out
    assert (tmp_path / "report.md").is_file()
    assert (tmp_path / "results.csv").is_file()


# Rows that may say "hypothesis not met" in the quick run, and how many may: claim 2's
# evidence row when no soft minimizer lies in its basin's regime; claim 3's split row needs
# a simple leading eigenvalue (the separated blobs have lambda_2 = 0.99 lambda_max);
# claim 6's float32 row when the library's float32 distance error exceeds the slack.
MAY_BE_NOT_MET = {
    2: ("oracle: ||C_sigma - C*||",),
    3: ("sigma^2 = 0.95 lambda_max",),
    6: ("implementation check: float32",),
}
NOT_MET_CAP = 8  # 4 in the run this was written against


def test_quick_run_every_row_passes(quick_run):
    """Every row PASSes except the named ones, which may report (with their numbers) that
    the hypothesis is not met, at most NOT_MET_CAP of them; every claim has PASS rows of
    the oracle and of the implementation check.

    (Claims 6 and 7 found a core bug here: on the d <= 4, k <= 16 lane path the entmax15
    step summed in another order than the hard step; fixed, tests/test_exact_recovery.py.)
    """
    _, rows, lines = quick_run
    assert {r.claim for r in rows} == set(range(1, 9))
    fails = [r for r in rows if r.status == "FAIL"]
    assert not fails, "\n".join(
        f"{r.claim} {r.dataset} k={r.k} {r.quantity}: {r.note}" for r in fails
    )
    not_met = [r for r in rows if r.status == "hypothesis not met"]
    for r in not_met:
        assert r.note, r  # the numbers that explain it
        allowed = MAY_BE_NOT_MET.get(r.claim, ())
        assert r.quantity.startswith(allowed) if allowed else False, (r.claim, r.quantity, r.note)
    assert len(not_met) <= NOT_MET_CAP, len(not_met)
    for claim in range(1, 9):
        mine = [r for r in rows if r.claim == claim]
        assert any(r.quantity.startswith("implementation check") for r in mine), claim
        decided = [r for r in mine if not r.quantity.startswith("implementation check")]
        assert sum(r.status == "PASS" for r in decided) >= len(decided) // 2, claim
    # every claim ran on every quick data set, one progress line each
    progress = [ln for ln in lines if ln.startswith("[")]
    assert len(progress) == len({r.claim for r in rows}) * len(datasets.names(quick=True))


def test_quick_run_counts_identities_apart(quick_run):
    """One identity row per claim that has one (1, 2, 4, 5), on the host data set, none
    counted as evidence; the report's table gives the counts per role."""
    out, rows, _ = quick_run
    identities = [r for r in rows if r.role == "identity"]
    assert sorted(r.claim for r in identities) == [1, 2, 4, 5]
    assert all(r.dataset == HOST and r.quantity.startswith("identity") for r in identities)
    assert not any(r.quantity.startswith("identity") for r in rows if r.role != "identity")
    counts = report.evidence_counts(rows)
    for claim, c in counts.items():
        mine = [r for r in rows if r.claim == claim]
        assert c["evidence"] + c["identity"] + c["implementation"] + c["hypothesis not met"] + (
            c["FAIL"]
        ) == len(mine)
    assert counts[1]["evidence"] == 0 and counts[2]["evidence"] > 0
    text = (out / "report.md").read_text(encoding="utf-8")
    assert "| claim | evidence (PASS) | identity (PASS) | implementation (PASS) |" in text


def test_quick_run_has_the_constructed_edge_cases(quick_run):
    # claim 7's near-tie paths (18 and the band) and claim 8's one-point cluster, once each
    _, rows, _ = quick_run
    tie = [r for r in rows if r.claim == 7 and "constructed near-tie path" in r.quantity]
    small = [r for r in rows if r.claim == 8 and "constructed small cluster" in r.note]
    assert len(tie) == 19 and len(small) == 3
    assert all(r.status == "PASS" for r in tie + small), [r.note for r in tie + small]


def test_quick_run_results_csv(quick_run):
    out, rows, _ = quick_run
    with open(out / "results.csv", newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    assert tuple(table[0][:6]) == ("claim", "dataset", "k", "measured", "predicted", "status")
    assert tuple(table[0]) == report.CSV_COLUMNS
    body = table[1:]
    assert len(body) == len(rows)  # one row per check
    for line, r in zip(body, rows):
        assert int(line[0]) == r.claim and line[1] == r.dataset and int(line[2]) == r.k
        assert line[5] == r.status
        m = float(line[3])
        assert m == r.measured or (math.isnan(m) and math.isnan(r.measured))


def test_quick_run_report_starts_with_the_summary(quick_run):
    out, rows, _ = quick_run
    text = (out / "report.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0].startswith("# ") and "summary" in lines[0]
    assert lines[2].startswith("| data set | claim 1 |")
    for name in datasets.names(quick=True):
        assert any(ln.startswith(f"| {name} |") for ln in lines[:40])
    for heading in ("## Claim 1:", "## Claim 4:", "## Data sets", "## Environment"):
        assert heading in text
    assert "SIMD level" in text
    assert "licence" in text


def test_quick_run_report_has_the_overview_per_data_set(quick_run):
    out, rows, _ = quick_run
    text = (out / "report.md").read_text(encoding="utf-8")
    assert "## Overview per data set" in text
    overview = report.report_overview.per_dataset(rows, ["iris"])["iris"]
    assert overview["sigma_c"] > 0 and overview["slope5"] >= 0.9 and overview["ratio7"] >= 1.0


def test_prune_figures_keeps_only_linked_files(tmp_path):
    (tmp_path / "figures").mkdir()
    for name in ("claim5_rate_iris", "claim5_rate_wine", "overview_slopes"):
        (tmp_path / "figures" / f"{name}.png").write_bytes(b"png")
    (tmp_path / "report.md").write_text(
        "# r\n- [a](figures/claim5_rate_iris.png)\n- [b](figures/claim5_rate_wine.png)\n"
        "- [c](figures/overview_slopes.png)\ntext\n"
    )
    report.report_overview.prune_figures(tmp_path, ["iris", "overview"])
    text = (tmp_path / "report.md").read_text()
    assert "wine" not in text and "iris" in text and "overview" in text and "text" in text
    assert not (tmp_path / "figures" / "claim5_rate_wine.png").exists()


def test_quick_run_figures(quick_run):
    pytest.importorskip("matplotlib")
    out, _, _ = quick_run
    names = {p.name for p in (out / "figures").glob("*.png")}
    assert "claim1_bounds_iris.png" in names
    assert "claim3_critical_iris.png" in names


# --------------------------------------------------------------------------- claim 1


def test_claim1_coincident_centroids_meet_the_bound_exactly():
    # All centroids at one point: every row of D is constant, so
    # J - F = 2 sigma^2 W log k and J - G = 2 sigma^2 W (4/3)(1 - k^-1/2) exactly.
    X = np.array([[0.0], [1.0], [2.0], [4.0]])
    C = np.full((3, 1), 1.75)
    sigmas = np.array([0.1, 1.0, 10.0])
    for kind, const in (("softmax", math.log(3)), ("entmax15", (4 / 3) * (1 - 3**-0.5))):
        J, gaps, bounds = claim1_bounds.bound_curve(X, C, sigmas, kind)
        assert J == pytest.approx(3.0625 + 0.5625 + 0.0625 + 5.0625)
        np.testing.assert_allclose(bounds, 2 * sigmas**2 * 4 * const)
        np.testing.assert_allclose(gaps, bounds, rtol=1e-12)
        assert claim1_bounds.check(J, gaps, bounds, coincident=True)[1] == "PASS"


def test_claim1_planted_wrong_bound_fails():
    X = _blobs()
    C = X[:3].copy()
    sigmas = np.logspace(-1, 1, 9)
    J, gaps, bounds = claim1_bounds.bound_curve(X, C, sigmas, "softmax")
    assert claim1_bounds.check(J, gaps, bounds, coincident=False)[1] == "PASS"
    # planted: a bound half as large (log k / 2) is violated at large sigma
    assert claim1_bounds.check(J, gaps, bounds / 2, coincident=False)[1] == "FAIL"
    # planted: an objective above J (the lower bound) fails too
    assert claim1_bounds.check(J, -np.abs(gaps) - 1.0, bounds, coincident=False)[1] == "FAIL"


def test_claim1_run_passes_on_blobs():
    # The sandwich holds for any input: one identity row (on the host), no evidence rows.
    rows = claim1_bounds.run(_ds(_blobs(), HOST), [2, 3], _ctx())
    assert [r.role for r in rows] == ["identity", "implementation", "implementation"]
    assert all(r.status == "PASS" for r in rows), [r.note for r in rows]
    assert [r.role for r in claim1_bounds.run(_ds(_blobs()), [2, 3], _ctx())] == [
        "implementation"
    ] * 2


def test_claim1_identity_row_holds_for_random_centroids():
    # What makes it an identity: random data and far-off centroids give ratios in [0, 1].
    rng = np.random.default_rng(5)
    X, C = rng.normal(size=(50, 3)), 10 * rng.normal(size=(4, 3))
    J, gaps, bounds = claim1_bounds.bound_curve(X, C, np.logspace(-2, 2, 9), "softmax")
    assert claim1_bounds.check(J, gaps, bounds, coincident=False)[1] == "PASS"


def test_claim1_planted_wrong_constant_fails(monkeypatch):
    real = claim1_bounds.entropy_const
    monkeypatch.setattr(claim1_bounds, "entropy_const", lambda kind, k: 0.5 * real(kind, k))
    rows = claim1_bounds.run(_ds(_blobs(), HOST), [2], _ctx())
    assert [r.status for r in rows] == ["FAIL", "PASS"]


def test_claim1_planted_native_objective_fails_the_implementation_check(monkeypatch):
    real = sk.objective
    monkeypatch.setattr(claim1_bounds.sk, "objective", lambda *a, **kw: real(*a, **kw) * (1 + 1e-9))
    rows = claim1_bounds.run(_ds(_blobs(), HOST), [2], _ctx())
    assert [r.status for r in rows] == ["PASS", "FAIL"]


# --------------------------------------------------------------------------- claim 2


def test_claim2_hand_minima_from_independent_searches():
    # {0, 1} and {10, 11}: min J = 4 x 1/4 = 1 at C = (0.5, 10.5).
    X = np.array([[0.0], [1.0], [10.0], [11.0]])
    starts = [np.array([[0.0], [11.0]]), np.array([[1.0], [10.0]])]
    C_J, J_best = claim2_gamma.lloyd_minimum(X, starts, 100)
    assert J_best == pytest.approx(1.0)
    np.testing.assert_allclose(np.sort(C_J[:, 0]), [0.5, 10.5])
    # The soft search never sees C_J: seeds at the data's ends, and annealing from the mean.
    soft = claim2_gamma.soft_minima(
        X, [0.05, 0.5], [np.array([[0.0], [1.0]])], 200, 5.0, np.random.default_rng(0)
    )
    F = soft[0.05][1]
    assert 0.0 <= J_best - F <= 2 * 0.05**2 * 4 * math.log(2) + 1e-12
    np.testing.assert_allclose(np.sort(soft[0.05][0][:, 0]), [0.5, 10.5], atol=1e-12)
    res = claim2_gamma.sandwich(X, 2, [0.05, 0.5], C_J, J_best, soft)
    row, _ = claim2_gamma._sandwich_row("toy", 2, res, [0.01, 0.1], "")
    assert row.status == "PASS"


def test_claim2_run_passes_on_blobs():
    rows = claim2_gamma.run(_ds(_blobs(), HOST), [2, 3], _ctx())
    assert [r.role for r in rows] == ["identity"] + ["evidence", "implementation"] * 2
    assert all(r.status == "PASS" for r in rows), [r.note for r in rows]
    # the evidence rows compared minimizers at widths with a measurable leak
    assert all("with E1 above rounding" in r.note and r.measured <= 2 for r in rows[1::2])


def test_claim2_planted_wrong_constant_fails(monkeypatch):
    monkeypatch.setattr(claim2_gamma, "CONST", 0.01)  # planted: 2 sigma^2 W (log k) / 100
    X = np.random.default_rng(0).normal(size=(300, 2))
    rows = claim2_gamma.run(_ds(X, HOST), [2], _ctx())
    assert rows[0].role == "identity"
    assert rows[0].status == "FAIL" and "certificate violated" in rows[0].note


def _shrinking_soft_step(monkeypatch):
    """planted: a native softmax step that moves its answer 20% toward the data mean."""
    real = sk.centroid_step

    def shrink(X, C, sigma=None, *, kind="softmax", **kw):
        res = real(X, C, sigma, kind=kind, **kw)
        if kind == "softmax":
            mean = np.asarray(X, dtype=np.float64).mean(axis=0)
            res = res._replace(centroids=0.8 * res.centroids + 0.2 * mean)
        return res

    monkeypatch.setattr(claim2_gamma.sk, "centroid_step", shrink)


def test_claim2_planted_shrinking_soft_step_fails(monkeypatch):
    _shrinking_soft_step(monkeypatch)
    rows = claim2_gamma.run(_ds(_blobs()), [2, 3], _ctx())
    assert [r.status for r in rows] == ["FAIL"] * 4, [r.note for r in rows]
    assert "not stationary" in rows[0].note


def test_claim2_planted_wrong_displacement_fails(monkeypatch):
    # planted: soft minimizers 3x farther from their basin than the theory says (E1 / 3)
    real = claim2_gamma.first_order_error
    monkeypatch.setattr(claim2_gamma, "first_order_error", lambda *a: real(*a) / 3.0)
    rows = claim2_gamma.run(_ds(_blobs()), [2, 3], _ctx())
    assert [r.status for r in rows] == ["FAIL", "PASS"] * 2, [r.note for r in rows]
    assert "off the theory" in rows[0].note


def test_claim2_tie_at_the_minimizer_is_not_met(monkeypatch):
    # Delta_J within rounding (forced: a floor above every margin) leaves no width to set:
    # the premise Delta > 0 fails, "not met", not a FAIL
    monkeypatch.setattr(claim2_gamma, "margin_floor", lambda X, C: np.inf)
    rows = claim2_gamma.run(_ds(_blobs()), [2], _ctx())
    assert rows[0].status == "hypothesis not met" and "tie" in rows[0].note


# --------------------------------------------------------------------------- claim 3


def _anisotropic(n=400, seed=1):
    # covariance close to diag(4, 1): lambda_max ~ 4 along e1
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 2)) * np.array([2.0, 1.0])


def test_claim3_measured_critical_sigma_is_sqrt_lambda_max():
    X = _anisotropic()
    sc = sk.critical_sigma(X)
    Xc = X - X.mean(axis=0)
    assert sc == pytest.approx(math.sqrt(np.linalg.eigvalsh(Xc.T @ Xc / len(X))[-1]), rel=1e-10)
    rng = np.random.default_rng(0)
    measured, rho = claim3_critical.measured_critical_sigma(X, 2, sc, rng, 100)
    assert rho == pytest.approx(1.0, abs=1e-6)
    assert measured == pytest.approx(sc, rel=1e-6)


def test_claim3_run_passes_and_splits_along_e1():
    rows = claim3_critical.run(_ds(_anisotropic()), [2, 3], _ctx())
    assert len(rows) == 8
    assert all(r.status == "PASS" for r in rows), [r.note for r in rows]


def test_claim3_split_direction_is_read_in_the_linear_regime():
    # (c) reads v1 while the spread is ~1e-3 sigma_c (nonlinear terms ~ 1e-6), not after
    # the split has turned (at 3e-2 sigma_c shuttle's direction had |cos| 0.968)
    X = _anisotropic()
    rows = claim3_critical.run(_ds(X), [2], _ctx())
    split = [r for r in rows if "0.95 lambda_max" in r.quantity][0]
    assert split.status == "PASS" and split.measured > 0.999, split.note
    spread = float(split.note.split("(x")[1].split(", ")[1].split(" sigma_c")[0])
    assert spread <= 2e-3, split.note


def test_claim3_planted_wrong_critical_sigma_fails(monkeypatch):
    # planted: a critical sigma 10% too large; the collapse/split temperatures move with it
    real = claim3_critical.O.covariance_top
    monkeypatch.setattr(claim3_critical.O, "covariance_top", lambda X: 1.21 * real(X))
    rows = claim3_critical.run(_ds(_anisotropic()), [2], _ctx())
    assert [r.status for r in rows] == ["FAIL"] * 4


def test_claim3_planted_native_critical_sigma_fails_the_implementation_check(monkeypatch):
    real = sk.critical_sigma
    monkeypatch.setattr(claim3_critical.sk, "critical_sigma", lambda X: 1.001 * real(X))
    rows = claim3_critical.run(_ds(_anisotropic()), [2], _ctx())
    assert [r.status for r in rows] == ["PASS"] * 3 + ["FAIL"]


# --------------------------------------------------------------------------- claim 4


def test_claim4_hand_step():
    # X = {0, 2} and {10}, C = (1, 9), hard: N = (2, 1), S = (2, 10), c+ = (1, 10);
    # dJ/dc = 2 (N c - S) = (0, -2): c - g / (2N) = (1, 10).
    X = np.array([[0.0], [2.0], [10.0]])
    C = np.array([[1.0], [9.0]])
    _, g = sk.gradients(X, C, kind="hard")
    np.testing.assert_array_equal(g, [[0.0], [-2.0]])
    err, empty = claim4_preconditioned.step_error(X, C, None, "hard")
    assert err == 0.0 and empty == 0


def test_claim4_run_passes_on_blobs():
    rows = claim4_preconditioned.run(_ds(_blobs(), HOST), [2, 3], _ctx())
    assert len(rows) == 1 + 2 * 9
    assert [r.role for r in rows].count("identity") == 1
    assert all(r.status == "PASS" for r in rows), [r.note for r in rows]


def test_claim4_planted_random_responsibilities_fail_the_evidence_not_the_identity(monkeypatch):
    # planted: a row-stochastic r unrelated to D. The step identity still holds (it holds
    # for any r); the gradient, surrogate-free descent and finite differences do not.
    def random_r(D, sigma=None, kind="softmax"):
        r = np.random.default_rng(list(D.shape)).random(D.shape)  # the same r per shape
        return r / r.sum(axis=1, keepdims=True)

    monkeypatch.setattr(claim4_preconditioned.O, "responsibilities", random_r)
    rows = claim4_preconditioned.run(_ds(_blobs(), HOST), [3], _ctx())
    by_q = {r.quantity: r for r in rows}
    assert by_q["identity: max |step - (c - dF/dc / (2N))| / |c| (3 kinds)"].status == "PASS"
    fd = by_q["softmax: |finite difference of F_sigma - <dF/dc, U>| / ||dF/dc||"]
    descent = by_q["softmax: max relative increase of F_sigma along 12 steps"]
    assert fd.status == "FAIL" and descent.status == "FAIL", (fd.note, descent.note)


def test_claim4_planted_overshooting_step_fails_the_descent(monkeypatch):
    monkeypatch.setattr(claim4_preconditioned, "PRECONDITIONER", 1.1)  # planted: 2.2 / (2N)
    rows = claim4_preconditioned.run(_ds(_blobs()), [3], _ctx())
    descent = [r for r in rows if "max relative increase" in r.quantity]
    surrogate = [r for r in rows if "r-fixed surrogate" in r.quantity]
    assert len(descent) == 3 and all(r.status == "FAIL" for r in descent + surrogate)


def test_claim4_planted_wrong_gradient_fails(monkeypatch):
    real = claim4_preconditioned.O.gradients

    def scaled(*args, **kwargs):
        gx, gc = real(*args, **kwargs)
        return gx, 1.001 * gc  # planted: a gradient 0.1% off

    monkeypatch.setattr(claim4_preconditioned.O, "gradients", scaled)
    rows = claim4_preconditioned.run(_ds(_blobs(), HOST), [2], _ctx())
    checked = [r for r in rows if "finite difference" in r.quantity or "identity" in r.quantity]
    assert len(checked) == 6 and all(r.status == "FAIL" for r in checked)


def test_claim4_planted_native_gradient_fails_the_implementation_check(monkeypatch):
    real = sk.gradients

    def scaled(*args, **kwargs):
        gx, gc = real(*args, **kwargs)
        return gx, 1.001 * gc

    monkeypatch.setattr(claim4_preconditioned.sk, "gradients", scaled)
    rows = claim4_preconditioned.run(_ds(_blobs()), [2], _ctx())
    assert [r.status for r in rows] == ["PASS"] * 8 + ["FAIL"]


# --------------------------------------------------------------------------- framework


def test_context_rng_is_deterministic_per_keys():
    ctx = _ctx()
    a = ctx.rng("rows", "iris", 3).integers(1 << 30, size=4)
    b = ctx.rng("rows", "iris", 3).integers(1 << 30, size=4)
    c = ctx.rng("rows", "iris", 4).integers(1 << 30, size=4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert _common.Context(quick=True, out_dir=None).figure_path("x") is None


def test_row_rejects_an_unknown_status():
    with pytest.raises(ValueError):
        _common.Row(1, "x", 2, "q", 0.0, 1.0, "OK")


def test_claims_are_deterministic():
    ds = _ds(_blobs())
    a = claim3_critical.run(ds, [2], _ctx())
    b = claim3_critical.run(ds, [2], _ctx())
    assert [(r.measured, r.status) for r in a] == [(r.measured, r.status) for r in b]


def test_registry_has_every_claim_and_skips_a_missing_module(monkeypatch):
    modules = experiments.load_claims()
    assert set(modules) == set(range(1, 9))
    for number, module in modules.items():
        assert module.NUMBER == number and module.TITLE and callable(module.run)
    monkeypatch.setitem(experiments.CLAIM_MODULES, 9, "claim9_not_written")
    said = []
    assert 9 not in experiments.load_claims(said.append)
    assert said == ["skip claim 9: module softkmeans.experiments.claim9_not_written is not there"]


def test_missing_package_skips_its_data_set(monkeypatch):
    def missing():
        raise datasets.Missing("pip install nothing-here")

    spec = datasets.Spec("absent", missing, True, False)
    monkeypatch.setitem(datasets.SPECS_BY_NAME, "absent", spec)
    said = []
    got = datasets.load_all(False, ["iris", "absent"], progress=said.append)
    assert [d.name for d in got] == ["iris"]
    assert said == ["skip data set absent: its package is not installed (pip install nothing-here)"]


@pytest.mark.parametrize("name", datasets.names(quick=True))
def test_quick_data_sets_load(name):
    ds = datasets.load(name)
    assert ds.X.dtype == np.float64 and ds.X.flags.c_contiguous
    assert np.isfinite(ds.X).all() and ds.X.shape[0] >= 100
    assert ds.source and ds.licence
    if ds.standardized:
        np.testing.assert_allclose(ds.X.mean(axis=0), 0.0, atol=1e-12)
        np.testing.assert_allclose(ds.X.std(axis=0), 1.0, rtol=1e-12)


def test_at_least_sixteen_real_data_sets_are_declared():
    assert sum(s.real for s in datasets.SPECS) >= 16
    assert len({s.name for s in datasets.SPECS}) == len(datasets.SPECS)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--datasets", "no-such-set"], "unknown data set 'no-such-set'"),
        (["--claims", "x"], "--claims expects numbers"),
        (["--claims", "12"], "unknown claim"),
    ],
)
def test_reproduce_user_errors(argv, message, capsys, tmp_path):
    code = cli.main(["reproduce", "--quick", "--out", str(tmp_path), *argv])
    _, err = capsys.readouterr()
    assert code == 1
    assert message in err


def test_import_softkmeans_does_not_import_experiments():
    import subprocess
    import sys

    code = (
        "import sys, softkmeans; "
        f"assert softkmeans.__file__ == {sk.__file__!r}, softkmeans.__file__; "
        "print('softkmeans.experiments' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
