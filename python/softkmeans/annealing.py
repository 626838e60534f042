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
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from . import _native, _sparse, _stats
from . import _validation as v
from ._steps import run_steps

__all__ = ["AnnealingSchedule", "check_schedule", "run_annealing"]


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


def _cluster_lambda_max(X, u, n_threads):
    """lambda_max of the covariance of X under weights u (= critical_sigma(X, u)^2)."""
    _, cov = _native.weighted_covariance(X, u, n_threads)
    return _stats.lambda_max(cov)


def _split_candidates(X, Xa, w, C, p, sigma, kind, n_threads):
    """(lambda_j, j) for centroids whose critical width is above sigma, largest first."""
    R = _native.responsibilities(Xa, _with_priors(C, p, sigma, X.dtype), kind, sigma, n_threads)
    m = C.shape[0]
    if m > 1:
        C64 = np.ascontiguousarray(C, dtype=np.float64)
        G = _native.sq_distances(C64, C64, n_threads)
        G[np.arange(m), np.arange(m)] = np.inf
        nearest = G.min(axis=1)
    else:
        nearest = np.full(1, np.inf)
    out = []
    for j in range(m):
        u = w * R[:, j].astype(np.float64)
        if not u.sum() > 0:
            continue
        lam = _cluster_lambda_max(X, u, n_threads)
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
    n_threads,
    history,
    relocate,
    report=None,
):
    """Anneal from the weighted mean; returns (centroids, final sigma, exact_lloyd).

    X, w: validated data and float64 weights; n_threads: an int (0: the OpenMP default).
    history: a `softkmeans._steps.History` that records each step and transition.
    relocate(C_old, step) -> centroids: the estimator's empty-cluster policy (finish).
    report(sigma, step, shift, n_centroids, elapsed): called once per width (verbose).
    max_iter bounds the finishing Lloyd phase.
    """
    start, stop = schedule.resolve(critical_sigma)
    d = X.shape[1]
    Xa = _augment(X)
    W = float(w.sum())
    C = ((w @ X.astype(np.float64)) / W)[None, :]
    p = np.ones(1)
    sigma = start
    t0 = time.perf_counter()

    def anneal_step(C):
        nonlocal p
        Ca = _with_priors(C, p, sigma, X.dtype)
        stats, _, _ = _native.block_stats(Xa, Ca, schedule.kind, sigma, w, n_threads)
        result = _stats.step_result(stats, Ca)
        C_new = result.centroids[:, :d].astype(np.float64)
        # A centroid that lost all its mass keeps its place (and its tiny mass).
        C_new[result.empty] = C[result.empty]
        p = np.maximum(stats.cluster_weights / W, 1e-300)
        # The step's margin is that of the augmented space, not the data's: the history
        # shows nan while annealing.
        return result._replace(centroids=C_new, min_margin=float("nan")), sigma, schedule.kind

    while True:
        if C.shape[0] < n_clusters:
            cands = _split_candidates(X, Xa, w, C, p, sigma, schedule.kind, n_threads)
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
        C = _add_farthest(X, w, C, n_clusters, n_threads)
    exact = False
    if schedule.finish:
        C, sigma, exact = finish_exact(
            X,
            w,
            C,
            sigma,
            max_iter=max_iter,
            n_threads=n_threads,
            history=history,
            relocate=relocate,
        )
        if report is not None and history.n_iter:
            report(sigma, None, history.shift[-1], n_clusters, time.perf_counter() - t0)
    return C, sigma, exact


def _add_farthest(X, w, C, k, n_threads):
    """Add centroids, one at a time, at the positive-weight point farthest from all."""
    C = [c for c in C]
    _, dist = _native.assign(X, np.array(C, dtype=X.dtype), n_threads)
    dist = dist.astype(np.float64) * (w > 0)
    while len(C) < k:
        i = int(np.argmax(dist))
        x_i = _sparse.dense_rows(X, [i])[0]
        C.append(x_i)
        if _sparse.is_sparse(X):
            _, to_i = _native.assign(X, x_i[None, :], n_threads)
        else:
            to_i = ((X - X[i]) ** 2).sum(axis=1)
        dist = np.minimum(dist, to_i * (w > 0))
    return np.array(C, dtype=X.dtype)


def finish_exact(X, w, C, sigma, *, max_iter, n_threads, history, relocate):
    """entmax15 steps below the exact-recovery threshold until a Lloyd fixed point.

    Returns (centroids, last sigma, exact_lloyd of the last step). NOTE: each step reads X
    twice, once for the margins that choose its sigma and once for the step itself.
    """
    k = C.shape[0]
    if k < 2:
        stats, _, _ = _native.block_stats(X, C, "hard", 0.0, w, n_threads)
        step = _stats.step_result(stats, C)
        history.record(0.0, step.objective, step.distortion, 0.0, "hard", step.min_margin)
        return step.centroids, sigma, True
    positive = w > 0
    exact = False

    def exact_step(C):
        nonlocal sigma, exact
        m = float(_native.margins(X, C, n_threads)[positive].min())
        if m > 0.0:
            sigma = min(sigma, math.sqrt(m) / 4.0)
            kind = "entmax15"
        else:
            # A point exactly equidistant from two centroids: no sigma > 0 makes entmax15
            # one-hot there, so this step is Lloyd's own (ties to the smallest index).
            kind = "hard"
        stats, _, _ = _native.block_stats(X, C, kind, sigma, w, n_threads)
        step = _stats.step_result(stats, C)
        exact = kind == "entmax15" and sigma <= math.sqrt(step.min_margin) / 2.0
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
