"""softkmeans.dask on a 2-process LocalCluster: the same fit as in memory (float64: 1e-10
relative, same labels) for every kind, with uneven chunks and weights, independent of the
chunking; a worker killed mid-fit changes nothing (or, for unrecomputable input, the error
says what happened); bad input fails before any work is scheduled."""

from __future__ import annotations

import os
import pickle
import signal

import dask
import dask.array as da
import dask.dataframe as dd
import distributed
import numpy as np
import pandas as pd
import pytest

import softkmeans
from conftest import KINDS, make_blobs, rel_close
from softkmeans import dask as skd

RTOL = 1e-10
CHUNKS = (700, 1100, 300, 899, 1)  # uneven, and a one-row block


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    with cluster, distributed.Client(cluster) as client:
        client.run(lambda: __import__("softkmeans.dask"))  # warm the workers up once
        yield client


@pytest.fixture(scope="module")
def problem():
    X, C = make_blobs(sum(CHUNKS), 4, 5, seed=3)
    w = np.random.default_rng(4).uniform(0.5, 2.0, size=X.shape[0])
    return X, C, w


def _fit(cls, X, C, kind, w=None, **kw):
    kw = {"max_iter": 40, "tol": 1e-4, **kw}
    return cls(C.shape[0], assignment=kind, init=C, **kw).fit(X, sample_weight=w)


def assert_close(actual, expected, rtol, what):
    # rel_close returns (ok, error): a bare `assert rel_close(...)` could never fail.
    ok, err = rel_close(actual, expected, rtol)
    assert ok, f"{what}: relative error {err:.3g} > {rtol:g}"


def assert_same_fit(a, b, rtol=RTOL):
    assert a.n_iter_ == b.n_iter_
    assert_close(a.cluster_centers_, b.cluster_centers_, rtol, "cluster_centers_")
    np.testing.assert_array_equal(a.labels_, b.labels_)
    for name in ("inertia_", "objective_", "critical_sigma_", "sigma_"):
        assert_close(getattr(a, name), getattr(b, name), rtol, name)
    # The margin is a difference of squared distances: relative to their size.
    scale = float((b.cluster_centers_.astype(np.float64) ** 2).sum(axis=1).max())
    assert abs(a.min_margin_ - b.min_margin_) <= rtol * scale
    for name in ("objective", "J", "sigma"):
        assert_close(a.history_[name], b.history_[name], rtol, f"history_[{name!r}]")
    assert a.history_["kind"] == b.history_["kind"]
    ta, tb = ([list(t.values()) for t in m.history_["transitions"]] for m in (a, b))
    assert len(ta) == len(tb)
    if ta:
        assert_close(ta, tb, rtol, "transitions")
    assert a.exact_lloyd_ == b.exact_lloyd_
    assert isinstance(a.cluster_centers_, np.ndarray) and isinstance(a.labels_, np.ndarray)


def test_workers_import_the_same_softkmeans(client):
    files = client.run(lambda: __import__("softkmeans").__file__)
    assert set(files.values()) == {softkmeans.__file__}


@pytest.mark.parametrize("kind", KINDS)
def test_equals_the_in_memory_fit(client, problem, kind):
    X, C, w = problem
    Xd = da.from_array(X, chunks=(CHUNKS, -1)).persist()
    wd = da.from_array(w, chunks=(CHUNKS,))
    for weights, weights_d in ((None, None), (w, wd)):
        expected = _fit(softkmeans.SoftKMeans, X, C, kind, weights)
        got = _fit(skd.SoftKMeans, Xd, C, kind, weights_d)
        assert_same_fit(got, expected)


@pytest.mark.parametrize("kind", KINDS)
def test_independent_of_the_chunking(client, problem, kind):
    X, C, w = problem
    # The arrays stay referenced: a hard fit's critical_sigma_ is computed from them.
    arrays = [da.from_array(X, chunks=chunks) for chunks in ((1000, 2), (250, -1))]
    fits = [_fit(skd.SoftKMeans, Xd, C, kind, w) for Xd in arrays]
    for other in fits[1:]:
        assert_same_fit(other, fits[0])


