"""The default width of the soft kinds (issue 36, item 12): calibration and speed.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/default_sigma.py

Calibration: on iris, wine, digits (standardized as `softkmeans reproduce` loads them) and
make_blobs (4 centres, d = 8), with k the number of classes, each model is fitted on a
seeded stratified half, its clusters are matched to the classes on that half (Hungarian,
`calibration.held_out`) and the held-out half's matched probabilities are scored by
log-loss (clipped at 1e-15) and mean largest probability. Models: the default
SoftKMeans(k) (softmax, sigma=None), the old default (sigma = 0.1 x critical_sigma, given
as a number), sigma="auto" spelled out, and GaussianMixture(covariance_type="spherical"),
all n_init=10. Five splits, means printed.

Speed: the defaults as typed, SoftKMeans(k) against KMeans(k), interleaved, medians of
3, float32 blobs (the README's "defaults vs sklearn defaults" shapes).
"""

from __future__ import annotations

import time

import numpy as np
from calibration import held_out
from sklearn import datasets as skd
from sklearn.cluster import KMeans
from sklearn.mixture import GaussianMixture
from sklearn.model_selection import train_test_split

import softkmeans
from softkmeans import SoftKMeans
from softkmeans.experiments import datasets as rd

SPLITS = 5
SPEED_SHAPES = [(1_000_000, 16, 64), (300_000, 64, 256)]  # the README's "defaults" rows


def labelled():
    for name, loader in {"iris": skd.load_iris, "wine": skd.load_wine,
                         "digits": skd.load_digits}.items():  # fmt: skip
        yield name, rd.load(name).X, loader().target
    X, y = skd.make_blobs(2000, n_features=8, centers=4, cluster_std=2.5, random_state=0)
    yield "make_blobs", X, y


def models(k, seed, X):
    old = 0.1 * softkmeans.critical_sigma(X)
    return {
        "SoftKMeans(k) (the default)": SoftKMeans(k, n_init=10, random_state=seed),
        "sigma=0.1 x critical (the old default)": SoftKMeans(
            k, sigma=old, n_init=10, random_state=seed
        ),
        "sigma='auto'": SoftKMeans(k, sigma="auto", n_init=10, random_state=seed),
        "GaussianMixture spherical": GaussianMixture(
            k, covariance_type="spherical", n_init=10, random_state=seed
        ),
    }


def calibration():
    print("| data set | model | held-out log-loss | mean max probability |")
    print("| --- | --- | ---: | ---: |")
    for name, X, y in labelled():
        k = len(np.unique(y))
        results = {}
        for seed in range(SPLITS):
            Xa, _, _, _ = train_test_split(X, y, test_size=0.5, stratify=y, random_state=seed)
            for label, model in models(k, seed, Xa).items():
                results.setdefault(label, []).append(held_out(model, X, y, seed, k))
        for label, values in results.items():
            loss, top = np.mean(values, axis=0)
            print(f"| {name} | {label} | {loss:.3f} | {top:.3f} |", flush=True)


def speed():
    print("| n, d, k (float32 blobs) | SoftKMeans(k) | KMeans(k) | speed-up | iterations | "
          "sigma=None (old default) | its speed-up |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: |")
    for n, d, k in SPEED_SHAPES:
        X, _ = skd.make_blobs(n, n_features=d, centers=k, random_state=0)
        X = X.astype(np.float32)
        ours, peer, old = [], [], []
        for _ in range(3):
            start = time.perf_counter()
            model = SoftKMeans(k, random_state=0).fit(X)
            ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            ref = KMeans(k, random_state=0).fit(X)
            peer.append(time.perf_counter() - start)
            start = time.perf_counter()
            SoftKMeans(k, sigma=None, random_state=0).fit(X)
            old.append(time.perf_counter() - start)
        a, b, c = (float(np.median(t)) for t in (ours, peer, old))
        print(f"| {n:,}, {d}, {k} | {a:.2f} s | {b:.2f} s | {b / a:.2f}x | "
              f"{model.n_iter_} vs {ref.n_iter_} | {c:.2f} s | {b / c:.2f}x |",
              flush=True)  # fmt: skip


def main():
    import sys

    print(f"# softkmeans {softkmeans.__version__}; load average "
          f"{open('/proc/loadavg').read().split()[:3]}")  # fmt: skip
    if "--speed-only" not in sys.argv:
        calibration()
    speed()


if __name__ == "__main__":
    main()
