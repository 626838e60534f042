"""The fitting driver behind `SoftKMeans` and the ``softkmeans cluster`` command.

scikit-learn's layering (estimator -> driver -> kernel): `Fitter` holds the parameters of
a fit and runs it on validated data with the functional API; `SoftKMeans` adds the
scikit-learn conventions on top; the command line uses `Fitter` directly, so that it does
not import scikit-learn (about a second at start-up). See `softkmeans.estimator` for the
semantics (the KMeans drop-in rules, weights, the sigma default, annealing).
"""

from __future__ import annotations

import math
import numbers
import sys
import time
import warnings

import numpy as np

from . import _api
from . import _validation as v
from ._seeding import _check_random_state, _kmeans_plusplus
from .annealing import check_schedule, run_annealing

__all__ = ["DEFAULT_SIGMA_FRACTION", "PARAMS", "Fitter"]

PARAMS = (
    "n_clusters",
    "assignment",
    "sigma",
    "anneal",
    "init",
    "n_init",
    "max_iter",
    "tol",
    "random_state",
    "n_threads",
    "verbose",
)
RESULTS = (
    "cluster_centers_",
    "labels_",
    "inertia_",
    "objective_",
    "sigma_",
    "n_iter_",
    "history_",
    "min_margin_",
    "critical_sigma_",
    "exact_lloyd_",
    "_n_threads",
)

# sigma=None: sigma = DEFAULT_SIGMA_FRACTION x critical_sigma(X).
DEFAULT_SIGMA_FRACTION = 0.1


class _History:
    """Per-iteration record of a fit: sigma, objective, J, centroid shift, kind."""

    def __init__(self):
        self.sigma, self.objective, self.J, self.shift, self.kind = [], [], [], [], []
        self.min_margin = []
        self.transitions = []

    @property
    def n_iter(self):
        return len(self.sigma)

    def record(self, sigma, objective, J, shift, kind, min_margin=float("nan")):
        self.min_margin.append(float(min_margin))
        self.sigma.append(float(sigma))
        self.objective.append(float(objective))
        self.J.append(float(J))
        self.shift.append(float(shift))
        self.kind.append(kind)

    def transition(self, sigma, iteration, n_before, n_after):
        self.transitions.append(
            {
                "sigma": float(sigma),
                "iteration": int(iteration),
                "n_before": int(n_before),
                "n_after": int(n_after),
            }
        )

    def as_dict(self):
        return {
            "sigma": np.asarray(self.sigma, dtype=np.float64),
            "objective": np.asarray(self.objective, dtype=np.float64),
            "J": np.asarray(self.J, dtype=np.float64),
            "shift": np.asarray(self.shift, dtype=np.float64),
            "min_margin": np.asarray(self.min_margin, dtype=np.float64),
            "kind": list(self.kind),
            "transitions": list(self.transitions),
        }


class _OncePerFit:
    """Collects warnings during a fit and issues each distinct one once at the end."""

    def __init__(self, category=UserWarning):
        self._seen = {}
        self.category = category

    def has(self, key):
        return key in self._seen

    def add(self, key, message, category=None):
        self._seen.setdefault(key, (message, self.category if category is None else category))

    def flush(self):
        if "distinct" in self._seen:  # the root cause: its consequences add nothing
            self._seen.pop("dup", None)
            self._seen.pop("found", None)
        for message, category in self._seen.values():
            warnings.warn(message, category, stacklevel=4)


class _Progress:
    """verbose >= 1: one line per iteration (per width when annealing); a tqdm bar on a tty."""

    def __init__(self, verbose, total, stream=None):
        self.verbose = verbose
        self.stream = stream if stream is not None else sys.stdout
        self.bar = None
        if verbose and getattr(self.stream, "isatty", lambda: False)():
            try:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=total, file=self.stream, leave=False)
            except ImportError:  # tqdm is optional
                self.bar = None

    def line(self, text):
        if not self.verbose:
            return
        if self.bar is not None:
            self.bar.update(1)
            self.bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _format_line(prefix, sigma, objective, J, shift, elapsed):
    return (
        f"{prefix}  sigma={sigma:.6g}  objective={objective:.10g}  J={J:.10g}  "
        f"shift={shift:.3g}  time={elapsed:.3f}s"
    )