def test_float32_and_dataframe_input(client, problem):
    X, C, _ = problem
    X32, C32 = X.astype(np.float32), C.astype(np.float32)
    X32d = da.from_array(X32, chunks=(CHUNKS, -1))  # referenced: critical_sigma_ reads it
    got = _fit(skd.SoftKMeans, X32d, C32, "hard")
    expected = _fit(softkmeans.SoftKMeans, X32, C32, "hard")
    assert got.cluster_centers_.dtype == np.float32
    assert_same_fit(got, expected, rtol=1e-5)

    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    # sigma=None pinned (issue 36 item 12): its critical_sigma_ is computed by the fit.
    got = _fit(skd.SoftKMeans, dd.from_pandas(df, npartitions=3), C, "softmax", sigma=None)
    expected = _fit(softkmeans.SoftKMeans, df, C, "softmax", sigma=None)
    assert_same_fit(got, expected)
    assert list(got.feature_names_in_) == list(df.columns)
    labels = got.predict(dd.from_pandas(df, npartitions=2))
    np.testing.assert_array_equal(labels.compute(), expected.labels_)


def test_numpy_input_is_passed_through(problem):
    X, C, w = problem
    assert_same_fit(
        _fit(skd.SoftKMeans, X, C, "entmax15", w), _fit(softkmeans.SoftKMeans, X, C, "entmax15", w)
    )


def test_kmeanspp_on_small_data_equals_the_in_memory_seeding(client, problem):
    X, _, _ = problem
    Xd = da.from_array(X, chunks=900)  # referenced: critical_sigma_ reads it
    got = skd.SoftKMeans(5, assignment="hard", init="k-means++", random_state=0).fit(Xd)
    expected = softkmeans.SoftKMeans(5, assignment="hard", random_state=0).fit(X)
    assert_same_fit(got, expected)


def test_predict_side_is_lazy_and_the_model_pickles(client, problem):
    X, C, _ = problem
    Xd = da.from_array(X, chunks=(CHUNKS, -1))
    model = _fit(skd.SoftKMeans, Xd, C, "softmax")
    for method in ("predict", "transform", "predict_proba"):
        lazy = getattr(model, method)(Xd)
        assert isinstance(lazy, da.Array), method
        np.testing.assert_allclose(lazy.compute(), getattr(model, method)(X), rtol=1e-12)
    assert model.score(Xd) == pytest.approx(model.score(X), rel=1e-12)
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone.predict(X), model.labels_)


def _boom(block):
    raise AssertionError("a block was computed")


def test_bad_input_fails_before_any_work(client, problem):
    X, C, w = problem
    Xd = da.from_array(X, chunks=(CHUNKS, -1)).map_blocks(_boom, dtype=X.dtype)
    # A column of strings, and an object column (of numbers: still refused, not parsed).
    df = pd.DataFrame({"a": X[:, 0], "name": ["x"] * X.shape[0], "obj": X[:, 1].astype(object)})
    ddf = dd.from_pandas(df, npartitions=2).map_partitions(_boom, meta=df.iloc[:0])
    for method in ("fit", "partial_fit"):
        model = skd.SoftKMeans(5, init=C)
        call = getattr(model, method)
        with pytest.raises(ValueError, match="unknown chunk sizes"):
            call(Xd[Xd[:, 0] > 0])
        with pytest.raises(ValueError, match="chunks"):
            call(Xd, sample_weight=da.from_array(w, chunks=1000))
        with pytest.raises(TypeError, match="numeric columns only.*'name'.*'obj' \\(object\\)"):
            call(ddf)
        with pytest.raises(TypeError, match="real numeric"):
            call(Xd.astype(np.complex128))


