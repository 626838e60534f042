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

Annealing runs with max_clusters + 1 centroids, so that the persistence of max_clusters is
measured, and stops cooling as soon as max_clusters + 1 are distinct. Where the cooling
reaches ``stop`` first, the persistence of the last k is a lower bound (``censored``).

Cost: one annealing run (`softkmeans.fit.annealing`: per width a few fused passes and one
moments pass) with at most max_clusters + 1 centroids; no finish.
"""

from __future__ import annotations

import dataclasses
import math
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
            fig, ax = plt.subplots(figsize=(6, 3.5))
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
    run_annealing(
        source, max_clusters + 1, schedule, critical_sigma=critical, tol=tol,
        max_iter=1, rng=check_random_state(random_state), history=History(),
        relocate=None, on_width=recorder,
    )  # fmt: skip
    return recorder.diagram(min_clusters, max_clusters, critical)


class Recorder:
    """on_width for `run_annealing`: counts distinct centroids after each width; asks to
    stop once ``stop_at`` are distinct (None: never)."""

    def __init__(self, merge, stop_at=None):
        self.merge, self.stop_at = merge, stop_at
        self.sigma, self.n_distinct, self.objective = [], [], []

    def __call__(self, sigma, C, objective):
        n = count_distinct(C, self.merge * sigma)
        self.sigma.append(float(sigma))
        self.n_distinct.append(n)
        self.objective.append(float(objective))
        return self.stop_at is not None and n >= self.stop_at

    def diagram(self, min_clusters, max_clusters, critical):
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
        persistence, censored = _persistence(sigma, counts)
        candidates = [k for k in range(min_clusters, max_clusters + 1) if k in persistence]
        # The most persistent; ties to the smaller k. Persistences are sums of equal log
        # cooling steps, so they tie up to rounding: compared at 1e-9. None reached: the
        # smallest allowed.
        suggested = (
            max(candidates, key=lambda k: (round(persistence[k], 9), -k))
            if candidates
            else min_clusters
        )
        return PhaseDiagram(
            sigma, counts, objective, splits, persistence, censored, int(suggested),
            min_clusters, max_clusters, float(self.merge), float(critical),
        )  # fmt: skip


def _persistence(sigma, counts):
    """({k: log sigma_k - log sigma_{k+1}}, the censored k or None)."""
    if counts.size == 0:
        return {}, None
    top = int(counts.max())
    appear = {}
    for k in range(1, top + 1):
        appear[k] = float(sigma[0]) if k == 1 else float(sigma[np.argmax(counts >= k)])
    persistence = {k: math.log(appear[k]) - math.log(appear[k + 1]) for k in range(1, top)}
    persistence[top] = math.log(appear[top]) - math.log(float(sigma[-1]))
    return persistence, top


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
