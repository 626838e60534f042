"""A labelling pass over a memory-mapped file not in the page cache, with and without
the read-ahead advice of `softkmeans.sources.readahead` (same blocks either way).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/studies/readahead.py [GB] [K]

Writes a GB-sized n x 128 float32 file to /tmp once; before each pass the file's pages
are dropped from the page cache (``posix_fadvise(POSIX_FADV_DONTNEED)`` on the clean
file); then one `labels` pass at K centroids (default 64: little compute per byte, where
the overlap matters most) in 64 MiB blocks, the next block advised or not. Interleaved,
3 rounds, medians; prints the ratio and the load average.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

from softkmeans.sources import ArraySource, readahead, reads

D = 128


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main():
    gb = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    n = int(gb * 1e9) // (D * 4)
    path = f"/tmp/softkmeans_readahead_{n}x{D}.f32"
    if not os.path.exists(path):
        mm = np.memmap(path, dtype=np.float32, mode="w+", shape=(n, D))
        rng = np.random.default_rng(0)
        for s in range(0, n, 500_000):
            e = min(n, s + 500_000)
            mm[s:e] = rng.standard_normal(size=(e - s, D), dtype=np.float32)
        mm.flush()
        del mm
    X = np.memmap(path, dtype=np.float32, mode="r", shape=(n, D))
    C = np.array(X[:k])
    readahead.MIN_FILE_BYTES = 0
    times = {"advised": [], "unadvised": []}
    for _ in range(3):
        for name in times:
            readahead.FileBlocks.ADVISE = name == "advised"
            source = ArraySource(X, n_threads=2, checked=True)
            drop_cache(path)
            t0 = time.perf_counter()
            reads.labels(source, C)
            times[name].append(time.perf_counter() - t0)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    adv, un = (statistics.median(times[k]) for k in ("advised", "unadvised"))
    print(
        f"{X.nbytes / 1e9:.1f} GB, k={k}: advised {adv:.2f} s ({X.nbytes / adv / 1e9:.2f} GB/s), "
        f"unadvised {un:.2f} s ({X.nbytes / un / 1e9:.2f} GB/s): {un / adv:.2f}x; load {load}"
    )


if __name__ == "__main__":
    main()
