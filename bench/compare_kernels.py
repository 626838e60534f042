"""bench/compare.py's kernel rows: the hard step against scikit-learn, faiss and the same-run
sgemm; softmax and entmax15 against our hard step, careful NumPy, PyTorch and the entmax
package; the torch free energy; small calls. One function per comparison, each returning
`table.Row` objects (printed as they come)."""

from __future__ import annotations

import sys
import time

import numpy as np
import peers as P
from table import Row, blob_data, format_row, medians, our_step

import softkmeans
from softkmeans import _native


def compare_sklearn(shapes, dtypes, args):
    """Hard step vs scikit-learn KMeans(algorithm="lloyd") per iteration (the target), and
    vs KMeans(algorithm="elkan") (information: no target; full run only)."""
    P.require("sklearn", "threadpoolctl")
    targets = {2: 3.0, 16: 2.0, 64: 1.5, 256: 1.25}
    rows = []
    for n, d, k in shapes:
        for dtype in dtypes:
            X, C = blob_data(n, d, k, dtype)
            ours_f = our_step(X, C, "hard", 1.0, args.threads)
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
            print(format_row(rows[-1]), flush=True)
            if "elkan" in t:
                elkan = t["elkan"].median
                rows.append(
                    Row("hard vs sklearn elkan", (n, d, k), dt, ours, elkan, "s", "info",
                        elkan / ours, True)
                )  # fmt: skip
                print(format_row(rows[-1]), flush=True)
    return rows


def compare_faiss(shapes, args):
    """Hard step vs faiss.Kmeans per iteration (float32, same init, no subsampling)."""
    P.require("faiss")
    rows = []
    for n, d, k in shapes:
        X, C = blob_data(n, d, k, np.float32)
        ours_f = our_step(X, C, "hard", 1.0, args.threads)
        fa = P.faiss_kmeans(X, C, n_threads=args.threads, iters=args.sk_iters - 1)
        ours_f()
        t = P.interleaved({"ours": ours_f, "faiss": fa}, repeats=args.repeats, warmup=0)
        ours, peer = t["ours"].median, t["faiss"].median
        rows.append(
            Row("hard vs faiss Kmeans", (n, d, k), "float32", ours, peer, "s", ">= 1x",
                peer / ours, peer / ours >= 1.0)
        )  # fmt: skip
        print(format_row(rows[-1]), flush=True)
    return rows


def compare_soft_vs_hard(shapes, dtypes, args):
    """softmax at sigma^2 = lambda_max / 10 and entmax15 at sigma = sqrt(Delta_min) / 2,
    each vs our hard step (time ratios)."""
    rows = []
    for n, d, k in shapes:
        for dtype in dtypes:
            X, C = blob_data(n, d, k, dtype)
            sig_soft = float(softkmeans.critical_sigma(X)) / np.sqrt(10.0)
            w = np.ones(n)
            dmin = _native.block_stats(X, C, "hard", 1.0, w, args.threads)[0].min_margin
            sig_ent = max(float(np.sqrt(max(dmin, 0.0))) / 2.0, 1e-30)
            hard = our_step(X, C, "hard", 1.0, args.threads)
            soft = our_step(X, C, "softmax", sig_soft, args.threads)
            ent = our_step(X, C, "entmax15", sig_ent, args.threads)
            th, ts, te = medians({"hard": hard, "softmax": soft, "entmax15": ent}, args.repeats)
            dt = np.dtype(dtype).name
            # The target is for d >= 16 (issues 10 and 23); at d = 2 the row is information.
            tgt = "<= 2.5x" if d >= 16 else "info"
            rows.append(Row("softmax vs hard (s2=lmax/10)", (n, d, k), dt, ts, th, "s", tgt,
                            ts / th, ts / th <= 2.5 or d < 16))  # fmt: skip
            print(format_row(rows[-1]), flush=True)
            rows.append(Row("entmax15 vs hard (s=sqrt(Dmin)/2)", (n, d, k), dt, te, th, "s",
                            "<= 1.2x", te / th, te / th <= 1.2))  # fmt: skip
            print(format_row(rows[-1]), flush=True)
    return rows


