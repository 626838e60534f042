"""The fitting driver behind `SoftKMeans` and the ``softkmeans cluster`` command.

scikit-learn's layering (estimator -> driver -> kernel): `Fitter` runs one fit, with the
parameters of a `FitParams`, on validated data, calling the trusted native layer
(`softkmeans._native`) inside its loops; `SoftKMeans` adds the scikit-learn conventions on
top; the command line uses `Fitter` directly, so that it does not import scikit-learn
(about a second at start-up). See `softkmeans.estimator` for the semantics (the KMeans
drop-in rules, weights, the sigma default, annealing).

The passes a fit makes over X: one validation (finiteness and magnitude); one weighted
covariance (the kernel reads X twice: the mean, then the centred products), which gives
both `critical_sigma_` and the tolerance; the seeding's (k-means++: one per centre, two where
the candidates' distances are not kept, see `_seeding.InMemoryPasses`); one
fused `block_stats` pass per iteration (a hard fit of an in-memory array with d > 4 and
centroids of at least 8 KiB: one `hard_stats_bounded` pass, which computes only the
distances that may change a row's label; `_BoundedHardPass`); and one final pass at the
final centroids, which yields the labels, inertia, objective and minimum margin at once
(`block_stats`, or the bounded pass in its exact mode where its centroids are grouped).
Relocating an empty cluster adds one `assign` pass (scikit-learn's policy needs the
labels at the step's input), except after a bounded step, which has them.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import warnings

import numpy as np

from . import _native, _sparse, _stats
from . import _validation as v
from ._params import DEFAULT_SIGMA_FRACTION, FitParams, check_init_centers
from ._seeding import InMemoryPasses, _check_random_state, greedy_kmeans_plusplus
from ._steps import History, run_steps
from .annealing import AnnealingReads, run_annealing

__all__ = ["DEFAULT_SIGMA_FRACTION", "Fitter", "StreamState"]

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
        if "found" in self._seen:  # the symptom scikit-learn reports says it all
            self._seen.pop("dup", None)
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

    def line(self, text, tick=True):
        """Print a line; tick: it reports a step (the bar advances)."""
        if not self.verbose:
            return
        if self.bar is not None:
            self.bar.update(1 if tick else 0)
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


def _iteration_line(i, kind, sigma, step):
    """scikit-learn's verbose line (its log parsers read ours); the inertia is J at the
    step's input centroids, as scikit-learn's. The soft kinds add their objective and
    width after it."""
    if kind == "hard":
        return f"Iteration {i}, inertia {step.distortion}."
    return f"Iteration {i}, inertia {step.distortion}, objective {step.objective}, sigma {sigma}."


def _converged_line(i, shift, tol):
    """scikit-learn's convergence line. Unchanged labels give a zero shift (the centroids
    are the same means): scikit-learn's "strict convergence"."""
    if shift == 0.0 and i > 0:  # scikit-learn has no labels to compare at iteration 0
        return f"Converged at iteration {i}: strict convergence."
    return f"Converged at iteration {i}: center shift {shift} within tolerance {tol}."


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
    """The core's thread count for a pass of n x k x d (an int; 0: the OpenMP default)."""
    if n_threads is None and n * k * d < _SERIAL_WORK:
        return 1
    return v.check_n_threads(n_threads)


@dataclasses.dataclass
class StreamState:
    """What a streaming fit carries from one batch to the next (SPEC.md, "Streaming")."""

    centroids: np.ndarray  # (k, d), the dtype of the first batch
    totals: np.ndarray  # (k,) float64, the running N_j(t)
    sigma: float  # fixed at the first batch (0.0 for "hard")
    critical_sigma: float  # of the first batch
    n_steps: int  # batches seen


