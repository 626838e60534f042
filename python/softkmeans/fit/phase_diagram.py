"""How many clusters: the phase diagram of deterministic annealing (SPEC.md, "Phase diagram
(how many clusters)").

Annealing (`softkmeans.fit.annealing_schedule`) cools from above the critical width,
where one centroid
sits at the mean, and centroids split at phase transitions. After each width the
centroids are counted, those within ``merge`` x sigma of each other as one (single
linkage): a split counts once its two halves have moved apart, so a split that collapses
back is not counted. k "appears" at the first (largest) width where at least k distinct
centroids exist; the persistence of k is log(sigma at which k appears) - log(sigma at
which k + 1 appears): how long, in log-temperature, the data keeps k clusters as it
cools. The suggested k is the most persistent k >= 2 within [min_clusters, max_clusters]
(ties: the smaller k).

Annealing splits each centroid along its principal axis (no random draw: the diagram is
the same for every seed), has 2 (max_clusters + 1) centroids to split into, so that the
persistence of max_clusters is measured, and stops cooling as soon as max_clusters + 1
are distinct. Only measured persistences and lower bounds compete: not those from the
first k whose k + 1 appeared only after a split was refused for want of centroids
(``unmeasured``: a run with more could have split earlier), nor k = n_samples (it cannot
split). n_clusters="auto" fits the suggestion, or 1 cluster where it persists less than a
factor ONE_CLUSTER in sigma (``PhaseDiagram.n_clusters``).

Cost: one annealing run (`softkmeans.fit.annealing`: per width a few fused passes and one
moments pass) with at most 2 (max_clusters + 1) centroids; no finish.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import NamedTuple

import numpy as np

from .. import _stats, sources
from .. import _validation as v
from ..sources import queries, reads
from .annealing import run_annealing
from .annealing_schedule import AnnealingSchedule, check_schedule
from .seeding import check_random_state
from .steps import History

__all__ = ["PhaseDiagram", "Split", "phase_diagram"]

# Two centroids closer than MERGE x sigma are one (the default of ``merge``): a fresh
# split starts 2 x 1e-2 x sigma apart (the schedule's perturbation) and is counted once
# the halves are a quarter of the width apart.
MERGE = 0.25
# Each width's steps run until the total squared shift is <= EQUILIBRIUM_TOL x the mean
# feature variance: the diagram needs every width at equilibrium. With the fit's own
# tolerance (1e-4) a cold width ends after its 2 first steps, fresh splits lag by many
# widths and the persistence of large k swells (iris: 9 suggested instead of 2; standardized
# wine: 10 instead of 3); at 1e-8 both are 2 and 3, for 2-5x the steps.
EQUILIBRIUM_TOL = 1e-8
# Where the cooling stops at the latest, relative to the critical width: 20 x colder than
# the annealing default (0.05), since the splits past max_clusters end it much earlier.
STOP_FRACTION = 2.5e-3
# n_clusters="auto" fits one cluster unless its best k keeps its clusters while sigma falls
# by at least a factor 1.4. Measured (seed-free splits, see `diagram_of`): single Gaussian
# blobs of 300-2000 rows in 1 to 20 dimensions keep no k beyond a factor 1.36 (1-d; 1.16
# from 2-d on); standardized iris (2), wine (3) and three blobs 2.9-4.1 sds apart keep
# theirs over 1.51, 1.58 and 1.67.
ONE_CLUSTER = math.log(1.4)


class Split(NamedTuple):
    """A change of the number of distinct centroids, at the end of a width."""

    sigma: float
    n_before: int
    n_after: int
    objective: float  # the annealing objective at that width


@dataclasses.dataclass(frozen=True)
class PhaseDiagram:
    """The splits of one annealing run, the persistence of each k and the suggested k.

    sigma, n_distinct, objective: per width, in cooling order.
    persistence: {k: log(sigma_k) - log(sigma_{k+1})} for every k from 1 up to the
    largest reached (0.0 for a k skipped by a simultaneous split).
    censored: the k whose persistence is only a lower bound (k + 1 never appeared).
    unmeasured: the k from which on persistences are no measurements (k + 1 appeared only
    after a split was refused for want of centroids), or None.
    suggested: the most persistent k in [min_clusters, max_clusters] and below n_samples
    (k = n_samples cannot split: its persistence runs to wherever the cooling ended) whose
    persistence is a measurement or a lower bound.
    n_clusters: what n_clusters="auto" fits: suggested, or 1 where suggested persists
    less than ONE_CLUSTER (no clusters: a single Gaussian blob).
    """

    sigma: np.ndarray
    n_distinct: np.ndarray
    objective: np.ndarray
    splits: tuple[Split, ...]
    persistence: dict[int, float]
    censored: int | None
    suggested: int
    min_clusters: int
    max_clusters: int
    merge: float
    critical_sigma: float
    unmeasured: int | None = None
    n_clusters: int = 0

    @property
    def at_max(self) -> bool:
        """The choice is max_clusters, the top of the range: a larger k may persist longer."""
        return self.n_clusters == self.max_clusters

    def plot(self, ax=None):
        """Distinct centroids against log sigma, the splits marked; returns the Figure.

        Needs matplotlib (``pip install 'softkmeans[plot]'``), imported here only.
        """
        try:
            import matplotlib.pyplot as plt
        except ModuleNotFoundError as exc:
            raise ImportError(
                "PhaseDiagram.plot needs matplotlib: pip install 'softkmeans[plot]'"
            ) from exc
        if ax is None:
            # constrained: the axis labels fit inside the figure (6 x 3.5 in clipped sigma's)
            fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
        else:
            fig = ax.figure
        ax.step(self.sigma, self.n_distinct, where="post", color="C0", label="distinct centroids")
        ax.set_xscale("log")
        ax.invert_xaxis()  # cooling runs left to right
        for s in self.splits:
            ax.axvline(s.sigma, color="0.8", lw=0.8, zorder=0)
        ax.axhline(
            self.suggested, color="C3", ls="--", lw=1, label=f"suggested k = {self.suggested}"
        )
        ax.set_xlabel("sigma (log scale, cooling to the right)")
        ax.set_ylabel("distinct centroids")
        ax.legend(loc="upper left", frameon=False)
        return fig


def phase_diagram(
    X,
    *,
    max_clusters=10,
    min_clusters=2,
    sample_weight=None,
    anneal=None,
    merge=MERGE,
    random_state=0,
    n_threads=None,
):
    """The phase diagram of X (n, d): splits, persistence of each k, the suggested k.

    max_clusters, min_clusters: the range the suggestion is taken from (2 <= min <= max).
    anneal: the schedule (None: the default, cooling 0.95, with ``stop`` at 2.5e-3 x the
    critical width); its ``finish`` and ``split_merge`` are not used.
    merge: centroids within merge x sigma count as one.
    """
    source = sources.source_of(X, sample_weight, fit=True)
    try:
        return diagram_of(
            source,
            max_clusters=max_clusters,
            min_clusters=min_clusters,
            anneal=anneal,
            merge=merge,
            random_state=random_state,
            n_threads=n_threads,
        )
    finally:
        if source is not X:
            source.close()


def warn_if_at_max(diagram):
    """n_clusters="auto" says when its choice is the top of its range (UserWarning)."""
    if diagram.at_max:
        warnings.warn(
            f"n_clusters='auto' chose max_clusters={diagram.max_clusters}, the top of its "
            "range: a larger k may persist longer; raise max_clusters to look further",
            UserWarning,
            stacklevel=6,  # the caller of SoftKMeans.fit
        )


def check_range(max_clusters, min_clusters, n_samples):
    """(max, min) checked: integers, 2 <= min <= max, and at least 2 samples."""
    max_clusters = v.check_int(max_clusters, "max_clusters", 2)
    min_clusters = v.check_int(min_clusters, "min_clusters", 2)
    if min_clusters > max_clusters:
        raise ValueError(f"min_clusters ({min_clusters}) must be <= max_clusters ({max_clusters})")
    if n_samples < 2:
        raise ValueError(f"choosing the number of clusters needs n_samples >= 2; got {n_samples}")
    return max_clusters, min_clusters


def diagram_of(source, *, max_clusters, min_clusters=2, anneal=None, merge=MERGE,
               random_state=0, n_threads=None, tol=None):  # fmt: skip
    """`phase_diagram` over a `softkmeans.sources.Source` (n_clusters="auto" uses it).

    tol: the annealing steps' shift tolerance (None: EQUILIBRIUM_TOL x the mean feature
    variance)."""
    max_clusters, min_clusters = check_range(max_clusters, min_clusters, source.shape[0])
    merge = v.check_real(merge, "merge", minimum=0.0)
    schedule = check_schedule(anneal) or AnnealingSchedule(splits=max_clusters + 1)
    _, cov = reads.moments(source)
    critical = _stats.critical_sigma_of(cov)
    if schedule.stop is None:
        schedule = dataclasses.replace(schedule, stop=STOP_FRACTION * (critical or 1.0))
    schedule = dataclasses.replace(schedule, finish=False, split_merge=False)
    source.n_threads = v.check_n_threads(n_threads)
    if tol is None:
        tol = EQUILIBRIUM_TOL * float(np.mean(queries.feature_variances(source)))
    recorder = Recorder(merge, stop_at=max_clusters + 1)
    # Twice the centroids the count needs: a fresh split is counted only once its halves
    # have moved apart, so with max_clusters + 1 of them a split still resolving would
    # use the last one and block the splits after it (censoring k below max_clusters).
    run_annealing(
        source, 2 * (max_clusters + 1), schedule, critical_sigma=critical, tol=tol,
        max_iter=1, rng=check_random_state(random_state), history=History(),
        relocate=None, on_width=recorder, watch_blocked=True, axis_splits=True,
    )  # fmt: skip
    return recorder.diagram(min_clusters, max_clusters, critical, source.shape[0])


class Recorder:
    """on_width for `run_annealing`: counts distinct centroids after each width; asks to
    stop once ``stop_at`` are distinct (None: never)."""

    def __init__(self, merge, stop_at=None):
        self.merge, self.stop_at = merge, stop_at
        self.sigma, self.n_distinct, self.objective = [], [], []
        self.first_blocked = None  # the index of the first width with a refused split

    def __call__(self, sigma, C, objective, blocked=False):
        n = count_distinct(C, self.merge * sigma)
        if blocked and self.first_blocked is None:
            self.first_blocked = len(self.sigma)
        self.sigma.append(float(sigma))
        self.n_distinct.append(n)
        self.objective.append(float(objective))
        return self.stop_at is not None and n >= self.stop_at

    def diagram(self, min_clusters, max_clusters, critical, n_samples=None):
        sigma = np.asarray(self.sigma)
        counts = np.asarray(self.n_distinct, dtype=np.int64)
        objective = np.asarray(self.objective)
        splits = tuple(
            Split(
                float(sigma[i]), int(counts[i - 1]) if i else 1, int(counts[i]), float(objective[i])
            )
            for i in range(len(counts))
            if counts[i] != (counts[i - 1] if i else 1)
        )
        persistence, censored, unmeasured = _persistence(sigma, counts, self.first_blocked)
        # The rule. Competing: the measured persistences (k + 1 appeared while every
        # critical centroid could still split) and the lower bound of a censored k (the
        # cooling ended before k + 1 appeared: the real one is longer still). Not: those
        # from `unmeasured` on (a refused split: with more centroids k + 1 could have
        # appeared sooner, so the value may be too long), nor k >= n_samples (it cannot
        # split, so its width runs to wherever the cooling stops). The winner, the most
        # persistent, is fitted only where it persists at least ONE_CLUSTER: a single
        # Gaussian blob splits on and on with no long plateau, so it is one cluster.
        top = max_clusters if n_samples is None else min(max_clusters, n_samples - 1)
        allowed = [
            k for k in range(min_clusters, top + 1)
            if k in persistence and (unmeasured is None or k < unmeasured)
        ]  # fmt: skip
        suggested = _most_persistent(persistence, allowed)
        if suggested is None:  # nothing in range is a measurement (or a lower bound)
            in_range = [k for k in range(min_clusters, max_clusters + 1) if k in persistence]
            suggested, n_clusters = _most_persistent(persistence, in_range) or min_clusters, 1
        else:
            n_clusters = suggested if persistence[suggested] >= ONE_CLUSTER else 1
        return PhaseDiagram(
            sigma, counts, objective, splits, persistence, censored, suggested,
            min_clusters, max_clusters, float(self.merge), float(critical), unmeasured,
            n_clusters,
        )  # fmt: skip


def _most_persistent(persistence, ks):
    """The k of ks with the largest persistence, None for no ks. Persistences are sums of
    equal log cooling steps, so they tie up to rounding: compared at 1e-9, ties to the
    smaller k."""
    return max(ks, key=lambda k: (round(persistence[k], 9), -k), default=None)


def _persistence(sigma, counts, first_blocked=None):
    """({k: log sigma_k - log sigma_{k+1}}, censored, unmeasured).

    censored: the k whose k + 1 never appeared, so that its persistence, run to the last
    width, is a lower bound (None where the cooling stopped at a count).
    unmeasured: the smallest k whose k + 1 appeared only after a width that refused a
    split for want of centroids (a run with more could have split earlier), or never
    did after one: from it on no persistence is a measurement, nor a bound (None: no
    split was refused).
    """
    if counts.size == 0:
        return {}, None, None
    top = int(counts.max())
    first = {k: (0 if k == 1 else int(np.argmax(counts >= k))) for k in range(1, top + 1)}
    appear = {k: float(sigma[i]) for k, i in first.items()}
    persistence = {k: math.log(appear[k]) - math.log(appear[k + 1]) for k in range(1, top)}
    persistence[top] = math.log(appear[top]) - math.log(float(sigma[-1]))
    unmeasured = None
    if first_blocked is not None:
        unmeasured = next(k for k in range(1, top + 1) if k == top or first[k + 1] > first_blocked)
    return persistence, top, unmeasured


def count_distinct(C, tolerance):
    """Groups of rows of C linked by distances <= tolerance (single linkage)."""
    C = np.asarray(C, dtype=np.float64)
    m = C.shape[0]
    parent = list(range(m))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    close = ((C[:, None, :] - C[None, :, :]) ** 2).sum(axis=2) <= tolerance * tolerance
    for a, b in zip(*np.nonzero(np.triu(close, 1))):
        parent[root(a)] = root(b)
    return len({root(i) for i in range(m)})
