"""`softkmeans.dask.SoftKMeans`: the same estimator, fitted on Dask arrays and dataframes.

Optional: ``pip install 'softkmeans[dask]'`` (``dask[array,dataframe]`` and
``distributed``); nothing imports this module unless you do.

One fit, one definition: this estimator subclasses `softkmeans.SoftKMeans` (same
parameters, docs, fitted attributes and predict-side conventions) and runs the in-memory
fitting driver (`softkmeans._driver.Fitter`: the step loop, tolerance, sigma default,
``n_init``, empty-cluster policy and fitted attributes) with the reads of X replaced by
passes over the blocks of a Dask array (`_DaskFitter`):

- **A pass** maps the native block-statistics kernel (`softkmeans._native.block_stats`)
  over the row blocks, one task per block, on the workers. The centroids are sent once per
  pass: one ``dask.delayed`` key of the pass's graph that every block task depends on
  (each worker fetches it once), never embedded in the block tasks.
- **The merge** of the block statistics (`softkmeans._stats.merge`) is a tree of pairwise
  merges in block order -- (0, 1), (2, 3), ..., then the same on the results -- whose shape
  depends only on the number of blocks, so the result does not depend on which worker
  computed what, or when. Only the merged statistics (k x d numbers) reach the client.
- **The update** c_j+ = S_j / N_j (`softkmeans._stats.step_result`) and the loop
  (`softkmeans._steps.run_steps`) run on the client.

A fit from the same initial centroids therefore equals the in-memory fit up to the
rounding of the block sums (float64: ~1e-15 relative), with the same labels; the chunking
changes nothing beyond that rounding.

Data and memory. With a distributed client the fit persists the (validated) X and
sample_weight on the workers for its duration (free when they are persisted already),
so each iteration reads cluster memory rather than recomputing X's graph; a block lost
with a worker is recomputed from that graph by Dask, and the fit's result does not change.
Where X cannot be recomputed (blocks scattered from the client), the fit raises a
RuntimeError that says so. Without a distributed client, each pass recomputes the blocks
with the local scheduler (out-of-core, at the cost of re-reading the source).

Initialisation. ``init="k-means++"`` runs the in-memory greedy k-means++ on a uniform
sample of rows (with their weights) gathered to the client: max(10 000, 100 x n_clusters)
rows at most, so it never pulls all the data to the client; when X has no more rows than
that, the sample is all of X and the seeding equals the in-memory fit's. ``"random"`` draws
among the same sample. (Not k-means||, dask-ml's default: its O(log n) passes cost more
than one sample on the data sizes we target.) An array is used as given; a callable is
called as ``init(X, n_clusters, random_state=rng)`` with the Dask array.

Fitted attributes are NumPy arrays: ``labels_`` comes from the final pass (n int64 gathered
to the client, as the in-memory fit gives them), so the fitted model pickles without the
cluster. ``predict``, ``transform``, ``predict_proba`` of a Dask array return Dask arrays
(lazy, one task per block, the centroids one key); ``score`` computes. NumPy input to any
method is passed to `softkmeans.SoftKMeans` unchanged.

Progress: ``verbose=1`` prints the estimator's per-iteration lines (a tqdm bar on a
terminal); the tasks appear in the Dask dashboard's task stream as
``softkmeans-block_stats``, ``softkmeans-merge``, ``softkmeans-moments``,
``softkmeans-anneal-moments`` and ``softkmeans-farthest``.

Annealing (``anneal=...``) runs `softkmeans.annealing`'s schedule, the in-memory one, with
its reads of X as block passes: each step one block_stats pass over the blocks augmented
on the workers with the prior coordinate (no augmented copy of X is stored), each width's
split test one pass that returns every centroid's responsibility-weighted moments (merged
pairwise in block order), and the exact finish one pass per step. The result equals the
in-memory annealing fit up to the rounding of the block sums (float64: centroids ~1e-16
relative, ``sigma_``, set by a minimum margin, ~1e-13; same labels and iterations).

Streaming: ``partial_fit`` takes a stream of Dask arrays or DataFrames (NumPy batches too):
each batch's statistics are one pass on the workers, the running-mean update (SPEC.md,
"Streaming") runs on the client, and the first batch seeds (k-means++ on its sample, as
``fit``) and fixes sigma. A batch of another width than the first is refused before any
work is scheduled.
"""

