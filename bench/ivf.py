"""IVF-scale K-Means on real descriptors (issue 24): softkmeans against faiss-cpu and
scikit-learn in one process, each target printed as measured / needed.

The descriptors are made offline from scikit-image's bundled photographs (nothing is
downloaded): 8 x 8 RGB patches (grey images repeated over the channels) at a random
position, scale (1 or 1/2) and one of the 8 flips/rotations, contrast-normalized
(Coates & Ng: minus the patch mean, over sqrt(variance + 10) in 0-255 units), then
projected on the 128 leading principal axes of 50,000 such patches: d = 128 float32,
rows drawn from a fixed seed (the same data in every run).

Rows (``--cases``, comma-separated):

- ``lloyd``: k = 4096 on 1e6 x 128, 10 iterations from the same initial centroids (random
  rows), all points: ``SoftKMeans(assignment="hard")`` vs faiss ``Kmeans.train`` (target
  5x) and scikit-learn ``KMeans`` (target 10x); J within 0.5 % of faiss's.
- ``sampled``: k = 16,384 on 4.2e6 x 128, 25 iterations, 256 points per centroid
  (``max_points_per_centroid=256``, faiss's default sampling): vs faiss (target 5x).
- ``memmap``: a 1e7 x 128 float32 file (5.1 GB, written once to ``--dir``), k = 16,384:
  sampled training (256 per centroid) plus the exact labels of every row: wall time and
  the peak growth of anonymous memory (RssAnon) against the bound n_fit x (t + 1) x 8 +
  O(k d) + 10 % of the file.
- ``huge`` (only when named): k = 65,536 on 16.8M x 128, 25 iterations plus the exact
  assignment: under 30 minutes.

``--scale s`` divides every n and k by s (the points per centroid stay); ``--quick`` is
a seconds-long smoke run (n / 200, k / 256). ``--faiss-iters m`` times faiss in the
``sampled`` row over 1 and m iterations and extrapolates its 25 (each of its iterations
computes every distance; at full size its 25 take over an hour here).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/ivf.py --cases lloyd
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/ivf.py --scale 4

Every fit gets ``--threads`` threads (2: the target machine). The machine line names the
CPU, its vector width and the same-run sgemm rate; the load average is printed beside
the figures (a loaded machine's figures are indicative).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers as P  # noqa: E402
import table  # noqa: E402

import softkmeans  # noqa: E402
from softkmeans import SoftKMeans  # noqa: E402
from softkmeans.fit.bounded import BoundedHardPass  # noqa: E402

PATCH = 8
D = 128
PHOTOGRAPHS = (
    "astronaut", "camera", "chelsea", "coffee", "rocket", "brick", "grass", "gravel",
    "coins", "moon", "page", "text", "clock", "hubble_deep_field", "immunohistochemistry",
    "retina", "cat",
)  # fmt: skip


# --------------------------------------------------------------------------------------
# Descriptors
# --------------------------------------------------------------------------------------


def _photographs(names=PHOTOGRAPHS):
    """The bundled photographs as float32 (H, W, 3) arrays in 0-255, each also at half
    size (a second scale of patches)."""
    from skimage import data
    from skimage.transform import rescale

    images = []
    for name in names:
        im = np.asarray(getattr(data, name)(), dtype=np.float32)
        if im.ndim == 2:
            im = np.repeat(im[:, :, None], 3, axis=2)
        im = im[:, :, :3]
        half = rescale(im, 0.5, channel_axis=2, anti_aliasing=True, preserve_range=True)
        images += [im, half.astype(np.float32)]
    return images


class Descriptors:
    """Contrast-normalized 8 x 8 RGB patches projected to d = 128 (see the module); the
    axes from `sample` patches. The tests take a few photographs and a small sample (the
    bench's 17 and 50,000 take about 20 s on a loaded 2-core machine)."""

    def __init__(self, seed=0, photographs=PHOTOGRAPHS, sample=50_000):
        self.images = _photographs(photographs)
        sizes = np.array([(h - PATCH + 1) * (w - PATCH + 1) for h, w, _ in
                          (im.shape for im in self.images)], dtype=np.float64)  # fmt: skip
        self.p_image = sizes / sizes.sum()
        self.seed = seed
        sample = self._patches(np.random.default_rng(seed + 1), sample)
        mean = sample.mean(axis=0)
        _, _, vt = np.linalg.svd(sample - mean, full_matrices=False)
        self.mean, self.axes = mean, np.ascontiguousarray(vt[:D].T)  # (192, 128)

    def _patches(self, rng, m):
        """m contrast-normalized patches (m, 192) float64."""
        which = rng.choice(len(self.images), size=m, p=self.p_image)
        out = np.empty((m, PATCH, PATCH, 3), dtype=np.float64)
        for i in np.unique(which):
            im = self.images[i]
            rows = np.flatnonzero(which == i)
            y = rng.integers(0, im.shape[0] - PATCH + 1, size=rows.size)
            x = rng.integers(0, im.shape[1] - PATCH + 1, size=rows.size)
            grid = np.arange(PATCH)
            out[rows] = im[y[:, None, None] + grid[None, :, None], x[:, None, None] + grid]
        turn = rng.integers(0, 8, size=m)  # the 8 flips / rotations
        for t in range(1, 8):
            sel = turn == t
            p = np.rot90(out[sel], k=t % 4, axes=(1, 2))
            out[sel] = p[:, :, ::-1] if t >= 4 else p
        flat = out.reshape(m, -1)
        flat -= flat.mean(axis=1, keepdims=True)
        flat /= np.sqrt(flat.var(axis=1, keepdims=True) + 10.0)
        return flat

    def rows(self, n, out=None, chunk=200_000):
        """(n, 128) float32 descriptors (into `out`, e.g. a memmap, chunk by chunk)."""
        out = np.empty((n, D), dtype=np.float32) if out is None else out
        rng = np.random.default_rng(self.seed)
        for s in range(0, n, chunk):
            e = min(n, s + chunk)
            out[s:e] = (self._patches(rng, e - s) - self.mean) @ self.axes
        return out


# --------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------


def rss_anon():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon"):
                return int(line.split()[1]) * 1024
    return 0


class PeakAnon:
    """The peak growth of RssAnon while the block runs (sampled every 5 ms)."""

    def __enter__(self):
        self.base = self.peak = rss_anon()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop:
            self.peak = max(self.peak, rss_anon())
            time.sleep(0.005)

    def __exit__(self, *exc):
        self._stop = True
        self._thread.join()
        self.growth = self.peak - self.base


def ours(X, C0, *, max_iter, threads, max_points_per_centroid=None, verbose=0):
    """The whole SoftKMeans(hard) fit from C0, timed as a user times it."""

    def run():
        model = SoftKMeans(
            C0.shape[0], assignment="hard", init=C0, max_iter=max_iter, tol=0.0,
            n_threads=threads, random_state=0, max_points_per_centroid=max_points_per_centroid,
            verbose=verbose,
        )  # fmt: skip
        t0 = time.perf_counter()
        model.fit(X)
        seconds = time.perf_counter() - t0
        return P.Timed(seconds, {"model": model, "J_last": float(model.history_["J"][-1])})

    return run


def _line(name, measured, needed, unit, ok, note=""):
    print(f"| {name} | {measured} | {needed} | {unit} | {'yes' if ok else 'NO'} | {note} |",
          flush=True)  # fmt: skip


def _load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def case_lloyd(desc, n, k, args):
    X = desc.rows(n)
    C0 = X[np.random.default_rng(1).choice(n, size=k, replace=False)].copy()
    cases = {"softkmeans": ours(X, C0, max_iter=10, threads=args.threads),
             "faiss": P.faiss_fit(X, C0, max_iter=10, n_threads=args.threads)}  # fmt: skip
    if not args.no_sklearn:
        cases["sklearn"] = P.sklearn_fit(X, C0, max_iter=10, n_threads=args.threads)
    t = P.interleaved(cases, repeats=args.repeats, warmup=0)
    mine = t["softkmeans"].median
    shape = f"k={k} n={n} d={D} 10 it, load {_load()}"
    ratio = t["faiss"].median / mine
    _line(f"lloyd vs faiss ({shape})", f"{ratio:.2f}x ({t['faiss'].median:.1f} s / "
          f"{mine:.1f} s)", "5x", "", ratio >= 5)  # fmt: skip
    if "sklearn" in t:
        ratio = t["sklearn"].median / mine
        _line(f"lloyd vs scikit-learn ({shape})", f"{ratio:.2f}x ({t['sklearn'].median:.1f} s "
              f"/ {mine:.1f} s)", "10x", "", ratio >= 10)  # fmt: skip
    J, J_faiss = t["softkmeans"].extra["J_last"], t["faiss"].extra["obj_last"]
    gap = J / J_faiss - 1
    _line(f"lloyd J vs faiss's ({shape})", f"{gap:+.3%}", "within 0.5%", "", abs(gap) <= 0.005)


def case_sampled(desc, n, k, args):
    X = desc.rows(n)
    C0 = X[np.random.default_rng(1).choice(n, size=k, replace=False)].copy()
    m = args.faiss_iters
    cases = {
        "softkmeans": ours(X, C0, max_iter=25, threads=args.threads, max_points_per_centroid=256),
        "faiss": P.faiss_fit(X, C0, max_iter=m or 25, n_threads=args.threads,
                             max_points_per_centroid=256),
    }  # fmt: skip
    if m:
        cases["faiss, 1 iteration"] = P.faiss_fit(
            X, C0, max_iter=1, n_threads=args.threads, max_points_per_centroid=256
        )
    t = P.interleaved(cases, repeats=args.repeats, warmup=0)
    mine = t["softkmeans"].median
    faiss_s, note = t["faiss"].median, "ours includes labelling every row"
    if m:
        # Every faiss iteration computes all n k distances: its time is its setup (the
        # sample, the first assignment) plus a constant per iteration, fitted through the
        # 1- and m-iteration runs (scaling the m-iteration time alone would count the
        # setup 25 / m times, in our favour).
        one = t["faiss, 1 iteration"].median
        faiss_s = one + (25 - 1) * (faiss_s - one) / (m - 1)
        note += f"; faiss 1 it {one:.1f} s, {m} it {t['faiss'].median:.1f} s, 25 it extrapolated"
    ratio = faiss_s / mine
    _line(f"sampled vs faiss (k={k} n={n} 256/centroid 25 it, load {_load()})",
          f"{ratio:.2f}x ({faiss_s:.1f} s / {mine:.1f} s)", "5x", "", ratio >= 5, note)  # fmt: skip


def case_memmap(desc, n, k, args, *, max_iter=25, limit_s=None, name="memmap"):
    path = os.path.join(args.dir, f"softkmeans_ivf_{n}x{D}.f32")
    if not os.path.exists(path) or os.path.getsize(path) != n * D * 4:
        t0 = time.perf_counter()
        mm = np.memmap(path + ".part", dtype=np.float32, mode="w+", shape=(n, D))
        desc.rows(n, out=mm)
        mm.flush()
        del mm
        os.replace(path + ".part", path)
        print(f"# wrote {path} ({n * D * 4 / 1e9:.1f} GB) in {time.perf_counter() - t0:.0f} s",
              flush=True)  # fmt: skip
    X = np.memmap(path, dtype=np.float32, mode="r", shape=(n, D))
    C0 = np.array(X[np.sort(np.random.default_rng(1).choice(n, size=k, replace=False))])
    run = ours(X, C0, max_iter=max_iter, threads=args.threads, max_points_per_centroid=256,
               verbose=args.verbose)  # fmt: skip
    with PeakAnon() as mem:
        timed = run()
    n_fit = min(n, 256 * k)
    bound = n_fit * (BoundedHardPass.MAX_GROUPS + 1) * 8 + 64 * k * D * 8 + 0.1 * X.nbytes
    shape = f"k={k} n={n} {max_iter} it, load {_load()}"
    _line(f"{name}: anonymous growth ({shape})", f"{mem.growth / 1e9:.2f} GB",
          f"<= {bound / 1e9:.2f} GB", "", mem.growth <= bound,
          f"{mem.growth / X.nbytes:.1%} of the file")  # fmt: skip
    ok = limit_s is None or timed.seconds <= limit_s
    _line(
        f"{name}: wall, sampled fit + every row labelled ({shape})",
        f"{timed.seconds:.1f} s",
        "-" if limit_s is None else f"<= {limit_s:.0f} s",
        "",
        ok,
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default="lloyd,sampled,memmap",
                   help="comma-separated: lloyd, sampled, memmap, huge")  # fmt: skip
    p.add_argument("--scale", type=int, default=1, help="divide every n and k by this")
    p.add_argument("--quick", action="store_true", help="a seconds-long smoke run")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=1, help="interleaved rounds (median)")
    p.add_argument("--no-sklearn", action="store_true", help="skip scikit-learn (slowest)")
    p.add_argument("--dir", default=tempfile.gettempdir(), help="where the memmap files go")
    p.add_argument("--verbose", type=int, default=0)
    p.add_argument("--faiss-iters", type=int, default=0,
                   help="sampled: time faiss over 1 and this many (>= 2) iterations and "
                   "extrapolate its 25 (0: run its 25)")  # fmt: skip
    args = p.parse_args(argv)
    if args.faiss_iters == 1 or args.faiss_iters < 0:
        p.error("--faiss-iters must be 0 or at least 2")
    n_scale, k_scale = (200, 256) if args.quick else (args.scale, args.scale)
    sgemm = P.gemm_rate(np.float32, n_threads=args.threads, size=4096)
    print(f"# softkmeans {softkmeans.__version__} {softkmeans.build_info()}")
    print(table.machine_line(sgemm, args.threads))
    print(f"# load average {_load()}")
    print("| target | measured | needed | unit | met | note |")
    desc = Descriptors()
    cases = set(args.cases.split(","))
    if "lloyd" in cases:
        case_lloyd(desc, 1_000_000 // n_scale, 4096 // k_scale, args)
    if "sampled" in cases:
        case_sampled(desc, 4_200_000 // n_scale, 16_384 // k_scale, args)
    if "memmap" in cases:
        case_memmap(desc, 10_000_000 // n_scale, 16_384 // k_scale, args)
    if "huge" in cases:
        case_memmap(desc, 16_800_000 // n_scale, 65_536 // k_scale, args, max_iter=25,
                    limit_s=1800, name="huge")  # fmt: skip


if __name__ == "__main__":
    main()
