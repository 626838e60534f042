"""softkmeans against its peers, in one process, on the same data and initial centroids.

Prints the performance tables of issues 3 and 10: median times of interleaved repeats
and ratios against the targets, every target as measured / needed. Issue 10's rows: the
whole fit from a given init vs scikit-learn and faiss (``fit``), defaults as typed
(``defaults``), the hard step vs the same-run sgemm rate (``kernel``), small calls
(``small``), the softmax step vs the careful NumPy step (``numpy``) and vs our hard step
(``soft``), entmax15 rows vs the entmax package (``entmax``). One function per
comparison (``compare_*``), each returning ``Row`` objects; ``main`` assembles the table.

    python bench/compare.py            # full run (n = 1e6; several minutes)
    python bench/compare.py --quick    # small n, about four minutes

Timing rules: every comparison runs its contenders alternately (interleaved) for
``--repeats`` rounds and reports medians; all contenders get ``--threads`` threads
(OpenMP for softkmeans, threadpoolctl for scikit-learn/BLAS, faiss.omp_set_num_threads,
torch.set_num_threads). softkmeans steps are timed at ``softkmeans._native`` (validation
is done once, as an estimator's loop does); scikit-learn and faiss per-iteration
times are (t(max_iter = M) - t(max_iter = 1)) / (M - 1), which removes their setup.

The peers (scikit-learn, faiss, the PyTorch and careful-NumPy steps, the `entmax`
package) and the ceilings (NumPy GEMM rate, copy bandwidth) live in ``bench/peers.py``;
a missing optional peer is skipped with a line that says so. Results go to
``--out`` (default bench/results) as compare.csv and compare.json; the full run also
runs ``bench/scaling.py`` (time vs n, k, d, threads; CSV/JSON and log-log PNGs there).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bf16  # noqa: E402
import peers as P  # noqa: E402
import scaling  # noqa: E402

import softkmeans  # noqa: E402
from softkmeans import _native  # noqa: E402

FULL_SHAPES = [
    (1_000_000, 2, 8),
    (1_000_000, 2, 1024),
    (1_000_000, 16, 64),
    (1_000_000, 16, 1024),
    (1_000_000, 64, 256),
    (200_000, 256, 1024),
]


@dataclasses.dataclass
class Row:
    """One line of the table: ours vs a peer, times in seconds (or rates, see unit)."""

    comparison: str
    shape: tuple
    dtype: str
    ours: float
    peer: float
    unit: str  # "s" (lower is better) or "rows/s", "GFLOP/s" (higher is better)
    target: str  # human-readable target on `ratio`
    ratio: float  # the quantity the target constrains
    ok: bool
    note: str = ""


def _data(n, d, k, dtype, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(k, d))
    X = (centres[rng.integers(0, k, size=n)] + rng.normal(size=(n, d))).astype(dtype)
    C = X[rng.choice(n, size=k, replace=False)].copy()
    return np.ascontiguousarray(X), np.ascontiguousarray(C)


def _medians(cases, repeats):
    """The median seconds of each case of `peers.interleaved` (one warm-up; rests, bursts
    and round-robin order as there), in the order of `cases`."""
    return [t.median for t in P.interleaved(cases, repeats=repeats, warmup=1).values()]


def _our_step(X, C, kind, sigma, threads):
    w = np.ones(X.shape[0])
    return lambda: _native.block_stats(X, C, kind, sigma, w, threads)


def compare_sklearn(shapes, dtypes, args):
    """Hard step vs scikit-learn KMeans(algorithm="lloyd") per iteration (the target), and
    vs KMeans(algorithm="elkan") (information: no target; full run only)."""
    P.require("sklearn", "threadpoolctl")
    targets = {2: 3.0, 16: 2.0, 64: 1.5, 256: 1.25}
    rows = []
    for n, d, k in shapes:
        for dtype in dtypes:
            X, C = _data(n, d, k, dtype)
            ours_f = _our_step(X, C, "hard", 1.0, args.threads)
            cases = {"ours": ours_f}
            for algo in ("lloyd",) if args.quick else ("lloyd", "elkan"):
                cases[algo] = P.sklearn_kmeans(
                    X, C, algorithm=algo, n_threads=args.threads, iters=args.sk_iters - 1
                )
            ours_f()
            t = P.interleaved(cases, repeats=args.repeats, warmup=0)
            ours, dt = t["ours"].median, np.dtype(dtype).name
            tgt = targets.get(d, 1.0)
            lloyd = t["lloyd"].median
            rows.append(
                Row("hard vs sklearn lloyd", (n, d, k), dt, ours, lloyd, "s",
                    f">= {tgt}x", lloyd / ours, lloyd / ours >= tgt)
            )  # fmt: skip
            print(_fmt(rows[-1]), flush=True)
            if "elkan" in t:
                elkan = t["elkan"].median
                rows.append(
                    Row("hard vs sklearn elkan", (n, d, k), dt, ours, elkan, "s", "info",
                        elkan / ours, True)
                )  # fmt: skip
                print(_fmt(rows[-1]), flush=True)
    return rows


def compare_faiss(shapes, args):
    """Hard step vs faiss.Kmeans per iteration (float32, same init, no subsampling)."""
    P.require("faiss")
    rows = []
    for n, d, k in shapes:
        X, C = _data(n, d, k, np.float32)
        ours_f = _our_step(X, C, "hard", 1.0, args.threads)
        fa = P.faiss_kmeans(X, C, n_threads=args.threads, iters=args.sk_iters - 1)
        ours_f()
        t = P.interleaved({"ours": ours_f, "faiss": fa}, repeats=args.repeats, warmup=0)
        ours, peer = t["ours"].median, t["faiss"].median
        rows.append(
            Row("hard vs faiss Kmeans", (n, d, k), "float32", ours, peer, "s", ">= 1x",
                peer / ours, peer / ours >= 1.0)
        )  # fmt: skip
        print(_fmt(rows[-1]), flush=True)
    return rows


def compare_soft_vs_hard(shapes, dtypes, args):
    """softmax at sigma^2 = lambda_max / 10 and entmax15 at sigma = sqrt(Delta_min) / 2,
    each vs our hard step (time ratios)."""
    rows = []
    for n, d, k in shapes:
        for dtype in dtypes:
            X, C = _data(n, d, k, dtype)
            sig_soft = float(softkmeans.critical_sigma(X)) / np.sqrt(10.0)
            w = np.ones(n)
            dmin = _native.block_stats(X, C, "hard", 1.0, w, args.threads)[0].min_margin
            sig_ent = max(float(np.sqrt(max(dmin, 0.0))) / 2.0, 1e-30)
            hard = _our_step(X, C, "hard", 1.0, args.threads)
            soft = _our_step(X, C, "softmax", sig_soft, args.threads)
            ent = _our_step(X, C, "entmax15", sig_ent, args.threads)
            th, ts, te = _medians({"hard": hard, "softmax": soft, "entmax15": ent}, args.repeats)
            dt = np.dtype(dtype).name
            # The target is for d >= 16 (issue 10); at d = 2 the row is information.
            tgt = "<= 2.5x" if d >= 16 else "info"
            rows.append(Row("softmax vs hard (s2=lmax/10)", (n, d, k), dt, ts, th, "s", tgt,
                            ts / th, ts / th <= 2.5 or d < 16))  # fmt: skip
            print(_fmt(rows[-1]), flush=True)
            rows.append(Row("entmax15 vs hard (s=sqrt(Dmin)/2)", (n, d, k), dt, te, th, "s",
                            "<= 1.2x", te / th, te / th <= 1.2))  # fmt: skip
            print(_fmt(rows[-1]), flush=True)
    return rows


def compare_numpy_softmax(shapes, args):
    """softmax step vs the in-place NumPy float32 implementation (needs an (n, k) buffer)."""
    rows = []
    for n, d, k in shapes:
        X, C = _data(n, d, k, np.float32)
        sigma = float(softkmeans.critical_sigma(X)) / np.sqrt(10.0)
        npy_step = P.NumpySoftmaxStep(X, k, sigma, n_threads=args.threads)
        ours_f = _our_step(X, C, "softmax", sigma, args.threads)
        to, tn = _medians({"ours": ours_f, "numpy": lambda C=C, f=npy_step: f(C)}, args.repeats)
        rows.append(Row("softmax vs numpy in-place f32", (n, d, k), "float32", to, tn, "s",
                        ">= 10x", tn / to, tn / to >= 10.0,
                        f"numpy buffer {npy_step.buffer_bytes / 1e9:.2f} GB"))  # fmt: skip
        print(_fmt(rows[-1]), flush=True)
        del npy_step
    return rows


def compare_soft_peers(shapes, args):
    """softmax and entmax15 steps (sigma^2 = lambda_max / 10) vs the NumPy reference and a
    straightforward PyTorch CPU step (torch.cdist + softmax / entmax.entmax15). Information
    rows (no target): ratio = peer time / our time."""
    from softkmeans import reference

    rows = []
    for n, d, k in shapes:
        for dtype in (np.float32,) if args.quick else (np.float32, np.float64):
            X, C = _data(n, d, k, dtype)
            sigma = float(softkmeans.critical_sigma(X)) / np.sqrt(10.0)
            dt = np.dtype(dtype).name
            for kind in ("softmax", "entmax15"):
                cases = {
                    "ours": _our_step(X, C, kind, sigma, args.threads),
                    "numpy reference": lambda X=X, C=C, kind=kind, sigma=sigma: (
                        reference.centroid_step(X, C, sigma, kind=kind)
                    ),
                }
                try:
                    cases["torch"] = P.torch_step(X, C, sigma, kind=kind, n_threads=args.threads)
                except P.PeerUnavailable as exc:
                    print(f"# {P.skip_message(f'torch {kind} step', exc)}", file=sys.stderr)
                t = P.interleaved(cases, repeats=args.repeats, warmup=1)
                ours = t.pop("ours").median
                for peer_name, tp in t.items():
                    rows.append(Row(f"{kind} step vs {peer_name}", (n, d, k), dt, ours,
                                    tp.median, "s", "info", tp.median / ours, True))  # fmt: skip
                    print(_fmt(rows[-1]), flush=True)
    return rows


def compare_entmax(ks, entries, args):
    """entmax15 on an (n, k) float32 score matrix vs the `entmax` package on torch CPU:
    the public ``softkmeans.entmax15`` (validation and output allocation included)."""
    P.require("torch", "entmax")
    rows = []
    for k in ks:
        n = entries // k
        Z = np.random.default_rng(k).normal(size=(n, k)).astype(np.float32)
        peer = P.entmax_rows(Z, n_threads=args.threads)
        softmax = P.torch_softmax_rows(Z, n_threads=args.threads)
        ours_f = lambda Z=Z: softkmeans.entmax15(Z, n_threads=args.threads)  # noqa: E731
        to, tp, ts = _medians({"ours": ours_f, "entmax": peer, "softmax": softmax}, args.repeats)
        rows.append(Row("entmax15 rows/s vs entmax+torch", (n, 0, k), "float32", n / to, n / tp,
                        "rows/s", ">= 10x", tp / to, tp / to >= 10.0,
                        f"torch.softmax {n / ts:.3g} rows/s"))  # fmt: skip
        print(_fmt(rows[-1]), flush=True)
    return rows


def compare_gemm(shapes, args):
    """Distance micro-kernel rate (2 n k d / time of assign: distance tile + argmin, no
    (n, k) output) vs the float32 GEMM rate of numpy's BLAS on the same shape."""
    from threadpoolctl import threadpool_limits

    rows = []
    for n, d, k in shapes:
        X, C = _data(n, d, k, np.float32)
        out = np.empty((n, k), dtype=np.float32)

        def gemm(X=X, C=C, out=out):
            with threadpool_limits(args.threads):
                np.matmul(X, C.T, out=out)

        ours_f = lambda X=X, C=C: _native.assign(X, C, args.threads)  # noqa: E731
        to, tg = _medians({"ours": ours_f, "sgemm": gemm}, args.repeats)
        flops = 2.0 * n * k * d
        ceiling = getattr(args, "ceilings", {}).get("gemm_f32_gflops")
        note = f"{flops / to / 1e9 / ceiling:.0%} of the square sgemm ceiling" if ceiling else ""
        rows.append(Row("distance kernel vs numpy sgemm", (n, d, k), "float32",
                        flops / to / 1e9, flops / tg / 1e9, "GFLOP/s", ">= 60%", tg / to,
                        tg / to >= 0.6, note))  # fmt: skip
        print(_fmt(rows[-1]), flush=True)
        del out
    return rows


