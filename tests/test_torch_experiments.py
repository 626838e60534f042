"""`softkmeans reproduce --torch`: the quick run through the command line, and each
experiment on a small synthetic data set (seconds)."""

from __future__ import annotations

import csv
import importlib.util

import pytest

pytest.importorskip("torch")

from conftest import make_blobs  # noqa: E402
from softkmeans import cli  # noqa: E402
from softkmeans.experiments import (  # noqa: E402
    _common,
    _torch_common,
    torch_codebook,
    torch_contraction,
    torch_gradients,
    torch_updates,
)
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

    before, budget = torch.get_num_threads(), _torch_common.QUICK_BUDGET
    torch.set_num_threads(1)
    _torch_common.QUICK_BUDGET = 30
    try:
        with _thread_limit(1):
            return {n: e.run(_blobs(), ctx) for n, e in te.EXPERIMENTS.items()}
    finally:
        torch.set_num_threads(before)
        _torch_common.QUICK_BUDGET = budget


@pytest.fixture()
def one_thread(monkeypatch):
    import torch

    from softkmeans.experiments import _thread_limit

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.setattr(_torch_common, "QUICK_BUDGET", 30)
    with _thread_limit(1):
        yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("number", sorted(te.EXPERIMENTS))
def test_each_experiment_shows_its_effect_on_blobs(number, ctx, results):
    rows, tables = results[number]
    assert rows and all(r.claim == number for r in rows)
    # may be "not met": experiment 12's baseline row when vector-quantize-pytorch is absent
    failed = [
        (r.quantity, r.measured, r.note)
        for r in rows
        if r.status != _common.PASS
        and not (r.status == _common.NOT_MET and "not installed" in r.note)
    ]
    assert not failed
    (title, head, body), *_ = tables
    assert title.endswith(" on blobs")
    assert body and all(len(row) == len(head) for row in body)


def test_gradient_table_spans_six_decades_and_tends_to_the_kmeans_gradient(results):
    _, [(_, head, body)] = results[9]
    ratios = sorted({float(row[1]) for row in body})
    assert sum(r.quantity.startswith("implementation check") for r in results[9][0]) == 2
    assert [r.role for r in results[9][0]].count("identity") == 2  # the 1e-5 sigma_c limits
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


# ------------------------------------------------------------- planted violations


def _statuses(rows):
    return [r.status for r in rows]


def test_exp9_planted_gradient_through_r_only_fails(monkeypatch, ctx, one_thread):
    # planted in the oracle: the data gradient flows through r only
    monkeypatch.setattr(torch_gradients, "full_gradient", torch_gradients.through_r)
    rows, _ = torch_gradients.gradient_norm(_blobs(), ctx)
    assert [r.status for r in rows if "min ||dF/dx||" in r.quantity] == ["FAIL", "FAIL"]


def test_exp9_planted_autograd_through_r_only_fails_the_implementation_check(
    monkeypatch, ctx, one_thread
):
    import torch

    skt = torch_gradients._skt()
    real = skt.free_energy

    def r_only(x, C, sigma, kind, *args, **kwargs):  # planted: D detached, r not
        r = skt.responsibilities(x, C, sigma, kind)
        D = torch.cdist(x.detach(), C).square()
        return (r * D).sum() + 0.0 * real(x.detach(), C, sigma, kind)

    monkeypatch.setattr(skt, "free_energy", r_only)
    rows, _ = torch_gradients.gradient_norm(_blobs(), ctx)
    impl = [r for r in rows if r.quantity.startswith("implementation check")]
    assert _statuses(impl) == ["FAIL", "FAIL"]


def test_exp10_planted_damped_closed_form_fails(monkeypatch, ctx, one_thread):
    skt = torch_updates._skt()
    real = skt.closed_form_update

    def damped(x, C, sigma, *args, **kwargs):  # planted: half the closed-form step
        new, stats = real(x, C, sigma, *args, **kwargs)
        return C + 0.1 * (new - C), stats

    monkeypatch.setattr(skt, "closed_form_update", damped)
    rows, _ = torch_updates.update_rules(_blobs(), ctx)
    assert rows[1].status == "FAIL", rows[1].note


def test_exp11_planted_wrong_critical_constant_fails(monkeypatch, ctx, one_thread):
    monkeypatch.setattr(torch_contraction, "CRITICAL", 0.1)  # planted: sigma^2 > lambda / 10
    rows, _ = torch_contraction.contraction(_blobs(), ctx)
    assert "FAIL" in _statuses(rows)


def test_exp12_planted_soft_quantizer_that_is_hard_fails(monkeypatch, ctx, one_thread):
    skt = torch_codebook._skt()
    real = skt.VectorQuantizer

    def always_hard(k, d, sigma=None, kind="hard", **kwargs):  # planted: kind ignored
        return real(k, d, None, "hard", **kwargs)

    monkeypatch.setattr(skt, "VectorQuantizer", always_hard)
    rows, _ = torch_codebook.codebook_usage(_blobs(), ctx)
    assert _statuses(rows)[:2] == ["FAIL", "FAIL"]


