"""Balanced (size-constrained) K-Means (SPEC.md, "Balanced (size-constrained) assignments").

Hard, unit weights and k <= MAX_K_TRANSFER (masses rounded to counts,
or capacities made two-sided by slack rows of cost 0): each Lloyd iteration makes one
fused pass at the last offsets g (`balanced_repair.CountsRepair`: labels, gaps, each
row's candidates and N, S, J at once), moves g toward the counts by Newton steps on the
candidates, and makes the counts exact by successive shortest paths on the k-node
cluster graph over the rows near a tie, checked on every row (complementary slackness:
the optimum); N, S, J are the pass's, corrected by the rows whose label changed.

Otherwise (weights, more clusters, or when that does not settle) each iteration makes
one candidates pass (`balanced_passes.candidates`: the M_CANDIDATES nearest centroids of
every row and the next distance, a lower bound on all the others) and solves the
assignment on that sparse candidate graph by an auction (Bertsekas' forward auction for
similar objects, epsilon-scaled, warm-started from the previous iteration's prices).
Every bid checks the next distance: a row whose best value is beaten by the bound of a
centroid outside its candidates widens the candidates (another pass), so the restricted
solution is the unrestricted one.

The dual is piecewise linear, so no smooth method alone reaches the exact counts: the
unit-weight path (`CountsRepair`) takes damped Newton steps on it over each row's few
candidates from the pass (many rows a step, no pass per step) and then the shortest
paths on the rows near a tie; the auction reaches them with one pass per iteration.
The bias trick ([C, sqrt(b)] over [X, 0], b_j = max g - g_j: D_ij + b_j from the
plain kernels) is used where a pass at given offsets is what is wanted: each Sinkhorn
iteration of the soft assignment, and predict with the fitted offsets.

Soft: entropic transport at T = 2 sigma^2, log-domain Sinkhorn over [X, 0] at the biased
centroids (one `stats` pass each); the step is c_j = S_j / N_j of the last pass.

Every read of X is a runner pass (`balanced_passes`, BIASED among them), in this
process or on a Dask source's workers; the solver (the repair, the auction, Sinkhorn's
offsets) runs in this process on (n,) vectors, as k-means|| does.
"""

from __future__ import annotations

import numpy as np

from .. import _balance, _native, _stats
from ..sources import queries, reads
from .balanced_passes import candidates, label_sums
from .balanced_repair import CountsRepair, min_outside
from .steps import History, run_steps

__all__ = [
    "M_CANDIDATES",
    "BalancedProblem",
    "biased_labels",
    "biased_responsibilities",
    "run_balanced",
    "targets_of",
    "with_offsets",
]

# Candidate centroids per row: the auction reads these; a row that needs more widens
# them for every row (doubling). 16 float64 + int64 a row: 256 bytes.
M_CANDIDATES = 16
# Final auction epsilon relative to the mean candidate cost: the assignment cost is then
# within n eps = 1e-8 of the total cost of the optimum (eps-complementary slackness).
EPS_RELATIVE = 1e-8
# The first epsilon phase: this times how much a cost may have changed since the last
# solve (cold: times the mean cost), and the factor between phases. Measured on
# bench/balanced.py (n 1e5, k 10): 0.5 took 3.1 s where 0.05 took 5.7 s and 0.01 6.7 s
# (the first phase, which moves the prices, is most of the auction's time).
EPS_START, EPS_FACTOR = 0.5, 20.0
# Most bids of one phase, per row (a safeguard: an auction always settles).
MAX_BIDS_PER_ROW = 10_000
# Sinkhorn: the relative mass error an iteration's soft step accepts, the final one's,
# and the most passes for each.
SINKHORN_STEP_TOL, SINKHORN_FINAL_TOL = 1e-3, 1e-6
SINKHORN_STEP_PASSES, SINKHORN_FINAL_PASSES = 30, 2000
# Floyd-Warshall over k clusters for offsets strictly inside the optimal dual face.
MAX_K_POTENTIALS = 512
# The repair (successive shortest paths on the k-node cluster graph, `CountsRepair`) runs
# Dijkstra in O(k^2) a move: above this k the auction is used. Measured on bench/
# balanced.py's unequal blobs, 1e5 x 16, 20 iterations from the same init, 2 threads (AMD
# Zen 4), the repair against the auction: k = 96 3.5 s / 9.6 s, k = 128 6.0 / 14.0,
# k = 256 13.4 / 24.9, k = 512 78 / 48 (the same sizes and inertia at each k). The repair
# since e84f72f and dbdeb8c (branch-free shortest paths): k = 128 4.9-5.0 s, k = 256
# 11.3-11.4 s.
MAX_K_TRANSFER = 256
# The tries of `_native.balanced_counts` (a test calls it directly).
TRANSFER_TRIES = 4


