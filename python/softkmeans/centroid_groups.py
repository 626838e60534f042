"""Splitting centroids into groups of near neighbours: the policy half of the bounded hard
step (`softkmeans.fit.bounded`) and of the group-pruned assignment
(`softkmeans.sources.nearest`); the kernels take the groups as given."""

from __future__ import annotations

import numpy as np

__all__ = ["ball_groups", "principal_axis_groups"]


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


def ball_groups(C, t, iterations=10):
    """(k,) int64: t groups of C (a power of two) for pruning by balls (a centre and the
    radius about it): `principal_axis_groups` refined by a few Lloyd steps of the centroids
    themselves (float64, ties to the smaller group), which shrink the groups' radii; a group
    may end empty. Deterministic: no randomness, no threads."""
    group = principal_axis_groups(C, t)
    P = np.asarray(C, dtype=np.float64)
    for _ in range(iterations):
        counts = np.bincount(group, minlength=t)
        centres = np.zeros((t, P.shape[1]))
        np.add.at(centres, group, P)
        centres /= np.maximum(counts, 1)[:, None]
        # Empty groups keep no centre: never nearest.
        D = (P * P).sum(1)[:, None] - 2.0 * P @ centres.T + (centres * centres).sum(1)[None, :]
        D[:, counts == 0] = np.inf
        new = np.argmin(D, axis=1).astype(np.int64)
        if np.array_equal(new, group):
            break
        group = new
    return group
