"""Deterministic annealing (the schedule: `softkmeans.fit.annealing_schedule`), over a data source.

Each step is one `stats` pass over [X, 0] at centroids with their prior coordinate; each
width's split test one `responsibility_moments` pass; the exact finish one hard pass per
step (SPEC.md, "Margins and temperatures").
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import _native
from ..sources import reads
from .annealing_passes import add_farthest, responsibility_moments
from .annealing_schedule import AnnealingSchedule
from .metric import EUCLIDEAN
from .split_merge import split_merge
from .steps import run_steps
from .tasks import NO_TASKS

__all__ = ["finish_exact", "run_annealing"]


def _with_priors(C, p, sigma, dtype):
    """(m, d + 1) centroids whose last coordinate b_j^2 = 2 sigma^2 log(p_max / p_j)."""
    logp = np.log(np.maximum(p, 1e-300))
    b = np.sqrt(2.0 * sigma * sigma * (logp.max() - logp))
    return np.hstack([C, b[:, None]]).astype(dtype)


def _split_candidates(source, C, p, sigma, kind, metric):
    """(lambda_j, j, cov_j) for centroids whose critical width is above sigma, largest
    first (cov_j: the centroid's posterior covariance)."""
    Ca = _with_priors(C, p, sigma, source.dtype)
    moments = responsibility_moments(source, Ca, kind, sigma)
    n_threads = source.n_threads
    m = C.shape[0]
    if m > 1:
        C64 = np.ascontiguousarray(C, dtype=np.float64)
        G = _native.sq_distances(C64, C64, n_threads)
        G[np.arange(m), np.arange(m)] = np.inf
        nearest = G.min(axis=1)
    else:
        nearest = np.full(1, np.inf)
    out = []
    for j, (U, mean, cov) in enumerate(moments):
        if not U > 0:
            continue
        lam = metric.critical_lambda(mean, cov)
        # A fresh twin pair is still one cluster: neither half may split again until
        # they are resolved, i.e. apart by half the cluster's width or more.
        if sigma * sigma < lam and nearest[j] >= 0.25 * lam:
            out.append((lam, j, cov))
    out.sort(key=lambda c: c[:2], reverse=True)
    return out


def _split_direction(cov, d, rng, along_axis):
    """A direction to split along: the principal axis of cov (the direction in which the
    centroid has become unstable; no draw, so the split is the same for every seed) or a
    random one."""
    if along_axis:
        return np.linalg.eigh(np.asarray(cov, dtype=np.float64))[1][:, -1]
    return rng.normal(size=d)


def run_annealing(
    source,
    n_clusters,
    schedule: AnnealingSchedule,
    *,
    critical_sigma: float,
    tol: float,
    max_iter: int,
    rng,
    history,
    relocate,
    report=None,
    task=NO_TASKS,
    metric=EUCLIDEAN,
    on_width=None,
    watch_blocked=False,
    axis_splits=False,
):
    """Anneal from the weighted mean; returns (centroids, final sigma, exact_lloyd).

    history: a `softkmeans.fit.steps.History` of each step and transition; relocate(C_old,
    step) -> centroids: the empty-cluster policy (finish); report(sigma, step, shift,
    n_centroids, elapsed): once per width (verbose); max_iter bounds the finish; task: the
    run's `softkmeans.fit.tasks.Task` (a subtask per width, one for the finish; a width
    that asks to stop ends the cooling); metric: `softkmeans.fit.metric`'s (step, start,
    split widths); on_width(sigma, C, objective, blocked) -> bool: after each width (the
    phase diagram, `softkmeans.fit.phase_diagram`), True ends the cooling. blocked: a
    centroid was critical at this width but every centroid was in use, so it could not
    split (evaluated only with ``watch_blocked``, at one moments pass per width once all are
    in use; else False). axis_splits: split along each centroid's principal axis instead of
    a random direction (the phase diagram: its k must not depend on the seed).
    """
    start, stop = schedule.resolve(critical_sigma)
    mean, _ = reads.moments(source)
    cooling = _Cooling(source, schedule, metric, metric.start(mean)[None, :], start)
    t0 = time.perf_counter()
    C, sigma = _cool(
        cooling, n_clusters, stop, tol=tol, rng=rng, history=history, task=task, report=report,
        t0=t0, on_width=on_width, watch_blocked=watch_blocked, axis_splits=axis_splits,
    )  # fmt: skip
    C = C.astype(source.dtype)
    if C.shape[0] < n_clusters:
        C = add_farthest(source, C, n_clusters)
    if not schedule.finish:
        return C, sigma, False
    finish = task.subtask("finish", max_subtasks=max(int(max_iter), 1))
    C, sigma, exact = _finish(
        source, C, sigma, schedule, max_iter=max_iter, history=history, relocate=relocate,
        task=finish, metric=metric,
    )  # fmt: skip
    if report is not None and history.n_iter:
        report(sigma, None, history.shift[-1], n_clusters, time.perf_counter() - t0)
    return C, sigma, exact


def _cool(
    cooling,
    n_clusters,
    stop,
    *,
    tol,
    rng,
    history,
    task,
    report,
    t0,
    on_width,
    watch_blocked,
    axis_splits,
):
    """Split, then step to convergence, at each width from cooling.sigma down to stop:
    (centroids, last sigma). Each width is a subtask of task; the cooling ends at stop, or
    earlier when a width's subtask or on_width asks to stop (run_annealing's arguments)."""
    schedule = cooling.schedule
    while True:
        C, blocked = cooling.split(n_clusters, rng, history, watch_blocked, axis_splits)
        width = task.subtask(f"width {cooling.sigma:.6g}", max_subtasks=schedule.steps)
        width.begin()
        C, step, shift = run_steps(
            C, cooling.step, max_steps=schedule.steps, tol=tol, history=history, min_steps=2,
            task=width,
        )  # fmt: skip
        cooling.C, sigma, n_iter = C, cooling.sigma, history.n_iter
        if report is not None:
            report(sigma, step, shift, C.shape[0], time.perf_counter() - t0)

        def state(C=C, sigma=sigma, n_iter=n_iter):
            return {"cluster_centers_": C, "sigma_": sigma, "n_iter_": n_iter}

        observed_stop = on_width is not None and on_width(sigma, C, history.objective[-1], blocked)
        if width.end(state) or observed_stop or sigma <= stop:
            break
        cooling.sigma = max(sigma * schedule.cooling, stop)
    return C, sigma


class _Cooling:
    """The state of a cooling (centroids C, their priors p, the width sigma) and its two
    moves: a step at sigma (one stats pass over [X, 0]) and the splits at a width."""

    def __init__(self, source, schedule, metric, C, sigma):
        self.source, self.schedule, self.metric = source, schedule, metric
        self.augmented = reads.augmented(source)
        self.C, self.p, self.sigma = C, np.ones(1), sigma

    def step(self, C):
        source, kind, sigma = self.source, self.schedule.kind, self.sigma
        Ca = _with_priors(C, self.p, sigma, source.dtype)
        stats, _ = reads.stats(self.augmented, Ca, kind, sigma)
        result = self.metric.step(stats, Ca)
        C_new = result.centroids[:, : source.shape[1]].astype(np.float64)
        # A centroid that lost all its mass keeps its place (and its tiny mass).
        C_new[result.empty] = C[result.empty]
        self.p = np.maximum(stats.cluster_weights / stats.weight, 1e-300)
        # The step's margin is that of the augmented space, not the data's: the history
        # shows nan while annealing.
        return result._replace(centroids=C_new, min_margin=float("nan")), sigma, kind

    def split(self, n_clusters, rng, history, watch_blocked=False, axis_splits=False):
        """(C after the splits at this width (up to schedule.splits, n_clusters in all),
        blocked: a centroid was critical but no room was left, only with watch_blocked)."""
        C, sigma, schedule = self.C, self.sigma, self.schedule
        blocked = False
        if C.shape[0] < n_clusters or watch_blocked:
            cands = _split_candidates(self.source, C, self.p, sigma, schedule.kind, self.metric)
            blocked = watch_blocked and len(cands) > n_clusters - C.shape[0]
            room = min(n_clusters - C.shape[0], schedule.splits)
            if cands[:room]:
                before = C.shape[0]
                C, self.p = _split(
                    C, self.p, cands[:room], rng, schedule.perturbation, self.metric, axis_splits
                )
                history.transition(sigma, history.n_iter, before, C.shape[0])
        self.C = C
        return C, blocked


def _split(C, p, cands, rng, perturbation, metric, axis_splits):
    """C and p with each candidate centroid j split into c_j +- u (|u| = perturbation x
    sqrt(lambda_j), along `_split_direction`), its prior halved between the twins."""
    d = C.shape[1]
    newC, newp = [], []
    for lam, j, cov in cands:
        u = _split_direction(cov, d, rng, axis_splits)
        u *= perturbation * math.sqrt(lam) / np.linalg.norm(u)
        newC.append(C[j] - u)
        C[j] = C[j] + u
        p[j] /= 2.0
        newp.append(p[j])
    C = np.vstack([C, np.array(newC)])
    return metric.project(C, C), np.concatenate([p, newp])


def _finish(source, C, sigma, schedule, *, max_iter, history, relocate, task, metric):
    """The exact finish (`finish_exact`), then split-merge where the schedule asks, as
    the subtask `task`: (centroids, sigma, exact_lloyd)."""
    k = C.shape[0]
    task.begin()
    C, sigma, exact = finish_exact(
        source, C, sigma, max_iter=max_iter, history=history, relocate=relocate,
        task=task, metric=metric,
    )  # fmt: skip
    # Euclidean only: its splits along a principal axis would leave the unit sphere.
    if schedule.split_merge and metric is EUCLIDEAN:
        C, moves = split_merge(source, C, max_iter=max_iter, max_rounds=4 * k)
        if moves:  # the search's Lloyd runs end at a fixed point: confirm it exactly
            C, sigma, exact = finish_exact(
                source, C, sigma, max_iter=max_iter, history=history, relocate=relocate,
                task=task,
            )  # fmt: skip
    n_iter = history.n_iter
    task.end(lambda: {"cluster_centers_": C, "sigma_": sigma, "n_iter_": n_iter})
    return C, sigma, exact


def finish_exact(source, C, sigma, *, max_iter, history, relocate, task=NO_TASKS, metric=EUCLIDEAN):
    """entmax15 steps below the exact-recovery threshold until a Lloyd fixed point.

    Returns (centroids, last sigma, exact_lloyd of the last step). Each step is one pass:
    the step from C_t runs at sigma_t = min(sigma, sqrt(Delta_min(C_t)) / 4), and below
    the threshold sqrt(Delta_min) / 2 the native entmax15 step returns exactly the bits of
    the hard step (SPEC.md, "Margins and temperatures"). So one hard pass at C_t gives
    both Delta_min(C_t), which fixes sigma_t, and the entmax15 step at sigma_t.
    """
    k = C.shape[0]
    if k < 2:
        stats, _ = reads.stats(source, C, "hard", 0.0)
        step = metric.step(stats, C)
        history.record(0.0, step.objective, step.distortion, 0.0, "hard", step.min_margin)
        return step.centroids, sigma, True
    exact = False

    def exact_step(C):
        nonlocal sigma, exact
        stats, _ = reads.stats(source, C, "hard", 0.0)
        step = metric.step(stats, C)
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
        task=task,
    )
    return C, sigma, exact
