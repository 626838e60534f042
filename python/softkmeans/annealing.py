"""Deterministic annealing (Rose, Gurewitz & Fox 1990; Rose 1998) on the softkmeans engine.

Temperature convention (as everywhere in softkmeans): we speak of the RBF width sigma; the
temperature is T = 2 sigma^2 and the scores are z_ij = -D_ij / (2 sigma^2).

The driver

1. starts with every centroid at the weighted mean mu, at ``start`` (default
   1.2 x critical_sigma, above the critical width sqrt(lambda_max) where all-at-mu is a
   strict local minimizer of F_sigma, SPEC.md "Critical temperature");
2. at each width perturbs the centroids by Gaussian noise of size
   ``perturbation x critical_sigma`` (so that they *can* split), then runs softmax
   centroid steps until they settle (see `_settled`); cools geometrically,
   sigma <- ``cooling`` x sigma, down to ``stop`` (default 0.05 x critical_sigma);
3. counts the distinct centroids after each width; a width at which the count grows is a
   phase transition and is recorded (sigma, iteration, count before and after);
4. finishes exactly at Lloyd: coincident centroids are separated (the copies move to the
   points farthest from their centroid, as an empty cluster would), then entmax15 steps
   run at sigma_t = min(sigma, sqrt(Delta_min(C_t)) / 4), half the exact-recovery
   threshold sqrt(Delta_min) / 2, until the centroids stop moving. Below that threshold an
   entmax15 step *is* Lloyd's step, so the result is a K-Means fixed point.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import time

import numpy as np

from . import _api

__all__ = ["AnnealingSchedule", "check_schedule", "run_annealing"]


@dataclasses.dataclass(frozen=True)
class AnnealingSchedule:
    """A deterministic-annealing schedule; widths are sigmas (T = 2 sigma^2).

    start:        initial sigma; None -> 1.2 x critical_sigma (above the first phase
                  transition, where all centroids sit at the mean).
    stop:         last annealing sigma; None -> 0.05 x critical_sigma.
    cooling:      geometric factor in (0, 1): sigma <- cooling x sigma.
    steps:        most centroid steps per width (a width ends earlier once settled).
    perturbation: noise added at each width, relative to critical_sigma.
    kind:         assignment map during annealing: "softmax" (classical DA, Shannon
                  entropy) or "entmax15".
    finish:       True: end with entmax15 below the exact-recovery threshold, i.e. Lloyd
                  (the result is a K-Means fixed point); False: stop at ``stop``.
    """

    start: float | None = None
    stop: float | None = None
    cooling: float = 0.9
    steps: int = 200
    perturbation: float = 1e-3
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
        if isinstance(self.steps, bool) or not isinstance(self.steps, numbers.Integral):
            raise TypeError(f"anneal steps must be a positive int; got {self.steps!r}")
        if self.steps < 1:
            raise ValueError(f"anneal steps must be >= 1; got {self.steps}")
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
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.generic)):
        raise TypeError(f"anneal {name} must be a real number; got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"anneal {name} must be finite; got {value}")
    return value


def _positive(value, name):
    value = _real(value, name)
    if value <= 0:
        raise ValueError(f"anneal {name} must be > 0; got {value}")
    return value


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


def count_distinct(C, threshold: float) -> int:
    """Number of groups of centroids, single linkage at squared distance <= threshold^2."""
    k = C.shape[0]
    if k <= 1:
        return k
    D = _api.sq_distances(C, C).astype(np.float64)
    close = D <= threshold * threshold
    group = -np.ones(k, dtype=np.int64)
    n_groups = 0
    for j in range(k):
        if group[j] >= 0:
            continue
        stack = [j]
        group[j] = n_groups
        while stack:
            a = stack.pop()
            for b in np.flatnonzero(close[a] & (group < 0)):
                group[b] = n_groups
                stack.append(b)
        n_groups += 1
    return n_groups


def _settled(shift, settle_tol):
    """A width is done once one step moves the centroids by at most ``settle_tol``.

    ``settle_tol`` is far below the perturbation (1% of it, squared), not just ``tol``:
    just below a critical width the split grows geometrically from the perturbation's
    size, by a factor close to 1 per step, so a shift of the order of the perturbation
    means the centroids are still moving apart, not that they have settled.
    """
    return shift <= settle_tol


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
    n_threads,
    history,
    relocate,
    report=None,
):
    """Anneal from the weighted mean; returns (centroids, final sigma, exact_lloyd, n_iter).

    history: a `softkmeans.estimator._History` that records each step and transition.
    relocate(C_old, step) -> centroids: the estimator's empty-cluster policy.
    report(sigma, step, shift, n_distinct, elapsed): called once per width (verbose).
    max_iter bounds the finishing Lloyd phase.
    """
    start, stop = schedule.resolve(critical_sigma)
    scale = critical_sigma if critical_sigma > 0 else 1.0
    mu = (w @ X.astype(np.float64)) / w.sum()
    C = np.tile(mu, (n_clusters, 1)).astype(X.dtype)
    noise = schedule.perturbation * scale / math.sqrt(X.shape[1])
    settle_tol = min(tol, (1e-2 * schedule.perturbation * scale) ** 2) if noise > 0 else tol
    # Coincident: closer than 10x the perturbation. Distinct (for counting splits): also
    # farther apart than sigma / 4, i.e. resolved at the current width.
    merge = 10.0 * max(schedule.perturbation, 1e-6) * scale
    n_distinct = 1
    sigma = start
    t0 = time.perf_counter()
    n_iter = 0
    while True:
        if noise > 0 and n_clusters > 1:
            C = (C + rng.normal(scale=noise, size=C.shape)).astype(X.dtype)
        shift = 0.0
        step = None
        for _ in range(schedule.steps):
            step = _api.centroid_step(
                X, C, sigma, kind=schedule.kind, sample_weight=w, n_threads=n_threads
            )
            C_new = step.centroids
            if step.empty.any():
                C_new = relocate(C, step)
            shift = float(((C_new.astype(np.float64) - C) ** 2).sum())
            n_iter += 1
            history.record(sigma, step.objective, step.distortion, shift, schedule.kind)
            C = C_new
            if _settled(shift, settle_tol):
                break
        new_distinct = count_distinct(C, max(merge, sigma / 4.0))
        if new_distinct > n_distinct:
            history.transition(sigma, n_iter, n_distinct, new_distinct)
        n_distinct = new_distinct
        if report is not None:
            report(sigma, step, shift, n_distinct, time.perf_counter() - t0)
        if sigma <= stop:
            break
        sigma = max(sigma * schedule.cooling, stop)

    exact = False
    if schedule.finish:
        C, sigma, exact, n_fin = finish_exact(
            X,
            w,
            C,
            sigma,
            merge=merge,
            max_iter=max_iter,
            n_threads=n_threads,
            history=history,
            relocate=relocate,
        )
        n_iter += n_fin
        if report is not None and history.n_iter:
            report(sigma, None, history.shift[-1], n_clusters, time.perf_counter() - t0)
    return C, sigma, exact, n_iter


def _separate_duplicates(X, w, C, merge, n_threads):
    """Move all but one of each group of coincident centroids to far-away points."""
    k = C.shape[0]
    D = _api.sq_distances(C, C).astype(np.float64)
    dup = np.zeros(k, dtype=bool)
    for j in range(k):
        if not dup[j]:
            later = np.flatnonzero(D[j, j + 1 :] <= merge * merge) + j + 1
            dup[later] = True
    if not dup.any():
        return C
    C = C.copy()
    keep = np.flatnonzero(~dup)
    _, dist = _api.assign(X, C[keep], n_threads=n_threads)
    dist = dist.astype(np.float64) * (w > 0)
    far = np.argsort(-dist, kind="stable")[: int(dup.sum())]
    C[np.flatnonzero(dup)] = X[far]
    return C


def finish_exact(X, w, C, sigma, *, merge, max_iter, n_threads, history, relocate):
    """entmax15 steps below the exact-recovery threshold until a Lloyd fixed point.

    Returns (centroids, last sigma, exact_lloyd of the last step, iterations).
    """
    k = C.shape[0]
    if k < 2:
        step = _api.centroid_step(X, C, kind="hard", sample_weight=w, n_threads=n_threads)
        history.record(0.0, step.objective, step.distortion, 0.0, "hard")
        return step.centroids, sigma, True, 1
    C = _separate_duplicates(X, w, C, merge, n_threads)
    positive = w > 0
    exact = False
    n_iter = 0
    for _ in range(max(int(max_iter), 1)):
        m = float(_api.margins(X, C, n_threads=n_threads)[positive].min())
        if m > 0.0:
            sigma = min(sigma, math.sqrt(m) / 4.0)
            step = _api.centroid_step(
                X, C, sigma, kind="entmax15", sample_weight=w, n_threads=n_threads
            )
            exact = sigma <= math.sqrt(step.min_margin) / 2.0
            kind = "entmax15"
        else:
            # A point exactly equidistant from two centroids: no sigma > 0 makes entmax15
            # one-hot there, so this step is Lloyd's own (ties to the smallest index).
            step = _api.centroid_step(X, C, kind="hard", sample_weight=w, n_threads=n_threads)
            exact = False
            kind = "hard"
        C_new = step.centroids
        if step.empty.any():
            C_new = relocate(C, step)
        shift = float(((C_new.astype(np.float64) - C) ** 2).sum())
        n_iter += 1
        history.record(sigma, step.objective, step.distortion, shift, kind)
        C = C_new
        if shift == 0.0:
            break
    return C, sigma, exact, n_iter