from __future__ import annotations

import functools

import numpy as np

try:
    import dask
    import dask.array as da
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "softkmeans.dask needs Dask: pip install 'softkmeans[dask]' "
        "(dask[array,dataframe] and distributed)"
    ) from exc

from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from . import _native, _stats
from . import _validation as v
from . import estimator as _estimator
from ._driver import Fitter, _threads_for
from .annealing import _augment, closer, farthest_distances, responsibility_moments

__all__ = ["SoftKMeans"]

# k-means++ / "random" seeding draws from at most this many rows (or 100 per cluster).
SAMPLE_ROWS = 10_000
SAMPLE_ROWS_PER_CLUSTER = 100


# ---------------------------------------------------------------------- the cluster


def _client():
    """The current distributed Client, or None (then the local Dask scheduler runs)."""
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None


def _broadcast(C):
    """The centroids of one pass as one graph key that every block task depends on: sent
    to the scheduler once with the pass's graph and from there to each worker once, never
    embedded in the block tasks.

    NOTE: not ``client.scatter(C, broadcast=True)``: a broadcast waits for every worker,
    and hangs while one that just died is being restarted; a key in the graph is simply
    recomputed wherever it is needed (and costs the same here, ~20 ms per pass).
    """
    return dask.delayed(C, name="softkmeans-centroids-" + dask.base.tokenize(C))


_LOST = (
    "the Dask fit lost data it cannot recompute: most likely a worker died holding blocks "
    "of X (or sample_weight) that were scattered from the client rather than computed "
    "from a graph. Build X from a recomputable source (da.from_array, da.from_zarr, "
    "dd.read_parquet, ...) and persist it, so that Dask can recompute lost blocks"
)


def _compute(*objs):
    """dask.compute, with a lost, unrecomputable input reported as what happened."""
    try:
        return dask.compute(*objs)
    except Exception as exc:
        names = {type(e).__name__ for e in _chain(exc)}
        if names & {"FutureCancelledError", "CancelledError"}:
            raise RuntimeError(f"{_LOST} ({type(exc).__name__}: {exc})") from exc
        raise


def _chain(exc):
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


# Statistics of up to this many consecutive blocks merge in one task: a tree whose shape
# depends only on the number of blocks (one level up to 8 blocks, two up to 64, ...).
MERGE_FAN_IN = 8