class Fitter(AnnealingReads):
    """One fit: `params` (a FitParams), the fitted attributes after `fit`.

    warning_category: the class of the convergence warnings (scikit-learn's
    ConvergenceWarning from the estimator, UserWarning otherwise).
    """

    def __init__(self, params: FitParams, warning_category=UserWarning):
        self.params = params
        self.warning_category = warning_category

    def results(self):
        """The fitted attributes, by name."""
        return {name: getattr(self, name) for name in RESULTS}

    # ------------------------------------------------------------------ reading the data
    # Every read of X in a fit goes through these methods (and _init_centroids, _relocator,
    # _warn_about_empty_clusters, and annealing's AnnealingReads), so that `softkmeans.dask`
    # can run the same fit on blocks held by Dask workers by overriding them.

    def _check_data(self, X):
        return v.check_data(X)

    def _check_weights(self, sample_weight, X):
        return _check_weights(sample_weight, X.shape[0])

    def _threads(self, n_threads, X, k):
        return _threads_for(n_threads, X.shape[0], k, X.shape[1])

    def _covariance(self, X, w):
        """(weighted mean (d,), weighted population covariance (d, d)) of X."""
        return _native.weighted_covariance(X, w, self._n_threads)

    def _pass(self, X, w, C, kind, sigma, *, sums=True, labels=False):
        """One block_stats pass over X at C: (BlockStats, labels or None)."""
        stats, lab, _ = _native.block_stats(
            X, C, kind, sigma, w, self._n_threads, sums=sums, labels=labels
        )
        return stats, lab

    def _seeding_passes(self, X, w):
        """The distance passes of k-means++ over X (see `softkmeans._seeding`)."""
        return InMemoryPasses(X, w, self._n_threads)

    def _labels_and_distances(self, X, C, labels=None):
        """(labels (n,), squared distance of each row to its centroid (n,), in the dtype of
        X as scikit-learn computes them, so that the farthest points agree with its).
        labels: the labels at C when the caller has them (no assign pass then)."""
        if labels is not None and not _sparse.is_sparse(X):
            # Row blocks of ~4 MiB: the same per-row sums without two (n, d) temporaries.
            dist = np.empty(X.shape[0], dtype=X.dtype)
            step = max(1, (1 << 22) // (X.shape[1] * X.itemsize))
            for s in range(0, X.shape[0], step):
                dist[s : s + step] = ((X[s : s + step] - C[labels[s : s + step]]) ** 2).sum(axis=1)
            return labels, dist
        labels, min_sq_dist = _native.assign(X, C, self._n_threads)
        if _sparse.is_sparse(X):
            return labels, min_sq_dist
        return labels, ((X - C[labels]) ** 2).sum(axis=1)

    def _init_centroids(self, X, w, k, init, rng, unit_weights=False):
        if isinstance(init, str) and init == "k-means++":
            centers, _ = greedy_kmeans_plusplus(
                X, k, w, rng, unit_weights=unit_weights, passes=self._seeding_passes(X, w)
            )
        elif isinstance(init, str) and init == "random":
            seeds = rng.choice(X.shape[0], size=k, replace=False, p=w / w.sum())
            centers = _sparse.dense_rows(X, seeds)
        elif callable(init):
            centers = check_init_centers(init(X, k, random_state=rng), X, k)
        else:
            centers = init
        return np.array(centers, dtype=X.dtype, order="C", copy=True)

    # ------------------------------------------------------------------ fitting

    def _relocator(self, X, w, kind, notes, labels_at=lambda C: None):
        """Empty-cluster policy: scikit-learn's `_relocate_empty_clusters` (see estimator).
        labels_at(C): the labels at C when the step already has them, else None."""

        def relocate(C_old, step):
            empty = np.flatnonzero(step.empty)
            C_new = np.array(step.centroids, copy=True)
            labels, dist = self._labels_and_distances(X, C_old, labels_at(C_old))
            if dist.max() == 0:
                # NOTE: scikit-learn then puts the empty centroids on the largest cluster's;
                # we keep them where they were (SPEC.md's step policy).
                notes.add(
                    "dup",
                    "Fewer distinct points than n_clusters: some clusters stay empty.",
                )
                return C_new
            far = np.argpartition(dist, -empty.size)[: -empty.size - 1 : -1]
            X_far = _sparse.dense_rows(X, far)
            N = np.array(step.cluster_weights, dtype=np.float64, copy=True)
            if kind == "hard":
                S = C_new.astype(np.float64) * N[:, None]
                touched = set()
                for e, f, x_f in zip(empty, far, X_far):
                    old = labels[f]
                    S[old] -= x_f * w[f]
                    S[e] = x_f * w[f]
                    N[e] = w[f]
                    N[old] -= w[f]
                    touched.update((int(e), int(old)))
                for j in touched:
                    if N[j] > 0:
                        C_new[j] = S[j] / N[j]
            else:
                C_new[empty] = X_far
            if kind != "hard":  # scikit-learn relocates silently; so does its drop-in
                notes.add("empty", "Empty clusters were relocated to the farthest points.")
            return C_new

        return relocate

    def _run_iterative(self, X, w, C, kind, sigma, tol, notes, progress):
        bounded = _BoundedHardPass.for_fit(X, w, kind, C.shape[0], self._n_threads)
        if bounded is not None:
            relocate = self._relocator(X, w, kind, notes, bounded.labels_at)
        else:
            relocate = self._relocator(X, w, kind, notes)

        def step(C):
            if bounded is not None:
                stats = bounded(C)
            else:
                stats, _ = self._pass(X, w, C, kind, sigma)
            return _stats.step_result(stats, C), sigma, kind

        def line(i, sigma, result, shift):
            progress.line(_iteration_line(i, kind, sigma, result))
            if shift <= tol:  # run_steps stops here
                progress.line(_converged_line(i, shift, tol), tick=False)

        history = History()
        C, _, _ = run_steps(
            C,
            step,
            max_steps=self.params.max_iter,
            tol=tol,
            history=history,
            relocate=relocate,
            on_step=line,
        )
        return C, sigma, history, bounded

    def _run_annealing(self, X, w, k, schedule, crit, tol, rng, relocate, progress):
        history = History()

        def report(s, step, shift, n_distinct, elapsed):
            prefix = f"width {len(history.sigma):6d} steps  distinct {n_distinct:4d}"
            progress.line(
                _format_line(prefix, s, history.objective[-1], history.J[-1], shift, elapsed)
            )

        C, sig, _ = run_annealing(
            X,
            w,
            k,
            schedule,
            critical_sigma=crit,
            tol=tol,
            max_iter=self.params.max_iter,
            rng=rng,
            reads=self,
            history=history,
            relocate=relocate,
            report=report if self.params.verbose else None,
        )
        return C, sig, history

    def fit(self, X, sample_weight=None):
        """Fit the centroids to X (n, d); sample_weight (n,) >= 0 optional."""
        params = self.params
        X = self._check_data(X)
        k, kind, schedule, init, n_init = params.check(X)
        w = self._check_weights(sample_weight, X)
        rng = _check_random_state(params.random_state)
        self._n_threads = self._threads(params.n_threads, X, k)
        notes = _OncePerFit(self.warning_category)

        # One covariance: the critical width and the tolerance (tol x the mean variance).
        _, cov = self._covariance(X, w)
        crit = _stats.critical_sigma_of(cov)
        self.critical_sigma_ = crit
        tol = _tolerance(cov, params.tol)
        sigma = _width(kind, params.sigma, crit)
        relocate = self._relocator(X, w, kind, notes)
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
            params.verbose, total=None if schedule is not None else params.max_iter * n_init
        )
        try:
            for _ in range(n_init):
                if schedule is not None:
                    C, sig, history = self._run_annealing(
                        X, w, k, schedule, crit, tol, rng, relocate, progress
                    )
                    bounded = None
                else:
                    C0 = self._init_centroids(X, w, k, init, rng, sample_weight is None)
                    progress.line("Initialization complete", tick=False)
                    C, sig, history, bounded = self._run_iterative(
                        X, w, C0, kind, sigma, tol, notes, progress
                    )
                # The final pass: labels, inertia, objective and margin at the final C
                # (the bounded pass gives block_stats's values with its bounds).
                out = bounded.final(C) if bounded is not None else None
                if out is None:
                    out = self._pass(X, w, C, kind, sig, sums=False, labels=True)
                final, labels = out
                run = (final, C, labels, sig, history)
                if best is None or (
                    final.objective < best[0].objective and not _same_clustering(labels, best[2], k)
                ):
                    best = run
        finally:
            progress.close()

        final, C, labels, sig, history = best
        self.cluster_centers_ = C
        self.labels_ = labels
        self.inertia_ = float(final.distortion)
        self.objective_ = float(final.objective)
        self.sigma_ = float(sig) if kind != "hard" else 0.0
        self.n_iter_ = history.n_iter
        self.history_ = history.as_dict()
        self.min_margin_ = float(final.min_margin)
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
        self._warn_about_empty_clusters(X, w, labels, k, notes)
        notes.flush()
        return self

    def partial_fit(self, X, sample_weight=None, state: StreamState | None = None):
        """One streaming step on the batch X (SPEC.md, "Streaming").

        The first batch (state None) checks the parameters, fixes sigma (from this batch's
        critical width when sigma is None) and initialises the centroids on this batch;
        every batch then makes one `block_stats` pass at the current centroids and moves
        them by the running-mean rule. Returns (the new StreamState, the batch's
        BlockStats at the centroids before the update, its labels there).
        """
        params = self.params
        X = self._check_data(X)
        w = self._check_weights(sample_weight, X)
        if state is None:
            k, kind, schedule, init, _ = params.check(X)
            if schedule is not None:
                raise ValueError(
                    "partial_fit does not anneal: annealing needs all the data at every "
                    "width; use fit, or anneal=None"
                )
            self._n_threads = self._threads(params.n_threads, X, k)
            _, cov = self._covariance(X, w)
            crit = _stats.critical_sigma_of(cov)
            rng = _check_random_state(params.random_state)
            C = self._init_centroids(X, w, k, init, rng, sample_weight is None)
            state = StreamState(C, np.zeros(k), _width(kind, params.sigma, crit), crit, 0)
        k = state.centroids.shape[0]
        self._n_threads = self._threads(params.n_threads, X, k)
        C = state.centroids.astype(X.dtype, copy=False)
        stats, labels = self._pass(X, w, C, params.assignment, state.sigma, labels=True)
        C_new, totals = _stats.running_update(state.centroids, state.totals, stats)
        new_state = StreamState(C_new, totals, state.sigma, state.critical_sigma, state.n_steps + 1)
        return new_state, stats, labels

    @staticmethod
    def _warn_about_empty_clusters(X, w, labels, k, notes):
        positive = w > 0
        # Without n-sized temporaries in the usual case (every weight positive).
        held = labels if positive.all() else labels[positive]
        n_found = int(np.count_nonzero(np.bincount(held, minlength=k)))
        if n_found < k or notes.has("dup"):
            # The root cause, checked only on a symptom (sorting the rows costs O(n log n)).
            if _sparse.is_sparse(X):
                n_distinct = _sparse.n_distinct_rows(X[positive])
            else:
                n_distinct = np.unique(X[positive], axis=0).shape[0]
            if n_distinct < k:
                notes.add(
                    "found",
                    # scikit-learn's ConvergenceWarning, and the count behind it.
                    f"Number of distinct clusters ({n_found}) found smaller than "
                    f"n_clusters ({k}). Possibly due to duplicate points in X: it has "
                    f"{n_distinct} distinct points.",
                )
        if n_found < k:
            notes.add(
                "found",
                f"Number of distinct clusters ({n_found}) found smaller than n_clusters ({k}). "
                "Possibly due to duplicate points in X.",
            )