_CHUNK_ROWS = 1 << 16


def _tolerance(X, w, tol):
    """tol x the mean (weighted) feature variance (scikit-learn's `_tolerance`).

    NOTE: scikit-learn ignores sample weights here; we weight the variance so that
    integer weights and duplicated rows give the same tolerance (with unit weights the
    two agree up to rounding).
    """
    if tol == 0:
        return 0.0
    W = w.sum()
    mu = (w @ X) / W if X.dtype == np.float64 else (w @ X.astype(np.float64)) / W
    ss = np.zeros(X.shape[1])
    for start in range(0, X.shape[0], _CHUNK_ROWS):  # float64 work in bounded chunks
        part = X[start : start + _CHUNK_ROWS].astype(np.float64) - mu
        ss += w[start : start + _CHUNK_ROWS] @ (part * part)
    return float(np.mean(ss / W) * tol)


def _check_weights(sample_weight, n):
    if sample_weight is not None:
        arr = np.asarray(sample_weight)
        if arr.ndim == 1 and arr.size == n and arr.dtype.kind in "biuf" and not arr.any():
            raise ValueError("sample_weight is all zero: at least one weight must be positive")
    return v.check_sample_weight(sample_weight, n)


# Below this many multiply-adds per pass (n x k x d, about a millisecond of one core) the
# native core runs on one thread: waking an OpenMP team costs about as much as the work,
# and far more on a busy machine (results do not depend on the thread count).
# n_threads=None otherwise leaves the choice to OpenMP / threadpoolctl.
_SERIAL_WORK = 1 << 20


def _threads_for(n_threads, n, k, d):
    if n_threads is None and n * k * d < _SERIAL_WORK:
        return 1
    return n_threads


def _check_int(value, name, minimum):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be an int; got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    return int(value)


