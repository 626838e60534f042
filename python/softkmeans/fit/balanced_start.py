"""Where the balanced repair starts (`softkmeans.fit.balanced_repair`): offsets, each
row's label there and a lower bound on its gap (its margin), from a pass at its own
offsets or from the pass's candidates at new offsets (Newton's); and the k x k solve of
the offsets' prediction from the last solve (`solve_spd`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _native

__all__ = ["Start", "candidates_start", "cover_short", "margin_bound", "pass_start",
           "rounding_slack", "solve_spd"]  # fmt: skip

# A cluster short of rows at Newton's offsets whose column fewer than COVER x its count
# rows hold among their candidates takes, as one more candidate, the rows of least regret
# that lack it: those that bring its holders to COVER x its count, at least its count
# (clusters sharing a blob share those rows: their union must hold both counts).
COVER = 2


def rounding_slack(p, g):
    """(n,) a bound on how far each row's computed gap may be from its exact gap at g
    (the pass subtracts g rounded to X's dtype, in X's dtype: a few units of roundoff of
    |D| + |g| on each of the two values)."""
    u = float(np.finfo(p.dist.dtype).eps)
    big = np.abs(p.dist).astype(np.float64) + 3.0 * float(np.abs(g).max(initial=0.0))
    return 8.0 * u * (big + p.gap.astype(np.float64)) + np.finfo(np.float64).tiny


class Start(NamedTuple):
    """Where the repair starts: offsets g (k,), each row's label at g, a lower bound on
    its exact gap there (margin, float64) and its D at the label (own, float64)."""

    g: np.ndarray
    labels: np.ndarray
    margin: np.ndarray
    own: np.ndarray


def pass_start(p, g):
    """The `Start` of the pass p at its offsets g."""
    margin = p.gap.astype(np.float64) - rounding_slack(p, g)
    return Start(g, p.labels, margin, p.dist.astype(np.float64))


def candidates_start(p, g, g_new, n_threads=1):
    """The `Start` at offsets g_new of the pass p at g: every row's best candidate, its
    margin the gap among its candidates and below the pass's floor at g (less its
    rounding) less the most any offset rose since (`_native.biased_row_margins`)."""
    labels, own, margin = _native.biased_row_margins(
        p.cand, p.cand_dist, g_new, *margin_bound(p.floor, g, g_new), n_threads
    )
    return Start(g_new, labels, margin, own)


def margin_bound(floor, g, g_new):
    """(floor or None, the six numbers of `_native.biased_row_margins`'s bound): the floor
    at g less a few units of |floor| + |g| in its dtype and the most an offset rose by
    g_new, the margin less a few float64 units of |own| + |g_new| + |gap|."""
    u, f64 = float(np.finfo(floor.dtype).eps), np.finfo(np.float64)
    rise, g_max, g_new_max = float((g_new - g).max()), np.abs(g).max(), np.abs(g_new).max()
    bound = (8.0 * u, 4.0 * g_max, rise, 8.0 * f64.eps, 3.0 * g_new_max, f64.tiny)
    return (floor if np.isfinite(floor).any() else None), tuple(map(float, bound))


def solve_spd(A, b):
    """x (k,) with A x = b for a symmetric positive definite A (k, k): Gaussian
    elimination without pivoting (stable on such an A) in elementwise NumPy operations
    only, so x has the same bits on every machine and BLAS (np.linalg.solve's LAPACK
    sums in the order of the BLAS kernel it dispatches to: the balanced fit's labels at
    1e6 rows differed in 336 rows between OpenBLAS's Haswell and SkylakeX kernels)."""
    A = np.array(A, dtype=np.float64)
    x = np.array(b, dtype=np.float64)
    k = x.size
    for j in range(k - 1):
        factor = A[j + 1 :, j] / A[j, j]
        A[j + 1 :, j:] -= factor[:, None] * A[j, j:][None, :]
        x[j + 1 :] -= factor * x[j]
    for j in range(k - 1, -1, -1):
        x[j] /= A[j, j]
        x[:j] -= A[:j, j] * x[j]
    return x


def cover_short(p, g, targets, labels, distances, columns):
    """The pass p (at offsets g) with one more candidate column for each cluster short
    of rows at labels (k,: each row's label at Newton's offsets) that fewer than COVER x
    its count rows hold (None: no such cluster). Newton on candidates cannot move more
    rows to a cluster than hold it (bench/balanced.py's unequal blobs of seed 2 at 1e6:
    two clusters sharing a blob were held by 31,076 rows for a count of 31,250; Newton
    raised both offsets by 85,000, its graph disconnected, and the repair of the pass's
    error took 3 s). The rows of least regret D_ij - g_j - min_l (D_il - g_l) that lack
    j take it, max(count, COVER x count - holders) of them (the rows that join j first
    as g_j rises): in an empty place, else in place of a column neither their label nor
    another such cluster (the m - 1 - q-th, at the q-th cluster), the floor lowered to
    that column's value; their D_ij are the kernel's (distances(rows): (rows, k));
    columns(J) (n, J) D to the clusters J ranks them (any precision)."""
    k, m = targets.size, p.cand.shape[1]
    short = np.flatnonzero(np.bincount(labels, minlength=k) < targets)
    held = np.bincount(p.cand.ravel() + 1, minlength=k + 1)[1:]  # (-1: none)
    short = short[held[short] < COVER * targets[short]]
    if short.size == 0 or m < 3:
        return None
    short = short[np.argsort(held[short] - COVER * targets[short], kind="stable")][: m - 2]
    cand, cand_dist, floor = p.cand.copy(), p.cand_dist.copy(), p.floor.copy()
    g_t = g.astype(cand_dist.dtype)  # (the pass's g rounded to its dtype: its floor's)
    best = p.dist.astype(np.float64) - g[p.labels]
    D = columns(short)
    for q, j in enumerate(short):
        regret = D[:, q] - g[j] - best
        regret[(cand == j).any(axis=1)] = np.inf
        want = max(targets[j], COVER * targets[j] - held[j])
        count = int(min(want, np.isfinite(regret).sum()))
        if count == 0:
            continue
        rows = np.sort(np.argpartition(regret, count - 1)[:count])
        held_r = (cand[rows] >= 0).sum(axis=1)
        slot = np.where(held_r < m, held_r, m - 1 - q)
        old = cand[rows, slot]
        free = (old < 0) | (~np.isin(old, short) & (old != p.labels[rows]))
        rows, slot, old = rows[free], slot[free], old[free]
        if rows.size == 0:
            continue
        out = old >= 0
        value = cand_dist[rows[out], slot[out]] - g_t[old[out]]
        floor[rows[out]] = np.minimum(floor[rows[out]], value)
        cand[rows, slot] = j
        cand_dist[rows, slot] = distances(rows)[:, j]
    return p._replace(cand=cand, cand_dist=cand_dist, floor=floor)