def test_exp12_baseline_has_its_own_row(monkeypatch):
    # absent: "not met" with the reason, never silently dropped; present and beaten: FAIL
    finals = {s: {"softmax": (0.5, 3.0, 0.2), "hard": (0.2, 2.0, 0.4)} for s in range(2)}
    row = torch_codebook._baseline_row("toy", 8, finals, range(2))
    assert row.status == "hypothesis not met" and "not installed" in row.note
    for s in range(2):
        finals[s][torch_codebook.BASELINE] = (0.9, 6.0, 0.1)  # planted: the baseline wins
    assert torch_codebook._baseline_row("toy", 8, finals, range(2)).status == "FAIL"
    for s in range(2):
        finals[s][torch_codebook.BASELINE] = (0.4, 2.5, 0.3)
    assert torch_codebook._baseline_row("toy", 8, finals, range(2)).status == "PASS"


def test_exp9_planted_envelope_formula_off_fails_its_fd(monkeypatch, ctx, one_thread):
    real = torch_gradients.full_gradient
    monkeypatch.setattr(  # planted: dF/dx 1% too large
        torch_gradients, "full_gradient", lambda *a: 1.01 * real(*a)
    )
    rows, _ = torch_gradients.gradient_norm(_blobs(), ctx)
    fd = [r for r in rows if "finite difference" in r.quantity]
    assert _statuses(fd) == ["FAIL", "FAIL"], [r.note for r in fd]


def test_exp11_crossing_under_a_task_loss_is_shown(ctx, one_thread):
    # beside the reconstruction, sigma^2 crosses lambda_max and the codebook collapses
    rows, _ = torch_contraction.contraction(_blobs(), ctx)
    task = [r for r in rows if r.quantity.startswith(torch_contraction.TASK)]
    assert len(task) == 1 and task[0].status == "PASS", task[0].note
    assert "crossed 1 lambda_max: at epoch" in task[0].note and "collapsed: True" in task[0].note


# ------------------------------------------------------------------ Fashion-MNIST


def test_fashion_mnist_idx_reader_and_install_hint(tmp_path, monkeypatch):
    import gzip

    import numpy as np

    from softkmeans.experiments import datasets, fashion_mnist

    images = np.arange(6 * 4, dtype=np.uint8).reshape(6, 2, 2)
    header = b"".join(v.to_bytes(4, "big") for v in (2051, 6, 2, 2))
    with gzip.open(tmp_path / "train-images-idx3-ubyte.gz", "wb") as f:
        f.write(header + images.tobytes())
    got = fashion_mnist.read_idx_images(tmp_path / "train-images-idx3-ubyte.gz")
    np.testing.assert_array_equal(got, images.reshape(6, 4))
    monkeypatch.setenv("SOFTKMEANS_FASHION_MNIST", str(tmp_path / "absent"))
    with pytest.raises(datasets.Missing, match="apt-get install -y dataset-fashion-mnist"):
        datasets.load("fashion5k")


def test_fashion_mnist_loads_when_installed():
    from softkmeans.experiments import datasets, fashion_mnist

    if not fashion_mnist.available():
        pytest.skip(f"Fashion-MNIST is not installed: {fashion_mnist.INSTALL}")
    ds = datasets.load("fashion5k")
    assert ds.X.shape == (fashion_mnist.N_KEEP, 784) and 0.0 <= ds.X.min() <= ds.X.max() <= 1.0


# ------------------------------------------------------------------ findings


def test_autograd_through_r_at_an_exact_tie_matches_the_closed_form():
    """Regression: softkmeans.torch._shifted_scores used torch.where(gap > 0, -gap / T, 0),
    which dropped the gradient of an exactly tied non-argmin score (found by experiment 9's
    implementation check on digits)."""
    import numpy as np

    X = np.array([[0.0, 1.0], [3.0, 0.5]])
    C = np.array([[-1.0, 0.0], [1.0, 0.0], [0.0, 4.0]])  # x_0 is at distance 2 from c_0, c_1
    ag, agr = torch_gradients.autograd(X, C, 1.5, "softmax")
    np.testing.assert_allclose(ag, torch_gradients.full_gradient(X, C, 1.5, "softmax"), atol=1e-12)
    np.testing.assert_allclose(agr, torch_gradients.through_r(X, C, 1.5, "softmax"), atol=1e-12)


def test_exp9_planted_tie_gradient_bug_exceeds_the_implementation_tolerance(monkeypatch):
    # planted: the historical softkmeans.torch bug (the where() that dropped a tied score's
    # gradient); the implementation check's tolerance at sigma does not hide it.
    import numpy as np
    import torch

    skt = torch_gradients._skt()

    def buggy(D, sigma):
        gap = D - D.min(dim=1, keepdim=True).values
        return torch.where(gap > 0, -gap / (2.0 * sigma * sigma), torch.zeros_like(gap))

    monkeypatch.setattr(skt, "_shifted_scores", buggy)
    X = np.array([[0.0, 1.0], [3.0, 0.5]])
    C = np.array([[-1.0, 0.0], [1.0, 0.0], [0.0, 4.0]])
    sigma = 1.5
    _, agr = torch_gradients.autograd(X, C, sigma, "softmax")
    err = np.linalg.norm(agr - torch_gradients.through_r(X, C, sigma, "softmax"))
    k_norm = np.linalg.norm(torch_gradients.kmeans_gradient(X, C))
    d_max = torch_gradients.O.sq_distances(X, C).max()
    tol = max(torch_gradients.IMPL_RTOL, 64 * torch_gradients.EPS * d_max / (2 * sigma**2))
    assert err / k_norm > 1e3 * tol
