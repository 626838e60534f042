"""The bf16 candidate pass (issue 23 item 2): the hard step's effective rate with the pass
on and off against the same-run sgemm.

The hard step (``block_stats``, kind hard, 2 n k d flops counted whether or not the pass
skips them) runs with the pass on, with it off, and a square float32 sgemm through NumPy's
BLAS, interleaved (``peers.interleaved``: round-robin, medians). Target: on / sgemm >= 1.6
at d >= 64, k >= 256 (the pass engages from k = 512). Each row also gives the mean
candidates a row (from the bound entry on a sample of rows) and checks that on and off gave
the same bytes.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/bf16.py [--quick]

``bench/compare.py --only bf16`` runs the same rows in its table. ``--descriptors N`` adds a
row on N of ``bench/ivf.py``'s image-patch descriptors at k = 4096 (centroids: k of the rows),
which keep hundreds of candidates a row: there the pass costs about twice the float path
(see bench/README.md, issue 24).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers as P  # noqa: E402
import table  # noqa: E402

from softkmeans import _core, _native  # noqa: E402

# Where the pass engages (softkmeans/config.hpp: d >= 64, k >= 512, k d >= 65536).
SHAPES = [(200_000, 64, 1024), (200_000, 128, 512), (100_000, 256, 1024)]
TARGET = 1.6


def _bytes(result):
    """Every array and number of a result, as bytes, in order."""
    if isinstance(result, (tuple, list)):
        return b"".join(_bytes(r) for r in result)
    return np.asarray(result).tobytes()


def mean_candidates(X, C, rows=2048):
    """Mean candidates a row of the pass on the first `rows` rows."""
    got = _core._bf16_distance_bounds(X[:rows], C)
    return float("nan") if got is None else float(got[2].sum(axis=1).mean())


def rows_bf16(shapes, threads, repeats, quick, data=None):
    """(shape, on GFLOP/s, off GFLOP/s, sgemm GFLOP/s, candidates a row, same bytes) per shape
    (blobs, or the rows `data` (n, d) with k of them drawn as centroids: shapes [(n, d, k)])."""
    gemm, gemm_flops = P.sgemm_call(2048 if quick else 4096, threads)
    out = []
    for n, d, k in shapes:
        X = P.make_blobs(n, d, k, np.float32) if data is None else data
        C = P.initial_centroids(X, k)
        w = np.ones(n)

        def step(on, X=X, C=C, w=w):
            def run():
                _native.set_bf16_enabled(on)
                return _native.block_stats(X, C, "hard", 1.0, w, threads)

            return run

        same = _bytes(step(True)()) == _bytes(step(False)())
        t = P.interleaved({"on": step(True), "off": step(False), "sgemm": gemm}, repeats=repeats)
        flops = 2.0 * n * k * d
        on, off = flops / t["on"].median / 1e9, flops / t["off"].median / 1e9
        sgemm = gemm_flops / t["sgemm"].median / 1e9
        out.append(((n, d, k), on, off, sgemm, mean_candidates(X, C), same))
    _native.set_bf16_enabled(True)
    return out


def compare_bf16(args):
    """compare.py's bf16 stage: one table row a shape, on / sgemm against TARGET (the note
    gives the rate without the pass, the candidates a row and whether the bits agreed)."""
    if not _native.bf16_available():
        print("# bf16: no AVX512_BF16 on this CPU/build, skipped", flush=True)
        return []
    shapes = [(n // (10 if args.quick else 1), d, k) for n, d, k in SHAPES]
    rows = []
    for shape, on, off, sgemm, cand, same in rows_bf16(shapes, args.threads, args.repeats,
                                                       args.quick):  # fmt: skip
        rows.append(table.Row("hard step, bf16 pass vs same-run sgemm", shape, "float32", on,
                              sgemm, "GFLOP/s", f">= {TARGET}x", on / sgemm,
                              on / sgemm >= TARGET and same,
                              f"off {off:.0f} GFLOP/s ({on / off:.2f}x), {cand:.1f} "
                              f"candidates a row, same bits {same}"))  # fmt: skip
        print(table.format_row(rows[-1]), flush=True)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="n / 10, sgemm 2048^3")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--descriptors", type=int, default=0, metavar="N",
                   help="also N of bench/ivf.py's descriptors at k = 4096")  # fmt: skip
    args = p.parse_args(argv)
    with open("/proc/loadavg") as f:
        print("# loadavg " + " ".join(f.read().split()[:3]))
    gemm = P.gemm_rate(np.float32, n_threads=args.threads, size=2048 if args.quick else 4096)
    print(table.machine_line(gemm, args.threads))
    compare_bf16(args)
    if args.descriptors:
        # Rows that keep many candidates (bench/ivf.py's image-patch descriptors at k =
        # 4096): the pass should cost about what the float path costs, not win.
        from ivf import Descriptors

        X = Descriptors().rows(args.descriptors)
        for shape, on, off, _, cand, same in rows_bf16(
            [(X.shape[0], X.shape[1], 4096)], args.threads, args.repeats, args.quick, data=X
        ):
            print(f"# descriptors {shape}: bf16 on {on:.0f} GFLOP/s, off {off:.0f} GFLOP/s "
                  f"(on / off {on / off:.2f}), {cand:.1f} candidates a row, same bits {same}",
                  flush=True)  # fmt: skip
    print(f"# ratio: effective GFLOP/s (2 n k d over the median time) / same-run sgemm; "
          f"target >= {TARGET}")  # fmt: skip


if __name__ == "__main__":
    main()
