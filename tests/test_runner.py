"""Every pass over X gives the same bytes in this process and on a 2-worker LocalCluster
(SPEC.md, "Passes"): the same block function over the same blocks, merged by the same
tree, whichever runner ran it. The in-process source here reads X in the Dask array's
chunks (1, 5 and 20 blocks, uneven), so that the blocks are equal.

Which passes: every module-level `Pass` or `RowMap` of the library (found by walking its
modules), each with arguments from the table below; a pass missing from the table fails
`test_the_table_holds_every_pass`.
"""

from __future__ import annotations

import importlib
import pkgutil
import struct

import numpy as np
import pytest

import softkmeans
from conftest import chunked_source
from softkmeans import _covariance
from softkmeans.sources import reads, runner

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

N, D, K = 1000, 6, 5
CHUNKINGS = {
    "1-block": (N,),
    "5-blocks": (300, 100, 250, 1, 349),
    "20-blocks": (37, 63) * 10,
}


def _library_passes():
    """{module.NAME: the Pass or RowMap} of every softkmeans module (not experiments)."""
    found = {}
    for info in pkgutil.walk_packages(softkmeans.__path__, "softkmeans."):
        if ".experiments" in info.name or info.name.endswith(("torch", "_torch_sigma", "__main__")):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, (runner.Pass, runner.RowMap)) and name.isupper():
                found.setdefault(value, f"{info.name}.{name}")
    return {path: read for read, path in found.items()}


def _arguments(C, n_threads=1):
    """{pass path: (transforms, args)}: what each pass is run with."""
    Ca = np.hstack([C, np.abs(C[:, :1])]).astype(C.dtype)
    labels = np.arange(N) % K
    groups = np.arange(K) % 2  # two groups of centroids: the group-pruned passes
    closest = np.where(labels == 0, np.inf, np.arange(N) / N)  # some rows infinitely far
    cand = np.array([3, 400, 999], dtype=np.int64)  # rows of X (the kernels' indices)
    offsets = np.linspace(-1.5, 0.0, K)  # a balanced fit's g (k,) float64
    return {
        "softkmeans.sources.reads.STATS": ((), (C, "softmax", 0.7, n_threads, True, True)),
        "softkmeans.sources.reads.NEAREST_STATS": ((), (C, groups, n_threads)),
        "softkmeans.sources.reads.GRADIENTS": ((), (C, "entmax15", 0.9, n_threads)),
        "softkmeans.sources.reads.LABELS": ((), (C, groups, n_threads)),
        "softkmeans.sources.reads.DISTANCES": ((), (C, n_threads)),
        "softkmeans.sources.reads.RESPONSIBILITIES": ((), (C, "softmax", 0.8, n_threads)),
        "softkmeans.sources.reads.MOMENTS": ((), (n_threads,)),
        "softkmeans.sources.reads.COVARIANCE": (
            (), (None, _covariance.product_block, C[0].astype(np.float64),
                 C[1].astype(np.float64), n_threads)
        ),
        "sums COVARIANCE": ((), (None, _covariance.row_sum_block)),
        "diagonal COVARIANCE": ((), (None, _covariance.diagonal_block, C[0].astype(np.float64))),
        "softkmeans.sources.dask_source.SCAN": ((), ()),
        # A fit's validation, the features' moments folded in (a check without them: 7 rows a time).
        "softkmeans.sources.dense.CHECK_VALUES": ((), ("X", 7, True, 1)),
        "softkmeans.sources.dense.FEATURE_MOMENTS": ((), ()),
        "softkmeans.sources.queries.DISTINCT_ROWS": ((), ()),
        "softkmeans.sources.queries.POSITIVE": ((), ()),
        "softkmeans.sources.queries.WEIGHTS": ((), ()),
        "softkmeans.sources.normalized.HAS_DIRECTION": ((), ()),
        "softkmeans.sources.normalized.ROW_NORMS": ((), ()),
        "softkmeans.fit.relocation.LABEL_DISTANCES": ((), (C, None, False, n_threads)),
        "softkmeans.fit.annealing_passes.RESPONSIBILITY_MOMENTS": (
            (), (Ca, "softmax", 0.8, n_threads)
        ),
        "softkmeans.fit.annealing_passes.FARTHEST_ROW": ((), (C, (C[0] + 1.0,), n_threads)),
        "softkmeans.fit.balanced_passes.CANDIDATES": ((), (C, 2, n_threads)),
        "softkmeans.fit.balanced_passes.SQ_DISTANCES": ((), (C, n_threads)),
        "softkmeans.fit.balanced_passes.LABEL_SUMS": ((), (labels, K)),
        # The balanced pass at offsets g: labels, gaps, N, S, J and 3 candidates a row
        # within a band of 2 (and none, the band infinite).
        "softkmeans.fit.balanced_passes.BIASED": ((), (C, offsets, n_threads, 3, 2.0)),
        "unbanded BIASED": ((), (C, offsets, n_threads, 0, np.inf)),
        # k-means++: the distances to the nearest centre so far, read by each block.
        "softkmeans.fit.seeding.CLOSEST": ((), (closest, C[:1], 3, n_threads)),
        "softkmeans.fit.seeding.POTENTIALS": ((), (closest, C[1:4], cand, n_threads)),
        # With the runner's transforms: annealing's zero column, cosine's normalization.
        "augmented STATS": ((reads.augment,), (Ca, "entmax15", 0.6, n_threads, True, True)),
        "normalized STATS": (
            (_normalize(),), (C / np.linalg.norm(C, axis=1, keepdims=True), "hard", 0.0,
                              n_threads, True, True)
        ),
        "normalized LABEL_DISTANCES": ((_normalize(),), (C, labels, True, n_threads)),
        "normalized POTENTIALS": ((_normalize(),), (closest, C[1:4], cand, n_threads)),
    }