def compare_torch_free_energy(shapes, args):
    """softkmeans.torch.free_energy forward + backward (one fused native pass; the backward
    scales what it saved) vs the plain PyTorch term torch.cdist + logsumexp + autograd, on
    the same float32 tensors, softmax at sigma^2 = lambda_max / 10. Both get --threads
    threads (OpenMP, torch.set_num_threads); the whole public call is timed."""
    P.require("torch")
    import torch

    from softkmeans import torch as skt

    torch.set_num_threads(args.threads)
    rows = []
    for n, d, k in shapes:
        X, C = _data(n, d, k, np.float32)
        sigma = float(softkmeans.critical_sigma(X)) / np.sqrt(10.0)
        T = 2.0 * sigma * sigma
        x = torch.from_numpy(X).requires_grad_()
        c = torch.from_numpy(C).requires_grad_()

        def ours(x=x, c=c, sigma=sigma):
            x.grad = c.grad = None
            skt.free_energy(x, c, sigma, "softmax", n_threads=args.threads).backward()

        def peer(x=x, c=c, T=T):
            x.grad = c.grad = None
            D = torch.cdist(x, c).square()
            (-T * torch.logsumexp(-D / T, dim=1)).sum().backward()

        def expansion(x=x, c=c, T=T):
            # The same term with D = ||x||^2 + ||c||^2 - 2 x.c (two GEMMs in the backward
            # instead of cdist's own backward): information, in the note.
            x.grad = c.grad = None
            D = (x * x).sum(1, keepdim=True) + (c * c).sum(1) - 2.0 * (x @ c.T)
            (-T * torch.logsumexp(-D / T, dim=1)).sum().backward()

        to, tp, te = _medians({"ours": ours, "cdist": peer, "expansion": expansion}, args.repeats)
        note = f"matmul-expansion torch term {te * 1e3:.0f} ms ({te / to:.2f}x)"
        rows.append(Row("torch F_sigma fwd+bwd vs cdist+lse", (n, d, k), "float32", to, tp,
                        "s", ">= 3x", tp / to, tp / to >= 3.0, note))  # fmt: skip
        print(_fmt(rows[-1]), flush=True)
    return rows


