"""Splitting centroids into groups of near neighbours, and their principal axes: the policy
half of the bounded hard step (`softkmeans.fit.bounded`) and of the pruned assignments
(`softkmeans.sources.nearest`); the kernels take the groups and the axes as given."""

from __future__ import annotations

import numpy as np

from . import _native
from ._covariance import _one_blas_thread

__all__ = ["ball_groups", "principal_axis_groups", "principal_projection"]


def principal_axis_groups(C, t):
    """(k,) int64: the group of each centroid of C, t (a power of two) groups of about equal
    size, near centroids together: halve every group at the median of its projection on its
    principal axis, log2 t times."""
    k = C.shape[0]
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


def ball_groups(C, t, iterations=10, n_threads=0):
    """(k,) int64: t groups of C for pruning by balls (a centre and the radius about it):
    a small k-means of the centroids themselves, from t of them taken farthest first
    (from c_0; deterministic), then a few Lloyd steps (the native assignment pass, ties
    to the smaller group; means in float64), which shrink the groups' radii; a group may
    end empty. Its result does not depend on the thread count. No BLAS: NumPy's threaded
    products took 20 times a single thread's time at these sizes on a loaded 2-core
    machine, and the principal-axis halving (`principal_axis_groups`) left balls that
    pruned 16% of the distances where these prune 98% (`bench/ivf_kernels.py`'s data)."""
    C = np.ascontiguousarray(C)
    P = np.asarray(C, dtype=np.float64)
    chosen = [0]
    to_chosen = np.full(C.shape[0], np.inf)
    for _ in range(min(t, C.shape[0]) - 1):
        _native.kmeanspp_update_closest(C, to_chosen, chosen[-1], n_threads)
        chosen.append(int(np.argmax(to_chosen)))
    group, _ = _native.assign(C, np.ascontiguousarray(C[chosen]), n_threads)
    for _ in range(iterations):
        order = np.argsort(group, kind="stable")
        held, starts = np.unique(group[order], return_index=True)
        counts = np.diff(np.append(starts, len(group)))
        centres = np.add.reduceat(P[order], starts, axis=0) / counts[:, None]
        nearest, _ = _native.assign(C, centres.astype(C.dtype), n_threads)
        new = held[nearest]
        if np.array_equal(new, group):
            break
        group = new
    return group


def principal_projection(C, p, n_threads=0):
    """(Q (d, p) float64 with orthonormal columns, mu (d,) float64): the p leading principal
    axes of the centroids C and their mean, for the projection-pruned assignment
    (`cpp/src/impl/projected.hpp`, which allows for Q being orthonormal only to rounding).
    The covariance natively (no threaded BLAS product), its eigenvectors on one BLAS
    thread (`_covariance._one_blas_thread`)."""
    C = np.ascontiguousarray(C)
    mu, cov = _native.weighted_covariance(C, np.ones(C.shape[0]), n_threads)
    with _one_blas_thread():
        _, vectors = np.linalg.eigh(cov)
    return np.ascontiguousarray(vectors[:, ::-1][:, :p]), np.ascontiguousarray(mu)
