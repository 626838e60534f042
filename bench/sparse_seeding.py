"""k-means++ and the default fit on CSR against scikit-learn (issue 36, item 11).

    python bench/sparse_seeding.py --n 200000 --d 50000 --nnz-per-row 50 --k 20

Data: TF-IDF-like rows (columns drawn from a Zipf law over d terms, so frequent terms are
shared, positive weights, rows of unit L2 norm), float64 CSR. Times, in this process and
interleaved: softkmeans.kmeans_plusplus against sklearn.cluster.kmeans_plusplus, and the
default fit (SoftKMeans(k), its k-means++ included: Lloyd from the seeds, then EM to
its likelihood tolerance) against KMeans(k) (k-means++, one run). Prints seconds and
the ratio softkmeans / scikit-learn (below 1: softkmeans is faster). Timings depend on
the machine's load: quote `uptime` with them.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import KMeans, kmeans_plusplus

import softkmeans


def tfidf_like(n, d, per_row, seed):
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, d + 1, dtype=np.float64)
    p = 1.0 / ranks
    cols = rng.choice(d, size=n * per_row, p=p / p.sum())
    rows = np.repeat(np.arange(n), per_row)
    X = sp.csr_matrix((rng.random(n * per_row) + 0.1, (rows, cols)), shape=(n, d))
    X.sum_duplicates()
    X.sort_indices()
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.csr_matrix(sp.diags(1.0 / norms) @ X)
    X.sort_indices()  # canonical CSR: what a vectorizer gives, read without a copy
    return X


def best_of(repeats, *fns):
    """The best time of each of fns over `repeats` rounds, the fns alternating within a
    round (a load that comes and goes weighs on both)."""
    times = [[] for _ in fns]
    for _ in range(repeats):
        for f, out in zip(fns, times):
            t = time.perf_counter()
            f()
            out.append(time.perf_counter() - t)
    return [min(t) for t in times]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--d", type=int, default=20_000)
    ap.add_argument("--nnz-per-row", type=int, default=50)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-fit", action="store_true", help="k-means++ only")
    a = ap.parse_args()
    X = tfidf_like(a.n, a.d, a.nnz_per_row, 0)
    print(f"X: {a.n} x {a.d} CSR, {X.nnz} stored, k = {a.k}")
    ours, peer = best_of(
        a.repeats,
        lambda: softkmeans.kmeans_plusplus(X, a.k, random_state=0),
        lambda: kmeans_plusplus(X, a.k, random_state=0),
    )
    print(f"k-means++      softkmeans {ours:7.3f} s  scikit-learn {peer:7.3f} s  "
          f"ratio {ours / peer:.2f}")  # fmt: skip
    if a.skip_fit:
        return
    ours, peer = best_of(
        a.repeats,
        lambda: softkmeans.SoftKMeans(a.k, random_state=0).fit(X),
        lambda: KMeans(a.k, random_state=0).fit(X),
    )
    print(f"default fit    softkmeans {ours:7.3f} s  scikit-learn {peer:7.3f} s  "
          f"ratio {ours / peer:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