# The shapes of issue 10's whole-fit table: (n, d, k, iterations).
FIT_SHAPES = [
    (1_000_000, 2, 8, 20),
    (1_000_000, 16, 64, 20),
    (500_000, 16, 1024, 20),
    (200_000, 64, 256, 20),
    (100_000, 256, 1024, 8),
]


def _our_fit(X, C0, max_iter, threads):
    def run():
        return softkmeans.SoftKMeans(
            C0.shape[0], assignment="hard", init=C0, n_init=1, max_iter=max_iter, tol=0,
            n_threads=threads,
        ).fit(X)  # fmt: skip

    return run


def compare_whole_fit(shapes, dtypes, args):
    """The whole `SoftKMeans(assignment="hard").fit` from a given init, `iters` iterations
    with tol=0, vs scikit-learn `KMeans(algorithm="lloyd").fit` (target 2x, both dtypes)
    and faiss `Kmeans.train` (target 1.25x, float32), same init array, whole calls timed
    interleaved."""
    P.require("sklearn", "threadpoolctl")
    rows = []
    for n, d, k, iters in shapes:
        for dtype in dtypes:
            X = P.make_blobs(n, d, k, dtype)
            C0 = P.initial_centroids(X, k)
            cases = {
                "ours": _our_fit(X, C0, iters, args.threads),
                "sklearn": P.sklearn_fit(X, C0, max_iter=iters, n_threads=args.threads),
            }
            if dtype == np.float32:
                try:
                    cases["faiss"] = P.faiss_fit(X, C0, max_iter=iters, n_threads=args.threads)
                except P.PeerUnavailable as exc:
                    print(f"# {P.skip_message('faiss whole fit', exc)}", file=sys.stderr)
            t = P.interleaved(cases, repeats=args.repeats, warmup=0 if args.quick else 1)
            ours, dt = t["ours"].median, np.dtype(dtype).name
            note = f"{iters} iterations"
            for peer, tgt in (("sklearn", 2.0), ("faiss", 1.25)):
                if peer not in t:
                    continue
                tp = t[peer].median
                rows.append(Row(f"whole fit vs {peer}", (n, d, k), dt, ours, tp, "s",
                                f">= {tgt}x", tp / ours, tp / ours >= tgt, note))  # fmt: skip
                print(_fmt(rows[-1]), flush=True)
    return rows


