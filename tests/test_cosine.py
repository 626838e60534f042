"""metric="cosine" (SPEC.md, "Cosine (spherical) K-Means"): the native path (normalized
source + the cosine step) against the NumPy reference, determinism, zero rows, the
spherical critical width by its dynamics, and the estimator's paths."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import softkmeans
from conftest import DTYPES, KINDS, SIMD_LEVELS, THREAD_COUNTS, assert_rel_close
from softkmeans import _native, reference, sources
from softkmeans.fit.metric import COSINE
from softkmeans.sources import reads

SIGMA = 0.3  # 2 sigma^2 = 0.18 >= 1e5 eps_32 x 2: r within float32's 1e-4 (SPEC.md)


def sphere_blobs(n, d, k, *, seed=0, spread=0.15, zero_rows=0, scale_rows=True):
    """Rows near k random directions, each of a random length (cosine ignores it), the
    first `zero_rows` rows zero; and k unit centroids near those directions."""
    rng = np.random.default_rng(seed)
    dirs = rng.normal(size=(k, d))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    X = dirs[rng.integers(0, k, size=n)] + rng.normal(scale=spread, size=(n, d))
    if scale_rows:
        X *= rng.uniform(0.1, 10.0, size=(n, 1))
    X[:zero_rows] = 0.0
    C = dirs + rng.normal(scale=spread, size=(k, d))
    C /= np.linalg.norm(C, axis=1, keepdims=True)
    return X, C


def native_step(X, C, sigma, kind, w, n_threads):
    """The step a cosine fit takes: its source's fused pass, then the cosine update."""
    source = COSINE.source(sources.source_of(X, w, fit=True))
    source.n_threads = n_threads
    stats, _ = reads.stats(source, C, kind, sigma)
    return COSINE.step(stats, C)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("n_threads", THREAD_COUNTS)
def test_step_matches_reference(dtype, kind, sparse, n_threads, simd_level):
    X, C = sphere_blobs(300, 12, 5, seed=1, zero_rows=3)
    X, C = X.astype(dtype), C.astype(dtype)
    w = np.random.default_rng(2).uniform(0.5, 2.0, size=X.shape[0])
    Xin = sp.csr_matrix(X) if sparse else X
    got = native_step(Xin, C, SIGMA, kind, w, n_threads)
    want = reference.cosine_centroid_step(X, C, SIGMA, kind=kind, sample_weight=w)
    assert got.centroids.dtype == dtype
    assert_rel_close(got.centroids, want.centroids, dtype, "centroids")
    assert_rel_close(got.cluster_weights, want.cluster_weights, dtype, "N")
    assert_rel_close(got.objective, want.objective, dtype, "objective", scale=4 * w.sum())
    assert_rel_close(got.distortion, want.distortion, dtype, "J", scale=4 * w.sum())
    assert_rel_close(got.min_margin, want.min_margin, dtype, "min_margin", scale=4.0)
    np.testing.assert_array_equal(got.empty, want.empty)
    np.testing.assert_allclose(np.linalg.norm(got.centroids.astype(np.float64), axis=1), 1, 1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["softmax", "entmax15"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_predict_proba_is_the_vmf_posterior(dtype, kind, sparse):
    X, _ = sphere_blobs(200, 8, 4, seed=3, zero_rows=2)
    X = X.astype(dtype)
    model = softkmeans.SoftKMeans(4, assignment=kind, sigma=SIGMA, metric="cosine", random_state=0)
    model.fit(sp.csr_matrix(X) if sparse else X)
    R = model.predict_proba(sp.csr_matrix(X) if sparse else X)
    C = model.cluster_centers_
    assert_rel_close(R, reference.cosine_responsibilities(X, C, SIGMA, kind=kind), dtype, "r")
    if kind == "softmax":  # vMF with kappa = 1 / sigma^2, from the cosines themselves
        X64 = X.astype(np.float64)
        norms = np.linalg.norm(X64, axis=1, keepdims=True)
        cos = np.divide(X64, norms, out=np.zeros_like(X64), where=norms > 0) @ C.T.astype(float)
        logits = cos / SIGMA**2
        vmf = np.exp(logits - logits.max(axis=1, keepdims=True))
        vmf /= vmf.sum(axis=1, keepdims=True)
        assert_rel_close(R, vmf, dtype, "vMF")


def test_reference_step_by_hand():
    """Two unit directions, two rows each, one zero row: S_j / ||S_j|| by hand."""
    X = np.array([[2.0, 0.0], [3.0, 1.0], [0.0, 0.0], [0.0, -5.0], [-1.0, -4.0]])
    C = np.array([[1.0, 0.0], [0.0, -1.0]])
    step = reference.cosine_centroid_step(X, C, kind="hard")
    s0 = np.array([1.0, 0.0]) + np.array([3.0, 1.0]) / np.sqrt(10.0)
    s1 = np.array([0.0, -1.0]) + np.array([-1.0, -4.0]) / np.sqrt(17.0)
    np.testing.assert_allclose(step.centroids[0], s0 / np.linalg.norm(s0), rtol=1e-14)
    np.testing.assert_allclose(step.centroids[1], s1 / np.linalg.norm(s1), rtol=1e-14)
    # The zero row ties (distance 1 to both) and weighs 0: nothing in N or J.
    np.testing.assert_array_equal(step.cluster_weights, [2.0, 2.0])
    d = 2 - 2 * (3 / np.sqrt(10.0)) + 2 - 2 * (4 / np.sqrt(17.0))
    assert step.distortion == pytest.approx(d, rel=1e-14)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_a_cluster_of_zero_rows_only_is_empty(sparse):
    """Zero rows tie (whichever centroid rounding favours) and weigh 0: a centroid that
    only they reach has S = 0 and N = 0: empty, kept."""
    X = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 3.0], [0.1, 2.0]])
    C = np.array([[-1.0, 0.0], [0.0, 1.0]])
    got = native_step(sp.csr_matrix(X) if sparse else X, C, 0.0, "hard", None, 1)
    np.testing.assert_array_equal(got.empty, [True, False])
    np.testing.assert_array_equal(got.centroids[0], C[0])
    np.testing.assert_array_equal(got.cluster_weights, [0.0, 2.0])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_fit_is_bitwise_the_same_for_every_thread_count(kind, sparse):
    X, _ = sphere_blobs(3000, 16, 6, seed=4, zero_rows=5)
    X = X.astype(np.float32)
    Xin = sp.csr_matrix(X) if sparse else X
    fits = [
        softkmeans.SoftKMeans(6, assignment=kind, metric="cosine", random_state=0, n_threads=t).fit(
            Xin
        )
        for t in THREAD_COUNTS
    ]
    for other in fits[1:]:
        assert other.cluster_centers_.tobytes() == fits[0].cluster_centers_.tobytes()
        np.testing.assert_array_equal(other.labels_, fits[0].labels_)
        assert other.objective_ == fits[0].objective_


