"""The command line's CSV loading (`softkmeans.reading`) against pandas.read_csv.

    python bench/csv_load.py [--rows 1000000] [--cols 16] [--dir /tmp]

Writes an (n, d) float64 CSV with a header (pandas' to_csv, index=False), then loads it
in a fresh process per reader and prints the wall time and the peak resident memory above
the process's footprint after its imports, with the target: at most ~2x pandas.read_csv
in time and memory.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

READERS = {
    "pandas.read_csv": "import pandas as pd; f = lambda p: pd.read_csv(p).to_numpy()",
    "softkmeans (pandas.read_csv)": "import pandas; from softkmeans.reading import read_table; "
    "f = lambda p: read_table(p).X",
    "softkmeans (pyarrow.csv, no pandas)": "import sys; sys.modules['pandas'] = None; "
    "import pyarrow.csv; from softkmeans.reading import read_table; "
    "f = lambda p: read_table(p).X",
    "softkmeans (numpy.loadtxt)": "import sys; sys.modules['pyarrow'] = None; "
    "sys.modules['pandas'] = None; from softkmeans.reading import read_table; "
    "f = lambda p: read_table(p).X",
}

CHILD = """
import resource, time, numpy as np
{setup}
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter(); X = f({path!r}); t = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(t, (peak - base) / 1024, X.shape[0], X.shape[1])
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--cols", type=int, default=16)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--skip-loadtxt", action="store_true")
    args = ap.parse_args()
    import numpy as np
    import pandas as pd

    path = os.path.join(args.dir, f"softkmeans_bench_{args.rows}x{args.cols}.csv")
    if not os.path.exists(path):
        X = np.random.default_rng(0).normal(size=(args.rows, args.cols))
        pd.DataFrame(X, columns=[f"f{j}" for j in range(args.cols)]).to_csv(path, index=False)
    size = os.path.getsize(path) / 2**20
    data = args.rows * args.cols * 8 / 2**20
    print(f"{path}: {size:.0f} MiB on disk, {data:.0f} MiB as float64")
    ref = None
    for name, setup in READERS.items():
        if args.skip_loadtxt and "loadtxt" in name:
            continue
        out = subprocess.run(
            [sys.executable, "-c", CHILD.format(setup=setup, path=path)],
            capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        t, mem = float(out[0]), float(out[1])
        ref = ref or (t, mem)
        print(
            f"{name:34s} {t:6.2f} s ({t / ref[0]:4.2f}x, needed <= 2x)  "
            f"peak +{mem:6.0f} MiB ({mem / ref[1]:4.2f}x, needed <= 2x)"
        )


if __name__ == "__main__":
    main()
