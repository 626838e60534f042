"""k-means|| seeding (`softkmeans.fit.kmeans_parallel`): deterministic for a random_state,
the same rows for any reader of X (array, row blocks, memmap, Dask chunks), weights
honoured, a bounded number of passes, and a fit as good as k-means++'s."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse

import softkmeans
from conftest import make_blobs
from softkmeans import sources
from softkmeans.fit import kmeans_parallel as kmeans_parallel_module
from softkmeans.fit.kmeans_parallel import ROUNDS, kmeans_parallel
from softkmeans.fit.params import InvalidParameterError
from softkmeans.sources import queries
from softkmeans.sources.kmeans_parallel_blocks import SAMPLE_ROUND, row_uniforms


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(3000, 6, 12, seed=5)
    w = np.random.default_rng(6).uniform(0.2, 3.0, size=X.shape[0])
    return X, w


@pytest.fixture(params=["all rows", "sampled"])
def weighing(request, monkeypatch):
    """The last pass weighs the candidates from every row (as at these sizes), or from
    a sample (as at large n: a few rows a candidate)."""
    if request.param == "sampled":
        monkeypatch.setattr(kmeans_parallel_module, "WEIGHING_ROWS", 8)
    return request.param


def _seed(X, k, random_state, w=None):
    centers, _ = kmeans_parallel(sources.source_of(X, w), k, np.random.RandomState(random_state))
    return centers


def test_row_uniforms_depend_only_on_seed_round_and_row():
    whole = row_uniforms(123, 2, 0, 1000)
    parts = np.concatenate([row_uniforms(123, 2, a, b) for a, b in [(0, 7), (7, 500), (500, 1000)]])
    np.testing.assert_array_equal(whole, parts)
    assert not np.array_equal(whole, row_uniforms(123, 3, 0, 1000))
    assert not np.array_equal(whole, row_uniforms(124, 2, 0, 1000))
    assert 0.0 <= whole.min() and whole.max() < 1.0
    assert abs(whole.mean() - 0.5) < 0.03  # uniform-ish: 1000 draws, sd of the mean ~0.009


def test_deterministic_for_a_random_state(blobs):
    X, w = blobs
    a, b = _seed(X, 12, 0, w), _seed(X, 12, 0, w)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, _seed(X, 12, 1, w))
    # The centres are rows of X.
    assert all((X == c).all(axis=1).any() for c in a)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_local_reader_seeds_the_same_rows(blobs, dtype, tmp_path, weighing):
    X, w = blobs
    X = X.astype(dtype)
    expected = _seed(X, 12, 3, w)
    np.testing.assert_array_equal(_seed(np.asfortranarray(X), 12, 3, w), expected)  # row blocks
    mm = np.memmap(tmp_path / "x.bin", dtype=dtype, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    np.testing.assert_array_equal(_seed(mm, 12, 3, w), expected)


@pytest.mark.parametrize("weighted", [False, True])
def test_dask_equals_the_in_memory_seeding(blobs, weighted, weighing):
    X, w = blobs
    w = w if weighted else None
    expected = _seed(X, 12, 4, w)
    for chunks in [(1000, 1000, 1000), (1, 1499, 700, 800), (3000,)]:
        Xd = da.from_array(X, chunks=(chunks, -1))
        wd = None if w is None else da.from_array(w, chunks=(chunks,))
        with dask.config.set(scheduler="threads"):
            got = _seed_source(sources.source_of(Xd, wd), 12, 4)
        np.testing.assert_array_equal(got, expected, err_msg=str(chunks))


def _in_blocks(source, n_blocks):
    """`source` read as n_blocks row blocks of uneven sizes (the last the largest)."""
    n = source.shape[0]
    bounds = np.unique(np.linspace(0, n, n_blocks + 1).astype(int) ** 2 // n)
    blocks = source.blocks

    def uneven():
        for _, _, rows in blocks():  # one in-memory block: sliced
            for a, b in zip(bounds[:-1], bounds[1:]):
                yield int(a), int(b), rows[a:b]

    source.blocks = uneven
    return source


def _draws(source, k, random_state):
    """The seeding's centres (bytes) and its number of passes over X."""
    centers, n_passes = kmeans_parallel(source, k, np.random.RandomState(random_state))
    return centers.tobytes(), n_passes