@pytest.mark.parametrize("kind", KINDS)
def test_fit_depends_on_directions_only(kind):
    """Rescaling rows changes nothing (up to rounding); zero rows move no centroid."""
    X, C = sphere_blobs(400, 5, 3, seed=5, scale_rows=False)
    scaled = X * np.random.default_rng(6).uniform(0.01, 100.0, size=(400, 1))
    with_zeros = np.vstack([np.zeros((7, 5)), X])
    kw = dict(assignment=kind, sigma=SIGMA, metric="cosine", init=C, max_iter=50)
    base = softkmeans.SoftKMeans(3, **kw).fit(X)
    np.testing.assert_allclose(base.cluster_centers_, softkmeans.SoftKMeans(3, **kw).fit(scaled)
                               .cluster_centers_, atol=1e-10)  # fmt: skip
    zeros = softkmeans.SoftKMeans(3, **kw).fit(with_zeros)
    np.testing.assert_allclose(base.cluster_centers_, zeros.cluster_centers_, atol=1e-10)
    assert np.isfinite(zeros.predict_proba(with_zeros)).all()
    np.testing.assert_allclose(np.linalg.norm(base.cluster_centers_, axis=1), 1.0, rtol=1e-12)


def test_sparse_dense_and_weights_agree():
    X, _ = sphere_blobs(500, 10, 4, seed=7, zero_rows=4)
    counts = np.random.default_rng(8).integers(1, 4, size=500)
    kw = dict(assignment="softmax", sigma=SIGMA, metric="cosine", random_state=1)
    dense = softkmeans.SoftKMeans(4, **kw).fit(X, sample_weight=counts)
    csr = softkmeans.SoftKMeans(4, **kw).fit(sp.csr_matrix(X), sample_weight=counts)
    np.testing.assert_allclose(csr.cluster_centers_, dense.cluster_centers_, atol=1e-9)
    init = dense.cluster_centers_
    kw["init"] = init
    repeated = softkmeans.SoftKMeans(4, **kw).fit(np.repeat(X, counts, axis=0))
    weighted = softkmeans.SoftKMeans(4, **kw).fit(X, sample_weight=counts)
    np.testing.assert_allclose(repeated.cluster_centers_, weighted.cluster_centers_, atol=1e-9)


