"""The alternating-minimization loop, written once: step, relocate empty clusters,
measure the shift, record, stop at the tolerance.

Used by the plain fit (`softkmeans.fit.driver`) and by every phase of deterministic
annealing (`softkmeans.fit.annealing`); what differs between them (the kind, sigma, the
prior coordinate of annealing, the empty-cluster policy) lives in the `step` and
`relocate` functions they pass in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .._types import StepResult
from .tasks import NO_TASKS

__all__ = ["History", "Run", "run_steps"]


class Run(NamedTuple):
    """What every run kind of a fit returns (iterative, annealing, balanced, sigma="auto"):
    the centroids, the width, the History, the final pass's BlockStats and labels, and
    the balance offsets (a balanced run's; None otherwise)."""

    centroids: np.ndarray
    sigma: float
    history: object
    final: object
    labels: np.ndarray
    offsets: object = None


class History:
    """Per-iteration record of a fit: sigma, objective, J, centroid shift, kind, margin."""

    def __init__(self):
        self.sigma, self.objective, self.J, self.shift, self.kind = [], [], [], [], []
        self.min_margin = []
        self.transitions = []
        self.stopped = False  # a task ended the steps (run_steps)

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


# step(C) -> (the step from C, its sigma, its kind)
StepFn = Callable[[np.ndarray], "tuple[StepResult, float, str]"]


def run_steps(
    C,
    step: StepFn,
    *,
    max_steps: int,
    tol: float,
    history: History,
    relocate=None,
    min_steps: int = 1,
    on_step=None,
    task=NO_TASKS,
    converged=None,
    first=0,
):
    """C <- step(C) until the total squared shift is <= tol (after at least `min_steps`
    steps), at most `max_steps` steps. Returns (C, the last StepResult or None, its shift).

    relocate(C_old, result) -> centroids: the empty-cluster policy, called when a step
    leaves a cluster empty (None: the step's own centroids, empty ones kept in place).
    on_step(i, sigma, result, shift): after each step (progress lines).
    task: the `softkmeans.fit.tasks.Task` of these steps, one leaf a step; a step whose
    task asks to stop ends them, as the tolerance does.
    converged(): a second stopping test after each step (EM's likelihood gain), or None.
    first: the number of the first step's leaf (a second stage: "iteration {first}" on).
    """
    result, shift = None, 0.0
    for i in range(max_steps):
        leaf = task.subtask(f"iteration {first + i}")
        leaf.begin()
        result, sigma, kind = step(C)
        C_new = result.centroids
        if relocate is not None and result.empty.any():
            C_new = relocate(C, result)
        shift = float(((C_new.astype(np.float64) - C) ** 2).sum())
        history.record(sigma, result.objective, result.distortion, shift, kind, result.min_margin)
        if on_step is not None:
            on_step(i, sigma, result, shift)
        C = C_new
        n_iter = history.n_iter

        def state(C=C, sigma=sigma, n_iter=n_iter):
            return {"cluster_centers_": C, "sigma_": sigma, "n_iter_": n_iter}

        stop = leaf.end(state)
        history.stopped = history.stopped or bool(stop)
        done = shift <= tol or (converged is not None and converged())
        if stop or (i + 1 >= min_steps and done):
            break
    return C, result, shift
