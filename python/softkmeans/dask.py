"""`softkmeans.dask.SoftKMeans`: the estimator, fitted on Dask arrays and dataframes.

Optional: ``pip install 'softkmeans[dask]'`` (``dask[array,dataframe]`` and
``distributed``); nothing imports this module unless you do.

One fit, one definition: a Dask collection is a data source
(`softkmeans.sources.dask_source.DaskSource`, whose passes run on the workers and merge in a
fixed tree: the in-memory fit up to the rounding of the block sums, float64 ~1e-15
relative, same labels), and this estimator is `softkmeans.SoftKMeans` itself under the
name users of dask-ml look for, with the same parameters, fitted attributes and
predict-side conventions.

Data and memory. With a distributed client the fit persists the (validated) X and
sample_weight on the workers for its duration (free when they are persisted already),
so each iteration reads cluster memory rather than recomputing X's graph; a block lost
with a worker is recomputed from that graph by Dask, and the fit's result does not change.
Where X cannot be recomputed (blocks scattered from the client), the fit raises a
RuntimeError that says so. Without a distributed client, each pass recomputes the blocks
with the local scheduler (out-of-core, at the cost of re-reading the source).

Initialisation. The default, ``init="k-means||"`` (dask-ml's default), runs
`softkmeans.fit.kmeans_parallel` over all of X: 1 + 2 passes of one task per block (each
row's distance to its nearest candidate, kept per block between passes; the draws are
hashed from the row index, so any chunking draws the same rows), then the weighted greedy
k-means++ on the ~4 k candidates on the client; it equals the in-memory k-means|| seeding
of the same rows. ``init="k-means++"`` runs the in-memory greedy k-means++ on a uniform
sample of rows (with their weights) gathered to the client: max(10 000, 100 x n_clusters)
rows at most, so it never pulls all the data to the client; when X has no more rows than
that, the sample is all of X and the seeding equals the in-memory fit's. ``"random"`` draws
among the same sample. An array is used as given; a callable is called as
``init(X, n_clusters, random_state=rng)`` with the Dask array.

Fitted attributes are NumPy arrays: ``labels_`` comes from the final pass (n int64 gathered
to the client, as the in-memory fit gives them), so the fitted model pickles without the
cluster. ``predict``, ``transform``, ``predict_proba`` of a Dask array return Dask arrays
(lazy, one task per block, the centroids one key); at many centroids ``predict`` groups
them once on the client and each block is labelled by the group-pruned pass, as is a
sampled fit's final pass (``max_points_per_centroid``). ``score`` computes. NumPy input
to any method is passed to `softkmeans.SoftKMeans` unchanged.

Progress: ``verbose=1`` prints the estimator's per-iteration lines (a tqdm bar on a
terminal). With a client, a pass runs as one call per worker on the blocks it holds
(`softkmeans.sources.dask_resident`: ~2 ms a pass where a task per block costs ~15-20),
which the dashboard's task stream does not show; blocks left unevenly on the workers
are copied once (at most a quarter of X) so that each worker thread has about as many
rows. Where that cannot run (a worker lost, blocks moved, more than 8 of the tree's groups
spread over the workers), a pass is one task per block, named in the task stream as
``softkmeans-block-stats``, ``softkmeans-scan``, ``softkmeans-moments``, ... (the merges
of more than 8 blocks' results as ``softkmeans-*-merge``; the last 8 are merged on the
client); k-means||'s passes are always tasks, ``softkmeans-kmeans-parallel-*``.

Annealing (``anneal=...``) runs `softkmeans.fit.annealing_schedule`'s schedule, the
in-memory one, with
its reads of X as block passes: each step one block_stats pass over the blocks augmented
on the workers with the prior coordinate (no augmented copy of X is stored), each width's
split test one pass that returns every centroid's responsibility-weighted moments (merged
pairwise in block order), and the exact finish one pass per step. The result equals the
in-memory annealing fit up to the rounding of the block sums (float64: centroids ~1e-16
relative, ``sigma_``, set by a minimum margin, ~1e-13; same labels and iterations).

Streaming: ``partial_fit`` takes a stream of Dask arrays or DataFrames (NumPy batches too):
each batch's statistics are one pass on the workers, the running-mean update (SPEC.md,
"Streaming") runs on the client, and the first batch seeds (with ``init`` on the batch, as
``fit``) and fixes sigma. A batch of another width than the first is refused before any
work is scheduled.
"""

from __future__ import annotations

import inspect

from . import estimator as _estimator
from .fit.params import DEFAULTS
from .sources import dask_source as _dask_source  # noqa: F401 - without Dask: an ImportError naming the extra

DASK_INIT = "k-means||"

__all__ = ["SoftKMeans"]


class SoftKMeans(_estimator.SoftKMeans):
    __doc__ = (
        "`softkmeans.SoftKMeans` on Dask arrays and Dask DataFrames (see `softkmeans.dask`);"
        ' init defaults to "k-means||".\n' + (_estimator.SoftKMeans.__doc__ or "").split("\n", 1)[1]
    )

    # The estimator's parameters, all of them, with init's default "k-means||": written as
    # **params and given the parent's signature (scikit-learn's get_params and clone read
    # the signature), so a parameter added to softkmeans.SoftKMeans is one here too.
    def __init__(self, n_clusters=DEFAULTS.n_clusters, *, init=DASK_INIT, **params):
        super().__init__(n_clusters, init=init, **params)

    _parent = inspect.signature(_estimator.SoftKMeans.__init__)
    __init__.__signature__ = _parent.replace(
        parameters=[
            p.replace(default=DASK_INIT) if p.name == "init" else p
            for p in _parent.parameters.values()
        ]
    )
    del _parent