class _BoundedHardPass:
    """The hard step of an in-memory fit with group distance bounds (Yinyang's; see
    `cpp/src/impl/bounded.hpp`): each call at centroids C returns the BlockStats of
    `block_stats(X, C, "hard")` (the same labels, N and S bit for bit), computing only the
    distances that may change a row's label since the previous call. The centroids are
    split once, at the first call, into t groups (`centroid_groups`); each row carries its
    label and, per group, a lower bound on its distance to the group's other centroids
    (8 + 8 t bytes a row, t <= MAX_GROUPS: at most 136) from one step to the next.

    History: J of a step that skipped distances sums the skipped rows' exact distances
    (within rounding of the kernel's); its min_margin is nan (not every margin is known).
    """

    # 16 groups: 136 bytes a row. Distances computed per step of the (1e5, 256, 1024) fit
    # with 16 and 32 groups: see bench/README.md ("Issue 10").
    MAX_GROUPS = 16
    # At least this many centroids a group, and this many multiply-adds (group size x d) a
    # row's group: each group computed costs a row a fixed part (its minima, its bound)
    # that only a large group outweighs. Single-thread CPU time of the bounded steps over
    # the plain ones (`python bench/bounded_steps.py N D K STEPS`), 1 / 2 / 4 / 16 groups:
    # at (2e5, 64, 256), 8 steps, 0.60 / 0.64 / 0.66 / 0.93; at (1e5, 256, 1024) 16 groups
    # 0.43 (Hamerly's single bound 0.47).
    MIN_GROUP_SIZE = 8
    MIN_GROUP_WORK = 16384

    def __init__(self, X, w, n_threads):
        self.X, self.w, self.n_threads = X, w, n_threads
        self.labels = np.zeros(X.shape[0], dtype=np.int64)
        self.lower = None
        self.group = None
        self.C_prev = None

    # A row's k distances cost about k d multiply-adds, k d itemsize / 32 vector ones (AVX2),
    # its bound test about d: below this size of the centroids (k d itemsize bytes) the test
    # and the gathering cost about what they save. Single-thread CPU time of 20 Lloyd steps on
    # blobs, bounded / plain (`python bench/bounded_steps.py N D K 20 DTYPE`): float32 1.28
    # at 16 x 64 (4 KiB), 0.52-0.63 at 32 x 128, 16 x 256, 64 x 64, 16 x 1024, 0.39 at
    # 64 x 256, 0.48 at 256 x 1024 (8 steps); float64 0.98 at 8 x 128 (8 KiB), 0.84 at 16 x 64.
    # Since the bound tests take a vector of rows at a time (an AVX-512 machine, n = 1e6):
    # float32 1.00 at 16 x 64 (4 KiB: still no gain below the threshold), float64 0.80 at
    # 8 x 128, 0.64 at 16 x 64.
    MIN_CENTROID_BYTES = 8192

    @classmethod
    def for_fit(cls, X, w, kind, k, n_threads):
        """The bounded pass of a fit with k centroids, or None where the plain pass runs:
        kinds other than hard, CSR input, X not an in-memory C-contiguous array (row
        blocks, Dask), d <= 4 (the direct-difference path), centroids smaller than
        MIN_CENTROID_BYTES."""
        if kind != "hard" or not isinstance(X, np.ndarray) or not X.flags.c_contiguous:
            return None
        d = X.shape[1]
        if d <= _native.SMALL_DIM or k * d * X.itemsize < cls.MIN_CENTROID_BYTES:
            return None
        return cls(X, w, n_threads)

    @classmethod
    def centroid_groups(cls, C):
        """(k,) int64: the group of each centroid of C, t groups of about equal size (t the
        largest power of two <= MAX_GROUPS, k / MIN_GROUP_SIZE and k d / MIN_GROUP_WORK; 1:
        Hamerly's single bound), near centroids
        together: halve every group at the median of its projection on its principal axis,
        log2 t times. A group's bound falls by its own largest drift, so groups of
        neighbours keep far groups' bounds high."""
        k, d = C.shape
        t = 1
        while 2 * t <= min(cls.MAX_GROUPS, k // cls.MIN_GROUP_SIZE, k * d // cls.MIN_GROUP_WORK):
            t *= 2
        group = np.zeros(k, dtype=np.int64)
        members = [np.arange(k)]
        while len(members) < t:
            halves = []
            for idx in members:
                P = np.asarray(C[idx], dtype=np.float64)
                P = P - P.mean(axis=0)
                # About the principal axis: a few power iterations from the farthest point
                # (an SVD of the (k, d) centroids would cost a good part of a step).
                axis = P[np.argmax(np.einsum("ij,ij->i", P, P))]
                for _ in range(8):
                    axis = P.T @ (P @ axis)
                    axis /= np.linalg.norm(axis) or 1.0
                order = idx[np.argsort(P @ axis, kind="stable")]
                halves += [np.sort(order[: len(idx) // 2]), np.sort(order[len(idx) // 2 :])]
            members = halves
        for g, idx in enumerate(members):
            group[idx] = g
        return group

    def __call__(self, C):
        stats, n_distances = self._step(C, exact=False)
        if n_distances < self.X.shape[0] * C.shape[0]:
            stats = stats._replace(min_margin=float("nan"))
        return stats

    def final(self, C):
        """The fit's final pass at C: (BlockStats, labels (n,)), the distortion and
        min_margin those of `block_stats` bit for bit (`exact`: every row's distance to its
        label's group is computed, and every row whose margin the bounds leave open below
        the least one found); None with one group (every distance: the plain pass)."""
        if self.group is not None and self.group.max() == 0:
            return None
        stats, _ = self._step(C, exact=True)
        return stats, self.labels

    def _step(self, C, exact):
        if self.group is None:
            self.group = self.centroid_groups(C)
            t = int(self.group.max()) + 1
            self.lower = np.zeros((self.X.shape[0], t), dtype=np.float64)
        stats, _, n_distances = _native.hard_stats_bounded(
            self.X,
            C,
            self.C_prev,
            self.w,
            self.labels,
            self.lower,
            self.group,
            self.n_threads,
            exact=exact,
        )
        self.C_prev = C
        return stats, n_distances

    def labels_at(self, C):
        """The labels at C when C is the input of the last step (else None)."""
        return self.labels if C is self.C_prev else None


def _width(kind, sigma, critical_sigma):
    """The sigma a fit runs at: 0 for "hard", the given one, or the default fraction of
    the critical width (1.0 when every point is the same, where any width will do)."""
    if kind == "hard":
        return 0.0
    if sigma is not None:
        return float(sigma)
    sigma = DEFAULT_SIGMA_FRACTION * critical_sigma
    return sigma if sigma > 0 else 1.0


def _tolerance(cov, tol):
    """tol x the mean (weighted) feature variance (scikit-learn's `_tolerance`).

    NOTE: scikit-learn ignores sample weights here; we weight the variance so that
    integer weights and duplicated rows give the same tolerance (with unit weights the
    two agree up to rounding).
    """
    return float(np.mean(cov.diagonal()) * tol) if tol else 0.0


def _same_clustering(labels1, labels2, k):
    """True when the two labelings are equal up to a permutation of the labels."""
    pairs = np.unique(np.asarray(labels1, dtype=np.int64) * k + labels2)
    return np.unique(pairs // k).size == pairs.size