class Fitter:
    """One fit: the parameters of `SoftKMeans` as attributes, the fitted ones after `fit`.

    warning_category: the class of the convergence warnings (scikit-learn's
    ConvergenceWarning from the estimator, UserWarning otherwise).
    """

    def __init__(self, warning_category=UserWarning, **params):
        unknown = sorted(set(params) - set(PARAMS))
        if unknown:
            raise TypeError(f"unknown parameters {unknown}")
        defaults = dict(
            n_clusters=8,
            assignment="softmax",
            sigma=None,
            anneal=None,
            init="k-means++",
            n_init=1,
            max_iter=300,
            tol=1e-4,
            random_state=None,
            n_threads=None,
            verbose=0,
        )
        defaults.update(params)
        for name, value in defaults.items():
            setattr(self, name, value)
        self.warning_category = warning_category

    def results(self):
        """The fitted attributes, by name."""
        return {name: getattr(self, name) for name in RESULTS}

    def _check_params(self, X):
        n = X.shape[0]
        k = _check_int(self.n_clusters, "n_clusters", 1)
        if n < k:
            raise ValueError(f"n_samples={n} should be >= n_clusters={k}.")
        if not isinstance(self.assignment, str) or self.assignment not in v.KINDS:
            raise ValueError(f"assignment must be one of {v.KINDS}; got {self.assignment!r}")
        kind = self.assignment
        if self.sigma is not None:
            v.check_sigma(self.sigma, "softmax")
        schedule = check_schedule(self.anneal)
        _check_int(self.n_init, "n_init", 1)
        _check_int(self.max_iter, "max_iter", 1)
        if isinstance(self.tol, (bool, np.bool_)) or not isinstance(
            self.tol, (numbers.Real, np.generic)
        ):
            raise TypeError(f"tol must be a real number >= 0; got {self.tol!r}")
        if not (math.isfinite(self.tol) and self.tol >= 0):
            raise ValueError(f"tol must be finite and >= 0; got {self.tol}")
        v.check_n_threads(self.n_threads)
        _check_int(self.verbose, "verbose", 0)
        init = self.init
        if isinstance(init, str):
            if init not in ("k-means++", "random"):
                raise ValueError(
                    f"init must be 'k-means++', 'random', an array or a callable; got {init!r}"
                )
        elif not callable(init):
            init = v.check_centroids(init, X, name="init")
            if init.shape[0] != k:
                raise ValueError(
                    f"init has {init.shape[0]} centroids but n_clusters={k}; they must match"
                )
        return k, kind, schedule, init

    def _init_centroids(self, X, w, k, init, rng):
        if isinstance(init, str) and init == "k-means++":
            centers, _ = _kmeans_plusplus(
                X, k, sample_weight=w, random_state=rng, n_threads=self._n_threads
            )
        elif isinstance(init, str) and init == "random":
            seeds = rng.choice(X.shape[0], size=k, replace=False, p=w / w.sum())
            centers = X[seeds]
        elif callable(init):
            centers = v.check_centroids(init(X, k, random_state=rng), X, name="init")
            if centers.shape[0] != k:
                raise ValueError(
                    f"init callable returned {centers.shape[0]} centroids; expected {k}"
                )
        else:
            centers = init
        return np.array(centers, dtype=X.dtype, order="C", copy=True)

    # ------------------------------------------------------------------ fitting

    def _relocator(self, X, w, kind, notes):
        """Empty-cluster policy: scikit-learn's `_relocate_empty_clusters` (see estimator)."""
        n_threads = self._n_threads

        def relocate(C_old, step):
            empty = np.flatnonzero(step.empty)
            C_new = np.array(step.centroids, copy=True)
            labels, _ = _api.assign(X, C_old, n_threads=n_threads)
            # As scikit-learn computes them (in the dtype of X), so argpartition agrees.
            dist = ((X - C_old[labels]) ** 2).sum(axis=1)
            if dist.max() == 0:
                # NOTE: scikit-learn then puts the empty centroids on the largest cluster's;
                # we keep them where they were (SPEC.md's step policy).
                notes.add(
                    "dup",
                    "Fewer distinct points than n_clusters: some clusters stay empty.",
                )
                return C_new
            far = np.argpartition(dist, -empty.size)[: -empty.size - 1 : -1]
            N = np.array(step.cluster_weights, dtype=np.float64, copy=True)
            if kind == "hard":
                S = C_new.astype(np.float64) * N[:, None]
                touched = set()
                for e, f in zip(empty, far):
                    old = labels[f]
                    S[old] -= X[f] * w[f]
                    S[e] = X[f] * w[f]
                    N[e] = w[f]
                    N[old] -= w[f]
                    touched.update((int(e), int(old)))
                for j in touched:
                    if N[j] > 0:
                        C_new[j] = S[j] / N[j]
            else:
                C_new[empty] = X[far]
            notes.add("empty", "Empty clusters were relocated to the farthest points.")
            return C_new

        return relocate

    def _run_iterative(self, X, w, C, kind, sigma, tol, relocate, progress, t0):
        history = _History()
        n_threads = self._n_threads
        for i in range(self.max_iter):
            step = _api.centroid_step(X, C, sigma, kind=kind, sample_weight=w, n_threads=n_threads)
            C_new = step.centroids
            if step.empty.any():
                C_new = relocate(C, step)
            shift = float(((C_new.astype(np.float64) - C) ** 2).sum())
            history.record(sigma, step.objective, step.distortion, shift, kind, step.min_margin)
            progress.line(
                _format_line(
                    f"iter {i:4d}",
                    sigma,
                    step.objective,
                    step.distortion,
                    shift,
                    time.perf_counter() - t0,
                )
            )
            C = C_new
            if shift <= tol:
                break
        return C, sigma, history

    def fit(self, X, sample_weight=None):
        """Fit the centroids to X (n, d), already validated; sample_weight (n,) >= 0."""
        X = v.check_data(X)
        k, kind, schedule, init = self._check_params(X)
        X = v.check_data(X)
        w = _check_weights(sample_weight, X.shape[0])
        rng = _check_random_state(self.random_state)
        self._n_threads = _threads_for(self.n_threads, X.shape[0], k, X.shape[1])
        notes = _OncePerFit(self.warning_category)
        t0 = time.perf_counter()

        crit = _api.critical_sigma(X, sample_weight=w)
        self.critical_sigma_ = float(crit)
        if kind == "hard":
            sigma = 0.0
        elif self.sigma is not None:
            sigma = float(self.sigma)
        else:
            sigma = DEFAULT_SIGMA_FRACTION * crit
            if not sigma > 0:  # all points identical (positive weight): any width will do
                sigma = 1.0
        tol = _tolerance(X, w, self.tol)
        relocate = self._relocator(X, w, kind, notes)
        n_init = self.n_init
        if not isinstance(init, str) and not callable(init) and n_init != 1:
            warnings.warn(
                "Explicit initial center position passed: performing only one init "
                f"in SoftKMeans instead of n_init={n_init}.",
                RuntimeWarning,
                stacklevel=3,
            )
            n_init = 1

        best = None
        progress = _Progress(
            self.verbose, total=None if schedule is not None else self.max_iter * n_init
        )
        try:
            for _ in range(n_init):
                if schedule is not None:
                    history = _History()

                    def report(s, step, shift, n_distinct, elapsed, history=history):
                        prefix = f"width {len(history.sigma):6d} steps  distinct {n_distinct:4d}"
                        progress.line(
                            _format_line(
                                prefix,
                                s,
                                history.objective[-1],
                                history.J[-1],
                                shift,
                                elapsed,
                            )
                        )

                    C, sig, exact, _ = run_annealing(
                        X,
                        w,
                        k,
                        schedule,
                        critical_sigma=crit,
                        tol=tol,
                        max_iter=self.max_iter,
                        rng=rng,
                        n_threads=self._n_threads,
                        history=history,
                        relocate=relocate,
                        report=report if self.verbose else None,
                    )
                else:
                    C0 = self._init_centroids(X, w, k, init, rng)
                    C, sig, history = self._run_iterative(
                        X, w, C0, kind, sigma, tol, relocate, progress, t0
                    )
                labels, _ = _api.assign(X, C, n_threads=self._n_threads)
                J = _api.objective(X, C, kind="hard", sample_weight=w, n_threads=self._n_threads)
                if kind == "hard":
                    obj = J
                else:
                    obj = _api.objective(
                        X, C, sig, kind=kind, sample_weight=w, n_threads=self._n_threads
                    )
                run = (obj, J, C, labels, sig, history)
                if best is None or (obj < best[0] and not _same_clustering(labels, best[3], k)):
                    best = run
        finally:
            progress.close()

        obj, J, C, labels, sig, history = best
        self.cluster_centers_ = C
        self.labels_ = labels
        self.inertia_ = float(J)
        self.objective_ = float(obj)
        self.sigma_ = float(sig) if kind != "hard" else 0.0
        self.n_iter_ = history.n_iter
        self.history_ = history.as_dict()
        if k >= 2:
            self.min_margin_ = float(_api.margins(X, C, n_threads=self._n_threads)[w > 0].min())
        else:
            self.min_margin_ = float("inf")
        if kind == "hard":
            self.exact_lloyd_ = True
        elif kind == "softmax" and schedule is None:
            self.exact_lloyd_ = k == 1  # softmax is never one-hot with two centroids
        else:
            # The last step was Lloyd's: a hard step, or entmax15 at or below
            # sqrt(Delta_min) / 2 with Delta_min at that step's own input centroids.
            last_kind = history.kind[-1]
            self.exact_lloyd_ = bool(
                last_kind == "hard"
                or (
                    last_kind == "entmax15"
                    and history.sigma[-1] <= math.sqrt(history.min_margin[-1]) / 2
                )
            )
        n_found = np.unique(labels[w > 0]).size
        if n_found < k or notes.has("dup"):
            # The root cause, checked only on a symptom (sorting the rows costs O(n log n)).
            n_distinct = np.unique(X[w > 0], axis=0).shape[0]
            if n_distinct < k:
                notes.add(
                    "distinct",
                    f"Number of distinct points ({n_distinct}) is smaller than "
                    f"n_clusters ({k}); some clusters are empty or duplicated.",
                )
        if n_found < k:
            notes.add(
                "found",
                f"Number of distinct clusters ({n_found}) found smaller than n_clusters ({k}). "
                "Possibly due to duplicate points in X.",
            )
        notes.flush()
        return self

    # ------------------------------------------------------------------ prediction


def _same_clustering(labels1, labels2, k):
    """True when the two labelings are equal up to a permutation of the labels."""
    pairs = np.unique(np.asarray(labels1, dtype=np.int64) * k + labels2)
    return np.unique(pairs // k).size == pairs.size