@pytest.mark.parametrize("weighted", [False, True])
def test_the_draws_do_not_depend_on_the_blocks_or_the_threads(blobs, weighted, weighing):
    X, w = blobs
    w = w if weighted else None
    expected = _draws(sources.source_of(X, w), 24, 5)
    for n_blocks in (5, 20):
        got = _draws(_in_blocks(sources.source_of(X, w), n_blocks), 24, 5)
        assert got == expected, n_blocks
    for n_threads in (1, 2, 3):
        source = sources.source_of(X, w)
        source.n_threads = n_threads
        assert _draws(source, 24, 5) == expected, n_threads
    for n_blocks in (1, 5, 20):
        chunks = np.diff(np.linspace(0, X.shape[0], n_blocks + 1).astype(int))
        Xd = da.from_array(X, chunks=(tuple(chunks), -1))
        wd = None if w is None else da.from_array(w, chunks=(tuple(chunks),))
        with dask.config.set(scheduler="sync"):
            assert _draws(sources.source_of(Xd, wd), 24, 5) == expected, n_blocks


def test_sparse_input_seeds_rows_of_x(blobs):
    X, w = blobs
    X = np.where(np.abs(X) > 1.5, X, 0.0)
    centers = _seed(scipy.sparse.csr_matrix(X), 12, 0, w)
    assert centers.shape == (12, X.shape[1])
    assert all((X == c).all(axis=1).any() for c in centers)
    # The same rows as the dense seeding (float64 distances: the same draws here).
    np.testing.assert_array_equal(centers, _seed(X, 12, 0, w))


def _seed_source(source, k, random_state):
    return kmeans_parallel(source, k, np.random.RandomState(random_state))[0]


def test_zero_weight_rows_are_never_chosen(blobs):
    X, w = blobs
    far = np.vstack([X, X[:50] + 1e4])  # 50 far rows: k-means|| would pick them all
    w_far = np.concatenate([w, np.zeros(50)])
    for seed in range(3):
        centers = _seed(far, 12, seed, w_far)
        assert (np.abs(centers) < 1e3).all()
    assert (np.abs(_seed(far, 12, 0, None)) > 1e3).any()  # unweighted, they are chosen


def test_weights_pull_the_centres(blobs):
    # All the weight on one half of the blobs: every centre is drawn from that half.
    X, _ = blobs
    left = X[:, 0] < np.median(X[:, 0])
    centers = _seed(X, 8, 0, left.astype(float))
    rows = [np.flatnonzero((X == c).all(axis=1))[0] for c in centers]
    assert left[rows].all()


def test_the_draws_follow_the_weights(blobs):
    X, _ = blobs
    w = np.zeros(X.shape[0])
    w[[10, 20]] = [1.0, 3.0]
    passes = queries.kmeans_parallel_passes(sources.source_of(X, w))
    firsts = np.array([passes.first(seed) for seed in range(400)])
    assert set(firsts) == {10, 20}
    assert abs((firsts == 20).mean() - 0.75) < 0.07  # binomial sd 0.022
    # A round draws no row of weight 0, however large the scale.
    w = np.ones(X.shape[0])
    w[::2] = 0.0
    source = sources.source_of(X, w)
    passes = queries.kmeans_parallel_passes(source)
    passes.update(source.rows([passes.first(0)]))
    drawn = passes.draw(0, 1, 1e6)
    assert drawn.size > 0 and (drawn % 2 == 1).all()


def test_ties_go_to_the_earlier_candidate(blobs):
    X, _ = blobs
    source = sources.source_of(X)
    passes = queries.kmeans_parallel_passes(source)
    passes.update(X[:3])
    passes.update(X[:3])  # the same candidates again: nobody moves to them
    np.testing.assert_array_equal(passes.candidate_weights()[3:], 0.0)