def _tree(parts, merge, name):
    """Merges of consecutive groups of MERGE_FAN_IN parts, in block order, level by level.

    merge(list) -> part combines its list in the order given. Each task combines a fixed
    range of blocks, so the result does not depend on who computed which block, or when.
    """
    level = 0
    while len(parts) > 1:
        key = f"{name}-{level}-" + dask.base.tokenize(parts)
        parts = [
            dask.delayed(merge, pure=True)(
                parts[i : i + MERGE_FAN_IN], dask_key_name=(key, i // MERGE_FAN_IN)
            )
            for i in range(0, len(parts), MERGE_FAN_IN)
        ]
        level += 1
    return parts[0]


def _blocks(X, w):
    """[(X block, w block or None)] of the non-empty row blocks, in order."""
    xs = X.to_delayed().ravel()
    ws = [None] * len(xs) if w is None else list(w.to_delayed().ravel())
    return [(x, wb) for x, wb, rows in zip(xs, ws, X.chunks[0]) if rows > 0]


def _weights(w, n):
    return np.ones(n) if w is None else np.ascontiguousarray(w, dtype=np.float64)


# ---------------------------------------------------------------------- block tasks


def _block_stats(X, w, C, kind, sigma, n_threads, sums, labels):
    """BlockStats of the block at C; (BlockStats, labels) when `labels`."""
    X = np.ascontiguousarray(X)
    stats, lab, _ = _native.block_stats(
        X, C, kind, sigma, _weights(w, X.shape[0]), n_threads, sums=sums, labels=labels
    )
    return (stats, lab) if labels else stats


def _block_moments(X, w, n_threads):
    """Check the block (finite, not too large; weights finite and >= 0) and return
    (W, weighted mean (d,), W x covariance (d, d)) of its rows."""
    X = v.check_data(X)
    if w is not None:
        w = v.as_float_array(w, "sample_weight", ndim=1, dtype=np.float64, allow_empty=True)
        if (w < 0).any():
            raise ValueError("sample_weight must be non-negative")
    w = _weights(w, X.shape[0])
    W = float(w.sum())
    d = X.shape[1]
    if not W > 0:
        return 0.0, np.zeros(d), np.zeros((d, d))
    mean, cov = _native.weighted_covariance(X, w, n_threads)
    return W, mean, W * cov


def _merge_moments(parts):
    return functools.reduce(_stats.merge_moment_pair, parts)


def _block_farthest(X, w, C, m, n_threads):
    """The m rows of the block farthest from their nearest centroid: (dist, rows, weights)."""
    X = np.ascontiguousarray(X)
    w = _weights(w, X.shape[0])
    labels, _ = _native.assign(X, C, n_threads)
    # As the in-memory relocation computes them (in the dtype of X).
    dist = ((X - C[labels]) ** 2).sum(axis=1)
    top = np.argsort(-dist, kind="stable")[:m]
    return dist[top], X[top], w[top]


def _concat_farthest(parts):
    return tuple(np.concatenate(column) for column in zip(*parts))


def _block_responsibility_moments(X, w, Ca, kind, sigma, n_threads):
    """Annealing's per-centroid moments of the block, as [(U_j, mean_j, U_j x cov_j)]."""
    X = np.ascontiguousarray(X)
    d = X.shape[1]
    out = []
    for U, mean, cov in responsibility_moments(
        X, _augment(X), _weights(w, X.shape[0]), Ca, kind, sigma, n_threads
    ):
        out.append((U, mean, U * cov) if U > 0 else (0.0, np.zeros(d), np.zeros((d, d))))
    return out


def _merge_responsibility_moments(parts):
    return [_merge_moments(list(per_centroid)) for per_centroid in zip(*parts)]


def _block_farthest_row(X, w, reference, n_threads):
    """(squared distance, row) of the block's positive-weight row farthest from the
    centroids C and the rows `added`, reference = (C, added) (ties to the first row), as
    annealing's in-memory `_add_farthest` computes them."""
    C, added = reference
    X = np.ascontiguousarray(X)
    positive = _weights(w, X.shape[0]) > 0
    dist = farthest_distances(X, positive, C, n_threads)
    for row in added:
        dist = closer(dist, X, positive, row)
    i = int(np.argmax(dist))
    return dist[i], X[i].copy()


def _first_farthest(parts):
    """The part of the largest distance; of equal ones the first in block order."""
    best = parts[0]
    for part in parts[1:]:
        if part[0] > best[0]:
            best = part
    return best


def _labels_block(X, C, n_threads):
    if X.shape[0] == 0:
        return np.empty(0, dtype=np.int64)
    X = v.check_data(X)
    return _native.assign(X, C.astype(X.dtype), n_threads)[0]


def _distances_block(X, C, n_threads):
    if X.shape[0] == 0:
        return np.empty((0, C.shape[0]), dtype=X.dtype)
    X = v.check_data(X)
    D = _native.sq_distances(X, C.astype(X.dtype), n_threads)
    return np.sqrt(D, out=D)


def _proba_block(X, C, kind, sigma, n_threads):
    if X.shape[0] == 0:
        return np.empty((0, C.shape[0]), dtype=X.dtype)
    X = v.check_data(X)
    return _native.responsibilities(X, C.astype(X.dtype), kind, sigma, n_threads)


# ---------------------------------------------------------------------- passes


def _block_tasks(name, block_fn, X, w, *args):
    """One task per non-empty row block: block_fn(X block, w block or None, *args), named
    ``softkmeans-<name>`` in the task stream (the args may hold a `_broadcast` key)."""
    token = dask.base.tokenize(X, w, *args)
    return [
        dask.delayed(block_fn, pure=True)(
            xb, wb, *args, dask_key_name=(f"softkmeans-{name}-{token}", i)
        )
        for i, (xb, wb) in enumerate(_blocks(X, w))
    ]


def _merged(parts, merge, name):
    """The parts merged by `merge` in the fixed tree (`_tree`), computed."""
    return _compute(_tree(parts, merge, name))[0]


def _stats_pass(X, w, C, kind, sigma, n_threads, *, sums=True, labels=False):
    """One block_stats pass over the blocks of X at C: (merged BlockStats, labels or None)."""
    args = (_broadcast(C), kind, sigma, n_threads, sums, labels)
    parts = _block_tasks("block_stats", _block_stats, X, w, *args)
    if not labels:
        return _merged(parts, _stats.merge, "softkmeans-merge"), None
    root = _tree([p[0] for p in parts], _stats.merge, "softkmeans-merge")
    merged, *labs = _compute(root, *[p[1] for p in parts])
    return merged, np.concatenate(labs)


def _moments(X, w, n_threads):
    parts = _block_tasks("moments", _block_moments, X, w, n_threads)
    return _merged(parts, _merge_moments, "softkmeans-moments-merge")


# ---------------------------------------------------------------------- input checks


def _is_dask(obj):
    return dask.is_dask_collection(obj)


def _is_dataframe(obj):
    return _is_dask(obj) and hasattr(obj, "dtypes") and hasattr(obj, "to_dask_array")


def _as_array(X, *, lengths):
    """A dask array from a dask array or a dask DataFrame of numeric columns;
    (array, feature names or None). Nothing is computed, except the partition lengths of
    a DataFrame when `lengths` (after its columns are checked)."""
    names = None
    if _is_dataframe(X):
        dtypes = X.dtypes
        if getattr(dtypes, "ndim", 1) == 0:  # a Series
            raise ValueError("X must be 2-dimensional: a Dask DataFrame, not a Series")
        bad = [
            f"{c!r} ({dt})"
            for c, dt in dtypes.items()
            if not (isinstance(dt, np.dtype) and dt.kind in "biuf")
        ]
        if bad:
            raise TypeError(
                "X must have numeric columns only (bool, integer or float); "
                f"these are not: {', '.join(bad)}"
            )
        columns = list(X.columns)
        if columns and all(isinstance(c, str) for c in columns):
            names = np.asarray(columns, dtype=object)
        X = X.to_dask_array(lengths=True if lengths else None)
    elif not isinstance(X, da.Array):
        raise TypeError(f"expected a Dask array or DataFrame; got {type(X).__name__}")
    if X.ndim != 2:
        raise ValueError(f"X must be 2-dimensional; got shape {X.shape}")
    # The dtype check of the in-memory validation, on an empty array of X's dtype.
    dtype = v.as_float_array(np.empty((0, 0), dtype=X.dtype), "X", ndim=2, allow_empty=True).dtype
    if X.dtype != dtype:
        X = X.astype(dtype)
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})
    return X, names


