"""Cosine (spherical) K-Means: a hard ``SoftKMeans(metric="cosine")`` fit against the
usual workarounds, same data, same unit initial centroids, same number of iterations.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/cosine.py            # 2e5 x 384
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/cosine.py --n 1000000

Two data sets: clustered synthetic embeddings (n x 384 float32, rows of random lengths
around `--topics` directions) and a TF-IDF matrix (scikit-learn's TfidfVectorizer on
generated topic documents: each document draws its words from one topic's Zipf
distribution over a shared vocabulary; nothing is downloaded).

Contenders, each timed as a user runs it, normalization of X included (every one of them
must read the rows as x / ||x||):

- ours: ``SoftKMeans(k, assignment="hard", metric="cosine", init=C0, max_iter=M, tol=0)``;
- scikit-learn: ``normalize(X)``, then M times ``KMeans(k, init=C, n_init=1, max_iter=1)``
  and C <- C / ||C||: the spherical K-Means loop (a Lloyd step, then the centroids
  renormalized). Why this and not ``KMeans(max_iter=M)`` then one renormalization: the
  latter is Euclidean K-Means on the sphere, a different algorithm (its centroids drift
  inside the ball between iterations); the loop makes the same M steps as ours from the
  same C0, so the two fits end at the same centroids (the J column says so);
- faiss (dense only): ``normalize_L2`` on a copy, then ``Kmeans(spherical=True,
  niter=M).train(X, init_centroids=C0)`` (it renormalizes the centroids after each step).
  Its J differs from the other two where a cluster empties: faiss splits a large
  cluster, scikit-learn and we move the centroid to the farthest row.

Times are medians of interleaved repeats (`peers.interleaved`), 2 threads each; the
targets are printed as measured / needed (>= 2x scikit-learn, > 1x faiss), with the CPU,
the load average and the same-run sgemm rate (`peers.gemm_rate`): on a shared machine
read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers as P  # noqa: E402
import table  # noqa: E402

import softkmeans  # noqa: E402


def embeddings(n, d, topics, seed=0):
    """n rows near `topics` random unit directions (noise 0.6 / sqrt(d) a coordinate), each
    of a random length in [0.5, 2]: cosine must ignore the lengths."""
    rng = np.random.default_rng(seed)
    dirs = rng.standard_normal((topics, d)).astype(np.float32)
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    X = rng.standard_normal((n, d), dtype=np.float32) * np.float32(0.6 / np.sqrt(d))
    X += dirs[rng.integers(topics, size=n)]
    X *= rng.uniform(0.5, 2.0, size=(n, 1)).astype(np.float32)
    return X


def tfidf(n_docs, vocabulary, topics, seed=0):
    """TF-IDF (n_docs, <= vocabulary) float32 CSR of generated topic documents."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    rng = np.random.default_rng(seed)
    zipf = 1.0 / np.arange(1, vocabulary + 1) ** 1.1
    zipf /= zipf.sum()
    orders = [rng.permutation(vocabulary) for _ in range(topics)]
    words = np.array([f"w{i}" for i in range(vocabulary)])
    lengths = rng.integers(40, 200, size=n_docs)
    topic = rng.integers(topics, size=n_docs)
    docs = [
        " ".join(words[orders[t][rng.choice(vocabulary, size=m, p=zipf)]])
        for t, m in zip(topic, lengths)
    ]
    return TfidfVectorizer(dtype=np.float32).fit_transform(docs).tocsr()


def unit_init(X, k, seed=1):
    """k distinct rows of X, normalized (float32): every contender's C0."""
    idx = np.random.default_rng(seed).choice(X.shape[0], size=k, replace=False)
    rows = X[idx]
    rows = rows.toarray() if hasattr(rows, "toarray") else np.asarray(rows)
    rows = rows.astype(np.float64)
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def cosine_distortion(X, C):
    """J = sum_i (2 - 2 max_j x^_i.c_j) over the nonzero rows, float64."""
    from sklearn.preprocessing import normalize

    Xn = normalize(X.astype(np.float64) if not hasattr(X, "toarray") else X.astype(np.float64))
    S = Xn @ C.astype(np.float64).T
    S = np.asarray(S)
    nonzero = np.asarray(abs(Xn).sum(axis=1)).ravel() > 0
    return float((2.0 - 2.0 * S.max(axis=1))[nonzero].sum())