def with_offsets(C, g, dtype):
    """(k, d + 1) centroids [c_j, sqrt(max g - g_j)]: over [X, 0] their squared distances
    are D_ij + max g - g_j, so the plain kernels' argmin / softmax are those of D - g."""
    b = np.sqrt(np.maximum(g.max() - g, 0.0))
    return np.hstack([np.asarray(C, dtype=np.float64), b[:, None]]).astype(dtype)


def biased_labels(source, C, g):
    """(labels, inertia): argmin_j (D_ij - g_j) of every row (ties to the smallest j)
    and sum_i w_i D_{i, labels_i}, from one hard pass over [X, 0]."""
    Ca = with_offsets(C, g, source.dtype)
    stats, labels = reads.stats(reads.augmented(source), Ca, "hard", 0.0, sums=False, labels=True)
    b = g.max() - g
    w = queries.weights(source)
    return labels, float(stats.distortion - np.bincount(labels, w, b.size) @ b)


def biased_responsibilities(source, C, g, sigma):
    """softmax((g_j - D_ij) / (2 sigma^2)) of every row: one pass."""
    Ca = with_offsets(C, g, source.dtype)
    return reads.responsibilities(reads.augmented(source), Ca, "softmax", sigma)


# ------------------------------------------------------------------------- the auction


def _min_cycle_mean(edge):
    """Karp's minimum mean weight of a cycle of the graph `edge` (K, K), inf: no edge
    (diagonal inf); inf when there is no cycle."""
    K = edge.shape[0]
    walks = np.zeros((K + 1, K))  # walks[t, v]: the lightest t-edge walk ending at v
    for t in range(K):
        walks[t + 1] = (walks[t][:, None] + edge).min(axis=0)
    ends = np.isfinite(walks[K])
    if not ends.any():
        return np.inf
    with np.errstate(invalid="ignore"):
        ratios = (walks[K][None, :] - walks[:K]) / (K - np.arange(K))[:, None]
    ratios[~np.isfinite(walks[:K])] = -np.inf
    return float(ratios.max(axis=0)[ends].min())


def _potentials(owner, cand, cost, beyond, k, room=None, start=None):
    """Offsets g (k,) with D_ij - g_j < D_il - g_l for every row i of cluster j and every
    l != j, so that argmin_j (D_ij - g_j) reproduces the labels: shortest-path potentials
    (Floyd-Warshall) of the cluster graph (edge j -> l: the least cost of moving a row of
    j to l) with every edge lowered by half its minimum cycle mean (Karp).

    room (k,) bool, capacities: the clusters with room, whose offset is 0; they are one
    node z, and every other cluster has an edge z -> j of weight 0 (g_j <= 0); g is the
    distance from z. None when a cycle weighs <= 0 (no such strict offsets: an optimum
    that is not unique) or k > MAX_K_POTENTIALS.

    start (k,), without capacities: the largest offsets at most `start` (the distances
    from a virtual source with an edge of weight start_j to each j; default 0), so a
    cluster that none of the rows given constrains keeps its place relative to the others.
    """
    if k > MAX_K_POTENTIALS:
        return None
    node = np.arange(k)
    K = k
    if room is not None:
        node[room] = k  # z
        K = k + 1
    own = cost[np.arange(owner.size), np.argmax(cand == owner[:, None], axis=1)]
    edge = np.full((K, K), np.inf)
    for s in range(cand.shape[1]):
        np.minimum.at(edge, (node[owner], node[cand[:, s]]), cost[:, s] - own)
    outside = np.full(K, np.inf)  # beyond the candidates: any cluster, z included
    np.minimum.at(outside, node[owner], beyond - own)
    np.minimum(edge, outside[:, None], out=edge)
    if room is not None:
        edge[k, node[~room]] = np.minimum(edge[k, node[~room]], 0.0)
    np.fill_diagonal(edge, np.inf)
    mean = _min_cycle_mean(edge)
    if not mean > 0:
        return None
    if np.isfinite(mean):
        edge -= 0.5 * mean
    np.fill_diagonal(edge, 0.0)
    for t in range(K):
        np.minimum(edge, edge[:, t : t + 1] + edge[t : t + 1, :], out=edge)
    if room is None:  # from a virtual source, edges of weight start_j (edge's diagonal 0)
        start = np.zeros(k) if start is None else np.asarray(start, dtype=np.float64)
        g = (start[:, None] + edge).min(axis=0)
        return g - g.max()
    return np.minimum(edge[k, node], 0.0)