def compare_numpy_softmax(shapes, args):
    """softmax step vs the in-place NumPy float32 implementation (needs an (n, k) buffer)."""
    rows = []
    for n, d, k in shapes:
        X, C = blob_data(n, d, k, np.float32)
        sigma = float(softkmeans.critical_sigma(X)) / np.sqrt(10.0)
        npy_step = P.NumpySoftmaxStep(X, k, sigma, n_threads=args.threads)
        ours_f = our_step(X, C, "softmax", sigma, args.threads)
        to, tn = medians({"ours": ours_f, "numpy": lambda C=C, f=npy_step: f(C)}, args.repeats)
        rows.append(Row("softmax vs numpy in-place f32", (n, d, k), "float32", to, tn, "s",
                        ">= 10x", tn / to, tn / to >= 10.0,
                        f"numpy buffer {npy_step.buffer_bytes / 1e9:.2f} GB"))  # fmt: skip
        print(format_row(rows[-1]), flush=True)
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
            X, C = blob_data(n, d, k, dtype)
            sigma = float(softkmeans.critical_sigma(X)) / np.sqrt(10.0)
            dt = np.dtype(dtype).name
            for kind in ("softmax", "entmax15"):
                cases = {
                    "ours": our_step(X, C, kind, sigma, args.threads),
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
                    print(format_row(rows[-1]), flush=True)
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
        to, tp, ts = medians({"ours": ours_f, "entmax": peer, "softmax": softmax}, args.repeats)
        rows.append(Row("entmax15 rows/s vs entmax+torch", (n, 0, k), "float32", n / to, n / tp,
                        "rows/s", ">= 10x", tp / to, tp / to >= 10.0,
                        f"torch.softmax {n / ts:.3g} rows/s"))  # fmt: skip
        print(format_row(rows[-1]), flush=True)
    return rows


def compare_gemm(shapes, args):
    """Distance micro-kernel rate (2 n k d / time of assign: distance tile + argmin, no
    (n, k) output) vs the float32 GEMM rate of numpy's BLAS on the same shape."""
    from threadpoolctl import threadpool_limits

    rows = []
    for n, d, k in shapes:
        X, C = blob_data(n, d, k, np.float32)
        out = np.empty((n, k), dtype=np.float32)

        def gemm(X=X, C=C, out=out):
            with threadpool_limits(args.threads):
                np.matmul(X, C.T, out=out)

        ours_f = lambda X=X, C=C: _native.assign(X, C, args.threads)  # noqa: E731
        to, tg = medians({"ours": ours_f, "sgemm": gemm}, args.repeats)
        flops = 2.0 * n * k * d
        ceiling = getattr(args, "ceilings", {}).get("gemm_f32_gflops")
        note = f"{flops / to / 1e9 / ceiling:.0%} of the square sgemm ceiling" if ceiling else ""
        rows.append(Row("distance kernel vs numpy sgemm", (n, d, k), "float32",
                        flops / to / 1e9, flops / tg / 1e9, "GFLOP/s", ">= 60%", tg / to,
                        tg / to >= 0.6, note))  # fmt: skip
        print(format_row(rows[-1]), flush=True)
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
        X, C = blob_data(n, d, k, np.float32)
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

        to, tp, te = medians({"ours": ours, "cdist": peer, "expansion": expansion}, args.repeats)
        note = f"matmul-expansion torch term {te * 1e3:.0f} ms ({te / to:.2f}x)"
        rows.append(Row("torch F_sigma fwd+bwd vs cdist+lse", (n, d, k), "float32", to, tp,
                        "s", ">= 3x", tp / to, tp / to >= 3.0, note))  # fmt: skip
        print(format_row(rows[-1]), flush=True)
    return rows


# Issue 23's kernel targets: the hard step as a fraction of the same-run sgemm rate
# (OpenBLAS at its native kernel: compare.py warns when OPENBLAS_CORETYPE pins it).
KERNEL_SHAPES = [
    ((1_000_000, 16, 64), 0.6),
    ((1_000_000, 16, 1024), 0.6),
    ((1_000_000, 64, 256), 0.85),
    ((200_000, 256, 1024), 0.9),
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
        ours_f = our_step(X, C, "hard", 1.0, args.threads)
        to, tg = medians({"ours": ours_f, "sgemm": gemm}, args.repeats)
        ours, peer = 2.0 * n * k * d / to / 1e9, gemm_flops / tg / 1e9
        rows.append(Row("hard step vs same-run sgemm", (n, d, k), "float32", ours, peer,
                        "GFLOP/s", f">= {tgt:.0%}", ours / peer, ours / peer >= tgt,
                        f"sgemm {size}^3"))  # fmt: skip
        print(format_row(rows[-1]), flush=True)
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
        print(format_row(rows[-1]), flush=True)
    if "sk" in t:
        ours, tp = t["fit2"].median, t["sk"].median
        rows.append(Row("small: fit 100x2 k=3 vs sklearn", (100, 2, 3), "float64", ours, tp, "s",
                        "info", tp / ours, True))  # fmt: skip
        print(format_row(rows[-1]), flush=True)
    return rows
