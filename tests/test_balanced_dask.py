"""A balanced fit of a Dask array on a 2-worker LocalCluster (issue 35, item 1): its reads
of X are runner passes on the workers (`softkmeans.fit.balanced_passes.BIASED`, the
candidates, the label sums), the solver runs in this process, as k-means|| does.

Oracles: the counts the balance asks for, the assignment problem at the fitted centroids
(conftest's `lp_optimum`: scipy's linear_sum_assignment on each cluster expanded into
its count of slots), and the same fit in this process over the same blocks (the runner
gives equal bytes for equal blocks: SPEC.md, "Passes").
"""

import numpy as np
import pytest

from conftest import chunked_source, lp_optimum, unequal_blobs
from softkmeans import SoftKMeans, _native
from softkmeans._balance import integer_targets
from softkmeans.fit.driver import Fitter
from softkmeans.fit.params import FitParams

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

N, D, K = 300, 3, 4
CHUNKINGS = {"1-block": (N,), "3-blocks": (100, 7, 193), "20-blocks": (13, 17) * 10}
# (the fit's balance parameters, weighted): equal counts (the fused pass and the repair),
# capacities (slack rows), and weights (the candidates pass and the auction).
CASES = {
    "equal": (dict(balance="equal"), False),
    "capacities": (dict(max_cluster_size=90), False),
    "weighted": (dict(balance="equal"), True),
}


def _data(weighted):
    X, C0 = unequal_blobs(N, D, K, seed=3)
    w = np.random.default_rng(4).integers(1, 4, size=N).astype(np.float64) if weighted else None
    return X, w, C0


def _fit(source, C0, balance):
    # tol=0: the in-process and Dask tolerances come from different validation passes
    # (their variances may differ in the last bit); with 0 both stop at the same step.
    params = FitParams(n_clusters=K, assignment="hard", init=C0, n_init=1, tol=0.0,
                       max_iter=50, n_threads=1, **balance)  # fmt: skip
    return Fitter(params).fit(source).results()


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize("case", list(CASES))
def test_a_balanced_dask_fit_is_the_in_process_fit_over_the_same_blocks(client, chunking, case):
    from softkmeans.sources.dask_source import DaskSource

    balance, weighted = CASES[case]
    X, w, C0 = _data(weighted)
    chunks = CHUNKINGS[chunking]
    wd = None if w is None else da.from_array(w, chunks=(chunks,))
    remote = DaskSource(da.from_array(X, chunks=(chunks, -1)), wd, n_threads=1, scan=True)
    there = _fit(remote, C0, balance)
    here = _fit(chunked_source(X, w, chunks), C0, balance)
    for name in ("labels_", "cluster_centers_", "balance_offsets_"):
        assert here[name].tobytes() == there[name].tobytes(), name
    assert here["inertia_"] == there["inertia_"]
    counts = np.bincount(there["labels_"], minlength=K)
    Dist = _native.sq_distances(X, there["cluster_centers_"], 1)
    J = Dist[np.arange(N), there["labels_"]].sum()
    if case == "equal":  # the exact counts, at the least cost for them
        np.testing.assert_array_equal(counts, integer_targets(np.full(K, N / K), N))
        assert J == pytest.approx(lp_optimum(Dist, counts), rel=1e-12)
    elif case == "capacities":  # at most 90 a cluster, at the least cost for that
        assert counts.max() <= 90
        assert J == pytest.approx(lp_optimum(Dist, np.full(K, 90)), rel=1e-12)
    else:  # each cluster's weight within the largest weight of its share
        N_w = np.bincount(there["labels_"], w, minlength=K)
        assert np.abs(N_w - w.sum() / K).max() <= w.max()


def test_a_balanced_fit_of_a_one_block_dask_array_is_the_in_memory_fit(client):
    # The estimator on the array and on a Dask array of one chunk: one block each, the
    # same bytes; sizes exact and J the assignment problem's optimum.
    X, _, C0 = _data(False)
    kw = dict(assignment="hard", balance="equal", init=C0, n_init=1, tol=0.0, n_threads=1)
    here = SoftKMeans(K, **kw).fit(X)
    there = SoftKMeans(K, **kw).fit(da.from_array(X, chunks=(N, -1)))
    assert here.labels_.tobytes() == there.labels_.tobytes()
    assert here.cluster_centers_.tobytes() == there.cluster_centers_.tobytes()
    counts = np.bincount(there.labels_, minlength=K)
    np.testing.assert_array_equal(counts, np.full(K, N // K))
    Dist = _native.sq_distances(X, there.cluster_centers_, 1)
    assert there.inertia_ == pytest.approx(lp_optimum(Dist, counts), rel=1e-12)
