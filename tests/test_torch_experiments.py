"""`softkmeans reproduce --torch`: the quick run through the command line, and each
experiment on a small synthetic data set (seconds)."""

from __future__ import annotations

import csv
import importlib.util

import pytest

pytest.importorskip("torch")

from conftest import make_blobs  # noqa: E402
from softkmeans import cli  # noqa: E402
from softkmeans.experiments import _common  # noqa: E402
from softkmeans.experiments import torch_experiments as te  # noqa: E402


def _blobs():
    """250 points around each of 4 centres in 6-D."""
    X, _ = make_blobs(1000, 6, 4, centre_scale=6.0, balanced=True)
    return _common.Dataset(
        name="blobs", X=X, source="test", licence="CC0", standardized=False, real=False
    )


@pytest.fixture(scope="module")
def ctx():
    # No out_dir: no figures here (matplotlib costs seconds); the command-line test below
    # writes the files.
    return _common.Context(quick=True, out_dir=None, seed=0)


@pytest.fixture(scope="module")
def results(ctx):
    """Each experiment once on blobs, one thread (the machine may be shared), a short
    budget for the optimizers of experiment 10."""
    import torch

    from softkmeans.experiments import _thread_limit

    before, budget = torch.get_num_threads(), te.QUICK_BUDGET
    torch.set_num_threads(1)
    te.QUICK_BUDGET = 30
    try:
        with _thread_limit(1):
            return {n: e.run(_blobs(), ctx) for n, e in te.EXPERIMENTS.items()}
    finally:
        torch.set_num_threads(before)
        te.QUICK_BUDGET = budget


@pytest.mark.parametrize("number", sorted(te.EXPERIMENTS))
def test_each_experiment_shows_its_effect_on_blobs(number, ctx, results):
    rows, tables = results[number]
    assert rows and all(r.claim == number for r in rows)
    failed = [(r.quantity, r.measured, r.note) for r in rows if r.status != _common.PASS]
    assert not failed
    (title, head, body), *_ = tables
    assert title.endswith(" on blobs")
    assert body and all(len(row) == len(head) for row in body)


def test_gradient_table_spans_six_decades_and_tends_to_the_kmeans_gradient(results):
    _, [(_, head, body)] = results[9]
    ratios = sorted({float(row[1]) for row in body})
    assert ratios[-1] / ratios[0] >= 1e6
    coldest = [row for row in body if float(row[1]) == ratios[0]]
    for row in coldest:
        assert abs(row[2] - 1.0) < 1e-8 and row[3] < 1e-8 and row[4] < 1e-8


def test_reproduce_torch_quick_through_the_command_line(tmp_path, capsys):
    code = cli.main(
        [
            "reproduce",
            "--torch",
            "--quick",
            "--claims",
            "9",
            "--threads",
            "1",
            "--out",
            str(tmp_path),
        ]  # fmt: skip
    )
    out, _ = capsys.readouterr()
    assert code == 0, out
    report = (tmp_path / "report.md").read_text()
    assert "Claim 9: PyTorch: gradient norm vs sigma" in report
    assert "### torch9_gradient_norm on digits" in report
    with open(tmp_path / "tables" / "torch9_gradient_norm_digits.csv") as f:
        assert next(csv.reader(f))[:2] == ["kind", "sigma/sigma_c"]
    # Figures are drawn when matplotlib is installed (not in CI's test extra), else skipped.
    has_matplotlib = importlib.util.find_spec("matplotlib") is not None
    figure = tmp_path / "figures" / "torch9_gradient_norm_digits.png"
    assert figure.exists() == has_matplotlib
    assert (tmp_path / "results.csv").exists()


def test_unknown_experiment_is_a_user_error(tmp_path, capsys):
    code = cli.main(["reproduce", "--torch", "--quick", "--claims", "3", "--out", str(tmp_path)])
    _, err = capsys.readouterr()
    assert code == 1 and "unknown experiment" in err
