"""``softkmeans reproduce``: the theory's claims checked on real and synthetic data.

One module per claim (``claimN_<slug>.py``, each with ``NUMBER``, ``TITLE`` and
``run(ds, ks, ctx) -> list[Row]``), the data sets (`softkmeans.experiments.datasets`)
and `run_all`, which runs every (claim, data set) pair and writes report.md,
results.csv and figures. Pure Python on the public functional API; ``import
softkmeans`` does not import this package.
"""

from __future__ import annotations

import importlib
import pathlib
import time

from . import datasets
from ._common import FAIL, NOT_MET, PASS, Context, Dataset, Row, pyplot

__all__ = [
    "CLAIMS",
    "CLAIM_MODULES",
    "Context",
    "Dataset",
    "Row",
    "datasets",
    "load_claims",
    "pyplot",
    "run_all",
    "FAIL",
    "NOT_MET",
    "PASS",
]

CLAIM_MODULES = {
    1: "claim1_bounds",
    2: "claim2_gamma",
    3: "claim3_critical",
    4: "claim4_preconditioned",
    5: "claim5_rate",
    6: "claim6_threshold",
    7: "claim7_trajectories",
    8: "claim8_fixed_points",
}


def load_claims(progress=None):
    """number -> module for every claim whose module is present (a missing one is a line)."""
    out = {}
    for number, name in CLAIM_MODULES.items():
        try:
            out[number] = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            if progress is not None:
                progress(f"skip claim {number}: module {__name__}.{name} is not there")
    return out


def __getattr__(name):
    # CLAIMS is built on first use, so importing datasets alone stays cheap.
    if name == "CLAIMS":
        return load_claims()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _thread_limit(threads):
    """A context limiting the OpenMP threads of the native core to `threads` and BLAS to
    one thread (threadpoolctl), or a no-op without threadpoolctl.

    BLAS gets one thread always: the oracle's products are small ((n, k) by (n, d)), and
    a multi-threaded OpenBLAS on a loaded 2-core machine made them 10 to 100 times slower.
    """
    import contextlib

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    stack.enter_context(threadpool_limits(limits=1, user_api="blas"))
    if threads is not None:
        stack.enter_context(threadpool_limits(limits=int(threads), user_api="openmp"))
    return stack


def run_all(quick, out_dir, datasets=None, claims=None, progress=print, seed=0, threads=None):
    """Run the claims on the data sets; write report.md, results.csv, figures; return rows.

    quick: the --quick selection (scikit-learn's bundled sets and synthetic data, small
    k and grids). out_dir: where the files go (None: nothing written). datasets, claims:
    names and numbers to restrict the run to (None: all). threads: OpenMP threads of the
    native core during the run (None: its default; needs threadpoolctl to take effect).
    """
    with _thread_limit(threads):
        return _run_all(quick, out_dir, datasets, claims, progress, seed, threads)


def start(quick, out_dir, names, seed, say):
    """(Context, loaded data sets) of a run; out_dir is created when given."""
    from . import datasets as D

    out_dir = None if out_dir is None else pathlib.Path(out_dir)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    return Context(quick=quick, out_dir=out_dir, seed=seed), D.load_all(quick, names, say)


def _run_all(quick, out_dir, datasets, claims, progress, seed, threads):
    from . import datasets as D
    from . import report

    say = progress if progress is not None else (lambda line: None)
    modules = load_claims(say)
    if claims:
        unknown = sorted(set(claims) - set(CLAIM_MODULES))
        if unknown:
            raise ValueError(f"unknown claim(s) {unknown}; known: 1..{len(CLAIM_MODULES)}")
        modules = {n: m for n, m in modules.items() if n in set(claims)}
    if datasets:
        for name in datasets:
            if name not in D.SPECS_BY_NAME:
                raise ValueError(f"unknown data set {name!r}; known: {', '.join(D.SPECS_BY_NAME)}")
    ctx, loaded = start(quick, out_dir, datasets, seed, say)
    out_dir = ctx.out_dir
    t_start = time.perf_counter()
    rows, timings = [], {}
    total = len(modules) * len(loaded)
    i = 0
    for number, module in sorted(modules.items()):
        for ds in loaded:
            i += 1
            ks = [k for k in D.ks_for(ds.name, quick) if k < ds.X.shape[0]]
            t0 = time.perf_counter()
            got = module.run(ds, ks, ctx)
            dt = time.perf_counter() - t0
            timings[(number, ds.name)] = dt
            counts = {s: sum(r.status == s for r in got) for s in (PASS, FAIL, NOT_MET)}
            say(
                f"[{i}/{total}] claim {number} ({module.TITLE}) on {ds.name} "
                f"({ds.X.shape[0]} x {ds.X.shape[1]}, k={','.join(map(str, ks))}): "
                f"{counts[PASS]} PASS, {counts[FAIL]} FAIL, {counts[NOT_MET]} {NOT_MET} "
                f"[{dt:.1f} s]"
            )
            rows.extend(got)
    elapsed = time.perf_counter() - t_start
    if out_dir is not None:
        report.write(
            out_dir, rows, loaded, modules, quick=quick, elapsed=elapsed, timings=timings, seed=seed
        )
    return rows
