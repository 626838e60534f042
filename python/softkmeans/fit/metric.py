"""The metric of a fit (``metric="euclidean" | "cosine"``): what cosine (spherical)
K-Means changes in the fit loop, and nothing else (SPEC.md, "Cosine (spherical) K-Means").

A fit reads X through a source; cosine reads it through a source of the rows
x_i / ||x_i|| (`softkmeans.sources.normalized`), keeps its centroids on the unit sphere,
and on those the Euclidean kernels give D_ij = ||x_i - c_j||^2 = 2 - 2 x_i.c_j (up to
rounding): the three assignment maps, the objectives, the margins and the fused passes
are the Euclidean ones, unchanged. What differs is written here once:

- the centroid step c_j+ = S_j / ||S_j|| (`Cosine.step`): a cluster with S_j = 0 is
  empty and keeps c_j, also when zero rows gave it N_j > 0 (ties send them to centroid 0);
- every centroid an update moves off the sphere (relocation, a split, a streaming
  update) is projected back (`Cosine.project`);
- the critical width sigma_c^2 = lambda_max(P Sigma P) / ||mu|| (`spherical_lambda`),
  for ``critical_sigma_``, the sigma=None default, annealing's start and its splits.
"""

from __future__ import annotations

import numpy as np

from .. import _stats
from .._covariance import DENSE_D, largest_eigenpair
from .._types import StepResult
from ..sources import reads

__all__ = [
    "COSINE",
    "EUCLIDEAN",
    "METRICS",
    "POLICIES",
    "metric_of",
    "spherical_lambda",
    "unit_rows",
]

METRICS = ("euclidean", "cosine")


class Euclidean:
    """The plain fit: every hook is the identity or the Euclidean formula."""

    name = "euclidean"

    def source(self, source, fit=True):
        """The source the fit (fit=False: a prediction) reads."""
        return source

    def step(self, stats, C) -> StepResult:
        """The centroid step from C whose statistics are `stats`."""
        return _stats.step_result(stats, C)

    def project(self, C, fallback):
        """C moved back where centroids live (rows of fallback where it cannot be)."""
        return C

    def critical_lambda(self, mean, cov) -> float:
        """The critical variance sigma_c^2 of data with this weighted (mean, covariance)."""
        return _stats.lambda_max(cov)

    def critical_sigma(self, source) -> float:
        """sigma_c of the data the source reads (one moments pass)."""
        mean, cov = reads.moments(source)
        return float(np.sqrt(self.critical_lambda(mean, cov)))

    def start(self, mean):
        """Annealing's single centroid above the critical width."""
        return np.array(mean, dtype=np.float64)


class Cosine(Euclidean):
    """Spherical K-Means: normalized rows, unit centroids."""

    name = "cosine"

    def source(self, source, fit=True):
        from ..sources.normalized import normalized

        return normalized(source, fit)

    def step(self, stats, C) -> StepResult:
        S = stats.sums
        norms = np.sqrt(np.einsum("ij,ij->i", S, S))
        empty = norms == 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            new_C = (S / norms[:, None]).astype(C.dtype)
        new_C[empty] = C[empty]
        return _stats.moved_to(stats, new_C, empty)

    def project(self, C, fallback):
        return unit_rows(C, fallback)

    def critical_lambda(self, mean, cov) -> float:
        return spherical_lambda(mean, cov)

    def start(self, mean):
        norm = float(np.linalg.norm(mean))
        if norm == 0.0:
            raise ValueError(
                "metric='cosine' annealing starts at the mean direction of the normalized "
                "rows, and their weighted mean is 0: pass anneal=None"
            )
        return np.array(mean, dtype=np.float64) / norm


EUCLIDEAN, COSINE = Euclidean(), Cosine()
# The metric of each name (a table: choosing one calls nothing).
POLICIES = {"euclidean": EUCLIDEAN, "cosine": COSINE}


def metric_of(name):
    """The metric named `name`; ValueError naming ``metric`` otherwise."""
    if isinstance(name, str) and name in POLICIES:
        return POLICIES[name]
    raise ValueError(f"metric must be one of {METRICS}; got {name!r}")


def unit_rows(C, fallback):
    """The rows of C divided by their norms (computed in float64, rounded once to C's
    dtype); a row of norm 0 (no direction) takes the row of fallback instead."""
    C64 = np.asarray(C, dtype=np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", C64, C64))
    zero = norms == 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (C64 / norms[:, None]).astype(np.asarray(C).dtype)
    if zero.any():
        out[zero] = np.asarray(fallback)[zero]
    return out


def spherical_lambda(mean, cov) -> float:
    """sigma_c^2 = lambda_max(P Sigma P) / ||mu||, P = I - m m^T, m = mu / ||mu||
    (SPEC.md, "Cosine (spherical) K-Means"): mean, cov the weighted mean and covariance
    of the normalized rows; cov a (d, d) array or an operator with ``matvec`` (a sparse
    `softkmeans._covariance.Covariance`).

    Why: linearizing c+ = S / ||S|| at c_j = m, a tangent deviation is multiplied by
    P Sigma P / (sigma^2 ||mu||), so all centroids at m stop attracting their
    perturbations where that operator's top eigenvalue reaches 1.

    NOTE: with mu = 0 there is no mean direction; the Euclidean lambda_max(Sigma) is
    returned (a width of the data's scale), SPEC.md defines nothing there.
    """
    mean = np.asarray(mean, dtype=np.float64)
    norm = float(np.linalg.norm(mean))
    if norm == 0.0:
        return _stats.lambda_max(cov)
    m = mean / norm
    if isinstance(cov, np.ndarray):
        return _top_eigenvalue(_projected(np.asarray(cov, dtype=np.float64), m)) / norm
    d = mean.size
    if d <= DENSE_D:
        return _top_eigenvalue(_projected(cov.dense(), m)) / norm

    def matvec(v):
        pv = v - m * (m @ v)
        out = cov.matvec(pv)
        return out - m * (m @ out)

    return largest_eigenpair(matvec, d)[0] / norm


def _projected(cov, m):
    """P cov P for P = I - m m^T, without forming P."""
    cm = cov @ m
    mcm = float(m @ cm)
    return cov - np.outer(m, cm) - np.outer(cm, m) + mcm * np.outer(m, m)


def _top_eigenvalue(A):
    return max(float(np.linalg.eigvalsh(A)[-1]), 0.0)