def compare_defaults(shapes, args):
    """Defaults as typed: `SoftKMeans(k, assignment="hard", random_state=0).fit` vs
    `KMeans(k, random_state=0).fit` on make_blobs (cluster_std=4), float32: at least 3x,
    with our inertia within 2% of scikit-learn's."""
    P.require("sklearn", "threadpoolctl")
    from sklearn.cluster import KMeans
    from sklearn.datasets import make_blobs

    rows = []
    for n, d, k in shapes:
        X, _ = make_blobs(n, d, centers=k, cluster_std=4.0, random_state=0)
        X = X.astype(np.float32)
        res = {}

        def ours(X=X, k=k, res=res):
            with P.thread_limit(args.threads):
                res["ours"] = softkmeans.SoftKMeans(k, assignment="hard", random_state=0).fit(X)

        def peer(X=X, k=k, res=res):
            with P.thread_limit(args.threads):
                res["peer"] = KMeans(k, random_state=0).fit(X)

        t = P.interleaved({"ours": ours, "peer": peer}, repeats=args.repeats, warmup=0)
        to, tp = t["ours"].median, t["peer"].median
        gap = res["ours"].inertia_ / res["peer"].inertia_ - 1.0
        ok = tp / to >= 3.0 and gap <= 0.02
        rows.append(Row("defaults vs sklearn defaults", (n, d, k), "float32", to, tp, "s",
                        ">= 3x", tp / to, ok, f"inertia {gap:+.2%} (needed <= +2%)"))  # fmt: skip
        print(_fmt(rows[-1]), flush=True)
    return rows