def _normalize():
    from softkmeans.sources.normalized import normalize_rows

    return normalize_rows


def _read(path, passes):
    """The pass of a table entry ("augmented STATS": reads.STATS)."""
    if path in passes:
        return passes[path]
    return next(p for q, p in passes.items() if q.endswith("." + path.split()[-1]))


def _bytes(value):
    """The bytes of a pass's result (arrays, floats, tuples, lists, None), nested."""
    if value is None:
        return b"None"
    if isinstance(value, np.ndarray):
        return str((value.dtype, value.shape)).encode() + np.ascontiguousarray(value).tobytes()
    if isinstance(value, (float, np.floating)):
        return struct.pack("<d", float(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value)).encode()
    if isinstance(value, (tuple, list)):
        return b"(" + b",".join(_bytes(v) for v in value) + b")"
    raise TypeError(f"no bytes for {type(value).__name__}")


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D)) + rng.integers(0, 3, size=(N, 1)) * 2.0
    X[7] = 0.0  # a zero row: cosine's weight-0 row
    w = rng.uniform(0.5, 2.0, size=N)
    w[5::97] = 0.0  # rows of weight 0 (the passes that keep rows of positive weight)
    C = X[rng.choice(N, K, replace=False)].copy()
    return X, w, C


def test_the_table_holds_every_pass(problem):
    passes = _library_passes()
    assert passes, "no Pass found: the walk is broken"
    table = {path for path in _arguments(problem[2]) if " " not in path}
    assert set(passes) - table == set(), "passes without a runner test"
    assert table - set(passes) == set(), "table entries that are no pass of the library"