def _local(sample_weight):
    """sample_weight for NumPy X: a Dask array is computed."""
    return np.asarray(sample_weight) if _is_dask(sample_weight) else sample_weight


def _known_rows(X):
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError(
            "X has unknown chunk sizes (e.g. after boolean indexing); call "
            "X.compute_chunk_sizes() first, or pass a Dask DataFrame (its partition "
            "lengths are computed)"
        )


def _sample_weight(sample_weight, X):
    """sample_weight as a float64 dask array with the row chunks of X, or None."""
    if sample_weight is None:
        return None
    n = X.shape[0]
    if _is_dataframe(sample_weight) and getattr(sample_weight.dtypes, "ndim", 1) == 0:
        sample_weight = sample_weight.to_dask_array(lengths=True)
    if not _is_dask(sample_weight):
        w = v.check_sample_weight(sample_weight, n)
        return da.from_array(w, chunks=(X.chunks[0],))
    if not isinstance(sample_weight, da.Array) or sample_weight.ndim != 1:
        raise ValueError("sample_weight must be a 1-dimensional Dask array (or NumPy array)")
    if sample_weight.shape[0] != n:
        raise ValueError(f"sample_weight has {sample_weight.shape[0]} entries but X has {n} rows")
    if sample_weight.chunks[0] != X.chunks[0]:
        raise ValueError(
            f"sample_weight's chunks {sample_weight.chunks[0]} must equal X's row chunks "
            f"{X.chunks[0]}; use sample_weight.rechunk((X.chunks[0],))"
        )
    if sample_weight.dtype.kind not in "biuf":
        raise TypeError(f"sample_weight must be real numeric; got dtype {sample_weight.dtype}")
    return sample_weight.astype(np.float64)