def ours(X, C0, iters, threads):
    def run():
        km = softkmeans.SoftKMeans(
            C0.shape[0], assignment="hard", metric="cosine", init=C0, n_init=1,
            max_iter=iters, tol=0.0, n_threads=threads,
        )  # fmt: skip
        km.fit(X)
        return P.Timed(0.0, {"C": km.cluster_centers_, "n_iter": km.n_iter_})

    return _wall(run)


def sklearn_loop(X, C0, iters, threads):
    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.preprocessing import normalize

    def run():
        with P.thread_limit(threads), warnings.catch_warnings():
            warnings.simplefilter("ignore", category=ConvergenceWarning)
            Xn = normalize(X)
            C = C0
            for _ in range(iters):
                km = KMeans(C.shape[0], init=C, n_init=1, max_iter=1, tol=0.0).fit(Xn)
                C = normalize(km.cluster_centers_)
        return P.Timed(0.0, {"C": C, "n_iter": iters})

    return _wall(run)


def faiss_spherical(X, C0, iters, threads):
    P.require("faiss")
    import faiss

    n, d = X.shape

    def run():
        with P.thread_limit(threads):
            Xn = np.array(X, dtype=np.float32, copy=True)
            faiss.normalize_L2(Xn)
            km = faiss.Kmeans(
                d, C0.shape[0], niter=iters, spherical=True, seed=1, verbose=False,
                max_points_per_centroid=n // C0.shape[0] + 1, min_points_per_centroid=1,
            )  # fmt: skip
            km.train(Xn, init_centroids=C0)
        return P.Timed(0.0, {"C": km.centroids, "n_iter": iters})

    return _wall(run)


def _wall(run):
    """The whole call's wall time as the Timed seconds (extra: the fit's outcome)."""
    import time

    def timed():
        t0 = time.perf_counter()
        out = run()
        return P.Timed(time.perf_counter() - t0, out.extra)

    return timed


def compare(name, X, C0, iters, threads, repeats, with_faiss):
    cases = {"ours": ours(X, C0, iters, threads), "sklearn": sklearn_loop(X, C0, iters, threads)}
    if with_faiss:
        try:
            cases["faiss"] = faiss_spherical(X, C0, iters, threads)
        except P.PeerUnavailable as exc:
            print(P.skip_message("faiss", exc))
    print(f"\n{name}: X {X.shape} {X.dtype}, k = {C0.shape[0]}, {iters} iterations, "
          f"load average before {table.load_average()}")  # fmt: skip
    timings = P.interleaved(cases, repeats=repeats, warmup=1)
    print(f"load average after {table.load_average()}")
    ours_t = timings["ours"].median
    print(f"{'contender':10s} {'median s':>9s} {'J (cosine)':>14s} {'speedup':>8s} {'needed':>7s}"
          f" {'measured/needed':>16s}")  # fmt: skip
    needed = {"ours": None, "sklearn": 2.0, "faiss": 1.0}
    for case, timing in timings.items():
        J = cosine_distortion(X, timing.extra["C"])
        speedup = timing.median / ours_t
        need = needed[case]
        tail = "" if need is None else f"{speedup:8.2f} {need:7.1f} {speedup / need:16.2f}"
        print(f"{case:10s} {timing.median:9.3f} {J:14.6g} {tail}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200_000, help="embedding rows (1e6: the issue's)")
    ap.add_argument("--d", type=int, default=384)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--docs", type=int, default=50_000, help="TF-IDF documents")
    ap.add_argument("--vocabulary", type=int, default=20_000)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sets", default="embeddings,tfidf", help="comma-separated data sets")
    args = ap.parse_args(argv)

    sgemm_size = 2048
    sgemm = P.gemm_rate(np.float32, n_threads=args.threads, size=sgemm_size)
    print(table.machine_line(sgemm, args.threads, sgemm_size))
    sets = args.sets.split(",")
    if "embeddings" in sets:
        X = embeddings(args.n, args.d, args.topics)
        C0 = unit_init(X, args.k)
        compare("embeddings", X, C0, args.iters, args.threads, args.repeats, True)
        del X
    if "tfidf" in sets:
        T = tfidf(args.docs, args.vocabulary, args.topics)
        compare("tf-idf", T, unit_init(T, args.k), args.iters, args.threads, args.repeats, False)


if __name__ == "__main__":
    main()