class BalancedProblem:
    """The hard balanced assignment of a source's rows under `Targets`, solved again at
    each iteration's centroids from the last prices.

    With unit weights the masses become integer counts (`integer_targets`: each within
    one of its mass) held exactly. NOTE: with other weights rows are not split (SPEC.md
    splits the mass of tied rows): a cluster's capacity is then its mass plus the largest
    weight, so each N_j <= m_j + max w and sum N_j = W.
    """

    def __init__(self, source, targets):
        self.weights = w = queries.weights(source)  # (n,) here: the solver runs here
        self.source, self.targets = source, targets
        self.live = np.flatnonzero(w > 0)
        self.w = w[self.live]
        n = self.live.size
        if targets.one_sided:
            self.caps = targets.capacities
        elif source.unit_weights:
            self.caps = _balance.integer_targets(targets.masses, n).astype(np.float64)
            if (self.caps < 1).any():
                raise ValueError(
                    f"balance gives a cluster fewer than one row of {n}: {targets.masses}"
                )
        else:
            self.caps = targets.masses + self.w.max()
        # Capacities with unit weights and few clusters: sum(u) - n slack rows of cost 0
        # to every cluster fill the room, so the problem is two-sided (every cluster
        # full) and the clusters holding slack share the lowest price, offset 0.
        k = targets.bounds.size
        spare = int(self.caps.sum()) - n if targets.one_sided and source.unit_weights else 0
        self.slack = spare if 0 < spare <= 4 * n and k <= M_CANDIDATES else 0
        self.prices = np.zeros(k)
        self.owner = np.full(n + self.slack, -1, dtype=np.int64)  # phases start from the last
        self.width = M_CANDIDATES
        self.last = None  # the centroids of the last solve
        # Integer counts (unit weights; capacities through the slack rows): one fused
        # pass and a repair of the boundary rows (`CountsRepair`).
        fused = source.unit_weights and 1 < k <= MAX_K_TRANSFER
        if fused and targets.one_sided and spare > 0:
            self.slack = spare if spare <= 4 * n else 0
        exact_counts = source.unit_weights and (not targets.one_sided or self.slack or spare == 0)
        self.repair = None
        if fused and exact_counts:
            self.repair = CountsRepair(source, self.caps.astype(np.int64), self.slack)

    def solve(self, C, offsets=False):
        """(labels (n,) int64 of every row, offsets g (k,), the cost of each live row's
        label). offsets: g strictly inside the optimal dual face (`_potentials`), so
        that argmin_j (D_ij - g_j) gives the labels; else the auction's prices."""
        if self.repair is not None:
            labels, g, self.stats, own = self.repair.solve(C)
            return labels, self._offsets_of(labels, g, offsets), own
        self.stats = None
        k = C.shape[0]
        while True:
            cand, cost, beyond = candidates(self.source, C, self.width)
            if self.live.size < cand.shape[0]:
                cand, cost, beyond = cand[self.live], cost[self.live], beyond[self.live]
            move = (
                np.inf if self.last is None else float(np.sqrt(((C - self.last) ** 2).sum(1)).max())
            )
            owner = self._auction(cand, cost, beyond, move) if k > 1 else np.zeros(self.w.size, int)
            if owner is not None:
                g = self.prices.min() - self.prices
                break
            self.width = min(k, 2 * self.width)  # a row's optimum may lie beyond: widen
        self.last = np.asarray(C, dtype=np.float64)
        room = self._room(owner) if self.targets.one_sided else None
        if room is not None:
            g = -self.prices if not self.slack else g
            g[room] = 0.0
        if offsets and k > 1:
            strict = _potentials(owner, cand, cost, beyond, k, room)
            g = g if strict is None else strict
        labels = np.zeros(self.source.shape[0], dtype=np.int64)
        labels[self.live] = owner
        if self.live.size < labels.size:  # zero weights take no room: argmin of D - g
            dead = np.setdiff1d(np.arange(labels.size), self.live)
            labels[dead] = biased_labels(self.source, C, g)[0][dead]
        pos = owner if cand.shape[1] == k else np.argmax(cand == owner[:, None], axis=1)
        return labels, g, cost[np.arange(owner.size), pos]

    def _offsets_of(self, labels, g, strict):
        """The repair's offsets: 0 where a capacity has room; strict (`_potentials` on
        the repair's boundary rows, kept where no other row's label changes by it)."""
        room = self._room(labels) if self.targets.one_sided else None
        if room is not None:
            g = g.copy()
            g[room] = 0.0
        if not strict:
            return g
        boundary, D, margin = self.repair.last
        k = g.size
        cand = np.broadcast_to(np.arange(k), D.shape)
        tight = _potentials(labels[boundary], cand, D, np.full(D.shape[0], np.inf), k, room,
                            start=g)  # fmt: skip
        if tight is None:
            return g
        change = tight - g
        ok = float(change.max() - change.min()) < min_outside(margin, boundary)
        return tight if ok else g

    def _auction(self, cand, cost, beyond, move):
        """The owners of the live rows (None: some row needs more candidates), by
        epsilon phases from the last prices and owners (a phase keeps the rows still
        within its eps of their best) down to EPS_RELATIVE x the mean cost. The first
        epsilon is EPS_START x how much a cost may have changed since the last solve
        (the centroids moved by at most `move`; inf: no last solve)."""
        scale = max(float(cost.mean()), np.finfo(np.float64).tiny)
        eps_final = EPS_RELATIVE * scale
        change = 2.0 * np.sqrt(float(cost.max())) * move + move * move
        eps = min(EPS_START * scale, max(EPS_START * change, eps_final))
        n, k, w = cand.shape[0], self.caps.size, self.w
        free_at_zero = self.targets.one_sided and not self.slack
        if self.slack:  # (k <= M_CANDIDATES: every row's candidates are all k clusters)
            cand = np.vstack([cand, np.tile(np.arange(k), (self.slack, 1))])
            cost = np.vstack([cost, np.zeros((self.slack, k))])
            beyond = np.concatenate([beyond, np.full(self.slack, np.inf)])
            w = np.concatenate([w, np.ones(self.slack)])
        max_bids = MAX_BIDS_PER_ROW * cand.shape[0]
        while True:
            status, owner, prices, _ = _native.balanced_auction(
                np.ascontiguousarray(cand), cost, beyond, w, self.caps, self.prices, self.owner,
                free_at_zero and eps <= eps_final, eps, max_bids,
            )  # fmt: skip
            if status == 1:
                return None
            if status == 2:
                raise RuntimeError(f"the balanced auction did not settle in {max_bids} bids")
            self.prices, self.owner = prices, owner
            if eps <= eps_final:
                return owner[:n]
            eps = max(eps / EPS_FACTOR, eps_final)

    def _room(self, owner):
        load = np.bincount(owner, self.w, minlength=self.caps.size)
        return load < self.caps * (1 - 1e-12)


