"""Scaling of softkmeans (and optionally its peers) with n, k, d and the thread count.

Each sweep varies one parameter around a base point (full: n = 10^6, d = 16, k = 64,
2 threads; --quick: n = 10^5) and times every operation at every point, interleaved,
taking the median of the repeats. Results go to <out>/scaling.csv and scaling.json, and
one log-log plot per sweep to <out>/scaling_<n|k|d|threads>.png.

Operations:
  assign          softkmeans.assign (labels and min distances)
  step_hard       softkmeans.centroid_step(kind="hard")
  step_softmax    softkmeans.centroid_step(kind="softmax"), sigma^2 = lambda_max / 10
  step_entmax15   softkmeans.centroid_step(kind="entmax15"), sigma = sqrt(Delta_min) / 2
                  (the exact-recovery temperature: the step equals Lloyd's)
  sklearn_lloyd   scikit-learn KMeans(algorithm="lloyd"), time per iteration (--peers)
  faiss           faiss-cpu Kmeans, time per iteration, float32 only (--peers)
The centroid steps are timed only once `centroid_step` runs natively (see
softkmeans._api.native_functions()); the NumPy reference is not a scaling subject.

    python bench/scaling.py --quick            # about a minute
    python bench/scaling.py --peers            # the full sweep, n up to 10^7
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers as P  # noqa: E402

import softkmeans  # noqa: E402

BASE_FULL = {"n": 1_000_000, "d": 16, "k": 64, "threads": 2}
BASE_QUICK = {"n": 100_000, "d": 16, "k": 64, "threads": 2}
SWEEPS_FULL = {
    "n": [10_000, 30_000, 100_000, 300_000, 1_000_000, 3_000_000, 10_000_000],
    "k": [8, 32, 128, 512, 1024],
    "d": [2, 4, 16, 64, 256],
    "threads": [1, 2],
}
SWEEPS_QUICK = {
    "n": [10_000, 100_000, 300_000],
    "k": [8, 64, 256],
    "d": [2, 16, 64],
    "threads": [1, 2],
}
STEP_KINDS = ("hard", "softmax", "entmax15")
BLOBS = 64  # blob centres of the synthetic data, whatever k is


def native_steps() -> bool:
    """Whether centroid_step runs in the native core (not the NumPy reference)."""
    try:
        from softkmeans._api import native_functions
    except ImportError:
        return False
    return "centroid_step" in native_functions()


def _entmax_sigma(X: np.ndarray, C: np.ndarray, n_threads: int) -> float:
    delta = float(np.min(softkmeans.margins(X, C, n_threads=n_threads)))
    return max(np.sqrt(max(delta, 0.0)) / 2.0, 1e-12 * float(softkmeans.critical_sigma(X)))


def operations(
    X: np.ndarray, C: np.ndarray, threads: int, ops: list[str]
) -> dict[str, Callable[[], object]]:
    """Callables doing one call of each operation on (X, C) at `threads` threads."""
    cases: dict[str, Callable[[], object]] = {}
    if "assign" in ops:
        cases["assign"] = lambda: softkmeans.assign(X, C, n_threads=threads)
    if any(op.startswith("step_") for op in ops):
        # sigma^2 = lambda_max / 10; critical_sigma = sqrt(lambda_max), computed natively
        # (no float64 copy of X, which at n = 10^7 would be 1.3 GB).
        sig_soft = float(softkmeans.critical_sigma(X)) / np.sqrt(10.0)
        for kind in STEP_KINDS:
            if f"step_{kind}" not in ops:
                continue
            sigma = _entmax_sigma(X, C, threads) if kind == "entmax15" else sig_soft

            def step(kind=kind, sigma=sigma):
                return softkmeans.centroid_step(X, C, sigma, kind=kind, n_threads=threads)

            cases[f"step_{kind}"] = step
    if "sklearn_lloyd" in ops:
        cases["sklearn_lloyd"] = P.sklearn_kmeans(X, C, algorithm="lloyd", n_threads=threads)
    if "faiss" in ops and X.dtype == np.float32:
        cases["faiss"] = P.faiss_kmeans(X, C, n_threads=threads)
    return cases


def choose_ops(with_peers: bool, log=print) -> list[str]:
    ops = ["assign"]
    if native_steps():
        ops += [f"step_{kind}" for kind in STEP_KINDS]
    else:
        log(
            "skipped step_hard/step_softmax/step_entmax15: centroid_step is not native yet "
            "(it runs the NumPy reference)"
        )
    if with_peers:
        for name, op in (("sklearn", "sklearn_lloyd"), ("faiss", "faiss")):
            try:
                P.require(name, "threadpoolctl") if name == "sklearn" else P.require(name)
                ops.append(op)
            except P.PeerUnavailable as exc:
                log(P.skip_message(op, exc))
    return ops


def run_scaling(
    *,
    quick: bool = False,
    dtype=np.float32,
    with_peers: bool = False,
    sweeps: list[str] | None = None,
    repeats: int | None = None,
    seed: int = 0,
    log=print,
) -> list[dict]:
    """Runs the sweeps; returns one row per (sweep, point, operation)."""
    base = BASE_QUICK if quick else BASE_FULL
    grid = SWEEPS_QUICK if quick else SWEEPS_FULL
    repeats = repeats or (3 if quick else 5)
    dtype = np.dtype(dtype)
    ops = choose_ops(with_peers, log)
    rows: list[dict] = []
    data: dict[int, np.ndarray] = {}

    def data_for(n: int, d: int) -> np.ndarray:
        # One array per d, as large as the largest n swept at that d; smaller n are prefixes.
        # Only the base d's array (the n sweep's) and the current other d are kept.
        if d not in data:
            for other in [key for key in data if key != base["d"]]:
                del data[other]
            n_max = max(max(grid["n"]), base["n"]) if d == base["d"] else base["n"]
            data[d] = P.make_blobs(n_max, d, BLOBS, dtype, seed)
        return data[d][:n]

    for sweep in sweeps or list(grid):
        for value in grid[sweep]:
            point = dict(base, **{sweep: value})
            n, d, k, threads = point["n"], point["d"], point["k"], point["threads"]
            X = data_for(n, d)
            C = P.initial_centroids(X, k, seed=seed + 1)
            cases = operations(X, C, threads, ops)
            timings = P.interleaved(cases, repeats=repeats, warmup=1)
            for op, t in timings.items():
                flops = 2.0 * n * k * d
                rows.append(
                    {
                        "sweep": sweep,
                        "op": op,
                        "dtype": dtype.name,
                        "n": n,
                        "d": d,
                        "k": k,
                        "threads": threads,
                        "seconds": t.median,
                        "seconds_min": t.best,
                        "gflops": flops / t.median * 1e-9,
                        "rows_per_s": n / t.median,
                    }
                )
            log(
                f"{sweep:>7} n={n:<9} d={d:<4} k={k:<5} t={threads}  "
                + "  ".join(f"{op}={t.median * 1e3:.2f}ms" for op, t in timings.items())
            )
    return rows


def write_results(rows: list[dict], out_dir: str, stem: str = "scaling") -> list[str]:
    """Writes <stem>.csv and <stem>.json; returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    csv_path = os.path.join(out_dir, f"{stem}.csv")
    json_path = os.path.join(out_dir, f"{stem}.json")
    if rows:
        with open(csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    with open(json_path, "w") as f:
        json.dump({"build_info": _build_info(), "rows": rows}, f, indent=1)
    return [csv_path, json_path]


def _build_info() -> dict:
    try:
        return {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in softkmeans.build_info().items()
        }
    except AttributeError:
        return {}


def plot(rows: list[dict], out_dir: str, stem: str = "scaling", log=print) -> list[str]:
    """One log-log PNG per sweep: seconds per call vs the swept parameter, a line per op."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        log(P.skip_message("plots", f"matplotlib is not installed ({exc})"))
        return []
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for sweep in dict.fromkeys(r["sweep"] for r in rows):
        sub = [r for r in rows if r["sweep"] == sweep]
        fixed = {p: sub[0][p] for p in ("n", "d", "k", "threads") if p != sweep}
        fig, ax = plt.subplots(figsize=(6, 4.2))
        for op in dict.fromkeys(r["op"] for r in sub):
            pts = sorted((r[sweep], r["seconds"]) for r in sub if r["op"] == op)
            ax.loglog(*zip(*pts), marker="o", label=op)
        ax.set_xlabel("threads" if sweep == "threads" else sweep)
        ax.set_ylabel("seconds per call (median)")
        title = ", ".join(f"{p}={v:,}" for p, v in fixed.items())
        ax.set_title(f"softkmeans scaling vs {sweep} ({sub[0]['dtype']}; {title})", fontsize=9)
        if sweep == "threads":
            ax.set_xticks(sorted({r["threads"] for r in sub}))
            ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out_dir, f"{stem}_{sweep}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sweep (about a minute)")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--peers", action="store_true", help="also time scikit-learn and faiss")
    parser.add_argument(
        "--sweeps", nargs="+", choices=list(SWEEPS_FULL), help="subset of the sweeps to run"
    )
    parser.add_argument("--repeats", type=int, help="repeats per point (default 3 quick, 5 full)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)

    rows = run_scaling(
        quick=args.quick,
        dtype=args.dtype,
        with_peers=args.peers,
        sweeps=args.sweeps,
        repeats=args.repeats,
    )
    for path in write_results(rows, args.out):
        print(f"wrote {path}")
    if not args.no_plots:
        for path in plot(rows, args.out):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
