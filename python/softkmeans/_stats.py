"""Block statistics (SPEC.md, "Block statistics"): what one pass over a block of rows
yields, how the statistics of disjoint blocks merge, and the centroid step formed from them.

The native core computes the statistics of a block in one fused pass
(`softkmeans._native.block_stats`); everything after that is here, once: the in-memory
step, the fitted attributes and (later) out-of-core, streaming and Dask fits all merge
statistics with `merge` and form c_j+ = S_j / N_j with `centroids`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from ._types import StepResult


class BlockStats(NamedTuple):
    """Sums over a block's rows at centroids C, and the minimum of their margins.

    weight:          W = sum_i w_i.
    cluster_weights: N (k,) float64, N_j = sum_i w_i r_ij (None when not asked for).
    sums:            S (k, d) float64, S_j = sum_i w_i r_ij x_i (None when not asked for).
    objective:       the kind's objective (J, F_sigma or G_sigma) summed over the block.
    distortion:      J summed over the block.
    min_margin:      Delta_min over the block's rows with w_i > 0 (inf when k == 1 or none).
    """

    weight: float
    cluster_weights: np.ndarray | None
    sums: np.ndarray | None
    objective: float
    distortion: float
    min_margin: float


def merge(blocks: Iterable[BlockStats]) -> BlockStats:
    """The statistics of the union of disjoint blocks, added in the order given.

    A fixed block order makes the result independent of who computed the blocks.
    """
    blocks = list(blocks)
    if not blocks:
        raise ValueError("merge needs at least one block")
    first = blocks[0]
    W, obj, J, mm = first.weight, first.objective, first.distortion, first.min_margin
    N = None if first.cluster_weights is None else first.cluster_weights.copy()
    S = None if first.sums is None else first.sums.copy()
    for b in blocks[1:]:
        W += b.weight
        obj += b.objective
        J += b.distortion
        mm = min(mm, b.min_margin)
        if N is not None:
            N += b.cluster_weights
            S += b.sums
    return BlockStats(W, N, S, obj, J, mm)


def centroids(stats: BlockStats, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(c_j+ = S_j / N_j in the dtype of C, empty): an empty cluster (N_j = 0) keeps c_j.

    The division is made in float64 and rounded once to the dtype of C.
    """
    N, S = stats.cluster_weights, stats.sums
    empty = N == 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        new_C = (S / N[:, None]).astype(C.dtype)
    if empty.any():
        new_C[empty] = C[empty]
    return new_C, empty


def step_result(stats: BlockStats, C: np.ndarray) -> StepResult:
    """The alternating-minimization step from C whose statistics are `stats`."""
    return moved_to(stats, *centroids(stats, C))


def moved_to(stats: BlockStats, new_C: np.ndarray, empty: np.ndarray) -> StepResult:
    """The StepResult of a step with statistics `stats` that moved the centroids to new_C
    (empty: the clusters that kept their centroid)."""
    return StepResult(
        centroids=new_C,
        cluster_weights=stats.cluster_weights,
        objective=float(stats.objective),
        distortion=float(stats.distortion),
        min_margin=float(stats.min_margin),
        empty=empty,
    )


def centroid_gradient(stats: BlockStats, C: np.ndarray) -> np.ndarray:
    """dF/dc_j = 2 (N_j c_j - S_j), computed in float64, in the dtype of C."""
    N, S = stats.cluster_weights, stats.sums
    return (2.0 * (N[:, None] * C.astype(np.float64) - S)).astype(C.dtype)


def lambda_max(cov: np.ndarray) -> float:
    """The largest eigenvalue of a weighted population covariance, clamped at 0
    (a (d, d) array, or an operator, `softkmeans._covariance.Covariance`)."""
    if not isinstance(cov, np.ndarray):
        return cov.lambda_max()
    return max(float(np.linalg.eigvalsh(cov)[-1]), 0.0)


