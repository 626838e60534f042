"""``softkmeans reproduce --torch``: the K-Means term in PyTorch, four measured effects.

9. Gradient norm vs sigma (`torch_gradients`): dF/dx stays bounded away from 0 as
   sigma -> 0 and tends to the K-Means gradient 2 (x_i - c_a(i)); the part that flows
   only through the responsibilities vanishes.
10. Closed-form centroid update vs Adam and SGD on the same objective F_sigma
   (`torch_updates`): one target for every method, a learning-rate grid with the
   preconditioner's step.
11. Representation contraction (`torch_contraction`): the codebook collapses to the mean
   exactly when sigma^2 crosses lambda_max, with the K-Means term alone, beside a
   reconstruction loss, and under a schedule sigma^2 = lambda_max / 4.
12. Codebook usage of hard, softmax and entmax15 vector quantization from a poor start,
   over several seeds (`torch_codebook`).

Each experiment's verdicts are the oracle's numbers (`softkmeans.experiments.oracle`,
NumPy float64) where the quantity has a closed form; PyTorch's agreement with them is an
"implementation check" row. Each returns check rows (report.md, results.csv) and a table
of everything it measured (tables/<experiment>_<data set>.csv, appended to report.md),
and draws a figure. torch is imported when an experiment runs, never when this module is
imported.
"""

from __future__ import annotations

import time

from ._common import PASS
from ._torch_common import QUICK_BUDGET, Experiment, _g, _torch
from .torch_codebook import codebook_usage
from .torch_contraction import contraction
from .torch_gradients import gradient_norm
from .torch_updates import update_rules

__all__ = ["DATASETS_FULL", "DATASETS_QUICK", "EXPERIMENTS", "QUICK_BUDGET", "run_torch"]

DATASETS_QUICK = ("digits",)
DATASETS_FULL = ("digits", "mnist5k", "fashion5k")
NOT_PRESENT = (
    "Fashion-MNIST (fashion5k) comes from Debian's dataset-fashion-mnist package "
    "(apt-get install -y dataset-fashion-mnist); without it the run skips it and says so."
)

EXPERIMENTS = {
    9: Experiment(9, "PyTorch: gradient norm vs sigma", gradient_norm),
    10: Experiment(10, "PyTorch: closed-form update vs Adam and SGD", update_rules),
    11: Experiment(11, "PyTorch: representation contraction and the critical sigma", contraction),
    12: Experiment(12, "PyTorch: codebook usage of hard, softmax and entmax15 VQ", codebook_usage),
}


def run_torch(
    quick, out_dir, datasets=None, experiments=None, progress=print, seed=0, threads=None
):
    """Run the PyTorch experiments; write report.md, results.csv, tables/ and figures/.

    threads: OpenMP threads of the native core and torch's intra-op threads (None: their
    defaults).
    """
    from . import _thread_limit

    torch = _torch()  # a clear ImportError before anything runs
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    try:
        with _thread_limit(threads):
            return _run_torch(quick, out_dir, datasets, experiments, progress, seed)
    finally:
        torch.set_num_threads(before)


def _run_torch(quick, out_dir, datasets, experiments, progress, seed):
    from . import report, start

    say = progress if progress is not None else (lambda line: None)
    names = list(datasets) if datasets else list(DATASETS_QUICK if quick else DATASETS_FULL)
    if experiments:
        unknown = sorted(set(experiments) - set(EXPERIMENTS))
        if unknown:
            raise ValueError(f"unknown experiment(s) {unknown}; known: {sorted(EXPERIMENTS)}")
    chosen = {n: e for n, e in EXPERIMENTS.items() if not experiments or n in set(experiments)}
    t_start = time.perf_counter()
    ctx, loaded = start(quick, out_dir, names, seed, say)
    out_dir = ctx.out_dir
    rows, tables, timings = [], [], {}
    for number, exp in sorted(chosen.items()):
        for ds in loaded:
            t0 = time.perf_counter()
            got, tabs = exp.run(ds, ctx)
            timings[(number, ds.name)] = time.perf_counter() - t0
            n_pass = sum(r.status == PASS for r in got)
            say(
                f"experiment {number} ({exp.TITLE}) on {ds.name}: {n_pass}/{len(got)} PASS "
                f"[{timings[(number, ds.name)]:.1f} s]"
            )
            rows += got
            tables += tabs
    elapsed = time.perf_counter() - t_start
    if out_dir is not None:
        report.write(
            out_dir, rows, loaded, chosen, quick=quick, elapsed=elapsed, timings=timings, seed=seed
        )
        lines = ["", "## Tables of the PyTorch experiments", "", NOT_PRESENT, ""]
        for title, head, body in tables:
            lines += [f"### {title}", ""]
            lines += report._table(head, [[_g(c) for c in row] for row in body])
            lines.append("")
        with open(out_dir / "report.md", "a", encoding="utf-8") as f:
            f.write("\n".join(lines))
    return rows, tables
