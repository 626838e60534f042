"""Anonymous memory a fit adds on a memory-mapped file (file-backed pages are not counted).

    python bench/studies/memmap_memory.py [hard|softmax|entmax15]

Writes a 2e6 x 32 float32 file (256 MB) to /tmp once, fits SoftKMeans(16, max_iter=10) on
np.memmap of it, and prints the peak growth of RssAnon (sampled every 5 ms) as a fraction
of the file.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np

from softkmeans import SoftKMeans

PATH, N, D = "/tmp/softkmeans_memmap_bench.f32", 2_000_000, 32


def rss_anon():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon")


def main():
    if not os.path.exists(PATH):
        rng = np.random.default_rng(0)
        mm = np.memmap(PATH, dtype=np.float32, mode="w+", shape=(N, D))
        for s in range(0, N, 200_000):
            block = rng.normal(size=(200_000, D)) + rng.integers(0, 8, size=(200_000, 1))
            mm[s : s + 200_000] = block.astype(np.float32)
        mm.flush()
        del mm
    X = np.memmap(PATH, dtype=np.float32, mode="r", shape=(N, D))
    kind = sys.argv[1] if len(sys.argv) > 1 else "hard"
    peak, stop = [0], [False]

    def sample():
        while not stop[0]:
            peak[0] = max(peak[0], rss_anon())
            time.sleep(0.005)

    base = rss_anon()
    t = threading.Thread(target=sample)
    t.start()
    t0 = time.perf_counter()
    SoftKMeans(16, assignment=kind, random_state=0, max_iter=10).fit(X)
    stop[0] = True
    t.join()
    growth = peak[0] - base
    print(
        f"{kind}: file {X.nbytes / 1e6:.0f} MB, anonymous growth {growth / 1e6:.0f} MB "
        f"= {growth / X.nbytes:.1%}, {time.perf_counter() - t0:.1f} s"
    )


if __name__ == "__main__":
    main()
