"""The empty-cluster policy of a fit: scikit-learn's `_relocate_empty_clusters`.

An empty cluster is moved to the point farthest from its centroid (`farthest`, one pass
over X: scikit-learn's choice of rows); for "hard" that point leaves its old cluster,
whose centroid is recomputed from the step's sums, as scikit-learn does. The soft kinds
move the centroid and warn once.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..sources import queries
from ..sources.block_ops import row_sq_norms, sq_distances_to_labels
from ..sources.nearest import NearestCentroid
from ..sources.runner import Pass, concat, run

__all__ = ["farthest", "relocator", "warn_about_empty_clusters"]


class Farthest(NamedTuple):
    """The m rows farthest from their nearest centroid (relocation of empty clusters)."""

    dist: np.ndarray  # (m,) squared distances, X's dtype
    rows: np.ndarray  # (m, d) dense, X's dtype
    weights: np.ndarray  # (m,) float64
    labels: np.ndarray  # (m,) int64, their labels at the centroids


def _distances_block(rows, w, start, C, labels, directions, n_threads):
    """(labels, squared distance to the label's centroid) of each row of the block;
    labels: the labels of all rows at C, or None (computed here)."""
    if labels is None:
        lab = NearestCentroid(C, n_threads)(rows)[0]
    else:
        lab = labels[start : start + rows.shape[0]]
    dist = sq_distances_to_labels(rows, C, lab, n_threads)
    if directions:  # a zero row has no direction: never a relocation target (it would
        dist[row_sq_norms(rows) == 0] = 0  # put a centroid at 0, off the sphere)
    return lab, dist


LABEL_DISTANCES = Pass("label-distances", _distances_block, concat)


def farthest(source, C, m, labels=None):
    """`Farthest` for the m rows farthest from their nearest centroid of C, chosen among
    all rows as scikit-learn chooses them (argpartition); labels: the labels at C when
    known (an in-process source's)."""
    C = np.ascontiguousarray(C, dtype=source.dtype)
    if source.kind == "dask":
        labels = None  # each block labels its rows on its worker
    labels, dist = run(source, LABEL_DISTANCES, C, labels, source.directions, source.n_threads)
    labels, dist = np.asarray(labels), np.asarray(dist)
    if dist.max() == 0:
        return Farthest(dist[:0], source.rows([]), np.zeros(0), labels[:0])
    far = np.argpartition(dist, -m)[: -m - 1 : -1]
    weights = _weights_at(source, far)
    return Farthest(dist[far], source.rows(far), weights, labels[far])


def _weights_at(source, idx):
    """The weights of the rows idx (a Dask source's computed; None there: all ones)."""
    if source.kind != "dask":
        return source.weights[idx]
    if source.weights is None:
        return np.ones(len(idx))
    return np.asarray(source.weights[idx].compute(), dtype=np.float64)


def relocator(source, kind, notes, labels_at=lambda C: None):
    """relocate(C_old, step) -> centroids, for `softkmeans.fit.steps.run_steps`.

    labels_at(C): the labels at C when the step already has them (the bounded step), else
    None (one more pass gives them).
    """

    def relocate(C_old, step):
        empty = np.flatnonzero(step.empty)
        C_new = np.array(step.centroids, copy=True)
        far = farthest(source, C_old, empty.size, labels_at(C_old))
        if far.dist.size == 0:  # every point sits on a centroid
            # NOTE: scikit-learn then puts the empty centroids on the largest cluster's;
            # we keep them where they were (SPEC.md's step policy).
            notes.add("dup", "Fewer distinct points than n_clusters: some clusters stay empty.")
            return C_new
        if kind == "hard":
            N = np.array(step.cluster_weights, dtype=np.float64, copy=True)
            S = C_new.astype(np.float64) * N[:, None]
            touched = set()
            for e, x_f, w_f, old in zip(empty, far.rows, far.weights, far.labels):
                S[old] -= x_f * w_f
                S[e] = x_f * w_f
                N[e] = w_f
                N[old] -= w_f
                touched.update((int(e), int(old)))
            for j in touched:
                if N[j] > 0:
                    C_new[j] = S[j] / N[j]
        else:  # scikit-learn relocates silently; so does its drop-in
            C_new[empty] = far.rows
            notes.add("empty", "Empty clusters were relocated to the farthest points.")
        return C_new

    return relocate


def warn_about_empty_clusters(source, labels, k, notes):
    """scikit-learn's ConvergenceWarning when the fit ends with fewer distinct clusters
    than k, with the number of distinct points behind it when that is the cause."""
    positive = queries.positive(source)
    held = labels if positive is None else labels[positive]
    n_found = int(np.count_nonzero(np.bincount(held, minlength=k)))
    if n_found < k or notes.has("dup"):
        # The root cause, checked only on a symptom (sorting the rows costs O(n log n)).
        n_distinct = queries.n_distinct_rows(source)
        if n_distinct < k:
            notes.add(
                "found",
                f"Number of distinct clusters ({n_found}) found smaller than "
                f"n_clusters ({k}). Possibly due to duplicate points in X: it has "
                f"{n_distinct} distinct points.",
            )
        elif n_found < k:  # not the data: the centroids met, or lost all their points
            notes.add(
                "found",
                f"Number of distinct clusters ({n_found}) found smaller than n_clusters "
                f"({k}), though X has {n_distinct} distinct points: centroids merged (a "
                "soft fit's sigma too wide for the data: try a smaller sigma or "
                "sigma=None; or an init with repeated centroids).",
            )
