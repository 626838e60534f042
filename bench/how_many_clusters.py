"""How many clusters: the phase diagram's suggestion against silhouette, the gap statistic
and the BIC of a Gaussian mixture (issue 25, item 3).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/how_many_clusters.py

For each labelled data set (the real ones `softkmeans reproduce` loads, as it loads them,
with their labels from the same package; and synthetic mixtures of known k with clusters
of unequal size and spread), every method chooses k in [2, 10] and clusters with it:

- phase: `softkmeans.SoftKMeans("auto", assignment="hard")` (the most persistent k of the
  phase diagram, then a K-Means fit with it);
- phase+anneal: the same k, fitted by `anneal={}` (deterministic annealing with its
  split-merge end) instead of one k-means++ run;
- silhouette: the k of the largest silhouette of scikit-learn `KMeans(k, n_init=3)`;
- gap: Tibshirani, Walther & Hastie (2001), B = 5 uniform references in the bounding
  box of the data's principal axes, the smallest k with gap(k) >= gap(k + 1) - s(k + 1)
  (KMeans n_init=1 on the references, 3 on the data);
- BIC: `GaussianMixture(k, covariance_type="full")`, smallest BIC, its own labels.

Printed: the chosen k and the adjusted Rand index (ARI) of that method's clustering
against the labels, per data set, and the seconds each method took (machine loaded: the
times are indicative, printed beside the load average and an sgemm rate of the same run).
"""

from __future__ import annotations

import time

import numpy as np
import table
from peers import gemm_rate
from sklearn import datasets as skd
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score, silhouette_score
from sklearn.mixture import GaussianMixture

import softkmeans
from softkmeans import SoftKMeans
from softkmeans.experiments import datasets as rd

KS = range(2, 11)


def real_sets():
    """(name, X as reproduce loads it, labels, true k)."""
    labels = {
        "iris": skd.load_iris().target,
        "wine": skd.load_wine().target,
        "breast-cancer": skd.load_breast_cancer().target,
        "digits": skd.load_digits().target,
    }
    out = []
    for name, y in labels.items():
        X = rd.load(name).X
        assert X.shape[0] == y.shape[0]  # no rows dropped or subsampled for these
        out.append((name, X, y))
    out.append(("wine-unscaled", skd.load_wine().data, skd.load_wine().target))
    return out


def mixture(name, sizes, spreads, d, separation, seed):
    """Gaussian clusters of the given sizes and spreads, centres `separation` apart or more."""
    rng = np.random.default_rng(seed)
    k = len(sizes)
    centres = [rng.normal(size=d) * separation]
    while len(centres) < k:
        c = rng.normal(size=d) * separation
        if min(np.linalg.norm(c - e) for e in centres) >= separation:
            centres.append(c)
    X = np.vstack([c + s * rng.normal(size=(n, d)) for c, n, s in zip(centres, sizes, spreads)])
    y = np.repeat(np.arange(k), sizes)
    return name, X, y


def synthetic_sets():
    return [
        mixture("syn-k3-2d", (500, 150, 50), (1.0, 0.5, 0.3), 2, 6.0, 0),
        mixture("syn-k4-2d", (400, 200, 100, 50), (1.5, 1.0, 0.6, 0.4), 2, 7.0, 1),
        mixture("syn-k5-5d", (400, 250, 150, 100, 60), (1.2, 1.0, 0.8, 0.6, 0.5), 5, 6.0, 2),
        mixture(
            "syn-k8-10d",
            (300, 250, 200, 150, 120, 90, 60, 40),
            np.linspace(1.2, 0.5, 8),
            10,
            6.0,
            3,
        ),  # fmt: skip
        mixture(
            "syn-k6-3d", (600, 300, 150, 80, 50, 30), (1.0, 0.9, 0.8, 0.7, 0.6, 0.5), 3, 5.0, 4
        ),  # fmt: skip
    ]


def by_phase(X):
    m = SoftKMeans("auto", assignment="hard", max_clusters=max(KS), random_state=0).fit(X)
    return m.n_clusters_, m.labels_


def by_phase_annealed(X):
    m = SoftKMeans("auto", anneal={}, max_clusters=max(KS), random_state=0).fit(X)
    return m.n_clusters_, m.labels_


def by_silhouette(X):
    best = None
    for k in KS:
        labels = KMeans(k, n_init=3, random_state=0).fit_predict(X)
        s = silhouette_score(X, labels)
        if best is None or s > best[0]:
            best = (s, k, labels)
    return best[1], best[2]


def _log_w(X, k, n_init):
    return np.log(KMeans(k, n_init=n_init, random_state=0).fit(X).inertia_)


def by_gap(X, B=5, seed=0):
    rng = np.random.default_rng(seed)
    mu = X.mean(axis=0)
    _, _, Vt = np.linalg.svd(X - mu, full_matrices=False)
    Z = (X - mu) @ Vt.T
    lo, hi = Z.min(axis=0), Z.max(axis=0)
    refs = [rng.uniform(lo, hi, size=Z.shape) @ Vt + mu for _ in range(B)]
    ks = list(KS) + [max(KS) + 1]
    gap, s = {}, {}
    for k in ks:
        ref = np.array([_log_w(R, k, 1) for R in refs])
        gap[k] = ref.mean() - _log_w(X, k, 3)
        s[k] = ref.std() * np.sqrt(1 + 1 / B)
    chosen = next((k for k in KS if gap[k] >= gap[k + 1] - s[k + 1]), max(KS))
    return chosen, KMeans(chosen, n_init=3, random_state=0).fit_predict(X)


def by_bic(X):
    best = None
    for k in KS:
        g = GaussianMixture(k, covariance_type="full", random_state=0).fit(X)
        b = g.bic(X)
        if best is None or b < best[0]:
            best = (b, k, g.predict(X))
    return best[1], best[2]


METHODS = {
    "phase": by_phase,
    "phase+anneal": by_phase_annealed,
    "silhouette": by_silhouette,
    "gap": by_gap,
    "BIC": by_bic,
}


def main():
    print(f"# softkmeans {softkmeans.__version__} {softkmeans.build_info()}")
    print(table.machine_line(gemm_rate(np.float32), 2, 2048))
    names = list(METHODS)
    head = "| data set | n x d | true k | " + " | ".join(f"{m} k (ARI)" for m in names)
    print(head + " | KMeans at true k ARI |")
    print("|" + " --- |" * (len(names) + 4))
    seconds = dict.fromkeys(names, 0.0)
    for name, X, y in real_sets() + synthetic_sets():
        k_true = len(np.unique(y))
        cells = []
        for m in names:
            t = time.perf_counter()
            k, labels = METHODS[m](X)
            seconds[m] += time.perf_counter() - t
            cells.append(f"{k} ({adjusted_rand_score(y, labels):.2f})")
        ref = adjusted_rand_score(y, KMeans(k_true, n_init=10, random_state=0).fit_predict(X))
        print(f"| {name} | {X.shape[0]} x {X.shape[1]} | {k_true} | " + " | ".join(cells)
              + f" | {ref:.2f} |", flush=True)  # fmt: skip
    print("# seconds per method, all data sets: "
          + ", ".join(f"{m} {s:.1f}" for m, s in seconds.items()))  # fmt: skip


if __name__ == "__main__":
    main()
