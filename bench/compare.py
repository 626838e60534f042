"""softkmeans against its peers, in one process, on the same data and initial centroids.

Prints issue 23's targets, every one as measured / needed, with the machine named (CPU
family/model, AVX-512 width, the same-run sgemm): the whole fit from a given init vs
scikit-learn (3x float32, 2.5x float64) and faiss (2x) (``fit``), defaults as typed (3x,
inertia within 2%) (``defaults``), the hard step vs the same-run sgemm rate (60% at d = 16,
85% at d = 64, 90% at d = 256) (``kernel``), the softmax step vs the careful NumPy step
(10x) (``numpy``) and vs our hard step (2.5x at d >= 16) (``soft``), sparse hard fits vs
scikit-learn (2x; 2 threads never slower than 1) (``sparse``), the Dask fit vs the
in-memory fit (1.5x) and dask-ml (8x) (``dask``). Issue 33 adds the whole fit vs
scikit-learn-intelex's KMeans (oneDAL; same init, 10 iterations, tol 0: 2x) (``intelex``,
skipped with the reason where it cannot be imported) and entmax15 rows vs the entmax
package (10x) (``entmax``), and a second machine line: the CPU as the kernel choices key
it (vendor, family/model, 512-bit FMA ports where known, AVX512_BF16, AMX-BF16) and every
kernel choice made for it, with why (``softkmeans.build_info()["kernel_choices"]``); its
hard step and whole-fit targets are the ``kernel`` and ``fit`` rows (float32).
``--only issue33`` runs exactly issue 33's rows. Earlier issues' rows run when named in
--only: small calls, per-step peers, the distance kernel, the torch term.
One function per comparison (``compare_kernels.py``, ``compare_fits.py``), each returning
``table.Row`` objects; ``main`` assembles the table.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/compare.py          # full
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/compare.py --quick  # small n

(OPENBLAS_CORETYPE pins OpenBLAS to its Haswell kernels, about half the native sgemm on
an AVX-512 machine; the targets are against the native kernel, so unset it for the run.)

Timing rules: every comparison runs its contenders alternately (interleaved) for
``--repeats`` rounds and reports medians; all contenders get ``--threads`` threads
(OpenMP for softkmeans, threadpoolctl for scikit-learn/BLAS, faiss.omp_set_num_threads,
torch.set_num_threads). softkmeans steps are timed at ``softkmeans._native`` (validation
is done once, as an estimator's loop does); whole fits are the whole public calls.

The peers (scikit-learn, faiss, the PyTorch and careful-NumPy steps, the `entmax`
package) and the ceilings (NumPy GEMM rate, copy bandwidth) live in ``bench/peers.py``;
a missing optional peer is skipped with a line that says so. Results go to
``--out`` (default bench/results) as compare.csv and compare.json; --scaling also
runs ``bench/scaling.py`` (time vs n, k, d, threads; CSV/JSON and log-log PNGs there).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bf16  # noqa: E402
import compare_cpu as cpu  # noqa: E402
import compare_fits as fits  # noqa: E402
import compare_kernels as kernels  # noqa: E402
import peers as P  # noqa: E402
import scaling  # noqa: E402
import table  # noqa: E402

import softkmeans  # noqa: E402

FULL_SHAPES = [
    (1_000_000, 2, 8),
    (1_000_000, 2, 1024),
    (1_000_000, 16, 64),
    (1_000_000, 16, 1024),
    (1_000_000, 64, 256),
    (200_000, 256, 1024),
]


ISSUE_23_STAGES = "fit,defaults,kernel,bf16,soft,numpy,sparse,dask"
ISSUE_33_STAGES = "kernel,fit,intelex,entmax,numpy,dask"
DEFAULT_STAGES = ISSUE_23_STAGES + ",intelex,entmax"
ALL_STAGES = DEFAULT_STAGES + ",small,sklearn,faiss,peers,gemm,torch"


def same_run_sgemm(threads, size=4096):
    """numpy's float32 GEMM rate (GFLOP/s) on a size^3 product, median of 5, now."""
    return P.gemm_rate(np.float32, n_threads=threads, size=size)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small n")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=None, help="interleaved rounds (median)")
    p.add_argument("--sk-iters", type=int, default=None, help="max_iter for peer fits")
    p.add_argument(
        "--only",
        default=DEFAULT_STAGES,
        help=f"comma-separated subset of: {ALL_STAGES}, or issue33 (default: issues 23 and 33)",
    )
    p.add_argument(
        "--out",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
        help="folder for CSV/JSON/PNG",
    )
    p.add_argument(
        "--scaling",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="also run bench/scaling.py",
    )
    args = p.parse_args(argv)
    scale = 10 if args.quick else 1
    args.repeats = args.repeats or (3 if args.quick else 5)
    args.sk_iters = args.sk_iters or (3 if args.quick else 4)
    shapes = [(n // scale, d, k) for n, d, k in FULL_SHAPES]
    dtypes = (np.float32, np.float64)
    only = set(args.only.replace("issue33", ISSUE_33_STAGES).split(","))
    unknown = only - set(ALL_STAGES.split(","))
    if unknown:
        p.error(f"unknown --only stages {sorted(unknown)}; choose from {ALL_STAGES}")
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if var in os.environ:
            print(f"# WARNING: {var}={os.environ[var]} is set: OpenBLAS runs a pinned kernel and "
                  "the sgemm ceiling is not the native one (see the docstring)")  # fmt: skip
    info = softkmeans.build_info()
    print(f"# softkmeans {softkmeans.__version__} {info}  threads={args.threads}")
    sgemm = same_run_sgemm(args.threads, size=2048 if args.quick else 4096)
    print(table.machine_line(sgemm, args.threads))
    print(cpu.cpu_line(sgemm, args.threads))
    ceilings = P.ceilings(n_threads=args.threads, quick=args.quick)
    ceilings["sgemm_4096_f32_gflops"] = sgemm
    args.ceilings = ceilings
    print("# ceilings: " + ", ".join(f"{key}={val:.1f}" for key, val in ceilings.items()))
    print("| comparison | shape | dtype | ours | peer | ratio | target | ok | note |")
    # --quick: n / 20 and at most 10 iterations (n stays >= 5 k: no empty clusters).
    fit_scale = 20 if args.quick else 1
    fit_shapes = [
        (n // fit_scale, d, k, min(it, 10) if args.quick else it) for n, d, k, it in fits.FIT_SHAPES
    ]
    # The issue's shapes; --quick at n / 40.
    default_scale = 40 if args.quick else 1
    default_shapes = [(1_000_000 // default_scale, 16, 64), (300_000 // default_scale, 64, 256)]
    kernel_shapes = [((n // fit_scale, d, k), t) for (n, d, k), t in kernels.KERNEL_SHAPES]
    # Issue 23's softmax shapes: (5e5, 16, 64) and (3e5, 16, 256).
    numpy_shapes = [(500_000 // scale, 16, 64), (300_000 // scale, 16, 256)]
    dask_n = 2_000_000 // scale
    stages = {
        "fit": lambda: fits.compare_whole_fit(fit_shapes, dtypes, args),
        "defaults": lambda: fits.compare_defaults(default_shapes, args),
        "kernel": lambda: kernels.compare_kernel_sgemm(kernel_shapes, args),
        "bf16": lambda: bf16.compare_bf16(args),
        "soft": lambda: kernels.compare_soft_vs_hard(shapes, dtypes, args),
        "numpy": lambda: kernels.compare_numpy_softmax(numpy_shapes, args),
        "sparse": lambda: fits.compare_sparse_fit(args),
        "dask": lambda: fits.compare_dask(args, n=dask_n),
        "small": lambda: kernels.compare_small_calls(args),
        "sklearn": lambda: kernels.compare_sklearn(shapes, dtypes, args),
        "faiss": lambda: kernels.compare_faiss(shapes, args),
        "peers": lambda: kernels.compare_soft_peers([(1_000_000 // scale, 16, 64)], args),
        "entmax": lambda: kernels.compare_entmax((8, 64, 1024), 2_000_000 // scale, args),
        "intelex": lambda: cpu.compare_intelex(
            [(n // fit_scale, d, k) for n, d, k in cpu.INTELEX_SHAPES], args
        ),
        "gemm": lambda: kernels.compare_gemm([s for s in shapes if s[1] >= 64], args),
        "torch": lambda: kernels.compare_torch_free_energy([(65536 // scale, 64, 512)], args),
    }
    rows = []
    for name, stage in stages.items():
        if name not in only:
            continue
        t0 = time.perf_counter()
        try:
            rows += stage()
        except (P.PeerUnavailable, ImportError) as exc:
            print(f"# {P.skip_message(name, exc)}", flush=True)
        print(f"# stage {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    misses = [r for r in rows if not r.ok]
    print(f"# {len(rows) - len(misses)}/{len(rows)} rows meet their target")
    for r in misses:
        print(f"# MISS: {table.format_row(r)}")
    for path in table.write_results(rows, ceilings, info, args):
        print(f"# wrote {path}")
    if args.scaling:
        srows = scaling.run_scaling(quick=args.quick, with_peers=True)
        for path in scaling.write_results(srows, args.out) + scaling.plot(srows, args.out):
            print(f"# wrote {path}")
    return rows


if __name__ == "__main__":
    main()