# ------------------------------------------------------------------------- the fit


def _weighted_cost(w, own):
    """sum_i w_i own_i, a pairwise sum: a BLAS dot of this length wakes OpenBLAS's thread
    team, which then spins beside the fit (0.04 s of CPU in a 0.3 s balanced fit)."""
    return float(np.add.reduce(w * own))


def targets_of(params, source, k, kind):
    """The `Targets` of a fit's balance / max_cluster_size (None: a plain fit), checked
    against the kind, annealing and the weights."""
    if params.balance is None and params.max_cluster_size is None:
        return None
    _balance.check_balance_kind(kind, params.anneal)
    w = queries.weights(source)
    return _balance.check_targets(
        params.balance, params.max_cluster_size, k, int((w > 0).sum()), float(w.sum()),
        source.unit_weights,
    )  # fmt: skip


class _Sinkhorn:
    """Soft balanced steps: log-domain Sinkhorn over [X, 0] at the biased centroids."""

    def __init__(self, source, targets, sigma):
        self.source, self.targets, self.sigma = reads.augmented(source), targets, sigma
        self.T = 2.0 * sigma * sigma
        self.g = np.zeros(targets.bounds.size)
        self.W = float(queries.weights(source).sum())

    def pass_at(self, C, tol, passes):
        """(BlockStats over [X, 0] at the last offsets, entropic objective), after at
        most `passes` Sinkhorn passes, stopping when the masses hold to tol."""
        bounds, one_sided = self.targets.bounds, self.targets.one_sided
        for _ in range(passes):
            Ca = with_offsets(C, self.g, self.source.dtype)
            stats, _ = reads.stats(self.source, Ca, "softmax", self.sigma)
            ratio = stats.cluster_weights / bounds
            if one_sided:
                done = (ratio <= 1 + tol).all() and (abs(ratio[self.g < 0] - 1) <= tol).all()
            else:
                done = (abs(ratio - 1) <= tol).all()
            value = stats.objective - self.W * self.g.max() + bounds @ self.g
            if done:
                break
            g = self.g - self.T * np.log(np.maximum(ratio, 1e-300))
            self.g = np.minimum(g, 0.0) if one_sided else g - g.max()
        return stats, value