# ---------------------------------------------------------------------- the fitter


class _DaskFitter(Fitter):
    """`Fitter` whose reads of X are passes over the blocks of a Dask array."""

    def _check_data(self, X):
        X, _ = _as_array(X, lengths=True)
        _known_rows(X)
        if X.size == 0:
            raise ValueError(f"X must not be empty; got shape {X.shape}")
        client = _client()
        return client.persist(X) if client is not None else X

    def _check_weights(self, sample_weight, X):
        w = _sample_weight(sample_weight, X)
        client = _client()
        return client.persist(w) if client is not None and w is not None else w

    def _threads(self, n_threads, X, k):
        return _threads_for(n_threads, max(X.chunks[0]), k, X.shape[1])

    def _covariance(self, X, w):
        W, mean, M = _moments(X, w, self._n_threads)
        if not W > 0:
            raise ValueError("sample_weight must have a positive sum")
        if not np.isfinite(W):
            raise ValueError("sample_weight must have a finite sum; rescale the weights")
        return mean, M / W

    def _pass(self, X, w, C, kind, sigma, *, sums=True, labels=False):
        return _stats_pass(X, w, C, kind, sigma, self._n_threads, sums=sums, labels=labels)

    def _sample(self, X, w, k, rng):
        """(rows, weights) of a uniform sample of X on the client (all of X when small)."""
        n = X.shape[0]
        m = max(SAMPLE_ROWS, SAMPLE_ROWS_PER_CLUSTER * k)
        if n <= m:
            rows, ws = _compute(X, w) if w is not None else (_compute(X)[0], None)
        else:
            idx = np.unique(rng.randint(0, n, size=m))
            rows, ws = _compute(X[idx], w[idx]) if w is not None else (_compute(X[idx])[0], None)
        ws = np.ones(rows.shape[0]) if ws is None else ws
        if int((ws > 0).sum()) < k:
            raise ValueError(
                f"the seeding sample has fewer than n_clusters={k} rows of positive weight; "
                "pass init as an array of centroids"
            )
        return np.ascontiguousarray(rows), np.ascontiguousarray(ws, dtype=np.float64)

    def _init_centroids(self, X, w, k, init, rng, unit_weights=False):
        if isinstance(init, str):
            rows, ws = self._sample(X, w, k, rng)
            return super()._init_centroids(rows, ws, k, init, rng, unit_weights)
        return super()._init_centroids(X, w, k, init, rng, unit_weights)

    def _relocator(self, X, w, kind, notes):
        """The in-memory policy, given the globally farthest rows (one more pass)."""
        relocator = super()._relocator

        def relocate(C_old, step):
            m = int(step.empty.sum())
            args = (_broadcast(C_old), m, self._n_threads)
            parts = _block_tasks("farthest", _block_farthest, X, w, *args)
            dist, rows, ws = _merged(parts, _concat_farthest, "softkmeans-farthest-merge")
            top = np.argsort(-dist, kind="stable")[:m]
            rows, ws = np.ascontiguousarray(rows[top]), np.ascontiguousarray(ws[top])
            # NOTE: the same m rows as the in-memory fit; when several clusters are empty
            # at once, which empty cluster gets which row may differ (argpartition order).
            return relocator(rows, ws, kind, notes)(C_old, step)

        return relocate

    # -------------------------------------------------------------- annealing's reads

    def _augment(self, X):
        """X with a zero last column, lazily: each pass augments its blocks on the workers."""
        d = X.shape[1] + 1
        return X.map_blocks(_augment, chunks=(X.chunks[0], (d,)), dtype=X.dtype)

    def _responsibility_moments(self, X, Xa, w, Ca, kind, sigma):
        """One pass: the per-centroid moments of each block, merged in block order."""
        args = (_broadcast(Ca), kind, sigma, self._n_threads)
        parts = _block_tasks("anneal-moments", _block_responsibility_moments, X, w, *args)
        merged = _merged(parts, _merge_responsibility_moments, "softkmeans-anneal-moments-merge")
        return [(U, mean, M / U) if U > 0 else (U, None, None) for U, mean, M in merged]

    def _add_farthest(self, X, w, C, k):
        """The in-memory greedy choice, one pass per added centroid."""
        C = np.ascontiguousarray(C, dtype=X.dtype)
        added = []
        while C.shape[0] + len(added) < k:
            args = (_broadcast((C, list(added))), self._n_threads)
            parts = _block_tasks("farthest", _block_farthest_row, X, w, *args)
            added.append(_merged(parts, _first_farthest, "softkmeans-farthest-merge")[1])
        return np.vstack([C, *added]).astype(X.dtype) if added else C

    def _warn_about_empty_clusters(self, X, w, labels, k, notes):
        positive = slice(None) if w is None else _compute(w > 0)[0]
        if np.unique(labels[positive]).size < k:
            # Only then: the distinct-rows check gathers the positive-weight rows.
            rows = _compute(X if w is None else X[positive])[0]
            ones = np.ones(rows.shape[0])
            super()._warn_about_empty_clusters(rows, ones, labels[positive], k, notes)


