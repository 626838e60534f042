"""softkmeans against its peers, in one process, on the same data and initial centroids.

Prints the performance table of issue 3: median times of interleaved repeats and
ratios against the targets. One function per comparison (``compare_*``), each
returning ``Row`` objects; ``main`` assembles the table.

    python bench/compare.py            # full run (n = 1e6; several minutes)
    python bench/compare.py --quick    # small n, about a minute

Timing rules: every comparison runs its contenders alternately (interleaved) for
``--repeats`` rounds and reports medians; all contenders get ``--threads`` threads
(OpenMP for softkmeans, threadpoolctl for scikit-learn/BLAS, faiss.omp_set_num_threads,
torch.set_num_threads). softkmeans steps are timed at ``softkmeans._core`` (validation
is done once, as an estimator's loop does); scikit-learn and faiss per-iteration
times are (t(max_iter = M) - t(max_iter = 1)) / (M - 1), which removes their setup.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time

import numpy as np

import softkmeans
from softkmeans import _core

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


def _time(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def interleaved(fns, repeats):
    """Median wall time of each callable, run alternately `repeats` times (after a warm-up)."""
    for f in fns:
        f()
    times = [[] for _ in fns]
    for _ in range(repeats):
        for i, f in enumerate(fns):
            times[i].append(_time(f))
    return [statistics.median(t) for t in times]


def _our_step(X, C, kind, sigma, threads):
    w = np.ones(X.shape[0])
    return lambda: _core.centroid_step(X, C, kind, sigma, w, threads)


def _per_iteration(fit, iters):
    """Seconds per iteration of fit(max_iter) from fit(iters) - fit(1); fit returns n_iter."""

    def run():
        t1 = _time(lambda: fit(1))
        box = {}
        tm = _time(lambda: box.setdefault("n", fit(iters)))
        n_done = box["n"]
        if n_done > 1:
            return max(tm - t1, 1e-9) / (n_done - 1)
        return tm

    return run


def compare_sklearn(shapes, dtypes, args):
    """Hard step vs scikit-learn KMeans(algorithm="lloyd") per iteration."""
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    targets = {2: 3.0, 16: 2.0, 64: 1.5, 256: 1.25}
    rows = []
    for n, d, k in shapes:
        for dtype in dtypes:
            X, C = _data(n, d, k, dtype)

            def fit(m, X=X, C=C, k=k):
                km = KMeans(k, init=C, n_init=1, tol=0.0, max_iter=m, algorithm="lloyd")
                with threadpool_limits(args.threads):
                    km.fit(X)
                return km.n_iter_

            sk = _per_iteration(fit, args.sk_iters)
            ours_f = _our_step(X, C, "hard", 1.0, args.threads)
            samples_sk, samples_ours = [], []
            ours_f()
            for _ in range(args.repeats):
                samples_ours.append(_time(ours_f))
                samples_sk.append(sk())
            ours, peer = statistics.median(samples_ours), statistics.median(samples_sk)
            tgt = targets.get(d, 1.0)
            rows.append(
                Row("hard vs sklearn lloyd", (n, d, k), np.dtype(dtype).name, ours, peer, "s",
                    f">= {tgt}x", peer / ours, peer / ours >= tgt)
            )  # fmt: skip
            print(_fmt(rows[-1]), flush=True)
    return rows


def compare_faiss(shapes, args):
    """Hard step vs faiss.Kmeans per iteration (float32, same init, no subsampling)."""
    import faiss

    faiss.omp_set_num_threads(args.threads)
    rows = []
    for n, d, k in shapes:
        X, C = _data(n, d, k, np.float32)

        def fit(m, X=X, C=C, n=n, d=d, k=k):
            km = faiss.Kmeans(d, k, niter=m, max_points_per_centroid=n, min_points_per_centroid=1,
                              seed=0, verbose=False)  # fmt: skip
            km.train(X, init_centroids=C)
            return m

        fa = _per_iteration(fit, args.sk_iters)
        ours_f = _our_step(X, C, "hard", 1.0, args.threads)
        samples_fa, samples_ours = [], []
        ours_f()
        for _ in range(args.repeats):
            samples_ours.append(_time(ours_f))
            samples_fa.append(fa())
        ours, peer = statistics.median(samples_ours), statistics.median(samples_fa)
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
            dmin = _core.centroid_step(X, C, "hard", 1.0, w, args.threads)[4]
            sig_ent = max(float(np.sqrt(max(dmin, 0.0))) / 2.0, 1e-30)
            hard = _our_step(X, C, "hard", 1.0, args.threads)
            soft = _our_step(X, C, "softmax", sig_soft, args.threads)
            ent = _our_step(X, C, "entmax15", sig_ent, args.threads)
            th, ts, te = interleaved([hard, soft, ent], args.repeats)
            dt = np.dtype(dtype).name
            rows.append(Row("softmax vs hard (s2=lmax/10)", (n, d, k), dt, ts, th, "s", "<= 2.5x",
                            ts / th, ts / th <= 2.5))  # fmt: skip
            print(_fmt(rows[-1]), flush=True)
            rows.append(Row("entmax15 vs hard (s=sqrt(Dmin)/2)", (n, d, k), dt, te, th, "s",
                            "<= 1.2x", te / th, te / th <= 1.2))  # fmt: skip
            print(_fmt(rows[-1]), flush=True)
    return rows


def numpy_softmax_step(X, C, sigma, buf):
    """A careful in-place NumPy float32 softmax step: one (n, k) buffer, BLAS for both
    products (D = ||x||^2 + ||c||^2 - 2 X C^T, shifted exp, N = 1^T R, S = R^T X)."""
    xn = np.einsum("ij,ij->i", X, X)
    cn = np.einsum("ij,ij->i", C, C)
    np.matmul(X, C.T, out=buf)
    buf *= -2.0
    buf += cn
    buf += xn[:, None]
    np.maximum(buf, 0.0, out=buf)
    buf -= buf.min(axis=1, keepdims=True)
    buf *= np.float32(-1.0 / (2.0 * sigma * sigma))
    np.exp(buf, out=buf)
    buf /= buf.sum(axis=1, keepdims=True)
    N = buf.sum(axis=0, dtype=np.float64)
    S = buf.T @ X
    return S / np.maximum(N, 1e-300)[:, None].astype(np.float32)


def compare_numpy_softmax(shapes, args):
    """softmax step vs the in-place NumPy float32 implementation (needs an (n, k) buffer)."""
    from threadpoolctl import threadpool_limits

    rows = []
    for n, d, k in shapes:
        X, C = _data(n, d, k, np.float32)
        sigma = float(softkmeans.critical_sigma(X)) / np.sqrt(10.0)
        buf = np.empty((n, k), dtype=np.float32)

        def npy(X=X, C=C, sigma=sigma, buf=buf):
            with threadpool_limits(args.threads):
                numpy_softmax_step(X, C, sigma, buf)

        ours_f = _our_step(X, C, "softmax", sigma, args.threads)
        to, tn = interleaved([ours_f, npy], args.repeats)
        rows.append(Row("softmax vs numpy in-place f32", (n, d, k), "float32", to, tn, "s",
                        ">= 10x", tn / to, tn / to >= 10.0,
                        f"numpy buffer {buf.nbytes / 1e9:.2f} GB"))  # fmt: skip
        print(_fmt(rows[-1]), flush=True)
        del buf
    return rows


def compare_entmax(ks, entries, args):
    """entmax15 on an (n, k) float32 score matrix vs the `entmax` package on torch CPU."""
    try:
        import torch
        from entmax import entmax15 as torch_entmax15
    except ImportError as exc:  # pragma: no cover - optional peers
        print(f"# entmax comparison skipped: {exc}", file=sys.stderr)
        return []
    torch.set_num_threads(args.threads)
    rows = []
    for k in ks:
        n = entries // k
        Z = np.random.default_rng(k).normal(size=(n, k)).astype(np.float32)
        Zt = torch.from_numpy(Z)

        def peer(Zt=Zt):
            with torch.no_grad():
                torch_entmax15(Zt, dim=1)

        to, tp = interleaved([lambda Z=Z: _core.entmax15(Z, args.threads), peer], args.repeats)
        rows.append(Row("entmax15 rows/s vs entmax+torch", (n, 0, k), "float32", n / to, n / tp,
                        "rows/s", ">= 10x", tp / to, tp / to >= 10.0))  # fmt: skip
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

        ours_f = lambda X=X, C=C: _core.assign(X, C, args.threads)  # noqa: E731
        to, tg = interleaved([ours_f, gemm], args.repeats)
        flops = 2.0 * n * k * d
        rows.append(Row("distance kernel vs numpy sgemm", (n, d, k), "float32", flops / to / 1e9,
                        flops / tg / 1e9, "GFLOP/s", ">= 60%", tg / to, tg / to >= 0.6))  # fmt: skip
        print(_fmt(rows[-1]), flush=True)
        del out
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
    p.add_argument("--quick", action="store_true", help="small n (about a minute)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=None, help="interleaved rounds (median)")
    p.add_argument("--sk-iters", type=int, default=None, help="max_iter for peer fits")
    p.add_argument(
        "--only",
        default="sklearn,faiss,soft,numpy,entmax,gemm",
        help="comma-separated subset of: sklearn, faiss, soft, numpy, entmax, gemm",
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
    print("| comparison | shape | dtype | ours | peer | ratio | target | ok | note |")
    rows = []
    if "sklearn" in only:
        rows += compare_sklearn(shapes, dtypes, args)
    if "faiss" in only:
        rows += compare_faiss(shapes, args)
    if "soft" in only:
        rows += compare_soft_vs_hard(shapes, dtypes, args)
    if "numpy" in only:
        n = 1_000_000 // scale
        rows += compare_numpy_softmax([(n, 16, 64), (n, 16, 256)], args)
    if "entmax" in only:
        rows += compare_entmax((8, 64, 1024), 10_000_000 // scale, args)
    if "gemm" in only:
        rows += compare_gemm([(s[0], s[1], s[2]) for s in shapes if s[1] >= 64], args)
    misses = [r for r in rows if not r.ok]
    print(f"# {len(rows) - len(misses)}/{len(rows)} rows meet their target")
    return rows


if __name__ == "__main__":
    main()