def run_balanced(
    source, C, kind, sigma, targets, *, tol, max_iter, on_step=None, task=None,
    step=_stats.step_result,
):  # fmt: skip
    """A balanced fit from centroids C: (C, sigma, History, (BlockStats, labels),
    offsets g). Hard: auction steps; "softmax": Sinkhorn steps at sigma. step(stats, C):
    the metric's centroid step (S / N; metric="cosine": S / ||S||)."""
    k, d = C.shape
    history = History()
    kw = dict(max_steps=max_iter, tol=tol, history=history, on_step=on_step)
    if task is not None:
        kw["task"] = task
    if kind == "hard":
        problem = BalancedProblem(source, targets)

        def hard_step(C):
            labels, _, own = problem.solve(C)
            if problem.stats is not None:
                return step(problem.stats, C), 0.0, "hard"
            N = np.bincount(labels, problem.weights, minlength=k)
            J = _weighted_cost(problem.w, own)
            S = label_sums(source, labels, k)
            stats = _stats.BlockStats(float(N.sum()), N, S, J, J, np.nan)
            return step(stats, C), 0.0, "hard"

        C, _, _ = run_steps(C, hard_step, **kw)
        labels, g, own = problem.solve(C, offsets=True)
        N = np.bincount(labels, problem.weights, minlength=k)
        J = _weighted_cost(problem.w, own)
        final = _stats.BlockStats(float(N.sum()), N, None, J, J, np.nan)
        return C, 0.0, history, (final, labels), g

    sinkhorn = _Sinkhorn(source, targets, sigma)

    def soft_step(C):
        stats, value = sinkhorn.pass_at(C, SINKHORN_STEP_TOL, SINKHORN_STEP_PASSES)
        stats = stats._replace(sums=stats.sums[:, :d], objective=value, distortion=np.nan)
        return step(stats, C), sigma, "softmax"

    C, _, _ = run_steps(C, soft_step, **kw)
    stats, value = sinkhorn.pass_at(C, SINKHORN_FINAL_TOL, SINKHORN_FINAL_PASSES)
    labels, inertia = biased_labels(source, C, sinkhorn.g)
    final = _stats.BlockStats(stats.weight, stats.cluster_weights, None, value, inertia, np.nan)
    return C, sigma, history, (final, labels), sinkhorn.g
