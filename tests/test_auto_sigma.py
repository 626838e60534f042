"""sigma="auto": EM of the equal-weight isotropic Gaussian mixture (SPEC.md, "A temperature
that means something"). Parity against the NumPy reference written from the definition
(softkmeans.reference_mixture), the fixed point sigma^2 = sum w r D / (W d) recomputed
here, thread-count determinism and the refusals."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from conftest import DTYPES, THREAD_COUNTS, assert_rel_close, make_blobs
from softkmeans import SoftKMeans
from softkmeans.reference_mixture import em_isotropic, posterior


def _data(dtype=np.float64):
    # Clusters of unequal spread (0.4 to 1.6), so the shared variance is a compromise.
    rng = np.random.default_rng(3)
    centres = np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 1.0], [0.0, 5.0, -2.0]])
    X = np.vstack([c + s * rng.normal(size=(50, 3)) for c, s in zip(centres, (0.4, 1.0, 1.6))])
    return X.astype(dtype), (centres + 0.5).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("n_threads", THREAD_COUNTS)
def test_em_steps_match_the_reference(simd_level, dtype, sparse, n_threads):
    X, C0 = _data(dtype)
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=X.shape[0])
    steps = 6 if dtype == np.float64 else 3
    Xin = sp.csr_matrix(X) if sparse else X
    m = SoftKMeans(3, sigma="auto", init=C0, max_iter=steps, tol=0.0, n_threads=n_threads).fit(
        Xin, sample_weight=w
    )
    C_ref, sigma_ref = em_isotropic(X.astype(np.float64), C0, m.n_iter_, sample_weight=w)
    assert m.n_iter_ == steps
    assert_rel_close(m.cluster_centers_, C_ref, dtype, "centroids")
    assert_rel_close(m.sigma_, sigma_ref, dtype, "sigma")
    assert_rel_close(m.predict_proba(X), posterior(X, C_ref, sigma_ref), dtype, "posterior")


def test_thread_count_does_not_change_a_bit():
    X, C0 = make_blobs(3000, 5, 4, seed=2)
    fits = [SoftKMeans(4, sigma="auto", init=C0, n_threads=t).fit(X) for t in THREAD_COUNTS]
    for m in fits[1:]:
        assert m.sigma_ == fits[0].sigma_
        np.testing.assert_array_equal(m.cluster_centers_, fits[0].cluster_centers_)


def test_the_fixed_point_is_the_ml_variance_at_its_centroids():
    X, C0 = _data()
    m = SoftKMeans(3, sigma="auto", init=C0, tol=0.0, max_iter=2000).fit(X)
    # Recomputed here from the definition: r at (C, sigma), the scatter about C.
    C, s = m.cluster_centers_, m.sigma_
    D = ((X[:, None, :] - C[None]) ** 2).sum(axis=2)
    z = -D / (2 * s * s)
    r = np.exp(z - z.max(axis=1, keepdims=True))
    r /= r.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(s**2, (r * D).sum() / (X.shape[0] * X.shape[1]), rtol=1e-9)
    np.testing.assert_allclose(C, (r.T @ X) / r.sum(axis=0)[:, None], rtol=1e-9, atol=1e-9)
    # Here the clusters are well apart, so sigma is near the pooled within-cluster
    # spread of the construction, sqrt(mean(0.4^2, 1.0^2, 1.6^2)) = 1.09.
    assert 0.9 < s < 1.3


def test_auto_sigma_is_scale_equivariant():
    X, C0 = _data()
    a = SoftKMeans(3, sigma="auto", init=C0).fit(X)
    b = SoftKMeans(3, sigma="auto", init=10 * C0).fit(10 * X)
    np.testing.assert_allclose(b.sigma_, 10 * a.sigma_, rtol=1e-9)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"sigma": "Auto"}, "sigma must be a real number > 0, None or 'auto'"),
        ({"sigma": "ml"}, "sigma must be"),
        ({"sigma": "auto", "assignment": "entmax15"}, "sigma='auto'.*assignment='softmax'"),
        ({"sigma": "auto", "assignment": "hard"}, "sigma='auto'.*assignment='softmax'"),
        ({"sigma": "auto", "metric": "cosine"}, "sigma='auto'.*metric='euclidean'"),
    ],
)
def test_bad_sigma_strings_are_refused(kwargs, match):
    X, _ = _data()
    with pytest.raises(ValueError, match=match):
        SoftKMeans(3, **kwargs).fit(X)


def test_partial_fit_refuses_auto_sigma():
    X, _ = _data()
    with pytest.raises(ValueError, match="sigma='auto'.*partial_fit"):
        SoftKMeans(3, sigma="auto").partial_fit(X)


def test_runs_compare_by_the_mixtures_log_likelihood():
    # nll_score differs from minus the log-likelihood, computed here from the density, by
    # a constant: so the n_init runs, each at its own sigma, are ranked by likelihood.
    from softkmeans import sources
    from softkmeans.fit.auto_sigma import nll_score
    from softkmeans.sources import reads

    X, C0 = _data()
    w = np.random.default_rng(2).uniform(0.5, 2.0, size=X.shape[0])
    source = sources.source_of(X, w)
    n, d = X.shape
    offsets = []
    for C, s in [(C0, 0.7), (C0[::-1] + 1.0, 1.9), (C0 * 0.5, 3.0)]:
        stats, _ = reads.stats(source, np.ascontiguousarray(C), "softmax", s, sums=False)
        D = ((X[:, None, :] - C[None]) ** 2).sum(axis=2)
        density = np.exp(-D / (2 * s * s)).mean(axis=1) / (2 * np.pi * s * s) ** (d / 2)
        offsets.append(nll_score(stats, s, d) - (-(w * np.log(density)).sum()))
    np.testing.assert_allclose(offsets, offsets[0], rtol=0, atol=1e-8 * abs(offsets[0]))


def _mean_log_likelihood(X, C, sigma):
    """The equal-weight isotropic mixture's mean log-density of the rows of X."""
    from scipy.special import logsumexp

    D = ((X[:, None, :] - C[None]) ** 2).sum(axis=2)
    d = X.shape[1]
    log_p = logsumexp(-D / (2 * sigma**2), axis=1) - np.log(len(C))
    return float(np.mean(log_p - 0.5 * d * np.log(2 * np.pi * sigma**2)))