def critical_sigma_of(cov: np.ndarray) -> float:
    """sqrt(lambda_max) (SPEC.md, "Critical temperature")."""
    return float(np.sqrt(lambda_max(cov)))


def running_update(
    C: np.ndarray, totals: np.ndarray, batch: BlockStats
) -> tuple[np.ndarray, np.ndarray]:
    """SPEC.md, "Streaming": (new C in the dtype of C, new running totals N(t)).

    N_j(t) = N_j(t-1) + N_j(batch); c_j <- c_j + (S_j(batch) - N_j(batch) c_j) / N_j(t),
    the running weighted mean of the points a centroid has been responsible for (no
    learning rate). Clusters the batch does not touch stay where they are. With zero
    totals this is the batch's own step S_j / N_j.
    """
    N_b, S_b = batch.cluster_weights, batch.sums
    new_totals = totals + N_b
    touched = N_b > 0
    C64 = C.astype(np.float64)
    C64[touched] += (S_b[touched] - N_b[touched, None] * C64[touched]) / new_totals[touched, None]
    return C64.astype(C.dtype), new_totals


STREAM_MEMORIES = ("sqrt", "all")


def stream_update(
    C: np.ndarray,
    totals: np.ndarray,
    memory: np.ndarray,
    batch: BlockStats,
    *,
    bound: str = "sqrt",
    decay: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SPEC.md, "Streaming": (new C in the dtype of C, new totals T(t), new memory M(t)).

    T_j(t) = (1 - decay) T_j(t-1) + N_j(batch), the weight seen (forgotten by decay);
    M_j(t) = min((1 - decay) M_j(t-1), B_j) + N_j(batch), the weight the centroid
    remembers, bounded by B_j = sqrt((1 - decay) T_j(t-1)) ("sqrt") or not at all
    ("all"); c_j <- c_j + (S_j(batch) - N_j(batch) c_j) / M_j(t): the weighted mean of
    the remembered statistics (closed form, no learning rate). Clusters the batch does
    not touch stay where they are. bound="all" with decay=0 is `running_update`.
    """
    keep = 1.0 - decay
    N_b, S_b = batch.cluster_weights, batch.sums
    old = keep * memory
    if bound == "sqrt":
        old = np.minimum(old, np.sqrt(keep * totals))
    new_memory = old + N_b
    new_totals = keep * totals + N_b
    touched = N_b > 0
    C64 = C.astype(np.float64)
    C64[touched] += (S_b[touched] - N_b[touched, None] * C64[touched]) / new_memory[touched, None]
    return C64.astype(C.dtype), new_totals, new_memory


def merge_moment_pair(a, b):
    """Chan, Golub & LeVeque's pairwise update of (W, weighted mean (d,), W x covariance
    (d, d)) for the union of two disjoint blocks; a block of zero weight is skipped."""
    Wa, ma, Ma = a
    Wb, mb, Mb = b
    if Wa == 0.0:
        return b
    if Wb == 0.0:
        return a
    W = Wa + Wb
    delta = mb - ma
    return W, ma + delta * (Wb / W), Ma + Mb + np.outer(delta, delta) * (Wa * Wb / W)


def merge_moments(parts: Iterable[tuple[float, np.ndarray, np.ndarray]]):
    """(W, weighted mean (d,), weighted population covariance (d, d)) of the union of
    disjoint blocks, each given as its own (W, mean, covariance), merged in the order given
    (`merge_moment_pair`); covariance operators (`softkmeans._covariance`) merge into the
    operator of the union of their blocks."""
    parts = list(parts)
    if parts and not isinstance(parts[0][2], np.ndarray):
        cov = type(parts[0][2]).merged(parts)
        return cov.W, cov.mean, cov
    scaled = ((Wb, np.asarray(mean_b, dtype=np.float64), Wb * cov_b) for Wb, mean_b, cov_b in parts)
    W, mean, M = functools.reduce(merge_moment_pair, scaled, (0.0, None, None))
    if W == 0.0:
        raise ValueError("merge_moments needs a block of positive weight")
    return W, mean, M / W
