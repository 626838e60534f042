"""Deterministic annealing (Rose, Gurewitz & Fox 1990; Rose 1998) on the softkmeans engine.

Temperature convention (as everywhere in softkmeans): we speak of the RBF width sigma; the
temperature is T = 2 sigma^2 and the scores are z_ij = -D_ij / (2 sigma^2).

This is *mass-constrained* DA: each distinct centroid j carries a mass p_j (its share of
the weight) and the responsibilities are r_ij ~ p_j exp(-D_ij / (2 sigma^2)), so a
centroid's pull does not depend on how many copies of it exist. The engine's kernels have
no per-centroid prior, so the masses enter through one extra coordinate: x'_i = (x_i, 0),
c'_j = (c_j, b_j) with b_j^2 = 2 sigma^2 log(p_max / p_j), which gives
D'_ij = D_ij - 2 sigma^2 log p_j + const and hence exactly those responsibilities from the
native ``centroid_step``.

The driver

1. starts with one centroid at the weighted mean mu (mass 1), at ``start`` (default
   1.2 x critical_sigma, above the critical width sqrt(lambda_max) where the mean is a
   strict local minimizer, SPEC.md "Critical temperature");
2. cools geometrically, sigma <- ``cooling`` x sigma, down to ``stop`` (default
   0.05 x critical_sigma). At each width, while there are fewer than k centroids, each
   centroid j whose own critical width has been crossed -- sigma^2 < lambda_max of its
   posterior covariance sum_i w_i r_ij (x_i - c_j)(x_i - c_j)^T / N_j, computed by
   ``softkmeans.critical_sigma(X, sample_weight=w * r_j)`` -- is split into two copies
   perturbed by +-``perturbation`` x its own width in a random direction (largest
   critical widths first, at most ``splits`` per width). Each split is a phase
   transition, recorded (sigma, iteration, count before and after). The two halves of a
   fresh split are one cluster until they are resolved, so neither may split again before
   they are apart by half the cluster's width, sqrt(lambda_max) / 2. Then centroid steps
   run until the shift is <= tol;
3. finishes exactly at Lloyd: if fewer than k centroids exist at ``stop``, the missing ones
   are placed on the points farthest from their centroid; then entmax15 steps run at
   sigma_t = min(sigma, sqrt(Delta_min(C_t)) / 4), half the exact-recovery threshold
   sqrt(Delta_min) / 2, until the centroids stop moving. Below that threshold an entmax15
   step *is* Lloyd's step, so the result is a K-Means fixed point.

Reading the data. Every read of X goes through the methods of `AnnealingReads` (the
fused ``block_stats`` pass ``_pass`` and the covariance ``_covariance`` of the fitting
driver, plus the three below), which `softkmeans._driver.Fitter` mixes in. In memory they
call the native core on X; `softkmeans.dask` overrides them with passes over the blocks of
a Dask array, so one implementation of the schedule runs in both places.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from . import _native, _sparse, _stats
from . import _validation as v
from ._steps import run_steps

__all__ = ["AnnealingReads", "AnnealingSchedule", "check_schedule", "run_annealing"]


@dataclasses.dataclass(frozen=True)
class AnnealingSchedule:
    """A deterministic-annealing schedule; widths are sigmas (T = 2 sigma^2).

    start:        initial sigma; None -> 1.2 x critical_sigma (above the first phase
                  transition, where all centroids sit at the mean).
    stop:         last annealing sigma; None -> 0.05 x critical_sigma.
    cooling:      geometric factor in (0, 1): sigma <- cooling x sigma.
    steps:        most centroid steps per width (a width ends once the shift <= tol).
    perturbation: size of the split of a centroid, relative to its own critical width.
    splits:       most centroids split per width (the largest critical widths first);
                  one at a time lets each split settle before the next is chosen.
    kind:         assignment map during annealing: "softmax" (classical DA, Shannon
                  entropy) or "entmax15".
    finish:       True: end with entmax15 below the exact-recovery threshold, i.e. Lloyd
                  (the result is a K-Means fixed point); False: stop at ``stop``.
    """

    start: float | None = None
    stop: float | None = None
    cooling: float = 0.95
    steps: int = 100
    perturbation: float = 1e-2
    splits: int = 1
    kind: str = "softmax"
    finish: bool = True

    def __post_init__(self):
        for name in ("start", "stop"):
            value = getattr(self, name)
            if value is not None:
                _positive(value, name)
        c = _real(self.cooling, "cooling")
        if not 0.0 < c < 1.0:
            raise ValueError(f"anneal cooling must be in (0, 1); got {c}")
        for name in ("steps", "splits"):
            v.check_int(getattr(self, name), f"anneal {name}", 1)
        p = _real(self.perturbation, "perturbation")
        if not 0.0 <= p < 1.0:
            raise ValueError(f"anneal perturbation must be in [0, 1); got {p}")
        if self.kind not in ("softmax", "entmax15"):
            raise ValueError(f"anneal kind must be 'softmax' or 'entmax15'; got {self.kind!r}")
        if self.start is not None and self.stop is not None and self.stop > self.start:
            raise ValueError(f"anneal stop ({self.stop}) must be <= start ({self.start})")

    def resolve(self, critical_sigma: float) -> tuple[float, float]:
        """(start, stop) in data units for data whose critical width is ``critical_sigma``."""
        scale = critical_sigma if critical_sigma > 0 else 1.0
        start = self.start if self.start is not None else 1.2 * scale
        stop = self.stop if self.stop is not None else 0.05 * scale
        return float(start), float(min(stop, start))


def _real(value, name):
    return v.check_real(value, f"anneal {name}")


def _positive(value, name):
    return v.check_real(value, f"anneal {name}", minimum=0.0, strict=True)


def check_schedule(anneal) -> AnnealingSchedule | None:
    """None/False -> None; True -> the default schedule; a dict or an AnnealingSchedule."""
    if anneal is None or anneal is False:
        return None
    if anneal is True:
        return AnnealingSchedule()
    if isinstance(anneal, AnnealingSchedule):
        return anneal
    if isinstance(anneal, dict):
        fields = {f.name for f in dataclasses.fields(AnnealingSchedule)}
        unknown = sorted(set(anneal) - fields)
        if unknown:
            raise ValueError(f"unknown anneal keys {unknown}; expected some of {sorted(fields)}")
        return AnnealingSchedule(**anneal)
    raise TypeError(
        f"anneal must be None, True, a dict or an AnnealingSchedule; got {type(anneal).__name__}"
    )


def _augment(X):
    """(n, d + 1) copy of X with a zero last column (the prior coordinate)."""
    if _sparse.is_sparse(X):
        return _sparse.with_zero_column(X)
    Xa = np.zeros((X.shape[0], X.shape[1] + 1), dtype=X.dtype)
    Xa[:, :-1] = X
    return Xa


def _with_priors(C, p, sigma, dtype):
    """(m, d + 1) centroids whose last coordinate b_j^2 = 2 sigma^2 log(p_max / p_j)."""
    logp = np.log(np.maximum(p, 1e-300))
    b = np.sqrt(2.0 * sigma * sigma * (logp.max() - logp))
    return np.hstack([C, b[:, None]]).astype(dtype)


def responsibility_moments(X, Xa, w, Ca, kind, sigma, n_threads):
    """[(U_j, weighted mean (d,), weighted covariance (d, d)) for each centroid j]: the
    moments of X under the weights u = w r_j, r the responsibilities of Xa at Ca
    (mean and covariance None where U_j = sum u is not positive)."""
    R = _native.responsibilities(Xa, Ca, kind, sigma, n_threads)
    out = []
    for j in range(Ca.shape[0]):
        u = w * R[:, j].astype(np.float64)
        U = float(u.sum())
        out.append((U, *_native.weighted_covariance(X, u, n_threads)) if U > 0 else (U, None, None))
    return out


def farthest_distances(X, positive, C, n_threads):
    """Squared distance of each row of X to its nearest centroid (0 where not positive)."""
    _, dist = _native.assign(X, np.ascontiguousarray(C, dtype=X.dtype), n_threads)
    return dist.astype(np.float64) * positive


def closer(dist, X, positive, row, n_threads=None):
    """`dist` lowered to the squared distance to `row` (dense, (d,)) where that is smaller."""
    if _sparse.is_sparse(X):
        _, to_row = _native.assign(X, row[None, :].astype(X.dtype), n_threads)
    else:
        to_row = ((X - row) ** 2).sum(axis=1)
    return np.minimum(dist, to_row * positive)


class AnnealingReads:
    """The reads of X that annealing makes besides the fitting driver's ``_pass`` and
    ``_covariance``, in memory; `softkmeans.dask` overrides them with block passes.

    Mixed into `softkmeans._driver.Fitter` (which sets ``_n_threads`` before a fit).
    """

    def _augment(self, X):
        """X with a zero last column (the prior coordinate)."""
        return _augment(X)

    def _responsibility_moments(self, X, Xa, w, Ca, kind, sigma):
        """`responsibility_moments` over all of X."""
        return responsibility_moments(X, Xa, w, Ca, kind, sigma, self._n_threads)

    def _add_farthest(self, X, w, C, k):
        """C with centroids added, one at a time, at the positive-weight row farthest from
        all centroids so far (ties to the first row)."""
        positive = w > 0
        C = [c for c in C]
        dist = farthest_distances(X, positive, np.array(C), self._n_threads)
        while len(C) < k:
            row = _sparse.dense_rows(X, [int(np.argmax(dist))])[0]
            C.append(row)
            dist = closer(dist, X, positive, row, self._n_threads)
        return np.array(C, dtype=X.dtype)


def _split_candidates(reads, X, Xa, w, C, p, sigma, kind, n_threads):
    """(lambda_j, j) for centroids whose critical width is above sigma, largest first."""
    Ca = _with_priors(C, p, sigma, X.dtype)
    moments = reads._responsibility_moments(X, Xa, w, Ca, kind, sigma)
    m = C.shape[0]
    if m > 1:
        C64 = np.ascontiguousarray(C, dtype=np.float64)
        G = _native.sq_distances(C64, C64, n_threads)
        G[np.arange(m), np.arange(m)] = np.inf
        nearest = G.min(axis=1)
    else:
        nearest = np.full(1, np.inf)
    out = []
    for j, (U, _, cov) in enumerate(moments):
        if not U > 0:
            continue
        lam = _stats.lambda_max(cov)
        # A fresh twin pair is still one cluster: neither half may split again until
        # they are resolved, i.e. apart by half the cluster's width or more.
        if sigma * sigma < lam and nearest[j] >= 0.25 * lam:
            out.append((lam, j))
    out.sort(reverse=True)
    return out


def run_annealing(
    X,
    w,
    n_clusters,
    schedule: AnnealingSchedule,
    *,
    critical_sigma: float,
    tol: float,
    max_iter: int,
    rng,
    reads,
    history,
    relocate,
    report=None,
):
    """Anneal from the weighted mean; returns (centroids, final sigma, exact_lloyd).

    X, w: the data and weights as the fitting driver validated them (NumPy, or Dask
    arrays with w None for unit weights). reads: the `softkmeans._driver.Fitter` of the
    fit (its ``_pass``, ``_covariance``, ``_n_threads`` and the `AnnealingReads` methods).
    history: a `softkmeans._steps.History` that records each step and transition.
    relocate(C_old, step) -> centroids: the estimator's empty-cluster policy (finish).
    report(sigma, step, shift, n_centroids, elapsed): called once per width (verbose).
    max_iter bounds the finishing Lloyd phase.
    """
    start, stop = schedule.resolve(critical_sigma)
    n_threads = reads._n_threads
    d = X.shape[1]
    Xa = reads._augment(X)
    mean, _ = reads._covariance(X, w)
    C = np.array(mean, dtype=np.float64)[None, :]
    p = np.ones(1)
    sigma = start
    t0 = time.perf_counter()

    def anneal_step(C):
        nonlocal p
        Ca = _with_priors(C, p, sigma, X.dtype)
        stats, _ = reads._pass(Xa, w, Ca, schedule.kind, sigma)
        result = _stats.step_result(stats, Ca)
        C_new = result.centroids[:, :d].astype(np.float64)
        # A centroid that lost all its mass keeps its place (and its tiny mass).
        C_new[result.empty] = C[result.empty]
        p = np.maximum(stats.cluster_weights / stats.weight, 1e-300)
        # The step's margin is that of the augmented space, not the data's: the history
        # shows nan while annealing.
        return result._replace(centroids=C_new, min_margin=float("nan")), sigma, schedule.kind

    while True:
        if C.shape[0] < n_clusters:
            cands = _split_candidates(reads, X, Xa, w, C, p, sigma, schedule.kind, n_threads)
            room = min(n_clusters - C.shape[0], schedule.splits)
            if cands[:room]:
                before = C.shape[0]
                newC, newp = [], []
                for lam, j in cands[:room]:
                    u = rng.normal(size=d)
                    u *= schedule.perturbation * math.sqrt(lam) / np.linalg.norm(u)
                    newC.append(C[j] - u)
                    C[j] = C[j] + u
                    p[j] /= 2.0
                    newp.append(p[j])
                C = np.vstack([C, np.array(newC)])
                p = np.concatenate([p, newp])
                history.transition(sigma, history.n_iter, before, C.shape[0])
        C, step, shift = run_steps(
            C, anneal_step, max_steps=schedule.steps, tol=tol, history=history, min_steps=2
        )
        if report is not None:
            report(sigma, step, shift, C.shape[0], time.perf_counter() - t0)
        if sigma <= stop:
            break
        sigma = max(sigma * schedule.cooling, stop)

    C = C.astype(X.dtype)
    if C.shape[0] < n_clusters:
        C = reads._add_farthest(X, w, C, n_clusters)
    exact = False
    if schedule.finish:
        C, sigma, exact = finish_exact(
            X, w, C, sigma, max_iter=max_iter, reads=reads, history=history, relocate=relocate
        )
        if report is not None and history.n_iter:
            report(sigma, None, history.shift[-1], n_clusters, time.perf_counter() - t0)
    return C, sigma, exact


def finish_exact(X, w, C, sigma, *, max_iter, reads, history, relocate):
    """entmax15 steps below the exact-recovery threshold until a Lloyd fixed point.

    Returns (centroids, last sigma, exact_lloyd of the last step). Each step is one pass:
    the step from C_t runs at sigma_t = min(sigma, sqrt(Delta_min(C_t)) / 4), and below
    the threshold sqrt(Delta_min) / 2 the native entmax15 step returns exactly the bits of
    the hard step (SPEC.md, "Margins and temperatures"). So one hard pass at C_t gives
    both Delta_min(C_t), which fixes sigma_t, and the entmax15 step at sigma_t.
    """
    k = C.shape[0]
    if k < 2:
        stats, _ = reads._pass(X, w, C, "hard", 0.0)
        step = _stats.step_result(stats, C)
        history.record(0.0, step.objective, step.distortion, 0.0, "hard", step.min_margin)
        return step.centroids, sigma, True
    exact = False

    def exact_step(C):
        nonlocal sigma, exact
        stats, _ = reads._pass(X, w, C, "hard", 0.0)
        step = _stats.step_result(stats, C)
        m = step.min_margin  # over the rows of positive weight
        if m > 0.0:
            sigma = min(sigma, math.sqrt(m) / 4.0)
            kind = "entmax15"
        else:
            # A point exactly equidistant from two centroids: no sigma > 0 makes entmax15
            # one-hot there, so this step is Lloyd's own (ties to the smallest index).
            kind = "hard"
        exact = kind == "entmax15"
        return step, sigma, kind

    C, _, _ = run_steps(
        C,
        exact_step,
        max_steps=max(int(max_iter), 1),
        tol=0.0,
        history=history,
        relocate=relocate,
    )
    return C, sigma, exact