def test_a_batch_of_another_width_fails_before_any_work(client, problem):
    X, C, _ = problem
    model = skd.SoftKMeans(5, init=C).partial_fit(da.from_array(X[:500], chunks=200))
    centres = model.cluster_centers_.copy()
    wide = da.from_array(np.hstack([X, X[:, :1]]), chunks=(CHUNKS, -1))
    for batch in (wide.map_blocks(_boom, dtype=X.dtype), np.hstack([X, X[:, :1]])):
        with pytest.raises(ValueError, match="X has 5 features, but SoftKMeans is expecting 4"):
            model.partial_fit(batch)
    np.testing.assert_array_equal(model.cluster_centers_, centres)
    assert model.n_steps_ == 1


def test_annealing_equals_the_in_memory_annealing(client, problem):
    X, _, w = problem
    Xd = da.from_array(X, chunks=(CHUNKS, -1)).persist()
    wd = da.from_array(w, chunks=(CHUNKS,))
    schedule = {"cooling": 0.4, "steps": 5, "splits": 2}
    got = skd.SoftKMeans(5, anneal=schedule, random_state=1).fit(Xd, sample_weight=wd)
    expected = softkmeans.SoftKMeans(5, anneal=schedule, random_state=1).fit(X, sample_weight=w)
    assert expected.history_["transitions"] and expected.exact_lloyd_  # it annealed
    assert_same_fit(got, expected)


def test_annealing_that_ends_short_of_k_adds_the_same_farthest_points(client, problem):
    X, _, _ = problem
    # Stopping above the critical width leaves one centroid: four are added at the
    # farthest points, then the Lloyd finish. (entmax15 annealing: the other map.)
    schedule = {"start": 40.0, "stop": 30.0, "cooling": 0.5, "kind": "entmax15"}
    got = skd.SoftKMeans(5, anneal=schedule).fit(da.from_array(X, chunks=(CHUNKS, -1)))
    expected = softkmeans.SoftKMeans(5, anneal=schedule).fit(X)
    assert expected.history_["transitions"] == []
    assert_same_fit(got, expected)


def _stream_attributes(model):
    return {
        name: getattr(model, name)
        for name in (
            "cluster_centers_", "cluster_weights_", "inertia_", "objective_", "sigma_",
            "critical_sigma_",
        )
    }  # fmt: skip