def _bracketed(parts):
    """A merge that shows its tree: any other grouping or order gives another string."""
    return "(" + ",".join(parts) + ")"


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 20, 64, 65, 130])
def test_a_tree_merged_in_parts_is_the_tree(n):
    # A Dask worker merges the groups whose blocks it holds all of, the client the rest
    # (`runner.merge_nodes`): the blocks spread over 3 holders in runs and at random.
    expected = runner.merge_in_tree([str(i) for i in range(n)], _bracketed)
    rng = np.random.default_rng(n)
    for holder_of in (np.arange(n) * 3 // n, rng.integers(0, 3, n)):
        nodes = {}
        for holder in range(3):
            held = {(0, i): str(i) for i in range(n) if holder_of[i] == holder}
            nodes.update(runner.merge_nodes(held, n, _bracketed))
        assert list(runner.merge_nodes(nodes, n, _bracketed).values()) == [expected]


class _Resident:
    """Records whether each resident pass ran where the blocks are (or fell back)."""

    def __init__(self, monkeypatch):
        from softkmeans.sources import dask_resident

        self.ran, original = [], dask_resident.ResidentPasses.run

        def run(passes, *args):
            result = original(passes, *args)
            self.ran.append(result is not dask_resident.NOT_RESIDENT)
            return result

        monkeypatch.setattr(dask_resident.ResidentPasses, "run", run)


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_pass_gives_the_same_bytes_in_process_and_on_dask(
    client, problem, chunking, dtype, monkeypatch
):
    # On Dask each pass runs twice: as one task per block, then as one call per worker
    # on the blocks it holds (`softkmeans.sources.dask_resident`; up to 8 blocks the
    # tree's last level is all the client merges, so it must run there).
    from softkmeans.sources import dask_passes
    from softkmeans.sources.dask_source import DaskSource

    X, w, C = (a.astype(dtype) if a.dtype.kind == "f" and a.ndim == 2 else a for a in problem)
    chunks = CHUNKINGS[chunking]
    local = chunked_source(X, w, chunks)
    remote = DaskSource(da.from_array(X, chunks=(chunks, -1)), da.from_array(w, chunks=(chunks,)),
                        n_threads=1)  # fmt: skip
    assert remote.block_passes.client is client
    resident = _Resident(monkeypatch)
    passes = _library_passes()
    for path, (transforms, args) in _arguments(C).items():
        read = _read(path, passes)
        local.transforms = remote.transforms = transforms
        here = runner.run(local, read, *args)
        for where in ("tasks", "resident"):
            monkeypatch.setattr(dask_passes, "RESIDENT", where == "resident")
            there = runner.run(remote, read, *args)
            if isinstance(read, runner.RowMap):
                there = there.compute()
            assert _bytes(here) == _bytes(there), f"{path}, {chunking}, {where}"
    if len(chunks) <= runner.MERGE_FAN_IN:
        # Most passes ran where the blocks are; a pass may fall back to tasks when a call
        # to a worker fails under load (its bytes were still compared above).
        assert resident.ran and sum(resident.ran) > len(resident.ran) / 2, resident.ran


def test_a_worker_of_two_threads_runs_its_blocks_in_two_jobs(problem, monkeypatch):
    # An in-process cluster (the worker's jobs are counted here): one worker, 2 threads,
    # 5 blocks: two jobs of 3 and 2 blocks, then the merge; the in-process bytes.
    from softkmeans.sources import dask_resident
    from softkmeans.sources.dask_source import DaskSource

    X, w, C = problem
    jobs, original = [], dask_resident._blocks

    def blocks(task, args, mine):
        jobs.append(len(mine))
        return original(task, args, mine)

    monkeypatch.setattr(dask_resident, "_blocks", blocks)
    chunks = CHUNKINGS["5-blocks"]
    args = (C, "softmax", 0.7, 1, True, True)
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    )
    with cluster, distributed.Client(cluster):
        Xd, wd = da.from_array(X, chunks=(chunks, -1)), da.from_array(w, chunks=(chunks,))
        there = runner.run(DaskSource(Xd, wd, n_threads=1), reads.STATS, *args)
    assert sorted(jobs) == [2, 3]
    assert _bytes(there) == _bytes(runner.run(chunked_source(X, w, chunks), reads.STATS, *args))


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
def test_the_queries_of_a_dask_source_against_numpy(client, chunking):
    # Which weights are positive and the distinct rows of positive weight, read by the
    # runner's passes on the workers: NumPy's answers on the whole of X.
    from softkmeans.sources import queries
    from softkmeans.sources.dask_source import DaskSource

    rng = np.random.default_rng(1)
    X = rng.integers(0, 3, size=(N, 3)).astype(np.float64)  # 27 possible rows
    X[:4] = 9.0  # a row only at weight 0
    X[-1] = 5.0  # a row only in the last block
    w = np.ones(N)
    w[:4] = 0.0
    w[500::37] = 0.0
    chunks = CHUNKINGS[chunking]
    source = DaskSource(da.from_array(X, chunks=(chunks, -1)), da.from_array(w, chunks=(chunks,)))
    np.testing.assert_array_equal(queries.positive(source), w > 0)
    assert queries.n_distinct_rows(source) == np.unique(X[w > 0], axis=0).shape[0]
    unweighted = DaskSource(da.from_array(X, chunks=(chunks, -1)))
    assert queries.positive(unweighted) is None
    assert queries.n_distinct_rows(unweighted) == np.unique(X, axis=0).shape[0] == 29


