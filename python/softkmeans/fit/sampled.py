"""Training on a sample, as index builders do (faiss's ``max_points_per_centroid``).

With ``max_points_per_centroid=m`` a fit of k centroids over more than k m rows of
positive weight runs on a uniform sample of k m of them, drawn once, without
replacement, from the fit's random_state (`training_source`), and then labels every
row exactly at the final centroids (`label_all`): ``labels_``, ``inertia_``,
``objective_`` and ``min_margin_`` are those of all rows, with their weights.

The sample is uniform over the rows of positive weight whatever their weights, and the
sampled rows keep their weights: each row is in the sample with the same probability,
so the sample's weighted sums are unbiased estimates, up to one common factor, of the
data's, and the weighted means (the centroids) estimate the data's. (Sampling in
proportion to the weights, and then fitting with unit weights, would estimate the same
means but lose the weights' spread.) The sample's rows are read the way X is read:
in memory, a temporary file-backed copy for a memory-mapped or array-like X, on the
workers for Dask (`Source.subset`).
"""

from __future__ import annotations

import numpy as np

from ..sources import queries, reads

__all__ = ["label_all", "training_source"]


def training_source(source, k, max_points_per_centroid, rng):
    """The source a fit of k centroids runs on: `source` itself (every row of positive
    weight fits in k x max_points_per_centroid, or None: no sampling), else its subset
    of a uniform sample, drawn with a seed taken from the RandomState rng."""
    if max_points_per_centroid is None:
        return source
    size = k * max_points_per_centroid
    positive = queries.positive(source)
    population = source.shape[0] if positive is None else np.flatnonzero(positive)
    if (population if positive is None else population.size) <= size:
        return source
    sampler = np.random.default_rng(rng.randint(np.iinfo(np.int64).max))
    idx = np.sort(sampler.choice(population, size=size, replace=False, shuffle=False))
    return source.subset(idx)


def label_all(source, C, kind, sigma, progress):
    """The final pass over every row of `source` at C: (BlockStats, labels (n,)); for the
    hard kind by the group-pruned pass (`softkmeans.sources.reads.nearest_stats`: at
    large k it computes a few percent of the n k distances, with the plain pass's
    labels and minimum margin bit for bit and J within rounding).

    Prints the rows done after each block of a pass that reads X in blocks (verbose)."""
    n = source.shape[0]
    progress.line(f"Labelling all {n} rows at the fitted centroids", tick=False)

    def report(done, total):
        progress.line(f"  labelled {done} / {total} rows", tick=False)

    source.on_block = report if progress.verbose else None
    try:
        if kind == "hard":
            return reads.nearest_stats(source, C)
        return reads.stats(source, C, kind, sigma, sums=False, labels=True)
    finally:
        source.on_block = None
