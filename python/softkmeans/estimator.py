"""`SoftKMeans`: the scikit-learn estimator for hard, softmax and entmax15 K-Means.

Temperature convention: we speak of the RBF width sigma (a length, in the units of X);
the temperature is T = 2 sigma^2 and the scores are z_ij = -D_ij / (2 sigma^2).

scikit-learn (>= 1.6, for ``validate_data`` and ``__sklearn_tags__``) is needed by this
estimator only, as the optional extra ``softkmeans[sklearn]``. Full estimator compatibility
-- ``get_params``/``set_params``/``clone``, ``__sklearn_tags__``, ``validate_data``
(``n_features_in_``, ``feature_names_in_`` and their errors), the HTML repr,
``check_estimator`` -- lives in scikit-learn's private machinery that changes between
releases; re-implementing it without scikit-learn would mean tracking those changes by hand
and still failing its checks. The functional API (``softkmeans.<name>``), `kmeans_plusplus`,
the fitting driver and the ``softkmeans`` command do not import scikit-learn, and
``import softkmeans`` imports this module only on first use of ``softkmeans.SoftKMeans``.

sigma="default" (the default): "auto" for a softmax fit (Euclidean, not annealed, balanced
or streamed), so that predict_proba is the isotropic Gaussian mixture's posterior; None
elsewhere. sigma=None: sigma = 0.1 x critical_sigma(X) (DEFAULT_SIGMA_FRACTION), i.e. a
temperature 1 % of the critical one, where the data's first split happens: well inside the
clustered phase, soft only near cluster boundaries, and scale-equivariant (scaling X scales
sigma).

The fitting loop (`softkmeans.fit`) is a thin policy layer over a data source
(`softkmeans.sources`, chosen once for the kind of X) and the trusted native layer: each
iteration is one fused ``block_stats`` pass over X, which returns the cluster weights,
the weighted sums (the new centroids are their ratio), the objective, J and the minimum
margin at once; one more pass at the final centroids gives the labels, inertia,
objective and minimum margin that the estimator reports.

``assignment="hard"`` follows ``sklearn.cluster.KMeans(algorithm="lloyd")`` step for step:
the tolerance is ``tol`` x the mean feature variance; a run stops after the first
iteration whose total squared centroid shift is <= that tolerance (this includes
scikit-learn's "strict convergence": unchanged labels give a zero shift); the labels are
recomputed from the final centroids; ``inertia_`` = J; an empty cluster is moved to the
point farthest from its centroid, which leaves its old cluster (scikit-learn's
``_relocate_empty_clusters``); with ``n_init > 1`` a run replaces the best one only if its
inertia is lower and its clustering differs.

Deliberately different from ``KMeans``: the default ``assignment`` is ``"softmax"``;
``labels_`` are int64; output feature names are ``softkmeans0, ...``; ``algorithm="elkan"``
runs Lloyd's iteration (a hard fit already skips, with distance bounds, the rows whose
label cannot change, bit for bit); ``copy_x`` has no effect (X is never written to); the
tolerance uses the *weighted* feature variance; with fewer distinct points than clusters
an empty cluster keeps its centroid.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from . import sources
from ._critical_sigma import CriticalSigma, Fingerprint, weak_ref
from .callbacks import CallbackSupportMixin, fit_task, with_callbacks
from .fit.balanced import biased_labels, biased_responsibilities
from .fit.driver import Fitter, threads_for
from .fit.params import DEFAULTS, FitParams, InvalidParameterError
from .fit.streaming import StreamState, fitted_weights
from .fit.tasks import NO_TASKS
from .sources import reads
from .sources.nearest import CentroidGrouping

__all__ = ["SoftKMeans"]


def _refuse_lossy_dtypes(X):
    """Strings and long double are refused as the functional API refuses them.

    scikit-learn's validate_data would parse numeric strings and round long double to
    float64 silently. Object arrays of numbers stay accepted: that is scikit-learn's
    convention (check_dtype_object), and anything non-numeric in them still fails there.
    """
    dtype = getattr(X, "dtype", None)
    if dtype is None or not isinstance(dtype, np.dtype):
        return
    if dtype.kind in "USVmM" or (dtype.kind == "f" and dtype.itemsize > 8):
        raise TypeError(f"X must be a real numeric array (float32 or float64); got dtype {dtype}")


def _streams(estimator):
    """partial_fit is available: the estimator does not anneal."""
    return estimator.anneal is None or estimator.anneal is False


class SoftKMeans(
    CallbackSupportMixin,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    ClusterMixin,
    BaseEstimator,
):
    """K-Means with hard (Lloyd), softmax or entmax15 assignments, and deterministic annealing.

    Temperature: sigma is the RBF width (units of X); T = 2 sigma^2; the scores are
    z_ij = -||x_i - c_j||^2 / (2 sigma^2).

    Parameters
    ----------
    n_clusters : int or "auto", default=8
        "auto": the most persistent k in [2, max_clusters] of the phase diagram
        (`softkmeans.fit.phase_diagram`: one annealing run, its splits along principal axes, so the
        same k for every seed), or 1 where that k keeps its clusters over less than a
        factor 1.4 in sigma (a single blob), then a fit with that k; ``n_clusters_`` and
        ``phase_diagram_`` report it. A choice at max_clusters warns (UserWarning) and
        sets ``phase_diagram_.at_max``: a larger k may persist longer.
    assignment : {"hard", "softmax", "entmax15"}, default="softmax"
        "hard" is Lloyd's algorithm, a drop-in for ``KMeans(algorithm="lloyd")``.
    sigma : float, None, "auto" or "default", default="default"
        "default": "auto" for softmax fits (Euclidean, not annealed, balanced or streamed by
        partial_fit), None otherwise (`FitParams.default_width`; measured calibration in
        bench/default_sigma.py). 0.1 x critical_sigma gave one-hot memberships.
        "auto" (softmax only): the maximum-likelihood shared variance, re-estimated at each
        step (EM of the equal-weight isotropic Gaussian mixture, `softkmeans.fit.auto_sigma`),
        so that ``predict_proba`` is that mixture's posterior. Seeded (``init`` a method),
        EM starts at Lloyd's fixed point, as GaussianMixture starts from k-means
        (``history_`` holds the hard steps first), and stops at ``tol`` or once a step
        gains at most 10 x ``tol`` in mean log-likelihood.
        Width for "softmax" / "entmax15" (ignored by "hard"). None: 0.1 x critical_sigma(X),
        the width below which the data's first split happens (sqrt of the largest
        eigenvalue of the weighted covariance), i.e. T = 0.01 x the critical temperature:
        well inside the clustered phase, soft only near cluster boundaries.
    anneal : None, True, dict or AnnealingSchedule, default=None
        Deterministic annealing (see `softkmeans.fit.annealing_schedule`): start above the critical
        width with all centroids at the mean, cool geometrically, finish with entmax15
        below sqrt(Delta_min)/2, i.e. exactly Lloyd, then split-merge moves while they lower
        J (`softkmeans.fit.split_merge`). ``init`` is not used when annealing; a ``sigma``
        is refused (the schedule sets the widths).
    init : "k-means++", "k-means||", "random", array-like (n_clusters, d) or callable, \