def _chunked_csr_source(X, w, chunks, cosine=False):
    """A CSR X read in the given row chunks (`softkmeans.sources.csr.CSRSource` reads one
    block; its cosine source, blocks of BLOCK_ENTRIES stored entries)."""
    from softkmeans.sources import csr, normalized

    source = csr.CSRSource(X, w, n_threads=1)
    bounds = np.concatenate([[0], np.cumsum(chunks)]).astype(int)
    spans = list(zip(bounds[:-1], bounds[1:]))
    if cosine:
        source = normalized.normalized(source)
        source.spans = lambda: iter(spans)
    else:
        source.blocks = lambda: ((a, b, source.data[a:b]) for a, b in spans)
    return source


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
def test_the_distinct_rows_of_a_csr_source_against_numpy(chunking):
    # The rows of positive weight, explicit zeros not stored; for cosine the directions
    # (a row and its multiple count once, as for a dense X).
    from scipy import sparse

    from softkmeans.sources import queries

    rng = np.random.default_rng(2)
    X = rng.integers(0, 3, size=(N, 3)).astype(np.float64) * (rng.random((N, 1)) < 0.5)
    X[:4] = 9.0  # a row only at weight 0
    X[-1] = 5.0  # a row only in the last block
    w = np.ones(N)
    w[:4] = 0.0
    w[500::37] = 0.0
    Xs = sparse.csr_matrix(X)
    Xs.data[::11] = 0.0  # explicit zeros: the row is its nonzero entries
    dense_rows = Xs.toarray()[w > 0]
    chunks = CHUNKINGS[chunking]
    assert queries.n_distinct_rows(_chunked_csr_source(Xs, w, chunks)) == np.unique(
        dense_rows, axis=0).shape[0]  # fmt: skip
    norms = np.linalg.norm(dense_rows, axis=1, keepdims=True)
    directions = np.round(dense_rows / np.where(norms > 0, norms, 1.0), 12)[norms[:, 0] > 0]
    assert queries.n_distinct_rows(_chunked_csr_source(Xs, w, chunks, cosine=True)) == np.unique(
        directions, axis=0).shape[0]  # fmt: skip