def test_sparse_blocks_merge_like_one_block(monkeypatch):
    """A CSR X read in many scaled blocks gives the one-block statistics up to rounding."""
    from softkmeans.sources import normalized

    X, C = sphere_blobs(700, 9, 4, seed=9, zero_rows=3)
    Xs = sp.csr_matrix(X)
    one = native_step(Xs, C, SIGMA, "softmax", None, 1)
    monkeypatch.setattr(normalized, "BLOCK_ENTRIES", 50)
    many = native_step(Xs, C, SIGMA, "softmax", None, 1)
    np.testing.assert_allclose(many.centroids, one.centroids, atol=1e-13)
    model = softkmeans.SoftKMeans(4, assignment="hard", metric="cosine", random_state=0).fit(Xs)
    assert np.isfinite(model.cluster_centers_).all()


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_critical_sigma_matches_reference(sparse):
    X, _ = sphere_blobs(300, 6, 3, seed=10, zero_rows=2)
    w = np.random.default_rng(11).uniform(0.5, 2.0, size=300)
    model = softkmeans.SoftKMeans(3, metric="cosine", random_state=0)
    model.fit(sp.csr_matrix(X) if sparse else X, sample_weight=w)
    want = reference.cosine_critical_sigma(X, sample_weight=w)
    assert model.critical_sigma_ == pytest.approx(want, rel=1e-10)


def _deviation_after(X, sigma, steps=40, eps=1e-4):
    """Two centroids at m +- eps u (u a fixed tangent direction), softmax cosine steps
    at width sigma; returns the final / initial distance between them."""
    source = COSINE.source(sources.source_of(X, fit=True))
    mu = X.astype(np.float64) / np.linalg.norm(X, axis=1, keepdims=True)
    m = mu.mean(axis=0)
    m /= np.linalg.norm(m)
    u = np.random.default_rng(0).normal(size=X.shape[1])
    u -= m * (m @ u)
    u /= np.linalg.norm(u)
    C = np.vstack([m + eps * u, m - eps * u])
    C /= np.linalg.norm(C, axis=1, keepdims=True)
    start = np.linalg.norm(C[0] - C[1])
    for _ in range(steps):
        stats, _ = reads.stats(source, C, "softmax", sigma)
        C = COSINE.step(stats, C).centroids
    return np.linalg.norm(C[0] - C[1]) / start


@pytest.mark.parametrize("layout", ["concentrated", "bimodal"])
def test_spherical_critical_width_separates_collapse_from_split(layout):
    """Just above sigma_c all centroids at m attract their perturbations; just below they
    grow (SPEC.md). "bimodal" (70 % near e_1, 30 % near -e_1) has a large radial variance
    and ||mu|| = 0.4: the width without P, or without / ||mu||, is far from the true one."""
    rng = np.random.default_rng(12)
    d = 4
    scales = np.array([0.0, 0.5, 0.3, 0.2])
    if layout == "concentrated":
        X = np.array([1.0, 0, 0, 0]) + rng.normal(size=(2000, d)) * scales
    else:
        sign = np.where(rng.uniform(size=2000) < 0.7, 1.0, -1.0)
        X = np.outer(sign, [1.0, 0, 0, 0]) + rng.normal(size=(2000, d)) * scales * 0.3
    crit = softkmeans.SoftKMeans(2, metric="cosine").fit(X).critical_sigma_
    assert _deviation_after(X, crit * 1.05) < 0.5
    assert _deviation_after(X, crit * 0.95) > 2.0


def test_annealing_first_split_below_the_critical_width():
    X, _ = sphere_blobs(600, 5, 3, seed=13)
    model = softkmeans.SoftKMeans(3, metric="cosine", anneal={}, random_state=0).fit(X)
    first = model.history_["transitions"][0]["sigma"]
    assert first <= model.critical_sigma_
    np.testing.assert_allclose(np.linalg.norm(model.cluster_centers_, axis=1), 1.0, rtol=1e-12)
    plain = softkmeans.SoftKMeans(3, assignment="hard", metric="cosine", random_state=0).fit(X)
    assert model.inertia_ <= plain.inertia_ * 1.001


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_partial_fit_keeps_unit_centroids(sparse):
    X, _ = sphere_blobs(900, 6, 3, seed=14, zero_rows=3)
    model = softkmeans.SoftKMeans(3, assignment="hard", metric="cosine", random_state=0)
    for batch in np.array_split(X, 3):
        model.partial_fit(sp.csr_matrix(batch) if sparse else batch)
        np.testing.assert_allclose(np.linalg.norm(model.cluster_centers_, axis=1), 1, rtol=1e-12)
    full = softkmeans.SoftKMeans(3, assignment="hard", metric="cosine", random_state=0).fit(X)
    assert model.score(X) >= full.score(X) * 1.1  # within 10 % of the batch fit's inertia


