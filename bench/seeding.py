"""k-means|| against k-means++ seeding (issue 35, item 2; issue 26, item 2): speed, passes,
final inertia.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/seeding.py \
        [--n 1000000] [--d 32] [--k 512] [--repeats 3] [--max-iter 30] [--threads 2]

Prints the machine lines (CPU, flags, SIMD level, a same-run sgemm, the load average),
then each target as measured / needed:

- issue 35: ``init="k-means||"`` seeding + 1 step at least 5x faster than k-means++
  seeding + 1 step at k >= 256, n >= 1e6 (the issue's case, the default: 1e6 x 32 float32
  blobs, k = 512). Each is the whole `SoftKMeans(k, assignment="hard", init=...,
  max_iter=1, tol=0).fit(X)` a user times (seeding, one step, the final labels), the two
  inits interleaved --repeats times, medians; the seeding's own share is timed inside
  the same fits and printed beside;
- the fit from each seeding (--max-iter Lloyd steps, --tol) ends within 1% of the
  inertia from k-means++ (the same max_iter; one seeding each, --random-state);
- issue 26: at most 10 passes over X, and the speed of the seedings alone extrapolated
  to --target-n rows: every pass is linear in n, k-means||'s k-means++ on its ~4 k
  candidates is not (the pass times scaled by target_n / n, that part kept as measured).

Data: a mixture of k Gaussians (unit variance, centres uniform in [-2, 2]^d: in 32 and
more dimensions a row is nearer its own centre than any other, while the clusters'
distances overlap, so no triangle-inequality bound prunes the seeding's passes).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_cpu  # noqa: E402
import peers  # noqa: E402
import table  # noqa: E402

import softkmeans  # noqa: E402
from softkmeans.fit import driver  # noqa: E402
from softkmeans.fit import kmeans_parallel as kp  # noqa: E402
from softkmeans.fit.seeding import KMeansPlusPlus  # noqa: E402


def blobs(n, d, k, seed, dtype):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-2.0, 2.0, size=(k, d)).astype(dtype)
    X = np.empty((n, d), dtype=dtype)
    step = 1 << 16
    for s in range(0, n, step):
        m = min(step, n - s)
        X[s : s + m] = centres[rng.integers(0, k, size=m)]
        X[s : s + m] += rng.standard_normal((m, d), dtype=np.float32)
    return X


class SeedingClock:
    """Times the seeding inside a fit: the driver's k-means|| and k-means++ calls, and
    k-means||'s k-means++ on its candidates (module attributes, looked up per call);
    k-means|| run with the given oversampling (l / k of each round)."""

    def __init__(self, oversampling):
        self.options = {"oversampling": oversampling}
        self.seconds = {}
        self.passes = 0
        self.candidates = 0
        self._originals = {}

    def _wrap(self, module, name, key, on_result=None, **options):
        original = getattr(module, name)
        self._originals[(module, name)] = original

        def timed(*args, **kwargs):
            t = time.perf_counter()
            out = original(*args, **kwargs, **options)
            self.seconds[key] = time.perf_counter() - t
            if on_result is not None:
                on_result(args, out)
            return out

        setattr(module, name, timed)

    def __enter__(self):
        self.seconds.clear()
        self._wrap(driver, "kmeans_parallel", "seeding", self._note_passes, **self.options)
        self._wrap(KMeansPlusPlus, "centres", "seeding")  # the fit's k-means++
        self._wrap(kp, "greedy_kmeans_plusplus", "candidates", self._note_candidates)
        return self

    def _note_passes(self, args, out):
        self.passes = out[1]

    def _note_candidates(self, args, out):
        self.candidates = args[0].shape[0]

    def __exit__(self, *exc):
        for (module, name), original in self._originals.items():
            setattr(module, name, original)


def timed_fits(X, args):
    """{init: [(fit seconds, seeding seconds, candidates' k-means++ seconds)]}, the two
    inits interleaved; and k-means||'s passes and candidate count."""
    times = {"k-means||": [], "k-means++": []}
    clock = SeedingClock(args.oversampling)
    for _ in range(args.repeats):
        for init in times:
            model = softkmeans.SoftKMeans(
                args.k, assignment="hard", init=init, n_init=1, max_iter=1, tol=0.0,
                random_state=args.random_state, n_threads=args.threads,
            )  # fmt: skip
            with clock:
                t = time.perf_counter()
                model.fit(X)
                fit = time.perf_counter() - t
            part = clock.seconds.get("candidates", 0.0) if init == "k-means||" else 0.0
            times[init].append((fit, clock.seconds["seeding"], part))
            print(f"  {init}: seeding + 1 step {fit:.2f} s (seeding {clock.seconds['seeding']:.2f}"
                  f" s{f', its candidates k-means++ {part:.2f} s' if part else ''})",
                  flush=True)  # fmt: skip
    return times, clock.passes, clock.candidates


def final_inertia(X, init, args):
    model = softkmeans.SoftKMeans(
        args.k, assignment="hard", init=init, n_init=1, max_iter=args.max_iter, tol=args.tol,
        random_state=args.random_state, n_threads=args.threads,
    )  # fmt: skip
    with SeedingClock(args.oversampling):
        model.fit(X)
    print(f"  fit from {init}: inertia {model.inertia_:.6e} after {model.n_iter_} steps",
          flush=True)  # fmt: skip
    return model.inertia_


def per_round(text):
    """--oversampling's "1,3" as (1.0, 3.0)."""
    return tuple(float(f) for f in text.split(","))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--k", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3, help="timed fits of each init (median)")
    ap.add_argument("--max-iter", type=int, default=30, help="Lloyd steps of the quality fits")
    ap.add_argument("--tol", type=float, default=0.0, help="the quality fits' tol")
    ap.add_argument("--oversampling", type=per_round, default=kp.OVERSAMPLING,
                    help="l / k of each round, comma-separated (the number of rounds)")  # fmt: skip
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--random-state", type=int, default=0)
    ap.add_argument("--target-n", type=int, default=10_000_000)
    args = ap.parse_args()
    sgemm = peers.gemm_rate(np.float32, n_threads=args.threads, size=2048)
    print(table.machine_line(sgemm, args.threads, 2048))
    print(compare_cpu.cpu_line(sgemm, args.threads))
    X = blobs(args.n, args.d, args.k, 0, np.float32)
    print(
        f"{args.n} x {args.d} float32 blobs, k = {args.k}, l = "
        f"{', '.join(f'{f:g} k' for f in args.oversampling)} in {len(args.oversampling)} "
        f"rounds, {args.threads} threads; load average {table.load_average()}"
    )
    times, passes, n_candidates = timed_fits(X, args)
    fit_par, seed_par, cand = np.median(np.array(times["k-means||"]), axis=0)
    fit_pp, seed_pp, _ = np.median(np.array(times["k-means++"]), axis=0)
    ratio = final_inertia(X, "k-means||", args) / final_inertia(X, "k-means++", args)
    scale = args.target_n / args.n
    extrapolated = seed_pp * scale / ((seed_par - cand) * scale + cand)
    print(f"\nmedians of {args.repeats}; load average now {table.load_average()}")
    print(
        f"  k-means|| seeding + 1 step   {fit_par:7.2f} s  (seeding {seed_par:.2f} s: "
        f"{passes} passes, k-means++ on its {n_candidates} candidates {cand:.2f} s)"
    )
    print(f"  k-means++ seeding + 1 step   {fit_pp:7.2f} s  (seeding {seed_pp:.2f} s)")
    print(f"target: k-means|| seeding + 1 step vs k-means++'s: {fit_pp / fit_par:.2f}x faster "
          f"measured / >= 5x needed")  # fmt: skip
    print(f"target: final inertia k-means|| / k-means++ (max_iter {args.max_iter}, tol "
          f"{args.tol:g}): {ratio:.4f} "
          f"measured / <= 1.01 needed")  # fmt: skip
    print(f"target: passes over X: {passes} measured / <= 10 needed")
    print(f"target: seeding alone extrapolated to {args.target_n} rows: {extrapolated:.1f}x "
          f"faster measured / >= 5x needed")  # fmt: skip


if __name__ == "__main__":
    main()
