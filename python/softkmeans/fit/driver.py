"""The fitting driver behind `SoftKMeans` and the ``softkmeans cluster`` command.

scikit-learn's layering (estimator -> driver -> kernel): `Fitter` runs one fit, with the
parameters of a `FitParams`, over a data source (`softkmeans.sources`, chosen once in
`Fitter.fit`); `SoftKMeans` adds the scikit-learn conventions on top; the command line
uses `Fitter` directly, so that it does not import scikit-learn (about a second at
start-up). See `softkmeans.estimator` for the semantics (the KMeans drop-in rules,
weights, the sigma default, annealing).

The passes a fit makes over X: one validation, which also gives the features' variances
(the tolerance); the seeding's (k-means++: one per centre, two where the candidates'
distances are not kept; k-means||: 1 + 2, `softkmeans.fit.kmeans_parallel`); one fused
`block_stats` pass per iteration (a hard fit of an in-memory array with d > 4 and
centroids of at least 8 KiB: one `hard_stats_bounded` pass, which computes only the
distances that may change a row's label, see `softkmeans.fit.bounded`); and one final pass
at the final centroids, which yields the labels, inertia, objective and minimum margin at
once. The weighted covariance and its largest eigenvalue (`critical_sigma_`) are computed
only where the fit needs them (a soft kind with sigma=None, annealing), or on first read
of `critical_sigma_`. Relocating an empty cluster adds one `assign` pass (scikit-learn's
policy needs the labels at the step's input), except after a bounded step, which has them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, NamedTuple

import numpy as np

from .. import _stats, sources
from .. import _validation as v
from ..sources import queries, reads
from . import phase_diagram as phase
from .annealing import run_annealing
from .auto_sigma import EM_GAIN_TOL_PER_TOL, nll_score, run_em
from .balanced import run_balanced, targets_of
from .bounded import BoundedHardPass
from .kmeans_parallel import kmeans_parallel
from .metric import EUCLIDEAN
from .params import (
    DEFAULT_SIGMA_FRACTION,
    FitParams,
    check_init_centers,
    is_auto,
    runs_of,
    tolerance_of,
    width_of,
)
from .progress import (
    QUIET,
    OncePerFit,
    Progress,
    converged_line,
    iteration_line,
    seeding_reporter,
    width_line,
)
from .relocation import relocator, warn_about_empty_clusters
from .sampled import label_all, training_source
from .seeding import KMeansPlusPlus, check_random_state
from .steps import History, Run, run_steps
from .streaming import StreamState, revival_rng, revive_dead
from .tasks import NO_TASKS

__all__ = ["DEFAULT_SIGMA_FRACTION", "Fitter", "StreamState", "threads_for"]

RESULTS = (
    "cluster_centers_",
    "labels_",
    "inertia_",
    "objective_",
    "sigma_",
    "n_iter_",
    "history_",
    "min_margin_",
    "exact_lloyd_",
    "balance_offsets_",
    "n_clusters_",
)


# Below this many multiply-adds per pass (n x k x d, about a millisecond of one core) the
# native core runs on one thread: waking an OpenMP team costs about as much as the work,
# and far more on a busy machine (results do not depend on the thread count).
# n_threads=None otherwise leaves the choice to OpenMP / threadpoolctl.
_SERIAL_WORK = 1 << 20


def threads_for(n_threads, n, k, d):
    """The core's thread count for a pass of n x k x d (an int; 0: the OpenMP default)."""
    if n_threads is None and n * k * d < _SERIAL_WORK:
        return 1
    return v.check_n_threads(n_threads)


class _Plan(NamedTuple):
    """What a fit's runs read and do, decided once (`Fitter.plan`): the source of the
    final pass and the training source of the runs (its sample, or itself), the checked
    parameters, and ``run(task, rng, progress) -> Run``, the run kind."""

    source: object
    training: object
    rng: object
    k: int
    kind: str
    schedule: object
    auto: bool  # sigma="auto": the runs compare by likelihood
    n_init: int
    progress: Progress
    run: Callable

    def close(self):
        self.progress.close()
        if self.training is not self.source:
            self.training.close()