def _sparse_text_like(n, d, density, k, seed=0):
    """A row-normalized CSR (n, d) of non-negative values at `density` (TF-IDF-like): each
    row draws most of its terms from its topic's share of the vocabulary; and k rows as the
    initial centroids (dense)."""
    from scipy import sparse

    rng = np.random.default_rng(seed)
    per_row = max(1, int(round(density * d)))
    topics = rng.integers(0, k, size=n)
    span = d // k
    cols = np.where(
        rng.random((n, per_row)) < 0.7,
        topics[:, None] * span + rng.integers(0, span, size=(n, per_row)),
        rng.integers(0, d, size=(n, per_row)),
    )
    rows = np.repeat(np.arange(n), per_row)
    X = sparse.csr_matrix((rng.random(n * per_row), (rows, cols.ravel())), shape=(n, d))
    X.sum_duplicates()
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sparse.csr_matrix(sparse.diags(1.0 / norms) @ X)
    C = X[rng.choice(n, size=k, replace=False)].toarray()
    return X, C


def compare_sparse_fit(args, n=40_000, d=3_000, density=0.004, k=20, max_iter=30):
    """Whole hard fit on a row-normalized sparse matrix (TF-IDF-like) from the same initial
    centroids: SoftKMeans(assignment="hard").fit vs scikit-learn's KMeans(algorithm="lloyd")
    .fit on the same CSR matrix, both the whole public call; target >= 1.5x (issue 11).

    Initial centroids are rows of X, so the many rows that share no term with any of them
    are at exactly equal distances (2, unit rows) from all: such ties go to the smallest
    index here and by rounding in scikit-learn, so the trajectories (not the work per
    iteration) differ; from tie-free centroids both give the same labels and iterations
    (tests/test_sparse.py)."""
    P.require("sklearn", "threadpoolctl")
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    X, C = _sparse_text_like(n, d, density, k)
    ours = softkmeans.SoftKMeans(
        k, assignment="hard", init=C, n_init=1, max_iter=max_iter, n_threads=args.threads
    )
    peer = KMeans(k, init=C, n_init=1, max_iter=max_iter, algorithm="lloyd")
    with threadpool_limits(limits=args.threads):
        cases = {"ours": lambda: ours.fit(X), "sklearn": lambda: peer.fit(X)}
        t_ours, t_peer = _medians(cases, args.repeats)
    note = (
        f"density {density:g}, iterations ours {ours.n_iter_} / sklearn {peer.n_iter_}, "
        f"inertia ratio {ours.inertia_ / peer.inertia_:.6f}"
    )
    row = Row("sparse hard fit vs sklearn lloyd", (n, d, k), "float64", t_ours, t_peer, "s",
              ">= 1.5x", t_peer / t_ours, t_peer / t_ours >= 1.5, note)  # fmt: skip
    print(_fmt(row), flush=True)
    return [row]


