"""Calibration of predict_proba (issue 25, item 4): sigma="auto" against the default sigma
and scikit-learn's GaussianMixture(covariance_type="spherical").

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/calibration.py

On the labelled real data sets `softkmeans reproduce` loads (as it loads them), with k the
number of classes: each model is fitted on a seeded stratified half, its clusters are
matched to the classes on that half (Hungarian, on the summed probabilities), and the
held-out half scores the matched probabilities by log-loss (scikit-learn's `log_loss`,
probabilities clipped at 1e-15) and by the mean largest probability (1.0: one-hot in all
but name). Lower log-loss is better calibrated. softkmeans runs k-means++ with n_init=10;
GaussianMixture n_init=10 (it learns a variance and a weight per component; sigma="auto"
one shared variance and equal weights). Five splits, means printed.
"""

from __future__ import annotations

import numpy as np
from peers import gemm_rate
from scipy.optimize import linear_sum_assignment
from sklearn import datasets as skd
from sklearn.metrics import log_loss
from sklearn.mixture import GaussianMixture
from sklearn.model_selection import train_test_split

import softkmeans
from softkmeans import SoftKMeans
from softkmeans.experiments import datasets as rd

SETS = {
    "iris": skd.load_iris,
    "wine": skd.load_wine,
    "breast-cancer": skd.load_breast_cancer,
    "digits": skd.load_digits,
}
SPLITS = 5


def models(k, seed):
    return {
        "softkmeans sigma='auto'": SoftKMeans(k, sigma="auto", n_init=10, random_state=seed),
        "softkmeans sigma=None (0.1 x critical)": SoftKMeans(k, n_init=10, random_state=seed),
        "GaussianMixture spherical": GaussianMixture(
            k, covariance_type="spherical", n_init=10, random_state=seed
        ),
    }


def matched(P_train, y_train, P_test, k):
    """P_test's columns reordered so that column c is the cluster matched to class c."""
    score = np.array([[P_train[y_train == c, j].sum() for j in range(k)] for c in range(k)])
    rows, cols = linear_sum_assignment(-score)
    return P_test[:, cols[np.argsort(rows)]]


def held_out(model, X, y, seed, k):
    """(log-loss, mean max probability) of model fitted on the seeded stratified half of
    (X, y), its clusters matched to the classes there, on the other half."""
    Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.5, stratify=y, random_state=seed)
    model.fit(Xa)
    P = matched(model.predict_proba(Xa), ya, model.predict_proba(Xb), k)
    P = np.clip(P, 1e-15, 1.0)
    P /= P.sum(axis=1, keepdims=True)
    return log_loss(yb, P, labels=np.arange(k)), P.max(axis=1).mean()


def main():
    print(f"# softkmeans {softkmeans.__version__} {softkmeans.build_info()}")
    print(f"# load average {open('/proc/loadavg').read().split()[:3]}")
    print(f"# sgemm {gemm_rate(np.float32):.1f} GFLOP/s (2 threads, same run)")
    print("| data set | model | held-out log-loss | mean max probability |")
    print("| --- | --- | --- | --- |")
    for name, loader in SETS.items():
        X, y = rd.load(name).X, loader().target
        k = len(np.unique(y))
        results = {}
        for seed in range(SPLITS):
            for label, model in models(k, seed).items():
                results.setdefault(label, []).append(held_out(model, X, y, seed, k))
        for label, values in results.items():
            loss, top = np.mean(values, axis=0)
            print(f"| {name} | {label} | {loss:.3f} | {top:.3f} |", flush=True)


if __name__ == "__main__":
    main()
