"""A split-merge search at zero temperature: how annealing ends (`softkmeans.fit.annealing`).

Why annealing needs it. Deterministic annealing follows one branch of fixed points of
F_sigma by continuation. Where the lowest branch is born away from the followed one (a
first-order transition), continuation cannot reach it, however slowly it cools. Unscaled
wine at k = 3 shows it: heating the best k-means++ solution and cooling the annealed one
through the same widths, the two branches are one above sigma ~ 100 and apart below it;
at sigma = 50 the branch annealing follows has F 4.5 % above the other, and it ends at
J = 2.629e6 against 2.371e6 for every seed and cooling (issue 25). The same happens on
standardized breast-cancer (k = 5: 12.7 % above the best of ten k-means++ runs) and wine
(k = 5: 3.9 %).

The move (Ueda et al. 2000's split-and-merge, at zero temperature): remove one centroid,
its points going to their next nearest, and split the costliest cluster of the rest
(largest share of J at its centroid c) in two along its principal axis, at
c +- sqrt(lambda_max); then Lloyd to a fixed point. (Measured on unscaled wine, k = 5:
splitting at the cluster's new mean, or ranking by weight x trace alone, finds no
improving move there; at c with the share of J it finds the best known J.) A move is
kept when it lowers J. The centroids to remove are tried cheapest first (the J without
them, one pass each), the first improvement is kept, and the search repeats until a full
round improves nothing.
Each round costs k hard passes to rank, and per tried move one moments pass and a Lloyd
run.
"""

from __future__ import annotations

import numpy as np

from .. import _stats
from ..sources import reads
from .annealing_passes import responsibility_moments
from .progress import OncePerFit
from .relocation import relocator
from .steps import History, run_steps

__all__ = ["split_merge"]

# A move must lower J by more than rounding to count: Lloyd runs from two starts that
# end at the same partition give J equal to about this relative precision.
_IMPROVEMENT = 1e-12


def split_merge(source, C, *, max_iter, max_rounds):
    """Centroids C (k, d), a Lloyd fixed point, improved by split-merge moves.

    Returns (centroids in the source's dtype, number of moves kept). The trial Lloyd runs
    relocate empty clusters as a hard fit does, without warning: most trials are
    discarded, and the caller's exact finish from the kept one warns where it must.
    """
    relocate = relocator(source, "hard", OncePerFit())  # never flushed: trials are silent
    k = C.shape[0]
    if k < 2:
        return C, 0
    J = _distortion(source, C)
    kept = 0
    for _ in range(max_rounds):
        for j in _removal_order(source, C):
            trial = _lloyd(source, _moved(source, C, j), max_iter, relocate)
            J_trial = _distortion(source, trial)
            if J_trial < J * (1.0 - _IMPROVEMENT):
                C, J = trial, J_trial
                kept += 1
                break
        else:
            break
    return C, kept


def _distortion(source, C):
    stats, _ = reads.stats(source, np.asarray(C, dtype=source.dtype), "hard", 0.0, sums=False)
    return float(stats.distortion)


def _removal_order(source, C):
    """Centroid indices by the J of the other centroids alone, smallest first."""
    cost = [_distortion(source, np.delete(C, j, axis=0)) for j in range(C.shape[0])]
    return np.argsort(cost, kind="stable")


def _moved(source, C, j):
    """C without c_j and with its costliest remaining cluster split along its axis."""
    rest = np.delete(np.asarray(C, dtype=np.float64), j, axis=0)
    Ca = np.hstack([rest, np.zeros((rest.shape[0], 1))]).astype(source.dtype)
    moments = responsibility_moments(source, Ca, "hard", 0.0)
    # A cluster's share of J at its centroid: U (trace(cov) + ||mean - c||^2).
    costs = [
        U * (_trace(cov) + float(((mean - c) ** 2).sum())) if U > 0 else -np.inf
        for (U, mean, cov), c in zip(moments, rest)
    ]
    t = int(np.argmax(costs))
    lam, axis = _principal_axis(moments[t][2])
    u = np.sqrt(lam) * axis
    parts = [np.delete(rest, t, axis=0), (rest[t] + u)[None, :], (rest[t] - u)[None, :]]
    return np.vstack(parts).astype(source.dtype)


def _trace(cov):
    return float(np.trace(cov)) if isinstance(cov, np.ndarray) else float(cov.diagonal().sum())


def _principal_axis(cov):
    """(lambda_max, its unit eigenvector) of a covariance array or operator."""
    if isinstance(cov, np.ndarray):
        values, vectors = np.linalg.eigh(cov)
        return max(float(values[-1]), 0.0), vectors[:, -1]
    return cov.top()


def _lloyd(source, C, max_iter, relocate):
    """Hard steps from C until the centroids stop moving (at most max_iter)."""

    def hard_step(C):
        stats, _ = reads.stats(source, C, "hard", 0.0)
        return _stats.step_result(stats, C), 0.0, "hard"

    C, _, _ = run_steps(
        C, hard_step, max_steps=max(int(max_iter), 1), tol=0.0, history=History(),
        relocate=relocate,
    )  # fmt: skip
    return C