# Issue 10's kernel targets: the hard step as a fraction of the same-run sgemm rate.
KERNEL_SHAPES = [
    ((1_000_000, 16, 64), 0.5),
    ((1_000_000, 16, 1024), 0.5),
    ((1_000_000, 64, 256), 0.7),
    ((200_000, 256, 1024), 0.8),
]


def compare_kernel_sgemm(shapes, args):
    """The hard step (block_stats, 2 n k d flops) vs the float32 GEMM rate numpy reaches on
    a square product measured interleaved in the same run (4096^3; 2048^3 with --quick)."""
    size = 2048 if args.quick else 4096
    gemm, gemm_flops = P.sgemm_call(size, args.threads)
    rows = []
    for (n, d, k), tgt in shapes:
        X = P.make_blobs(n, d, k, np.float32)
        C = P.initial_centroids(X, k)
        ours_f = _our_step(X, C, "hard", 1.0, args.threads)
        to, tg = _medians({"ours": ours_f, "sgemm": gemm}, args.repeats)
        ours, peer = 2.0 * n * k * d / to / 1e9, gemm_flops / tg / 1e9
        rows.append(Row("hard step vs same-run sgemm", (n, d, k), "float32", ours, peer,
                        "GFLOP/s", f">= {tgt:.0%}", ours / peer, ours / peer >= tgt,
                        f"sgemm {size}^3"))  # fmt: skip
        print(_fmt(rows[-1]), flush=True)
    return rows