def test_em_stops_at_the_first_step_that_gains_at_most_ten_tol_in_likelihood():
    # Overlapping blobs: the last step still shifts the centroids by more than the shift
    # tolerance, so the likelihood test ended the fit; the gains (mean log-likelihood of
    # the step's input state over the one before) come from the NumPy reference's states.
    X, _ = make_blobs(400, 3, 4, seed=12, spread=1.0, centre_scale=3.0)
    C0 = X[[0, 1, 2, 3]].copy()
    model = SoftKMeans(4, sigma="auto", init=C0, max_iter=300).fit(X)
    steps = model.n_iter_
    assert model.history_["shift"][-1] > model.tol * X.var(axis=0).mean()
    ll = [_mean_log_likelihood(X, *em_isotropic(X, C0, t)) for t in range(steps)]
    gains = np.diff(ll)
    assert (gains[:-1] > 10 * model.tol).all() and gains[-1] <= 10 * model.tol, gains


def test_a_seeded_auto_fit_starts_em_at_lloyds_fixed_point():
    # Lloyd from the seeds (GaussianMixture's k-means start), then EM from its centroids.
    X, _ = make_blobs(600, 4, 5, seed=12, spread=2.0)
    auto = SoftKMeans(5, random_state=0, n_init=1).fit(X)
    lloyd = SoftKMeans(5, assignment="hard", random_state=0, n_init=1).fit(X)
    from_lloyd = SoftKMeans(5, sigma="auto", init=lloyd.cluster_centers_, n_init=1).fit(X)
    kinds = auto.history_["kind"]
    assert kinds == ["hard"] * lloyd.n_iter_ + ["softmax"] * (len(kinds) - lloyd.n_iter_)
    assert len(kinds) == lloyd.n_iter_ + from_lloyd.n_iter_
    np.testing.assert_array_equal(auto.cluster_centers_, from_lloyd.cluster_centers_)
    assert auto.sigma_ == from_lloyd.sigma_