# ---------------------------------------------------------------------- the estimator


class SoftKMeans(_estimator.SoftKMeans):
    __doc__ = (
        "`softkmeans.SoftKMeans` on Dask arrays and Dask DataFrames (see `softkmeans.dask`).\n"
        + (_estimator.SoftKMeans.__doc__ or "").split("\n", 1)[1]
    )

    def fit(self, X, y=None, sample_weight=None):
        """Fit the centroids to X (a Dask array or DataFrame, or NumPy: passed through)."""
        if not _is_dask(X):
            return super().fit(X, y, sample_weight=_local(sample_weight))
        self._check_input(X, sample_weight, reset=True)
        return self._fit_with(_DaskFitter, X, sample_weight)

    @available_if(_estimator._streams)
    def partial_fit(self, X, y=None, sample_weight=None):
        """One streaming step (see `softkmeans.SoftKMeans.partial_fit`) on a batch X, a Dask
        array or DataFrame (or NumPy: passed through; a stream may mix both).

        The batch's statistics are computed on the workers (one pass; the first batch
        also seeds and measures its critical width there), the running-mean update on
        the client, so the stream gives what the in-memory partial_fit gives on the same
        batches. ``labels_`` (of this batch) is a NumPy array.
        """
        if not _is_dask(X):
            return super().partial_fit(X, y, sample_weight=_local(sample_weight))
        self._check_input(X, sample_weight, reset=self.__dict__.get("_stream") is None)
        return self._partial_fit_with(_DaskFitter, X, sample_weight)

    def _check_input(self, X, sample_weight, *, reset):
        """The checks made before any task is scheduled (dtype, columns, width, unknown
        chunks, weight chunks; a DataFrame's weight chunks are checked in _DaskFitter,
        after its partition lengths are known). reset: set n_features_in_ and
        feature_names_in_ (a fit, the first partial_fit), else check X against them."""
        if reset:
            X_arr, names = _as_array(X, lengths=False)
            if names is not None:
                self.feature_names_in_ = names
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
            self.n_features_in_ = X_arr.shape[1]
        else:
            X_arr, _, _ = self._dask_X(X)
        if not _is_dataframe(X):
            _known_rows(X_arr)
            _sample_weight(sample_weight, X_arr)

    # -------------------------------------------------------------- predict side

    def _dask_X(self, X):
        check_is_fitted(self)
        if _is_dataframe(X) and hasattr(self, "feature_names_in_"):
            if [str(c) for c in X.columns] != list(self.feature_names_in_):
                raise ValueError(
                    "The feature names should match those that were passed during fit; "
                    f"got {list(X.columns)}, expected {list(self.feature_names_in_)}"
                )
        X, _ = _as_array(X, lengths=False)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input."
            )
        k, d = self.cluster_centers_.shape
        rows = max((c for c in X.chunks[0] if not np.isnan(c)), default=1)
        threads = _threads_for(self.n_threads, int(rows), k, d)
        C = da.from_array(self.cluster_centers_, chunks=self.cluster_centers_.shape)
        return X, C, threads

    def predict(self, X):
        """Nearest centroid of each row (a lazy Dask array for Dask input)."""
        if not _is_dask(X):
            return super().predict(X)
        X, C, threads = self._dask_X(X)
        return da.blockwise(
            _labels_block, "i", X, "ij", C, "kj", n_threads=threads, dtype=np.int64,
            concatenate=True, meta=np.empty(0, dtype=np.int64),
        )  # fmt: skip

    def transform(self, X):
        """Distances to the centroids (a lazy Dask array for Dask input)."""
        if not _is_dask(X):
            return super().transform(X)
        X, C, threads = self._dask_X(X)
        return da.blockwise(
            _distances_block, "ik", X, "ij", C, "kj", n_threads=threads, dtype=X.dtype,
            concatenate=True, meta=np.empty((0, 0), dtype=X.dtype),
        )  # fmt: skip

    def predict_proba(self, X):
        """Responsibilities at ``sigma_`` (a lazy Dask array for Dask input)."""
        if not _is_dask(X):
            return super().predict_proba(X)
        X, C, threads = self._dask_X(X)
        return da.blockwise(
            _proba_block, "ik", X, "ij", C, "kj", kind=self.assignment, sigma=self.sigma_,
            n_threads=threads, dtype=X.dtype, concatenate=True,
            meta=np.empty((0, 0), dtype=X.dtype),
        )  # fmt: skip

    def score(self, X, y=None, sample_weight=None):
        """Minus the fitted objective on X (computed: one pass for Dask input)."""
        if not _is_dask(X):
            return super().score(X, y, sample_weight=_local(sample_weight))
        X, _, threads = self._dask_X(X)
        _known_rows(X)
        w = _sample_weight(sample_weight, X)
        C = self.cluster_centers_.astype(X.dtype)
        stats, _ = _stats_pass(X, w, C, self.assignment, self.sigma_, threads, sums=False)
        return -float(stats.objective)