@pytest.mark.filterwarnings("ignore:X has feature names")
@pytest.mark.parametrize("kind", ["hard", "softmax"])  # the kind only changes the kernel
def test_partial_fit_equals_the_in_memory_partial_fit(client, problem, kind):
    X, _, w = problem
    bounds = [0, 1000, 1700, 3000]  # uneven batches, the first seeds (k-means++)
    got = skd.SoftKMeans(5, assignment=kind, init="k-means++", random_state=2)
    expected = softkmeans.SoftKMeans(5, assignment=kind, random_state=2)
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        # Dask arrays, a NumPy batch in between, a DataFrame; with and without weights.
        weights = w[a:b] if i != 1 else None
        if i == 2:
            df = pd.DataFrame(X[a:b], columns=[f"f{j}" for j in range(X.shape[1])])
            batch = dd.from_pandas(df, npartitions=3)
            expected.partial_fit(df, sample_weight=weights)
        else:
            batch = da.from_array(X[a:b], chunks=(b - a) // 3 + 1) if i == 0 else X[a:b]
            expected.partial_fit(X[a:b], sample_weight=weights)
        got.partial_fit(batch, sample_weight=weights)
        assert got.n_steps_ == expected.n_steps_ == i + 1
        np.testing.assert_array_equal(got.labels_, expected.labels_)
        assert isinstance(got.labels_, np.ndarray)
        for name, value in _stream_attributes(expected).items():
            assert_close(getattr(got, name), value, RTOL, f"{name} after batch {i}")
    # A fit ends the stream: the next partial_fit seeds again.
    got.fit(da.from_array(X, chunks=1000))
    got.partial_fit(da.from_array(X[:400], chunks=200))
    assert got.n_steps_ == 1


def test_bad_values_are_reported_from_the_workers(client, problem):
    X, C, _ = problem
    bad = X.copy()
    bad[1500, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        skd.SoftKMeans(5, init=C).fit(da.from_array(bad, chunks=(CHUNKS, -1)))


def _kill_a_worker_on_pass(monkeypatch, client, number, holding):
    """Make the `number`-th pass of the fit start by killing the worker holding `holding`."""
    from softkmeans.sources import dask_passes

    original, calls = dask_passes.BlockPasses.run, [0]

    def pass_(*args, **kwargs):
        calls[0] += 1
        if calls[0] == number:
            address = next(iter(client.who_has(holding).values()))[0]
            os.kill(client.run(os.getpid)[address], signal.SIGKILL)
        return original(*args, **kwargs)

    monkeypatch.setattr(dask_passes.BlockPasses, "run", pass_)
    return calls


def test_a_worker_killed_mid_fit_changes_nothing(client, problem, monkeypatch):
    X, C, w = problem
    Xd = da.from_array(X, chunks=(CHUNKS, -1)).persist()
    distributed.wait(Xd)
    calls = _kill_a_worker_on_pass(monkeypatch, client, 3, distributed.futures_of(Xd))
    got = _fit(skd.SoftKMeans, Xd, C, "hard", w, tol=0.0, max_iter=6)
    assert calls[0] >= 3
    assert_same_fit(got, _fit(softkmeans.SoftKMeans, X, C, "hard", w, tol=0.0, max_iter=6))
    client.wait_for_workers(2)


def test_a_lost_unrecomputable_input_is_reported(client, problem, monkeypatch):
    X, C, _ = problem
    blocks = np.split(X, np.cumsum(CHUNKS)[:-1])
    futures = client.scatter(blocks)
    Xd = da.concatenate(
        [
            da.from_delayed(dask.delayed(f), shape=b.shape, dtype=b.dtype)
            for f, b in zip(futures, blocks)
        ]
    )
    _kill_a_worker_on_pass(monkeypatch, client, 3, futures)
    with pytest.raises(RuntimeError, match="lost data it cannot recompute"):
        _fit(skd.SoftKMeans, Xd, C, "hard", tol=0.0, max_iter=6)
    client.wait_for_workers(2)


def _on_one_worker_recording_plans(client, problem, monkeypatch):
    """X in 8 blocks persisted on one worker, C, and the list each resident plan made
    (`ResidentPasses._make_plan`) is appended to."""
    from softkmeans.sources import dask_resident

    X, C, _ = problem
    first = sorted(client.nthreads())[0]
    Xd = da.from_array(X, chunks=((375,) * 8, -1)).persist(workers=[first])
    distributed.wait(Xd)
    plans, original = [], dask_resident.ResidentPasses._make_plan

    def make_plan(passes):
        plans.append(original(passes))
        return plans[-1]

    monkeypatch.setattr(dask_resident.ResidentPasses, "_make_plan", make_plan)
    return Xd, C, plans


def test_a_copy_not_made_in_time_leaves_its_block_where_it_was(client, problem, monkeypatch):
    # Evening out copies each moved block to one named worker (strictly: a loose restriction
    # let the idle holder steal the copy). A copy its worker never makes (here: a worker
    # that does not exist) is cancelled after COPY_WAIT_S and the pass runs on the blocks
    # where they are, the same bits, no hang.
    from softkmeans.sources import dask_passes, dask_resident

    Xd, C, plans = _on_one_worker_recording_plans(client, problem, monkeypatch)
    copies = dask_resident.ResidentPasses._copies
    monkeypatch.setattr(dask_resident, "COPY_WAIT_S", 0.5)
    monkeypatch.setattr(
        dask_resident.ResidentPasses, "_copies", lambda self, i, a: copies(self, i, "tcp://0.0.0.0:9")
    )
    got = _fit(skd.SoftKMeans, Xd, C, "hard", tol=0.0, max_iter=4)
    assert [sorted(map(len, plan.values())) for plan in plans] == [[8]]
    monkeypatch.setattr(dask_passes, "RESIDENT", False)
    expected = _fit(skd.SoftKMeans, Xd, C, "hard", tol=0.0, max_iter=4)
    assert got.cluster_centers_.tobytes() == expected.cluster_centers_.tobytes()


def test_blocks_persisted_on_one_worker_are_spread_over_both(client, problem, monkeypatch):
    # A pass runs where the blocks are (`softkmeans.sources.dask_resident`): blocks all
    # on one worker are first copied to the other (at most a quarter of the rows: 2 of 8
    # blocks), and the fit is the tasks' bit for bit.
    from softkmeans.sources import dask_passes

    Xd, C, plans = _on_one_worker_recording_plans(client, problem, monkeypatch)
    got = _fit(skd.SoftKMeans, Xd, C, "hard", tol=0.0, max_iter=4)
    assert [sorted(map(len, plan.values())) for plan in plans] == [[2, 6]]
    monkeypatch.setattr(dask_passes, "RESIDENT", False)
    expected = _fit(skd.SoftKMeans, Xd, C, "hard", tol=0.0, max_iter=4)
    assert got.cluster_centers_.tobytes() == expected.cluster_centers_.tobytes()
    np.testing.assert_array_equal(got.labels_, expected.labels_)


def test_a_worker_holding_copies_killed_mid_fit_changes_nothing(client, problem, monkeypatch):
    # The copies that even out the workers are bound to their worker: when it is lost, the
    # next plan starts from the source's own blocks (no wait on a copy that cannot be
    # remade elsewhere), and the fit is the in-memory one.
    from softkmeans.sources import dask_passes

    X, C, _ = problem
    first, second = sorted(client.nthreads())
    Xd = da.from_array(X, chunks=((375,) * 8, -1)).persist(workers=[first])
    distributed.wait(Xd)
    original, calls = dask_passes.BlockPasses.run, [0]

    def pass_(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 3:
            os.kill(client.run(os.getpid)[second], signal.SIGKILL)
        return original(*args, **kwargs)

    monkeypatch.setattr(dask_passes.BlockPasses, "run", pass_)
    got = _fit(skd.SoftKMeans, Xd, C, "hard", tol=0.0, max_iter=6)
    assert calls[0] >= 3
    assert_same_fit(got, _fit(softkmeans.SoftKMeans, X, C, "hard", None, tol=0.0, max_iter=6))
    client.wait_for_workers(2)


@pytest.mark.parametrize("inline", [True, False], ids=["centroids-inline", "centroids-task"])
@pytest.mark.parametrize("chunks", [CHUNKS, (150,) * 20], ids=["5-blocks", "20-blocks"])
def test_the_futures_passes_give_the_graph_passes_bits(
    client, problem, monkeypatch, chunks, inline
):
    # With a client, a pass maps tasks over the persisted blocks' futures and merges on the
    # client (20 blocks: a level of merge tasks first); the dask.delayed graph of the local
    # scheduler (forced here, run on the same cluster) merges in tasks. The same tree:
    # the same bits, whichever worker ran which block.
    from softkmeans.sources import dask_passes, dask_source

    X, C, w = problem
    Xd = da.from_array(X, chunks=(chunks, -1)).persist()
    wd = da.from_array(w, chunks=(chunks,))
    if not inline:
        monkeypatch.setattr(dask_passes, "INLINE_BYTES", 0)
    got = _fit(skd.SoftKMeans, Xd, C, "softmax", wd, tol=0.0, max_iter=4)
    monkeypatch.setattr(dask_source, "_client", lambda: None)
    expected = _fit(skd.SoftKMeans, Xd, C, "softmax", wd, tol=0.0, max_iter=4)
    assert got.cluster_centers_.tobytes() == expected.cluster_centers_.tobytes()
    np.testing.assert_array_equal(got.labels_, expected.labels_)
    for name in ("inertia_", "objective_", "min_margin_"):
        assert getattr(got, name) == getattr(expected, name), name
    assert got.history_["objective"].tobytes() == expected.history_["objective"].tobytes()


def test_kmeans_parallel_is_the_default_and_equals_the_in_memory_seeding(client, problem):
    # k-means|| over all blocks (uneven, one of one row), weighted: the draws are hashed
    # from the row index, so the seeding and the fit are the in-memory ones.
    X, _, w = problem
    Xd = da.from_array(X, chunks=(CHUNKS, -1))
    got = skd.SoftKMeans(5, assignment="hard", random_state=7, max_iter=1).fit(Xd, sample_weight=w)
    assert skd.SoftKMeans().init == "k-means||"
    expected = softkmeans.SoftKMeans(5, assignment="hard", init="k-means||", random_state=7)
    expected.set_params(max_iter=1).fit(X, sample_weight=w)
    np.testing.assert_allclose(got.cluster_centers_, expected.cluster_centers_, rtol=RTOL)
    np.testing.assert_array_equal(got.labels_, expected.labels_)


def test_kmeans_parallel_draws_the_in_memory_rows_on_the_cluster(client, problem):
    # The seeding itself, byte for byte (the test above compares the fit after a step).
    from softkmeans import sources
    from softkmeans.fit.kmeans_parallel import kmeans_parallel

    X, _, w = problem
    expected = kmeans_parallel(sources.source_of(X, w), 24, np.random.RandomState(6))
    Xd = da.from_array(X, chunks=(CHUNKS, -1))
    got = kmeans_parallel(
        sources.source_of(Xd, da.from_array(w, chunks=(CHUNKS,))), 24, np.random.RandomState(6)
    )
    assert got[0].tobytes() == expected[0].tobytes() and got[1] == expected[1]


def test_dask_estimator_takes_every_parameter_of_the_estimator():
    # The Dask estimator once listed its parameters by hand and lost the ones added later
    # (metric, balance, ...): get_params and clone then dropped them.
    from sklearn.base import clone

    from softkmeans import SoftKMeans
    from softkmeans.dask import SoftKMeans as DaskSoftKMeans

    model = DaskSoftKMeans(3, metric="cosine", balance="equal", max_points_per_centroid=64)
    params = model.get_params()
    assert set(params) == set(SoftKMeans().get_params())
    assert params["init"] == "k-means||" and params["metric"] == "cosine"
    assert clone(model).get_params() == params


def test_a_sampled_hard_fit_labels_every_row_on_the_workers_by_the_pruned_pass(client, monkeypatch):
    """The centroids are grouped on the client (MIN_CENTROIDS lowered there) and each
    block's final pass runs group-pruned on its worker: labels_ and min_margin_ are the
    plain pass's bit for bit over every row, inertia_ within rounding."""
    from softkmeans.sources.nearest import NearestCentroid

    monkeypatch.setattr(NearestCentroid, "MIN_CENTROIDS", 64)
    X, _ = make_blobs(6000, 16, 64, seed=9)
    w = np.random.default_rng(10).uniform(0.5, 2.0, size=X.shape[0])
    model = skd.SoftKMeans(
        128, assignment="hard", max_iter=4, random_state=0, max_points_per_centroid=8
    ).fit(da.from_array(X, chunks=1500), sample_weight=da.from_array(w, chunks=1500))
    plain, plain_labels, _ = softkmeans._native.block_stats(
        X, model.cluster_centers_, "hard", 0.0, w, 2, sums=False, labels=True
    )
    np.testing.assert_array_equal(np.asarray(model.labels_), plain_labels)
    assert model.min_margin_ == plain.min_margin
    assert model.inertia_ == pytest.approx(plain.distortion, rel=1e-12, abs=0.0)


def test_predict_at_many_centroids_is_the_plain_assignment_on_the_workers(client, monkeypatch):
    """Groups made on the client (MIN_CENTROIDS lowered there), the pruned pass on the
    workers: the labels of `_native.assign` over every row."""
    from softkmeans.sources.nearest import NearestCentroid

    monkeypatch.setattr(NearestCentroid, "MIN_CENTROIDS", 64)
    X, _ = make_blobs(5000, 16, 64, seed=11)
    dX = da.from_array(X, chunks=1200)
    model = skd.SoftKMeans(128, assignment="hard", init="random", max_iter=3, random_state=0)
    labels = model.fit(dX).predict(dX).compute()
    expected, _ = softkmeans._native.assign(X, model.cluster_centers_, 2)
    np.testing.assert_array_equal(labels, expected)