class Fitter:
    """One fit: `params` (a FitParams), the fitted attributes after `fit`.

    warning_category: the class of the convergence warnings (scikit-learn's
    ConvergenceWarning from the estimator, UserWarning otherwise).
    task: the fit's `softkmeans.fit.tasks.Task` (scikit-learn's callbacks, through the
    estimator): a subtask per n_init run, whose end may stop the runs.
    """

    def __init__(self, params: FitParams, warning_category=UserWarning, task=NO_TASKS):
        self.params = params
        self.warning_category = warning_category
        self.task = task
        self.source = None
        self._critical_sigma = None
        self._notes = None  # made by the first warning of the fit (`notes`)
        self._planned = None
        self._plusplus = None  # the k-means++ seeding's passes, prepared once (`plan`)
        self.metric = params.metric_policy()
        # annealing fits and n_clusters="auto" (softkmeans.fit.phase_diagram)
        self.phase_diagram_ = None

        self.balance_offsets_ = None

    def results(self):
        """The fitted attributes, by name (phase_diagram_ where the fit has one)."""
        out = {name: getattr(self, name) for name in RESULTS}
        if self.phase_diagram_ is not None:
            out["phase_diagram_"] = self.phase_diagram_
        return out

    @property
    def critical_sigma_(self):
        """sqrt(lambda_max) of the data's weighted covariance (metric="cosine": the
        spherical width, `softkmeans.fit.metric`), computed on first use."""
        if self._critical_sigma is None:
            self._critical_sigma = self.metric.critical_sigma(self.source)
        return self._critical_sigma

    @property
    def notes(self):
        """The fit's warnings, each issued once at its end (`OncePerFit`)."""
        if self._notes is None:
            self._notes = OncePerFit(self.warning_category)
        return self._notes

    @property
    def critical_sigma_known(self):
        """critical_sigma_ when the fit has computed it, else None."""
        return self._critical_sigma

    def _open(self, source, stream=False):
        """The checked parameters; the source's thread count set for them.
        n_clusters="auto": the phase diagram's suggestion (`softkmeans.fit.phase_diagram`);
        sigma="default": "auto" or None (`FitParams.default_width`)."""
        if is_auto(self.params.n_clusters):
            if self.metric is not EUCLIDEAN:
                raise ValueError(
                    "n_clusters='auto' (the Euclidean phase diagram) needs metric='euclidean'; "
                    f"got metric={self.params.metric!r}: pass an int n_clusters"
                )
            self.phase_diagram_ = phase.diagram_of(
                source,
                max_clusters=self.params.max_clusters,
                random_state=check_random_state(self.params.random_state),
                n_threads=self.params.n_threads,
            )
            phase.warn_if_at_max(self.phase_diagram_)
            k = self.phase_diagram_.n_clusters
            self.params = dataclasses.replace(self.params, n_clusters=k)
        resolved = self.params.check(source)
        self.params = self.params.default_width(resolved.schedule, stream)
        source.n_threads = threads_for(
            self.params.n_threads, source.rows_per_pass, resolved.n_clusters, source.shape[1]
        )
        self.source = source
        return resolved

    def _init_centroids(self, k, init, rng, progress=QUIET):
        source = self.source
        if isinstance(init, str):
            if init == "k-means||":
                centers, _ = kmeans_parallel(source, k, rng)
            elif init == "k-means++":
                # verbose: lines while it runs
                report = seeding_reporter(progress, k) if progress.verbose else None
                plusplus = self._plusplus or KMeansPlusPlus(source, k)
                centers, _ = plusplus.centres(rng, report=report)
            else:  # "random"
                seeds = queries.seeding_sample(source, k, rng)
                w = seeds.weights
                idx = rng.choice(seeds.shape[0], size=k, replace=False, p=w / w.sum())
                centers = seeds.rows(idx)
        elif callable(init):
            centers = check_init_centers(init(source.data, k, random_state=rng), source, k)
        else:
            centers = init
        centers = np.array(centers, dtype=source.dtype, order="C", copy=True)
        if self.metric is not EUCLIDEAN:
            if not np.asarray(centers, dtype=np.float64).any(axis=1).all():
                raise ValueError("init has a zero row: metric='cosine' centroids are directions")
            centers = self.metric.project(centers, centers)
        return centers

    def _run_iterative(self, C, kind, sigma, tol, progress, task, finish=True):
        """Lloyd (or fixed-sigma) steps from C to tol: a `Run`. finish=False: the first
        stage of a soft fit (sigma="auto"'s Lloyd): no final pass (final and labels None),
        its lines in the soft fit's form (sigma 0, objective J), no convergence line."""
        source = self.source
        bounded = BoundedHardPass.for_fit(source, kind, C.shape[0], self.params.max_iter)
        labels_at = bounded.labels_at if bounded is not None else (lambda C: None)

        def step(C):
            stats = bounded(C) if bounded is not None else reads.stats(source, C, kind, sigma)[0]
            return self.metric.step(stats, C), sigma, kind

        def line(i, sigma, result, shift):
            progress.line(iteration_line(i, kind if finish else "softmax", sigma, result))
            if shift <= tol and finish:  # run_steps stops here
                progress.line(converged_line(i, shift, tol), tick=False)

        history = History()
        C, _, _ = run_steps(
            C,
            step,
            max_steps=self.params.max_iter,
            tol=tol,
            history=history,
            relocate=self._relocator(kind, labels_at),
            on_step=line,
            task=task,
        )
        if not finish:
            return Run(C, sigma, history, None, None)
        # The final pass: labels, inertia, objective and margin at the final C (the
        # bounded pass gives block_stats's values with its bounds).
        final = bounded.final(C) if bounded is not None else None
        if final is None:
            final = reads.stats(source, C, kind, sigma, sums=False, labels=True)
        return Run(C, sigma, history, *final)

    def _run_annealing(self, k, schedule, tol, rng, relocate, progress, task):
        history = History()
        recorder = phase.Recorder(phase.MERGE)

        def report(s, step, shift, n_distinct, elapsed):
            prefix = f"width {len(history.sigma):6d} steps  distinct {n_distinct:4d}"
            progress.line(
                width_line(prefix, s, history.objective[-1], history.J[-1], shift, elapsed)
            )

        C, sig, _ = run_annealing(
            self.source,
            k,
            schedule,
            critical_sigma=self.critical_sigma_,
            tol=tol,
            max_iter=self.params.max_iter,
            rng=rng,
            history=history,
            relocate=relocate,
            report=report if self.params.verbose else None,
            task=task,
            metric=self.metric,
            on_width=recorder,
        )
        if self.phase_diagram_ is None:  # n_clusters="auto" keeps its own, to max_clusters
            self.phase_diagram_ = recorder.diagram(2, max(k - 1, 2), self.critical_sigma_)
        final = reads.stats(self.source, C, self.params.assignment, sig, sums=False, labels=True)
        return Run(C, sig, history, *final)

    def _relocator(self, kind, labels_at=lambda C: None):
        """The empty-cluster policy, its centroids where the metric keeps them (a
        relocated cluster's old one may leave the sphere; an empty one without a
        direction keeps its place)."""
        relocate = relocator(self.source, kind, self.notes, labels_at)
        if self.metric is EUCLIDEAN:
            return relocate
        return lambda C_old, step: self.metric.project(relocate(C_old, step), C_old)

    def fit(self, X, sample_weight=None):
        """Fit the centroids to X (n, d), or to a `softkmeans.sources.Source` (its weights
        its own); sample_weight (n,) >= 0 optional. A source made here is closed here."""
        source = sources.source_of(X, sample_weight, fit=True)
        try:
            self.plan(source).run()
        finally:
            if source is not X:
                source.close()
        return self

    def plan(self, source):
        """Decide once what the fit's runs read and do (`_Plan`), for the rows of a
        `softkmeans.sources.Source` (the caller's to close): the parameters checked, the
        metric's source, the training sample (max_points_per_centroid), the tolerance,
        the width and the run kind. A feature that is off is not consulted."""
        data = source if self.metric is EUCLIDEAN else self.metric.source(source)
        k, kind, schedule, init, n_init = self._open(data)
        rng = check_random_state(self.params.random_state)
        # The runs read the training sample, the final pass every row.
        sample = self.params.max_points_per_centroid
        training = data if sample is None else training_source(data, k, sample, rng)
        try:
            self._planned = self._plan_runs(data, training, rng, k, kind, schedule, init, n_init)
        except BaseException:
            if training is not data:
                training.close()
            raise
        return self

    def run(self):
        """The planned fit: its runs, the best kept, and its final pass over every row
        where the runs read a sample."""
        # The plan's run kind refers to this Fitter: dropped, it leaves no cycle that would
        # keep the source (and X) alive after the fit.
        plan, self._planned = self._planned, None
        try:
            best = self._best_run(plan)
            if plan.training is not plan.source:
                final, labels = label_all(
                    plan.source, best.centroids, plan.kind, best.sigma, plan.progress
                )
                best = best._replace(final=final, labels=labels)
        finally:
            plan.close()
        self._set_results(plan.kind, plan.schedule, plan.k, best)
        warn_about_empty_clusters(plan.source, self.labels_, plan.k, self.notes)
        self.notes.flush()
        return self

    def _plan_runs(self, source, training, rng, k, kind, schedule, init, n_init):
        params = self.params
        self.source = training
        variances = training.variances
        if variances is None:  # not computed by the source's validation
            variances = queries.feature_variances(training)
        v.check_spread(variances, training.dtype)  # squared distances would underflow
        tol = tolerance_of(variances, params.tol)
        auto = is_auto(params.sigma)  # re-estimated by each run (softkmeans.fit.auto_sigma)
        needs_width = kind != "hard" and params.sigma is None
        sigma = (
            0.0
            if auto
            else width_of(kind, params.sigma, self.critical_sigma_ if needs_width else 0.0)
        )
        n_init = runs_of(init, n_init)
        targets = self._targets(training, k, kind, auto)
        total = None if schedule is not None else params.max_iter * n_init
        progress = Progress(params.verbose, total=total) if params.verbose else QUIET
        if isinstance(init, str) and init == "k-means++":  # its passes, for every run
            self._plusplus = KMeansPlusPlus(training, k)
        run = self._run_kind(k, kind, sigma, tol, init, schedule, targets, auto)
        return _Plan(source, training, rng, k, kind, schedule, auto, n_init, progress, run)

    def _targets(self, training, k, kind, auto):
        """The balanced fit's `Targets`, or None; what does not combine with it refused."""
        if self.params.balance is None and self.params.max_cluster_size is None:
            return None  # a plain fit
        targets = targets_of(self.params, training, k, kind)
        if targets is not None and self.params.max_points_per_centroid is not None:
            raise ValueError(
                "max_points_per_centroid does not combine with balance / max_cluster_size: "
                "the cluster sizes are those of all the rows, not of a sample"
            )
        if auto and targets is not None:
            raise ValueError(
                "sigma='auto' does not combine with balance / max_cluster_size: a balanced "
                "fit needs a fixed sigma (a number, or None)"
            )
        return targets

    def _run_kind(self, k, kind, sigma, tol, init, schedule, targets, auto):
        """The fit's run kind, chosen once: run(task, rng, progress) -> `Run`."""
        params, training = self.params, self.source
        if schedule is not None:

            def run(task, rng, progress):
                relocate = self._relocator(kind)
                return self._run_annealing(k, schedule, tol, rng, relocate, progress, task)

            return run

        def seeded(task, rng, progress):
            C0 = self._init_centroids(k, init, rng, progress)
            progress.line("Initialization complete", tick=False)
            return C0

        if targets is not None:

            def run(task, rng, progress):
                C, sig, history, final, g = run_balanced(
                    training, seeded(task, rng, progress), kind, sigma, targets,
                    tol=tol, max_iter=params.max_iter, task=task, step=self.metric.step,
                )  # fmt: skip
                return Run(C, sig, history, *final, offsets=g)

        elif auto:

            def run(task, rng, progress):
                C0, lloyd = seeded(task, rng, progress), History()
                if isinstance(init, str):  # seeded: Lloyd first (auto_sigma.run_em)
                    C0, _, lloyd, *_ = self._run_iterative(
                        C0, "hard", 0.0, tol, progress, task, finish=False
                    )
                first = lloyd.n_iter  # EM's steps continue Lloyd's history, in max_iter
                C, sig, history, final = run_em(
                    training, C0, tol=tol,
                    max_iter=0 if lloyd.stopped else params.max_iter - first,
                    relocate=relocator(training, kind, self.notes), task=task,
                    on_step=lambda i, s, step, _: progress.line(
                        iteration_line(first + i, kind, s, step)
                    ), gain_tol=EM_GAIN_TOL_PER_TOL * params.tol, history=lloyd,
                )  # fmt: skip
                return Run(C, sig, history, *final)

        else:

            def run(task, rng, progress):
                C0 = seeded(task, rng, progress)
                return self._run_iterative(C0, kind, sigma, tol, progress, task)

        return run

    def _best_run(self, plan):
        """The best of the plan's runs (lowest objective; sigma="auto": likelihood), a
        run's task ending the runs when it asks to (tasks are made only where observed)."""
        best, best_score = None, None
        observed = self.task is not NO_TASKS
        max_subtasks = None if plan.schedule is not None else self.params.max_iter
        for r in range(plan.n_init):
            task = self.task
            if observed:
                task = task.subtask(f"run {r}", max_subtasks=max_subtasks)
                task.begin()
            run = plan.run(task, plan.rng, plan.progress)
            # sigma='auto': runs end at their own widths, so they compare by likelihood.
            score = (
                nll_score(run.final, run.sigma, self.source.shape[1])
                if plan.auto
                else run.final.objective
            )
            if best is None or (
                score < best_score and not _same_clustering(run.labels, best.labels, plan.k)
            ):
                best, best_score = run, score
            state = {
                "cluster_centers_": run.centroids,
                "sigma_": run.sigma,
                "n_iter_": run.history.n_iter,
            }
            if task.end(lambda state=state: state):
                break
        return best

    def _set_results(self, kind, schedule, k, run):
        final, history = run.final, run.history
        self.balance_offsets_ = run.offsets
        self.cluster_centers_ = run.centroids
        self.labels_ = run.labels
        self.inertia_ = float(final.distortion)
        self.objective_ = float(final.objective)
        self.sigma_ = float(run.sigma) if kind != "hard" else 0.0
        self.n_iter_ = history.n_iter
        self.history_ = history.as_dict()
        self.min_margin_ = float(final.min_margin)
        self.n_clusters_ = int(k)
        self.exact_lloyd_ = _exact_lloyd(kind, schedule, k, history, run.offsets)

    def partial_fit(self, X, sample_weight=None, state: StreamState | None = None):
        """One streaming step on the batch X (SPEC.md, "Streaming").

        The first batch (state None) checks the parameters, fixes sigma (from this batch's
        critical width when sigma is None) and initialises the centroids on this batch;
        every batch then makes one `block_stats` pass at the current centroids and moves
        them to the mean of the remembered statistics (``stream_memory``, ``decay``).
        Returns (the new StreamState, the batch's
        BlockStats at the centroids before the update, its labels there).
        """
        params = self.params
        source = sources.source_of(X, sample_weight, fit=state is None)
        try:
            data = source
            source = self.metric.source(data)
            if state is None:
                state = self._first_batch(source)
            else:
                k, d = state.centroids.shape
                source.n_threads = threads_for(params.n_threads, source.rows_per_pass, k, d)
                self.source = source
            return self._stream_step(source, state)
        finally:
            if data is not X:
                data.close()

    def _first_batch(self, source):
        """The stream's state before its first batch: parameters checked, sigma fixed,
        centroids initialised on the batch."""
        k, kind, schedule, init, _ = self._open(source, stream=True)
        params = self.params  # sigma="default" resolved
        if params.balance is not None or params.max_cluster_size is not None:
            raise ValueError(
                "partial_fit does not balance: use fit with balance / max_cluster_size"
            )
        if is_auto(params.sigma):
            raise ValueError(
                "sigma='auto' is re-estimated over all the data at every step; partial_fit "
                "needs a fixed sigma (a number, or None)"
            )
        if schedule is not None:
            raise ValueError(
                "partial_fit does not anneal: annealing needs all the data at every "
                "width; use fit, or anneal=None"
            )
        # A first batch is small: its critical width is computed at once (a stream of
        # temporary batches would leave nothing to compute it from later).
        crit = self.critical_sigma_
        C = self._init_centroids(k, init, check_random_state(params.random_state))
        sigma = width_of(kind, params.sigma, crit)
        return StreamState(C, np.zeros(k), np.zeros(k), sigma, crit, 0)

    def _stream_step(self, source, state):
        C = state.centroids.astype(source.dtype, copy=False)
        stats, labels = reads.stats(source, C, self.params.assignment, state.sigma, labels=True)
        C_new, totals, memory = _stats.stream_update(
            state.centroids,
            state.totals,
            state.memory,
            stats,
            bound=self.params.stream_memory,
            decay=self.params.decay,
        )
        C_new = self.metric.project(C_new, state.centroids)
        C_new, totals, memory, _ = revive_dead(
            source, C_new, totals, memory, stats.cluster_weights, state,
            lambda: revival_rng(self.params.random_state, state.n_steps),
        )  # fmt: skip
        new_state = dataclasses.replace(
            state, centroids=C_new, totals=totals, memory=memory, n_steps=state.n_steps + 1
        )
        return new_state, stats, labels


def _exact_lloyd(kind, schedule, k, history, offsets):
    """True when the fit's last step was Lloyd's (exact_lloyd_)."""
    if offsets is not None:
        return False  # a balanced fit is not Lloyd's
    if kind == "hard":
        return True
    if kind == "softmax" and schedule is None:
        return k == 1  # softmax is never one-hot with two centroids
    # The last step was Lloyd's: a hard step, or entmax15 at or below sqrt(Delta_min) / 2
    # with Delta_min at that step's own input centroids.
    last_kind = history.kind[-1]
    return bool(
        last_kind == "hard"
        or (last_kind == "entmax15" and history.sigma[-1] <= math.sqrt(history.min_margin[-1]) / 2)
    )


def _same_clustering(labels1, labels2, k):
    """True when the two labelings are equal up to a permutation of the labels."""
    pairs = np.unique(np.asarray(labels1, dtype=np.int64) * k + labels2)
    return np.unique(pairs // k).size == pairs.size