@pytest.mark.parametrize("entries", [1 << 24, 50, 1])
def test_the_row_norms_of_a_cosine_csr_source_against_numpy(entries, monkeypatch):
    # The ROW_NORMS pass over a CSR X in spans of `entries` stored entries (one span, many,
    # one row a span): NumPy's norms of the dense rows; the source's scales follow.
    from scipy import sparse

    from softkmeans.sources import csr, normalized

    monkeypatch.setattr(normalized, "BLOCK_ENTRIES", entries)
    rng = np.random.default_rng(4)
    X = rng.normal(size=(N, D)) * (rng.random((N, D)) < 0.3)
    X[-1] = 3.0  # the last span's row
    source = normalized.normalized(csr.CSRSource(sparse.csr_matrix(X), None, n_threads=1))
    assert (len(list(source.spans())) == 1) == (entries >= np.count_nonzero(X))
    np.testing.assert_allclose(source.row_norms, np.linalg.norm(X, axis=1), rtol=1e-14)
    assert source.row_norms[-1] == np.sqrt(9.0 * D)


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize("d", [D, 520])
def test_the_moments_of_an_in_process_source_are_those_on_dask(client, chunking, d):
    # `reads.moments`: the (d, d) array of the MOMENTS pass, or past DENSE_D the operator
    # whose every product is a COVARIANCE pass: the same bits in this process and on Dask
    # (both runners merge the blocks by the one tree), and NumPy's values.
    from softkmeans.sources.dask_source import DaskSource

    rng = np.random.default_rng(5)
    X = rng.normal(size=(N, d)) * rng.uniform(0.5, 3.0, size=d) + 1.0
    w = rng.uniform(0.5, 2.0, size=N)
    chunks = CHUNKINGS[chunking]
    local = chunked_source(X, w, chunks)
    remote = DaskSource(da.from_array(X, chunks=(chunks, -1)), da.from_array(w, chunks=(chunks,)),
                        n_threads=1)  # fmt: skip
    (mean, cov), (mean_d, cov_d) = reads.moments(local), reads.moments(remote)
    assert _bytes(mean) == _bytes(mean_d)
    expected = np.cov(X, rowvar=False, aweights=w, bias=True)
    np.testing.assert_allclose(mean, np.average(X, axis=0, weights=w), rtol=1e-12)
    if isinstance(cov, np.ndarray):
        assert _bytes(cov) == _bytes(cov_d)
        np.testing.assert_allclose(cov, expected, rtol=1e-10, atol=1e-12)
        return
    v = rng.normal(size=d)
    assert _bytes((cov.W, cov.diagonal(), cov.matvec(v))) == _bytes(
        (cov_d.W, cov_d.diagonal(), cov_d.matvec(v)))  # fmt: skip
    np.testing.assert_allclose(cov.diagonal(), np.diagonal(expected), rtol=1e-10)
    np.testing.assert_allclose(cov.matvec(v), expected @ v, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize("d", [D, 520])
def test_the_covariance_of_a_csr_source_against_numpy(chunking, d, monkeypatch):
    # A CSR source's operator, each read a COVARIANCE pass over its blocks (the given
    # chunks; for cosine spans of 50 stored entries, each row scaled by the pass):
    # NumPy's mean, diagonal, products and (d <= DENSE_D) matrix of the dense rows.
    from scipy import sparse

    from softkmeans.sources import normalized

    monkeypatch.setattr(normalized, "BLOCK_ENTRIES", 50)
    rng = np.random.default_rng(6)
    X = rng.normal(size=(N, d)) * (rng.random((N, d)) < 0.1) + (rng.random((N, 1)) < 0.5)
    X[-1] = 0.0
    X[-1, -1] = 40.0  # the last block's row: the largest entry
    w = rng.uniform(0.5, 2.0, size=N)
    v = rng.normal(size=d)
    norms = np.linalg.norm(X, axis=1)
    unit = X / np.where(norms > 0, norms, 1.0)[:, None]
    for cosine, rows, weights in ((False, X, w), (True, unit, w * (norms > 0))):
        source = _chunked_csr_source(sparse.csr_matrix(X), w, CHUNKINGS[chunking], cosine)
        mean, cov = reads.moments(source)
        expected = np.cov(rows, rowvar=False, aweights=weights, bias=True)
        np.testing.assert_allclose(mean, np.average(rows, axis=0, weights=weights), atol=1e-14)
        np.testing.assert_allclose(cov.diagonal(), np.diagonal(expected), rtol=1e-9, atol=1e-14)
        np.testing.assert_allclose(cov.matvec(v), expected @ v, rtol=1e-9, atol=1e-12)
        if d <= D:
            np.testing.assert_allclose(cov.dense(), expected, rtol=1e-9, atol=1e-14)