def compare_bf16(args):
    """The hard step with the bf16 candidate pass vs the same-run sgemm (bench/bf16.py's
    rows; the note gives the rate without the pass and the candidates a row)."""
    if not _native.bf16_available():
        print("# bf16: no AVX512_BF16 on this CPU/build, skipped", flush=True)
        return []
    shapes = [(n // (10 if args.quick else 1), d, k) for n, d, k in bf16.SHAPES]
    rows = []
    for shape, on, off, sgemm, cand, same in bf16.rows_bf16(shapes, args.threads, args.repeats,
                                                            args.quick):  # fmt: skip
        rows.append(Row("hard step, bf16 pass vs same-run sgemm", shape, "float32", on, sgemm,
                        "GFLOP/s", f">= {bf16.TARGET}x", on / sgemm, on / sgemm >= bf16.TARGET,
                        f"off {off:.0f} GFLOP/s, {cand:.1f} candidates a row, "
                        f"same bits {same}"))  # fmt: skip
        print(_fmt(rows[-1]), flush=True)
    return rows


def compare_small_calls(args):
    """Small calls do not pay for a thread team: a 100 x 2, k = 3 fit and a loop of 1000
    `softkmeans.assign` calls on 100 x 2 data at n_threads=2 vs n_threads=1 (target: the
    threaded call within 1.2x of the serial one), and the tiny fit vs scikit-learn (info).

    A fit's time is the mean of a loop of fits. NOTE: a single millisecond fit timed
    straight after other work (the previous case of the round) runs 0.2-0.5 ms slower, for
    either thread count (cold caches and branch predictors on a shared machine), which
    charged that to whichever case came first in a fixed round order (n_threads=2 first:
    1.32-1.36x; the order swapped: 0.5x); and on a loaded machine single fits are often
    descheduled for a time slice (5-10 ms).
    """
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 2))
    C = X[:3].copy()

    def loop(threads):
        def run():
            for _ in range(1000):
                softkmeans.assign(X, C, n_threads=threads)

        return run

    def per_fit(fit_once, fits):
        def run():
            t0 = time.perf_counter()
            for _ in range(fits):
                fit_once()
            return P.Timed((time.perf_counter() - t0) / fits)

        return run

    def fit(threads):
        model = softkmeans.SoftKMeans(3, assignment="hard", init=C, n_init=1, n_threads=threads)
        return per_fit(lambda: model.fit(X), 100)

    cases = {"loop2": loop(2), "loop1": loop(1), "fit2": fit(2), "fit1": fit(1)}
    try:
        P.require("sklearn", "threadpoolctl")
        from sklearn.cluster import KMeans

        cases["sk"] = per_fit(lambda: KMeans(3, init=C, n_init=1).fit(X), 10)
    except P.PeerUnavailable as exc:
        print(f"# {P.skip_message('sklearn tiny fit', exc)}", file=sys.stderr)
    # Each round starts at the next case (every case takes every position in the round
    # equally often): what runs just before a case (a scikit-learn fit whose OpenMP and
    # BLAS threads still spin, a cold start) must not decide a 20% ratio.
    names, rounds = list(cases), 2 * len(cases) * max(1, -(-args.repeats // (2 * len(cases))))
    t = P.interleaved(cases, repeats=0, warmup=1)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name, timing in P.interleaved({n: cases[n] for n in order}, 1, 0).items():
            t[name].times += timing.times
    rows = []
    for name, label in (("loop", "1000 assign calls 100x2 k=3"), ("fit", "fit 100x2 k=3")):
        t2, t1 = t[name + "2"].median, t[name + "1"].median
        rows.append(Row(f"small: {label}, 2 vs 1 thread", (100, 2, 3), "float64", t2, t1, "s",
                        "<= 1.2x", t2 / t1, t2 / t1 <= 1.2))  # fmt: skip
        print(_fmt(rows[-1]), flush=True)
    if "sk" in t:
        ours, tp = t["fit2"].median, t["sk"].median
        rows.append(Row("small: fit 100x2 k=3 vs sklearn", (100, 2, 3), "float64", ours, tp, "s",
                        "info", tp / ours, True))  # fmt: skip
        print(_fmt(rows[-1]), flush=True)
    return rows


def _fmt(r: Row) -> str:
    n, d, k = r.shape
    shape = f"n={n:>9,} d={d:>3} k={k:>4}"
    if r.unit == "s":
        vals = f"{r.ours * 1e3:10.1f} ms {r.peer * 1e3:10.1f} ms"
    else:
        vals = f"{r.ours:10.3g} {r.peer:10.3g} {r.unit}"
    flag = "ok" if r.ok else "MISS"
    return (f"| {r.comparison:<36} | {shape} | {r.dtype:<7} | {vals} | {r.ratio:7.2f} "
            f"| {r.target:<8} | {flag:<4} | {r.note}")  # fmt: skip


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small n (about four minutes)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=None, help="interleaved rounds (median)")
    p.add_argument("--sk-iters", type=int, default=None, help="max_iter for peer fits")
    p.add_argument(
        "--only",
        default="fit,defaults,kernel,bf16,small,sklearn,faiss,soft,peers,numpy,entmax,gemm,torch,"
        "sparse",
        help="comma-separated subset of: fit, defaults, kernel, bf16, small, sklearn, faiss, soft, "
        "peers, numpy, entmax, gemm, torch, sparse",
    )
    p.add_argument(
        "--out",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
        help="folder for CSV/JSON/PNG",
    )
    p.add_argument(
        "--scaling",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run bench/scaling.py (default: on for the full run, off with --quick)",
    )
    args = p.parse_args(argv)
    scale = 10 if args.quick else 1
    args.repeats = args.repeats or (3 if args.quick else 5)
    args.sk_iters = args.sk_iters or (3 if args.quick else 4)
    shapes = [(n // scale, d, k) for n, d, k in FULL_SHAPES]
    dtypes = (np.float32, np.float64)
    only = set(args.only.split(","))
    info = softkmeans.build_info()
    print(f"# softkmeans {softkmeans.__version__} {info}  threads={args.threads}")
    ceilings = P.ceilings(n_threads=args.threads, quick=args.quick)
    args.ceilings = ceilings
    print("# ceilings: " + ", ".join(f"{key}={val:.1f}" for key, val in ceilings.items()))
    print("| comparison | shape | dtype | ours | peer | ratio | target | ok | note |")
    n_soft = 1_000_000 // scale
    # --quick: n / 20 and at most 10 iterations (n stays >= 5 k: no empty clusters).
    fit_scale = 20 if args.quick else 1
    fit_shapes = [
        (n // fit_scale, d, k, min(it, 10) if args.quick else it) for n, d, k, it in FIT_SHAPES
    ]
    # The shapes; --quick at n / 40.
    default_scale = 40 if args.quick else 1
    default_shapes = [(1_000_000 // default_scale, 16, 64), (300_000 // default_scale, 64, 256)]
    kernel_shapes = [((n // fit_scale, d, k), t) for (n, d, k), t in KERNEL_SHAPES]
    stages = [
        ("fit", lambda: compare_whole_fit(fit_shapes, dtypes, args)),
        ("defaults", lambda: compare_defaults(default_shapes, args)),
        ("kernel", lambda: compare_kernel_sgemm(kernel_shapes, args)),
        ("bf16", lambda: compare_bf16(args)),
        ("small", lambda: compare_small_calls(args)),
        ("sklearn", lambda: compare_sklearn(shapes, dtypes, args)),
        ("faiss", lambda: compare_faiss(shapes, args)),
        ("soft", lambda: compare_soft_vs_hard(shapes, dtypes, args)),
        ("peers", lambda: compare_soft_peers([(n_soft, 16, 64)], args)),
        (
            "numpy",
            lambda: compare_numpy_softmax([(n_soft, 16, 64), (3 * n_soft // 10, 16, 256)], args),
        ),
        ("entmax", lambda: compare_entmax((8, 64, 1024), 2_000_000 // scale, args)),
        ("gemm", lambda: compare_gemm([s for s in shapes if s[1] >= 64], args)),
        ("torch", lambda: compare_torch_free_energy([(65536 // scale, 64, 512)], args)),
        ("sparse", lambda: compare_sparse_fit(args)),
    ]
    rows = []
    for name, stage in stages:
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
    for path in write_results(rows, ceilings, info, args):
        print(f"# wrote {path}")
    if args.scaling if args.scaling is not None else not args.quick:
        srows = scaling.run_scaling(quick=args.quick, with_peers=True)
        for path in scaling.write_results(srows, args.out) + scaling.plot(srows, args.out):
            print(f"# wrote {path}")
    return rows


def write_results(rows, ceilings, info, args):
    """compare.csv (one line per row) and compare.json (rows, ceilings, build info)."""
    os.makedirs(args.out, exist_ok=True)
    records = []
    for r in rows:
        rec = dataclasses.asdict(r)
        rec["n"], rec["d"], rec["k"] = rec.pop("shape")
        records.append(rec)
    csv_path = os.path.join(args.out, "compare.csv")
    json_path = os.path.join(args.out, "compare.json")
    if records:
        with open(csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(records[0]))
            writer.writeheader()
            writer.writerows(records)
    meta = {"threads": args.threads, "quick": args.quick, "repeats": args.repeats}
    info = {key: (list(val) if isinstance(val, tuple) else val) for key, val in info.items()}
    with open(json_path, "w") as f:
        json.dump({"build_info": info, "run": meta, "ceilings": ceilings, "rows": records}, f,
                  indent=1)  # fmt: skip
    return [csv_path, json_path] if records else [json_path]


if __name__ == "__main__":
    main()
