"""The softmax step (`_native.block_stats(X, C, "softmax", sigma, w, 1)`, sigma^2 =
lambda_max / 10) of this build against the same call of another build's compiled core,
loaded beside it in this process, and against this build's hard step: medians of the CPU
time of interleaved calls at one thread (the machine's other load moves wall times; one
thread needs no second time slice). Prints ns a row, softmax / hard for both builds, new /
old, and whether the two builds' outputs are bitwise equal (else their largest relative
difference). The before/after figures of bench/README.md's softmax paragraph.

    python bench/studies/softmax_ab.py OLD_CORE_SO [N,D,K ...] [--repeats R]
    python bench/studies/softmax_ab.py /tmp/main/_core.cpython-311-x86_64-linux-gnu.so 2e5,16,64

OLD_CORE_SO: a `_core*.so` built from another commit (e.g. copied from main's
python/softkmeans before building this branch).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
from table import blob_data as _data  # noqa: E402  (the data of compare.py's softmax rows)

import softkmeans  # noqa: E402
from softkmeans import _native  # noqa: E402

SHAPES = ["2e5,16,64", "5e4,16,1024", "1e5,64,256", "2e4,256,1024"]


def load_core(path):
    # Its own module name: under softkmeans._core the import system hands back the
    # module already loaded.
    spec = importlib.util.spec_from_file_location("softmax_ab_old._core", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def max_relative_difference(a, b):
    worst = 0.0
    for u, v in zip(a, b, strict=True):
        u, v = np.asarray(u, dtype=float), np.asarray(v, dtype=float)
        if u.size:
            scale = np.maximum(np.abs(u), np.finfo(float).tiny)
            worst = max(worst, float(np.max(np.abs(u - v) / scale)))
    return worst


def compare(old, n, d, k, dtype, repeats):
    X, C = _data(n, d, k, dtype)
    sigma = float(softkmeans.critical_sigma(X)) / np.sqrt(10.0)
    w = np.ones(n)
    calls = {
        "hard": lambda: _native.block_stats(X, C, "hard", 1.0, w, 1),
        "old": lambda: old.block_stats(X, C, "softmax", sigma, w, 1, True, False, False)[:6],
        "new": lambda: _native.block_stats(X, C, "softmax", sigma, w, 1)[0],
    }
    outputs = {name: f() for name, f in calls.items()}  # also the warm-up
    times = {name: [] for name in calls}
    for _ in range(repeats):
        for name, f in calls.items():
            t0 = time.process_time()
            f()
            times[name].append(time.process_time() - t0)
    t = {name: float(np.median(v)) for name, v in times.items()}
    diff = max_relative_difference(outputs["old"], tuple(outputs["new"]))
    same = "bitwise equal" if diff == 0.0 else f"max relative difference {diff:.1e}"
    print(
        f"({n}, {d}, {k}) {np.dtype(dtype).name}: ns a row hard {t['hard'] * 1e9 / n:.0f}, "
        f"softmax old {t['old'] * 1e9 / n:.0f} new {t['new'] * 1e9 / n:.0f}; softmax / hard "
        f"old {t['old'] / t['hard']:.2f}x new {t['new'] / t['hard']:.2f}x; new / old "
        f"{t['new'] / t['old']:.3f}; {same}",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old_core")
    parser.add_argument("shapes", nargs="*", default=SHAPES)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    old = load_core(args.old_core)
    for shape in args.shapes:
        n, d, k = (int(float(v)) for v in shape.split(","))
        for dtype in (np.float32, np.float64):
            compare(old, n, d, k, dtype, args.repeats)


if __name__ == "__main__":
    main()