default="k-means++"
        "k-means||" (Bahmani et al. 2012; `softkmeans.fit.kmeans_parallel`): 1 + 2 passes
        over X, drawing about n_clusters, then 3 n_clusters candidates (the last pass
        reads a sample of X where that is under half of it), then the weighted greedy
        k-means++ on the candidates; the draws are hashed from the row index, so every
        reader of X (memmap, row blocks, Dask chunks) seeds the same rows.
        A callable is called as ``init(X, n_clusters, random_state=RandomState)`` and
        returns an array-like (n_clusters, d). ``sample_weight`` is used by the seeding of
        "k-means++", "k-means||" and "random", not by an array or a callable (as
        scikit-learn).
    n_init : "auto" or int, default="auto"
        Runs from different initializations; the best (lowest objective) is kept.
        "auto" (scikit-learn's default and meaning): 1 run for "k-means++" or an array,
        10 for "random" or a callable; 1 when annealing (init unused). An array with
        n_init > 1 warns and runs once.
    max_iter : int, default=300
        Most centroid steps per run (the final Lloyd phase when annealing).
    tol : float, default=1e-4
        A run stops when the total squared centroid shift is <= tol x the mean feature
        variance (scikit-learn's rule).
    random_state : None, int or RandomState
    n_threads : None or int
        Threads of the native core; None uses the OpenMP default (honours
        ``threadpoolctl.threadpool_limits``).
    verbose : int or bool, default=0
        Nonzero: scikit-learn's lines -- "Initialization complete" per run, "Iteration i,
        inertia J." per step (the soft kinds add ", objective F, sigma s"), and
        "Converged at iteration i: strict convergence." or "... center shift s within
        tolerance t."; when annealing, one line per width.
    copy_x : bool, default=True
        Accepted for scikit-learn compatibility; no effect: X is never modified (scikit-learn
        centres X in place when copy_x=False; we never write to X, whatever its layout).
    algorithm : {"lloyd", "elkan"}, default="lloyd"
        Accepted for scikit-learn compatibility; both run Lloyd's iteration (the fused
        native pass costs about what Elkan's bound bookkeeping saves, and "elkan" gives
        the same result as "lloyd" in scikit-learn too, up to rounding).
    stream_memory : {"sqrt", "all"}, default="sqrt"
        ``partial_fit`` only: how much of the stream a centroid remembers. "sqrt": at most
        sqrt(T_j) of the weight T_j it has seen, plus the batch (old assignments are
        forgotten, so the stream reaches the batch fit's inertia: within 1 % after 5
        passes in bench/streaming.py); "all": everything, the running mean of SPEC.md
        before issue 26 and of ``MiniBatchKMeans`` (which freezes early assignments).
    max_clusters : int >= 2, default=10
        n_clusters="auto" only: the largest k considered. 10 covers the range the usual
        k-selection plots scan (2..10); the diagram's cost grows with it (the annealing
        runs with 2 (max_clusters + 1) centroids) and finer splits past it are rarely
        clusters. The choice stays below n_samples.
    decay : float in [0, 1], default=0.0
        ``partial_fit`` only: the fraction of the remembered statistics forgotten at each
        batch (exponential forgetting, for a drifting stream; Spark's ``decayFactor`` is
        1 - decay). 0: none; 1: each batch alone moves the centroids to its own means.
    metric : {"euclidean", "cosine"}, default="euclidean"
        "cosine": spherical K-Means (SPEC.md, "Cosine (spherical) K-Means"): every row is
        read as x / ||x|| (a zero row ties with every centroid and moves none), the
        centroids are unit vectors, c_j = S_j / ||S_j||; softmax is then a von
        Mises-Fisher mixture of concentration 1 / sigma^2 (``predict_proba``), and
        ``critical_sigma_``, ``transform``, ``inertia_`` and the objectives are those of
        the normalized rows (D = 2 - 2 cos). Dense X is normalized into one copy (the
        memory of X again); sparse X is scaled block by block, never copied.
    max_points_per_centroid : None or int >= 1, default=None
        Train on a sample, as index builders do (faiss's parameter of the same name,
        whose default is 256): with more than n_clusters x max_points_per_centroid rows
        of positive weight, the runs (seeding, iterations, n_init) see only a uniform
        sample of that many of them, drawn once from ``random_state`` without
        replacement; then one pass labels every row exactly at the fitted centroids.
        None: every row. The sample is uniform whatever ``sample_weight``, and the
        sampled rows keep their weights (the weighted means stay unbiased). ``labels_``,
        ``inertia_``, ``objective_`` and ``min_margin_`` cover all rows with their
        weights; ``n_iter_``, ``history_`` and the tolerance are those of the sample's
        runs (as is ``critical_sigma_`` when the fit needs it). A memory-mapped X is
        sampled into a temporary file, not into memory (`softkmeans.fit.sampled`).
        ``partial_fit`` uses each batch whole; ``predict`` labels every row exactly.

    balance : None, "equal" or array-like (n_clusters,), default=None
        Balanced clusters (SPEC.md, "Balanced (size-constrained) assignments"): target
        masses m_j > 0 summing to the total sample weight W (relative tolerance 1e-6;
        "equal": W / n_clusters each). "hard": the assignment minimizing the distortion
        under the masses, a_i = argmin_j (D_ij - g_j) with one offset per cluster; with
        unit weights every cluster holds floor(m_j) or floor(m_j) + 1 rows (the extra
        rows to the largest fractional parts). "softmax": entropic transport at sigma
        (Sinkhorn), N_j = m_j to 1e-6. Not with "entmax15", annealing or partial_fit.
        See `softkmeans.fit.balanced` for the cost.
    max_cluster_size : None, number or array-like (n_clusters,), default=None
        Capacities u_j (one number: the same for every cluster): N_j <= u_j, offsets
        g_j <= 0 and g_j = 0 where a cluster has room. With unit weights a count (floored);
        their sum must reach n (else ValueError). Not together with ``balance``.

    Attributes
    ----------
    cluster_centers_ : (n_clusters, d), dtype of X
    labels_ : (n,) int64, nearest centroid of each training point
    inertia_ : float, J = sum_i w_i min_j ||x_i - c_j||^2
    objective_ : float, the objective of ``assignment`` at ``sigma_`` (J, F_sigma, G_sigma)
    sigma_ : float, the width used by predict_proba/score (0.0 for "hard"); when annealing,
        the last width
    n_iter_ : int, centroid steps of the kept run
    min_margin_ : float, Delta_min at the final centroids (inf when n_clusters == 1)
    critical_sigma_ : float, sqrt(lambda_max) of the weighted data covariance
    exact_lloyd_ : bool, True when the result is exactly Lloyd: always for "hard"; for
        entmax15 (and after annealing) when sigma_ <= sqrt(min_margin_)/2; never for softmax
        without annealing
    history_ : dict of per-iteration arrays "sigma", "objective", "J", "shift",
        "min_margin" (Delta_min at the step's input; nan while annealing and for a hard
        step that skipped rows by distance bounds), a list
        "kind" and "transitions" (phase transitions when annealing: sigma, iteration,
        n_before, n_after distinct centroids)
    balance_offsets_ : (n_clusters,) float64 or None, the offsets g of a balanced fit
        (max g = 0 for ``balance``; g <= 0 for ``max_cluster_size``); None otherwise.
        ``predict`` returns argmin_j (D_ij - g_j), which on the training data gives
        ``labels_`` (except at rows exactly tied under the offsets), and
        ``predict_proba`` of a balanced "softmax" fit the responsibilities with the
        offsets; ``transform`` and ``score`` ignore them.
    n_clusters_ : int, the number of clusters fitted (n_clusters, or the "auto" choice)
    phase_diagram_ : `softkmeans.fit.phase_diagram.PhaseDiagram`, for annealing fits and
        n_clusters="auto": the splits, the persistence of each k, the suggested k
    n_features_in_, feature_names_in_ (when X has string column names)
    """

    def __init__(
        self,
        n_clusters=DEFAULTS.n_clusters,
        *,
        assignment=DEFAULTS.assignment,
        sigma=DEFAULTS.sigma,
        anneal=DEFAULTS.anneal,
        init=DEFAULTS.init,
        n_init=DEFAULTS.n_init,
        max_iter=DEFAULTS.max_iter,
        tol=DEFAULTS.tol,
        random_state=DEFAULTS.random_state,
        n_threads=DEFAULTS.n_threads,
        verbose=DEFAULTS.verbose,
        copy_x=DEFAULTS.copy_x,
        algorithm=DEFAULTS.algorithm,
        stream_memory=DEFAULTS.stream_memory,
        decay=DEFAULTS.decay,
        metric=DEFAULTS.metric,
        balance=DEFAULTS.balance,
        max_cluster_size=DEFAULTS.max_cluster_size,
        max_clusters=DEFAULTS.max_clusters,
        max_points_per_centroid=DEFAULTS.max_points_per_centroid,
    ):
        self.n_clusters = n_clusters
        self.assignment = assignment
        self.sigma = sigma
        self.anneal = anneal
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.n_threads = n_threads
        self.verbose = verbose
        self.copy_x = copy_x
        self.algorithm = algorithm
        self.stream_memory = stream_memory
        self.decay = decay
        self.metric = metric
        self.max_clusters = max_clusters

        self.balance = balance
        self.max_cluster_size = max_cluster_size

        self.max_points_per_centroid = max_points_per_centroid

    # ------------------------------------------------------------------ validation

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _validate(self, X, *, reset):
        """scikit-learn's checks of X against the fitted features (reset: a fit sets them).

        A Dask collection or an array-like read by row slices (h5py, zarr) is not read
        here: its dtype and columns are checked, and the source reads it.
        """
        _refuse_lossy_dtypes(X)
        if sources.is_deferred(X):
            self._check_features(X.shape[1], sources.check_deferred(X), reset)
            return X
        # No order="C": a Fortran-ordered or strided X is read in row blocks, not copied.
        return validate_data(
            self, X, dtype=[np.float64, np.float32], accept_sparse="csr", reset=reset
        )

    def _check_features(self, n_features, names, reset):
        """validate_data's feature checks for an X it must not read (its messages); names:
        a Dask DataFrame's string column names (scikit-learn reads only pandas')."""
        if reset:
            self.n_features_in_ = int(n_features)
            if names is not None:
                self.feature_names_in_ = names
            else:
                self.__dict__.pop("feature_names_in_", None)
            return
        if n_features != self.n_features_in_:
            raise ValueError(
                f"X has {n_features} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input."
            )
        fitted = getattr(self, "feature_names_in_", None)
        if fitted is not None and names is not None and list(names) != list(fitted):
            raise ValueError(
                "The feature names should match those that were passed during fit; "
                f"got {list(names)}, expected {list(fitted)}"
            )

    @with_callbacks
    def fit(self, X, y=None, sample_weight=None):
        """Fit the centroids to X (n, d); sample_weight (n,) >= 0 optional.

        X may be a NumPy array of any layout, a DataFrame, a scipy.sparse matrix, an
        np.memmap, an array-like read by row slices that is not in memory (an h5py or zarr
        dataset: copied block by block into a temporary memory-mapped file in ``TMPDIR``,
        fitted there and the file removed), or a Dask array or DataFrame (`softkmeans.dask`).

        Callbacks set by ``set_callbacks`` (scikit-learn >= 1.9) see each run, width and
        iteration and may stop the fit (`softkmeans.callbacks`).
        """
        fitter, source = self._fitter(X, y, sample_weight)
        try:
            fitter.run()
            # Before the source closes: a fit whose critical_sigma_ is computed now (a
            # balanced one) reads it, and a spooled copy is gone once closed.
            self._set_fitted(fitter, source, weak_ref(X))
        finally:
            source.close()
        return self

    def _fitter(self, X, y, sample_weight):
        """(the `Fitter` of a fit, planned, the source of X): X validated and its source
        made once, the callbacks' root task begun only where callbacks are set."""
        X = self._validate(X, reset=True)
        source = sources.source_of(X, sample_weight, fit=True)
        try:
            task = fit_task(self, X, y, sample_weight) if self._has_callbacks() else NO_TASKS
            return Fitter(self._fit_params(), ConvergenceWarning, task).plan(source), source
        except BaseException:
            source.close()
            raise

    def _has_callbacks(self):
        """Callbacks are set (scikit-learn >= 1.9's ``set_callbacks``, or a parent's)."""
        return bool(getattr(self, "_skl_callbacks", None)) or hasattr(
            self, "_parent_callback_ctx"
        )

    def _set_fitted(self, fitter, source, training_data):
        """The fitted attributes of `fitter`'s fit of `source` (still open) and what
        partial_fit and critical_sigma_ continue from; the callbacks' root task ended."""
        weights = None if source.unit_weights else source.weights
        self.__dict__.pop("_stream", None)  # a fit ends any stream of partial_fit calls
        self.__dict__.pop("n_steps_", None)
        self.__dict__.pop("cluster_weights_", None)
        self.__dict__.pop("phase_diagram_", None)
        for name, value in fitter.results().items():
            setattr(self, name, value)
        self._fitted_weights = fitted_weights(  # partial_fit continues from them
            self.labels_, weights, self.n_clusters_
        )
        self._critical = CriticalSigma(
            fitter.critical_sigma_known, training_data, source, fitter.metric, self._fingerprint()
        )
        self._n_features_out = self.cluster_centers_.shape[0]
        self._grouping = CentroidGrouping()  # predict's centroid groups, made once
        fitter.task.end(dict)  # the fitted estimator itself

    @property
    def critical_sigma_(self):
        """sqrt(lambda_max) of the weighted covariance of the training data (of the first
        batch of a stream), computed when a fit needs it (a soft kind with sigma=None,
        annealing) or else on first read, from the training data if it is still
        referenced (AttributeError otherwise: use `softkmeans.critical_sigma`)."""
        critical = self.__dict__.get("_critical")
        if critical is None:
            raise AttributeError("critical_sigma_ is set by fit or partial_fit")
        return critical.value()

    def __getstate__(self):
        state = super().__getstate__()
        if "_critical" in state:  # the weak reference to the training data does not pickle
            try:
                value = state["_critical"].value()
            except AttributeError:
                value = None
            state["_critical"] = CriticalSigma(value, None, None, state["_critical"]._metric)
        if "_grouping" in state:  # made again by the first predict
            state["_grouping"] = CentroidGrouping()
        return state

    def _fingerprint(self):
        """What critical_sigma_'s first read checks the training data against (None: it
        cannot be checked, so computed now): the fitted objective, recomputed there at the
        fitted centroids by the same kernels (a balanced fit's is at its biased labels)."""
        if self.balance_offsets_ is not None:
            return None
        return Fingerprint(
            self.cluster_centers_, self.assignment, self.sigma_, self.objective_, self.n_threads
        )

    def _fit_params(self):
        params = FitParams.of(self)
        # scikit-learn's RandomState conventions (None: the global one), and its error
        # class for a bad one (both a ValueError and a TypeError).
        try:
            params.random_state = check_random_state(self.random_state)
        except ValueError as exc:
            raise InvalidParameterError(str(exc)) from None
        return params

    @available_if(_streams)
    def partial_fit(self, X, y=None, sample_weight=None):
        """Update the centroids with one batch X (n_b, d): streaming K-Means (SPEC.md).

        Each centroid moves to the weighted mean of the statistics it remembers,
        M_j(t) = min((1 - decay) M_j(t-1), sqrt(T_j)) + N_j(batch),
        c_j <- c_j + (S_j - N_j c_j) / M_j(t), T_j the weight it has seen (``stream_memory``
        "all": no sqrt bound, the running mean): closed form, no learning rate; clusters
        the batch does not touch stay where they are, except a dead centroid (seen weight
        and share of the batch both below 1 % of the largest: moved to a batch row drawn
        as k-means++ draws, `softkmeans.fit.streaming`). The first call checks the
        parameters, initialises the centroids on this batch with ``init`` and fixes sigma
        (None: 0.1 x this batch's critical width; n_clusters="auto": k from this batch,
        in ``n_clusters_``); the first after `fit` continues from the fitted centroids
        and sigma, as MiniBatchKMeans does. Not available with ``anneal`` (annealing needs
        all the data at every width).

        After each call: ``cluster_centers_``, ``cluster_weights_`` (T_j, forgotten by
        ``decay``), ``n_steps_`` (batches seen), and of this batch at the centroids before
        its update: ``labels_``, ``inertia_``, ``objective_``, ``min_margin_``.
        """
        state = self.__dict__.get("_stream")
        if state is None and "_fitted_weights" in self.__dict__:
            state = self._continue_from_fit()
        first = state is None
        source = sources.source_of(self._validate(X, reset=first), sample_weight, fit=first)
        fitter = Fitter(self._fit_params(), ConvergenceWarning)
        try:
            stream, stats, labels = fitter.partial_fit(source, state=state)
            if first:  # read now, before a spooled copy of the batch is gone
                critical = CriticalSigma(stream.critical_sigma, None, source, fitter.metric)
        finally:
            source.close()
        if first:  # n_clusters="auto": the first batch's choice
            self.n_clusters_ = stream.centroids.shape[0]
            if fitter.phase_diagram_ is not None:
                self.phase_diagram_ = fitter.phase_diagram_
        self._stream = stream
        self.cluster_centers_ = stream.centroids
        self.cluster_weights_ = stream.totals
        self.n_steps_ = stream.n_steps
        self.labels_ = labels
        self.inertia_ = float(stats.distortion)
        self.objective_ = float(stats.objective)
        self.min_margin_ = float(stats.min_margin)
        self.sigma_ = float(stream.sigma)
        if first:
            self._critical = critical
        self._n_features_out = self.cluster_centers_.shape[0]
        self._grouping = CentroidGrouping()
        return self

    def _continue_from_fit(self):
        """The stream's state at the fitted model: its centroids, width and clusters'
        weights (`softkmeans.fit.streaming`)."""
        if self.balance is not None or self.max_cluster_size is not None:
            raise ValueError(
                "partial_fit does not balance: use fit with balance / max_cluster_size"
            )
        weights = self.__dict__.pop("_fitted_weights")
        C = self.cluster_centers_
        return StreamState(C, weights, weights.copy(), self.sigma_, math.nan, 0)

    def _source(self, X, sample_weight=None):
        """The source of X (checked against the fit), its threads set, and the
        centroids in its dtype."""
        check_is_fitted(self)
        X = self._validate(X, reset=False)
        metric = self._fit_params().metric_policy()
        source = metric.source(sources.source_of(X, sample_weight), fit=False)
        k, d = self.cluster_centers_.shape
        source.n_threads = threads_for(self.n_threads, source.rows_per_pass, k, d)
        return source, self.cluster_centers_.astype(source.dtype, copy=False)

    def predict(self, X):
        """Index of the nearest centroid of each row of X (hard labels, int64); for a
        balanced fit, argmin_j (D_ij - g_j) with the fitted ``balance_offsets_`` (no
        sizes are enforced on X itself)."""
        source, C = self._source(X)
        offsets = getattr(self, "balance_offsets_", None)
        if offsets is not None:
            return biased_labels(source, C, offsets)[0]
        return reads.labels(source, C, self.__dict__.get("_grouping"))

    def fit_predict(self, X, y=None, sample_weight=None):
        """Fit and return ``labels_``."""
        return self.fit(X, sample_weight=sample_weight).labels_

    def predict_proba(self, X):
        """Responsibilities (n, n_clusters) of the fitted assignment at ``sigma_``.

        One-hot for "hard"; rows sum to 1.
        """
        source, C = self._source(X)
        offsets = getattr(self, "balance_offsets_", None)
        if offsets is not None and self.assignment == "softmax":
            return biased_responsibilities(source, C, offsets, self.sigma_)
        return reads.responsibilities(source, C, self.assignment, self.sigma_)

    def transform(self, X):
        """Euclidean distances (n, n_clusters) to the centroids (as KMeans.transform); for
        float32 X computed in float64 and rounded, as scikit-learn's (a row on its centre
        is at distance 0)."""
        source, C = self._source(X)
        return reads.distances(source, C)

    def fit_transform(self, X, y=None, sample_weight=None):
        """Fit and return the distances of X to the centroids."""
        return self.fit(X, sample_weight=sample_weight).transform(X)

    def score(self, X, y=None, sample_weight=None):
        """Minus the fitted objective on X (J for hard, F_sigma or G_sigma at ``sigma_``):
        for "hard", minus the inertia of X, as ``KMeans.score``."""
        source, C = self._source(X, sample_weight)
        stats, _ = reads.stats(source, C, self.assignment, self.sigma_, sums=False)
        return -float(stats.objective)