def test_dask_fit_matches_in_memory():
    da = pytest.importorskip("dask.array")
    X, _ = sphere_blobs(800, 6, 3, seed=15, zero_rows=2)
    kw = dict(assignment="softmax", sigma=SIGMA, metric="cosine", init=X[[5, 300, 600]])
    local = softkmeans.SoftKMeans(3, **kw).fit(X)
    Xd = da.from_array(X, chunks=200)
    with __import__("dask").config.set(scheduler="synchronous"):
        remote = softkmeans.SoftKMeans(3, **kw).fit(Xd)
    np.testing.assert_allclose(remote.cluster_centers_, local.cluster_centers_, atol=1e-10)
    assert remote.critical_sigma_ == pytest.approx(local.critical_sigma_, rel=1e-10)
    np.testing.assert_allclose(
        remote.predict_proba(Xd).compute(), local.predict_proba(X), atol=1e-10
    )


def test_bad_metric_and_zero_data():
    X, _ = sphere_blobs(50, 3, 2)
    with pytest.raises(ValueError, match="metric"):
        softkmeans.SoftKMeans(2, metric="manhattan").fit(X)
    with pytest.raises(ValueError, match="no nonzero row"):
        softkmeans.SoftKMeans(2, metric="cosine").fit(np.zeros((10, 3)))
    with pytest.raises(ValueError, match="no nonzero row"):
        softkmeans.SoftKMeans(2, metric="cosine").fit(sp.csr_matrix((10, 3)))
    with pytest.raises(ValueError, match="init has a zero row"):
        softkmeans.SoftKMeans(2, metric="cosine", init=np.zeros((2, 3))).fit(X)


def test_torch_cosine_form_is_the_reference_objective():
    """softkmeans.torch's documented cosine form: free_energy of the normalized rows and
    centroids is the reference's cosine objective; the centroid gradient through the
    normalization is tangent to the sphere; critical_sigma(metric="cosine") the width."""
    torch = pytest.importorskip("torch")
    from softkmeans import torch as skt

    X, C = sphere_blobs(120, 5, 3, seed=16, zero_rows=2)
    w = (np.linalg.norm(X, axis=1) > 0).astype(np.float64)
    x = torch.nn.functional.normalize(torch.from_numpy(X), dim=1)
    c = torch.from_numpy(C * 3.0).requires_grad_()
    F = skt.free_energy(x, torch.nn.functional.normalize(c, dim=1), SIGMA, sample_weight=w)
    want = reference.cosine_centroid_step(X, C, SIGMA, kind="softmax").objective
    assert F.item() == pytest.approx(want, rel=1e-10)
    F.backward()
    radial = (c.grad * c.detach()).sum(dim=1)
    assert float(radial.abs().max()) < 1e-10 * float(c.grad.abs().max())
    got = skt.critical_sigma(torch.from_numpy(X), metric="cosine")
    assert got == pytest.approx(reference.cosine_critical_sigma(X), rel=1e-10)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_relocated_clusters_get_unit_centroids(sparse):
    """Two equal initial centroids: the second is empty at the first step, moves to the
    farthest row (scikit-learn's policy) and its donor cluster is recomputed: both unit."""
    X, C = sphere_blobs(300, 4, 3, seed=17, zero_rows=3)
    init = C[[0, 0, 1]]
    model = softkmeans.SoftKMeans(3, assignment="hard", metric="cosine", init=init, max_iter=1)
    model.fit(sp.csr_matrix(X) if sparse else X)
    assert not np.allclose(model.cluster_centers_[1], init[1])
    np.testing.assert_allclose(np.linalg.norm(model.cluster_centers_, axis=1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_fit_is_bitwise_the_same_at_every_simd_level(kind):
    X, _ = sphere_blobs(1000, 16, 4, seed=18, zero_rows=2)
    X = X.astype(np.float32)
    before = _native.selected_simd_level()
    fits = []
    try:
        for level in SIMD_LEVELS:
            _native.set_simd_level(level)
            model = softkmeans.SoftKMeans(4, assignment=kind, metric="cosine", random_state=0)
            fits.append(model.fit(sp.csr_matrix(X) if kind == "softmax" else X))
    finally:
        _native.set_simd_level(before)
    for other in fits[1:]:
        assert other.cluster_centers_.tobytes() == fits[0].cluster_centers_.tobytes()
        assert other.objective_ == fits[0].objective_