def test_candidate_weights_hold_all_the_weight(blobs):
    X, w = blobs
    source = sources.source_of(X, w)
    passes = queries.kmeans_parallel_passes(source)
    passes.update(source.rows([passes.first(9)]))
    passes.update(source.rows(passes.draw(9, 1, 20.0 / float(w @ passes.closest))))
    weights = passes.candidate_weights()
    assert weights.size == passes.m > 1
    assert weights.sum() == pytest.approx(w.sum(), rel=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_a_sampled_pass_weighs_the_candidates_by_the_rows_of_its_sample(blobs, weighted):
    """The oracle: the sample's rows by their uniforms of SAMPLE_ROUND, each row's nearest
    candidate before and after the pass by direct differences; the weights are the
    earlier passes' (every row's) plus the sample's moves scaled by 1 / fraction, and
    exact where no row moves."""
    X, w = blobs
    w = w if weighted else None
    source = sources.source_of(X, w)
    passes = queries.kmeans_parallel_passes(source)
    first, second = X[[5, 900, 2000]], X[[17, 1500, 2500, 2999]]
    passes.update(first)
    passes.update(second, 77, 0.3)
    sample = row_uniforms(77, SAMPLE_ROUND, 0, X.shape[0]) < 0.3
    assert 0.25 < sample.mean() < 0.35
    D = ((X[:, None, :] - np.vstack([first, second])[None]) ** 2).sum(axis=2)
    before, after = np.argmin(D[:, :3], axis=1), np.argmin(D, axis=1)
    w1 = np.ones(X.shape[0]) if w is None else w
    moves = np.bincount(after[sample], w1[sample], 7) - np.bincount(before[sample], w1[sample], 7)
    expected = np.bincount(before, w1, 7) + moves / 0.3
    np.testing.assert_allclose(passes.candidate_weights(), np.maximum(expected, 0.0), rtol=1e-12)
    # The same candidates again: nobody moves, the weights are every row's.
    passes = queries.kmeans_parallel_passes(source)
    passes.update(first)
    passes.update(first, 78, 0.3)
    expected = np.concatenate([np.bincount(before, w1, 3), np.zeros(3)])
    np.testing.assert_allclose(passes.candidate_weights(), expected, rtol=1e-12)


def test_at_most_one_plus_rounds_passes_over_x(blobs):
    X, _ = blobs
    source = sources.source_of(np.asfortranarray(X))  # row blocks: count the reads
    reads = []
    blocks = source.blocks
    source.blocks = lambda *a, **kw: (reads.append(1), blocks(*a, **kw))[1]
    _, n_passes = kmeans_parallel(source, 64, np.random.RandomState(0))
    assert len(reads) == n_passes == 1 + ROUNDS


@pytest.mark.parametrize("oversampling", [(1.0, 3.0), (2.0,), (1.0, 1.0, 1.0)])
def test_each_round_draws_its_own_oversampling_times_k(blobs, oversampling, monkeypatch):
    """Round r draws each row with probability min(1, l_r D^2 / phi), l_r =
    oversampling[r] k: about l_r rows (fewer only where a row's probability is capped,
    rare here), so the candidates number about 1 + k sum(oversampling). Three seedings'
    counts add to a Poisson-binomial total of sd <= sqrt(total), 17-24 here: +-15% is 2.6
    sd or more (the draws are hashed: the same counts on every machine). (1, 3) drawn
    as (1, 1), the first round's l in every round, gives half the count."""
    X, _ = blobs
    counts = []
    greedy = kmeans_parallel_module.greedy_kmeans_plusplus
    monkeypatch.setattr(
        kmeans_parallel_module, "greedy_kmeans_plusplus",
        lambda candidates, *a: (counts.append(candidates.shape[0]), greedy(candidates, *a))[1],
    )  # fmt: skip
    k = 48
    for random_state in range(3):
        _, n_passes = kmeans_parallel(
            sources.source_of(X), k, np.random.RandomState(random_state), oversampling=oversampling
        )
        assert n_passes == 1 + len(oversampling)
    expected = 3 * (1 + k * sum(oversampling))
    assert 0.85 * expected < sum(counts) < 1.15 * expected, (counts, expected)


def test_fewer_distinct_rows_than_clusters():
    X = np.repeat(np.arange(5.0)[:, None], 40, axis=0) * np.ones((1, 3))
    model = softkmeans.SoftKMeans(8, assignment="hard", init="k-means||", random_state=0)
    with pytest.warns(Warning):  # the empty-cluster / distinct-points notice
        model.fit(X)
    assert model.inertia_ == 0.0


def test_the_fit_is_as_good_as_kmeanspp(weighing):
    # One seeding is a draw among local minima (here k-means++ ends 0.96x-1.05x its own
    # mean across seeds): compare the mean final inertia over 8 random states.
    X, _ = make_blobs(6000, 8, 40, seed=11)

    def mean_inertia(init):
        return np.mean([
            softkmeans.SoftKMeans(40, assignment="hard", init=init, random_state=s).fit(X).inertia_
            for s in range(8)
        ])  # fmt: skip

    assert mean_inertia("k-means||") <= 1.01 * mean_inertia("k-means++")


def test_init_parameter():
    X, _ = make_blobs(200, 2, 3, seed=1)
    model = softkmeans.SoftKMeans(3, init="k-means||", random_state=0).fit(X)
    assert model.cluster_centers_.shape == (3, 2)
    with pytest.raises(InvalidParameterError, match=r"'k-means\|\|'"):
        softkmeans.SoftKMeans(3, init="kmeans||").fit(X)
