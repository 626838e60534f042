"""Annealing that does not lose (issue 25, item 4): the annealed J against the best of ten
k-means++ runs of scikit-learn, on the real data sets `softkmeans reproduce` loads (as it
loads them, at its k) and on unscaled wine (the issue's case).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/annealing_quality.py

Columns: J of `SoftKMeans(k, anneal={})` (split-merge end, the default) and of
`anneal={"split_merge": False}` (the annealed branch alone), each divided by the best J of
`KMeans(k, n_init=10)`; the seconds of the annealing fit and of the ten k-means++ runs
(indicative: the machine is shared, see the load average printed with them).
"""

from __future__ import annotations

import time

import numpy as np
from peers import gemm_rate
from sklearn.cluster import KMeans
from sklearn.datasets import load_wine

import softkmeans
from softkmeans import SoftKMeans
from softkmeans.experiments import datasets as rd

NAMES = ("iris", "wine", "breast-cancer", "digits")


def sets():
    out = [(n, rd.load(n).X, rd.ks_for(n, False)) for n in NAMES]
    return out + [("wine-unscaled", load_wine().data, (2, 3, 5))]


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main():
    print(f"# softkmeans {softkmeans.__version__} {softkmeans.build_info()}")
    print(f"# load average {open('/proc/loadavg').read().split()[:3]}")
    print(f"# sgemm {gemm_rate(np.float32):.1f} GFLOP/s (2 threads, same run)")
    columns = ("data set", "k", "anneal / best of 10", "without split-merge / best", "anneal s")
    print("| " + " | ".join(columns) + " | 10 x k-means++ s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, X, ks in sets():
        for k in ks:
            km = KMeans(k, n_init=10, random_state=0)
            best, t_km = _timed(lambda km=km, X=X: km.fit(X).inertia_)
            da = SoftKMeans(k, anneal={}, random_state=0)
            m, t_da = _timed(lambda da=da, X=X: da.fit(X))
            plain = SoftKMeans(k, anneal={"split_merge": False}, random_state=0).fit(X)
            print(
                f"| {name} | {k} | {m.inertia_ / best:.5f} | {plain.inertia_ / best:.5f} | "
                f"{t_da:.2f} | {t_km:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
